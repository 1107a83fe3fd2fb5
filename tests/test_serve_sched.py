#!/usr/bin/python3
"""attend serve's scheduling (issue 35): a request gathered with a long one is answered as
soon as its own sentences are done, not when the whole gathering is; a queue holding more
than --max-wait seconds of work (at the rate the server measured) refuses new requests with
a 503 and Retry-After instead of letting latency grow, and every request it accepts is
answered with attend translate's output.
Run: /usr/bin/python3 tests/test_serve_sched.py"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

LONG = T.corpus_lines("multi30k", "de", 400, skip=9000)
LONG = sorted(LONG, key=len)[-96:]  # the longest: three library batches of 32
SHORT = "Ein Hund."


def timed_post(server, body, out, key):
    t0 = time.perf_counter()
    status, headers, answer = server.post("/translate", body)
    out[key] = (time.perf_counter() - t0, status, headers, answer)


def check_short_answered_first():
    """A one-sentence request and a 96-sentence one gathered into one batch (--gather-ms 300
    and a token budget above both make sure they are): the short one, sorted into the first library batch, comes back
    while the long one is still being translated, and both equal attend translate."""
    want_long = S.translate_cli(S.SHIPPED, LONG, "-t", "2")
    want_short = S.translate_cli(S.SHIPPED, [SHORT], "-t", "2")[0]
    with S.Server(S.SHIPPED, "-t", "2", "--gather-ms", "300", "--max-batch-tokens", "8192", "-v") as server:
        out = {}
        threads = [threading.Thread(target=timed_post, args=(server, {"q": LONG}, out, "long")),
                   threading.Thread(target=timed_post, args=(server, {"q": SHORT}, out, "short"))]
        for t in threads:
            t.start()
            time.sleep(0.02)
        for t in threads:
            t.join()
        (t_long, s_long, _, a_long), (t_short, s_short, _, a_short) = out["long"], out["short"]
        assert s_long == 200 and a_long["translatedText"] == want_long, (s_long, a_long)
        assert s_short == 200 and a_short["translatedText"] == want_short, (s_short, a_short)
        assert "batch of 97 sentences from 2 requests" in server.log(), server.log()[-500:]
        assert t_short < 0.6 * t_long, (t_short, t_long)
        assert server.stop() == 0


def check_shedding():
    """--max-wait 1: with the rate measured (one request first), 48 clients each sending 24
    sentences at once ask for far more than a second of work: the server refuses some with
    503, a JSON error and Retry-After, answers the others correctly, and still answers after."""
    lines = T.corpus_lines("multi30k", "de", 24, skip=9500)
    want = S.translate_cli(S.SHIPPED, lines, "-t", "2")
    with S.Server(S.SHIPPED, "-t", "2", "--max-wait", "1", "--no-access-log") as server:
        status, _, body = server.post("/translate", {"q": lines})
        assert status == 200 and body["translatedText"] == want, (status, body)
        out = {}
        threads = [threading.Thread(target=timed_post, args=(server, {"q": lines}, out, k)) for k in range(48)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(v[1] for v in out.values())
        assert set(statuses) == {200, 503}, statuses
        for seconds, status, headers, answer in out.values():
            if status == 200:
                assert answer["translatedText"] == want, answer
            else:
                assert "queue" in answer["error"] and int(headers["Retry-After"]) >= 1, (headers, answer)
        status, _, body = server.post("/translate", {"q": SHORT})
        assert status == 200 and body["translatedText"], (status, body)
        assert server.stop() == 0


def main():
    r = T.Runner()
    r.check("a short request gathered with a long one is answered first", check_short_answered_first)
    r.check("--max-wait: 503 with Retry-After past a second of queued work; accepted ones exact",
            check_shedding)
    r.finish()


if __name__ == "__main__":
    main()
