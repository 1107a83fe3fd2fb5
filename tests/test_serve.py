#!/usr/bin/python3
"""attend serve, through real server processes on 127.0.0.1: 300 lines sent one request each
from 16 concurrent clients equal attend translate (and were batched across requests), list
requests keep their order, form posts (as libretranslatepy sends) work, /v1/translate's n-best
scores (normalized_score) and alignments equal the CLI's --n-best and --alignment, its
attention data equal attend explore's; the bad-input set (each its status and a JSON error,
the server serving on), slow-loris connections, queue-full 503s, CORS only when asked, and
SIGTERM / SIGINT finishing what is in flight and exiting 0.
The concurrent load, disconnects and 10,000 tiny requests: tests/test_serve_load.py.
Run: /usr/bin/python3 tests/test_serve.py"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

LINES = T.corpus_lines("multi30k", "de", 300, skip=5000)


def check_help():
    out = subprocess.run([S.ATTEND, "serve", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "POST /translate" in out.stdout and "--max-body" in out.stdout, out
    out = subprocess.run([S.ATTEND, "--help"], capture_output=True, text=True)
    assert "  serve " in out.stdout, out.stdout
    for bad in (["--nope"], ["--port", "70000"], ["extra"]):
        out = subprocess.run([S.ATTEND, "serve", "-m", S.TINY, *bad], capture_output=True, text=True)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, (bad, out)
    out = subprocess.run([S.ATTEND, "serve", "-m", S.TINY, "--host", "localhost.example", "--port", "0"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "not a numeric" in out.stderr, out


def check_identity(server, want):
    """Each line its own request, 16 clients at once: attend translate's lines exactly."""
    def one(i):
        status, _, body = server.post("/translate", {"q": LINES[i], "source": "de", "target": "en"})
        assert status == 200, (status, body)
        return body["translatedText"]
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(len(LINES))))
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{len(bad)} lines differ, first: {bad[:3]}"
    batches = [line.split() for line in server.log().splitlines() if "attend serve: batch of" in line]
    assert max(int(b[7]) for b in batches) > 1, "no batch held more than one request"


def check_lists(server, want):
    status, _, body = server.post("/translate", {"q": LINES[:40]})
    assert status == 200 and body["translatedText"] == want[:40], body
    # one entry of several lines: translated line by line (as attend translate), joined again
    status, _, body = server.post("/translate", {"q": ["\n".join(LINES[40:43]), "", LINES[43]]})
    assert status == 200 and body["translatedText"] == ["\n".join(want[40:43]), "", want[43]], body


def check_form(server, want):
    """A form post, as libretranslatepy sends it: the same answer as JSON."""
    body = urllib.parse.urlencode({"q": LINES[7], "source": "de", "target": "en", "api_key": ""}).encode()
    status, _, answer = server.request("POST", "/translate", body,
                                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and answer == {"translatedText": want[7]}, (status, answer)
    status, _, answer = server.request("POST", "/translate", b"q=%ff%fe&source=de",
                                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "UTF-8" in answer["error"], (status, answer)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for bad in (b"%%%=%", b"q", b"=&=&", b"q=%zz&&&source"):  # broken forms: an error, never a crash
        status, _, answer = server.request("POST", "/translate", bad, headers=form)
        assert status == 400 and "error" in answer, (bad, status, answer)
    # JSON under a form's type, as `curl -d` sends it: read as JSON
    status, _, answer = server.request("POST", "/translate", json.dumps({"q": LINES[7]}).encode(), headers=form)
    assert status == 200 and answer == {"translatedText": want[7]}, (status, answer)
    S.alive(server)


def check_nbest_alignment(server):
    lines = LINES[:12]
    cli = S.translate_cli(S.SHIPPED, lines, "--beam", "4", "--n-best", "3")
    status, _, body = server.post("/v1/translate", {"q": lines, "beam": 4, "n_best": 3, "alignment": True})
    assert status == 200, body
    for i, t in enumerate(body["translations"]):
        assert len(t["nbest"]) == 3 and t["text"] == t["nbest"][0]["text"], t
        for k, h in enumerate(t["nbest"]):
            idx, text, score = cli[3 * i + k].split(" ||| ")
            assert int(idx) == i and text == h["text"] and score == f"{h['normalized_score']:.6f}", (cli[3 * i + k], h)
        # the best's scores are the result's; score the sum of the log-probabilities (beams:
        # <pad> left out of their log-softmax, as HF's Marian beam search)
        assert (t["score"], t["normalized_score"]) == (t["nbest"][0]["score"], t["nbest"][0]["normalized_score"]), t
        assert abs(t["score"] - sum(t["logprobs"])) < 1e-3, t
        assert len(t["logprobs"]) == len(t["tokens"]) and t["tokens"][-1] == "</s>", t
    for view in ("last:0", "penultimate:avg"):
        cli = S.translate_cli(S.SHIPPED, lines, f"--alignment={view}")
        status, _, body = server.post("/v1/translate", {"q": lines, "alignment": view})
        assert status == 200, body
        got = [t["text"] + " ||| " + t["alignment"] for t in body["translations"]]
        assert got == cli, (view, got[:2], cli[:2])


def check_prefix(server):
    """/v1 "prefix" equals attend translate --prefix-file; concurrent prefixed and plain
    requests are each answered as alone; prefix with target_text is a 400."""
    import tempfile
    lines = LINES[:8]
    prefixes = ["A", "The", "", "Two", "A man", "In", "", "People"]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(prefixes) + "\n")
    try:
        cli = S.translate_cli(S.SHIPPED, lines, "--prefix-file", f.name)
    finally:
        os.unlink(f.name)
    plain = S.translate_cli(S.SHIPPED, lines)
    with ThreadPoolExecutor(4) as pool:
        a = pool.submit(server.post, "/v1/translate", {"q": lines, "prefix": prefixes})
        b = pool.submit(server.post, "/v1/translate", {"q": lines})
        (sa, _, ba), (sb, _, bb) = a.result(), b.result()
    assert sa == 200 and sb == 200, (ba, bb)
    assert [t["text"] for t in ba["translations"]] == cli, ([t["text"] for t in ba["translations"]], cli)
    assert [t["text"] for t in bb["translations"]] == plain
    assert all(t.startswith(p) for t, p in zip(cli, prefixes)), cli
    status, _, body = server.post("/v1/translate", {"q": "Hallo", "prefix": "Hi", "target_text": "Hello"})
    assert status == 400 and "prefix" in body["error"], body
    status, _, body = server.post("/v1/translate", {"q": ["Hallo"], "prefix": "Hi"})
    assert status == 400 and "prefix" in body["error"], body


def explore_data(args):
    page = subprocess.run([T.ATTEND, "explore", "-m", S.SHIPPED, "-o", "-", *args], capture_output=True,
                          text=True, check=True).stdout
    start = page.index('<script type="application/json" id="attend-data">') + len(
        '<script type="application/json" id="attend-data">')
    return json.loads(page[start:page.index("</script>", start)])


def check_attention(server):
    """"attention": the sentence as attend explore puts it on its page, forced decoding too."""
    want = explore_data([LINES[5]])["sentences"][0]
    status, _, body = server.post("/v1/translate", {"q": LINES[5], "attention": True})
    assert status == 200 and body["translations"][0]["explore"] == want, body["translations"][0].keys()
    target = "A man is riding a bicycle."
    want = explore_data([LINES[5], "--target", target])["sentences"][0]
    status, _, body = server.post("/v1/translate", {"q": LINES[5], "target_text": target, "attention": True})
    assert status == 200 and body["translations"][0]["explore"] == want and want["forced"], body


BAD = [  # (body, status, words of the error)
    (b'{"q": "Hallo', 400, "not valid JSON"),
    (b'["Hallo"]', 400, "JSON object"),
    (b'{"q": 5}', 400, "string"),
    (b'{"q": ["Hallo", 5]}', 400, "string"),
    (b'{"text": "Hallo"}', 400, "missing"),
    (b'{"q": ""}', 400, "empty"),
    (b'{"q": []}', 400, "empty list"),
    (b'{"q": "Hallo \xff\xfe Welt"}', 400, "UTF-8"),
    (b'{"q": "Hallo \xed\xa0\x80"}', 400, "UTF-8"),
    (b'{"q": "Hallo", "format": "xml"}', 400, "format"),
    (b'', 400, "not valid JSON"),
]
BAD_V1 = [
    ({"q": "Hallo", "beam": "4"}, "beam"),
    ({"q": "Hallo", "beam": 2, "n_best": 3}, "n_best"),
    ({"q": "Hallo", "beam": 0}, "beam"),
    ({"q": "Hallo", "prefix": 3}, "prefix"),
    ({"q": "Hallo", "max_len": 3}, "unknown field"),
    ({"q": "Hallo", "model": "/etc/passwd"}, "no model named"),  # a name, never a path
    ({"q": "Hallo", "alignment": "last:99"}, "alignment"),
    ({"q": ["a", "b"], "target_text": "x"}, "target_text"),
    ({"q": "Hallo", "sample": True, "beam": 4}, "sample"),
    ({"q": "Hallo", "src_lang": "de"}, "no source language"),
    ({"q": "Hallo", "top_p": 1.5}, "top_p"),
]


def check_bad_input(server):
    for body, status, words in BAD:
        got, _, answer = server.post("/translate", body)
        assert got == status and words in answer["error"], (body, got, answer)
    for body, words in BAD_V1:
        got, _, answer = server.post("/v1/translate", body)
        assert got == 400 and words in answer["error"], (body, got, answer)
    # a declared body over the limit: refused at once, before it is sent
    s = S.raw_socket(server.port)
    s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (2 << 20))
    head = s.recv(65536)
    assert head.startswith(b"HTTP/1.1 413") and b"max-body" in head, head
    s.close()
    # the same without a Content-Length: chunked, refused once past the limit
    c = server.connect()
    c.putrequest("POST", "/translate")
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    for _ in range(40):
        c.send(b"10000\r\n" + b"a" * 0x10000 + b"\r\n")
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 413, r.status
    c.close()
    for method, path, status in (("GET", "/translate", 405), ("POST", "/health", 405), ("GET", "/nope", 404),
                                 ("DELETE", "/", 405), ("GET", "/../etc/passwd", 404)):
        got, _, answer = server.request(method, path)
        assert got == status and "error" in answer, (method, path, got, answer)
    S.alive(server)
    status, _, body = server.post("/translate", {"q": LINES[0]})
    assert status == 200 and body["translatedText"], body


def check_slow_loris(server):
    """Connections that send half a request and stall are closed after --timeout; meanwhile
    the others are served at once."""
    socks = []
    for i in range(30):
        s = S.raw_socket(server.port)
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n" + (b"\r\n{\"q\"" if i % 2 else b""))
        socks.append(s)
    t0 = time.time()
    status, _, body = server.post("/translate", {"q": "Hallo Welt"})
    assert status == 200 and time.time() - t0 < 5, (status, time.time() - t0)
    time.sleep(3.5)  # --timeout 2
    for s in socks:
        s.settimeout(5)
        assert s.recv(100) == b"", "a stalled connection was not closed"
        s.close()
    S.alive(server)


def check_cors(server):
    _, headers, _ = server.get("/health")
    assert not any(k.lower().startswith("access-control") for k in headers), headers
    with S.Server(S.TINY, "--allow-origin", "https://example.org", "-t", "1") as s2:
        _, headers, _ = s2.get("/health")
        assert headers.get("Access-Control-Allow-Origin") == "https://example.org", headers
        status, headers, _ = s2.request("OPTIONS", "/translate")
        assert status == 204 and "POST" in headers.get("Access-Control-Allow-Methods", ""), (status, headers)
        assert "127.0.0.1" in s2.log()
        assert s2.stop() == 0


def check_queue_full():
    """--max-queue 3 and a long gathering window: most of 12 requests at once get 503 with
    Retry-After, the rest their translation."""
    with S.Server(S.TINY, "--max-queue", "3", "--gather-ms", "1500", "-t", "1") as s:
        def one(i):
            return s.post("/translate", {"q": f"Hallo {i}"})
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(one, range(12)))
        codes = sorted(a[0] for a in answers)
        assert codes.count(200) >= 1 and codes.count(503) >= 6 and set(codes) == {200, 503}, codes
        assert all(a[1].get("Retry-After") == "1" and "queue" in a[2]["error"] for a in answers if a[0] == 503)
        S.alive(s)
        assert s.stop() == 0


def check_multilingual():
    """A multilingual model: source and target name the languages (LibreTranslate's fields
    and /v1's src_lang / tgt_lang), each answer attend translate's with those languages."""
    m2m = os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf")
    lines = ["Hallo Welt!", "Wo ist der Bahnhof?"]
    with S.Server(m2m, "-t", "1") as s:
        _, _, model = s.get("/v1/model")
        assert model["architecture"] == "m2m_100" and {"de", "en", "fr"} <= set(model["languages"]), model
        for src, tgt in (("de", "en"), ("de", "fr")):
            want = S.translate_cli(m2m, lines, "--src-lang", src, "--tgt-lang", tgt)
            status, _, body = s.post("/translate", {"q": lines, "source": src, "target": tgt})
            assert status == 200 and body["translatedText"] == want, (status, body, want)
            status, _, body = s.post("/v1/translate", {"q": lines, "src_lang": src, "tgt_lang": tgt})
            assert status == 200 and [t["text"] for t in body["translations"]] == want, body
        for body, words in (({"q": "Hallo", "source": "de"}, "give the source and target"),
                            ({"q": "Hallo", "source": "de", "target": "xx"}, "no language \"xx\"")):
            status, _, answer = s.post("/translate", body)
            assert status == 400 and words in answer["error"], (body, status, answer)
        assert s.stop() == 0


def check_t5_tasks():
    """A T5 model: /v1's "task" and the server's --task write the task's prefix as attend
    translate --task does; /v1/model lists the tasks; an unknown task is a 400."""
    t5 = os.path.join(T.REPO, "tests", "data", "tiny-t5.gguf")
    lines = ["The house is wonderful.", "Hello world"]
    with S.Server(t5, "-t", "1", "--task", "translation_en_to_de") as s:
        _, _, model = s.get("/v1/model")
        assert model["architecture"] == "t5" and "summarization" in model["tasks"], model
        for task in ("summarization", "translation_en_to_de"):
            want = S.translate_cli(t5, lines, "--task", task)
            status, _, body = s.post("/v1/translate", {"q": lines, "task": task})
            assert status == 200 and [t["text"] for t in body["translations"]] == want, (task, body, want)
        status, _, body = s.post("/translate", {"q": lines})
        assert body["translatedText"] == S.translate_cli(t5, lines, "--task", "translation_en_to_de"), body
        assert body["translatedText"] != S.translate_cli(t5, lines, "--task", "summarization"), body
        status, _, answer = s.post("/v1/translate", {"q": "Hello", "task": "nope"})
        assert status == 400 and "no task" in answer["error"], answer
        assert s.stop() == 0


def check_signal(sig):
    """Requests in flight when the signal comes are answered; then the server exits 0."""
    with S.Server(S.SHIPPED, "--gather-ms", "300", "-t", "2") as s:
        results = [None] * 8

        def one(i):
            results[i] = s.post("/translate", {"q": LINES[i]})
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.15)
        s.proc.send_signal(sig)
        for t in threads:
            t.join(60)
        assert s.proc.wait(60) == 0, s.log()
        want = S.translate_cli(S.SHIPPED, LINES[:8])
        assert [r[0] for r in results] == [200] * 8 and [r[2]["translatedText"] for r in results] == want, results
        assert "finishing the requests in flight" in s.log() and "stopped" in s.log()


def main():
    r = T.Runner()
    r.check("serve --help, attend --help, bad options", check_help)
    want = S.translate_cli(S.SHIPPED, LINES, "-t", "2")
    with S.Server(S.SHIPPED, "-t", "2", "-v", "--timeout", "2") as server:
        r.check("300 lines from 16 concurrent clients equal attend translate, batched", check_identity, server,
                want)
        r.check("list requests keep their order; a multi-line entry", check_lists, server, want)
        r.check("a LibreTranslate form post", check_form, server, want)
        r.check("/v1/translate n-best and alignments equal the CLI's", check_nbest_alignment, server)
        r.check("/v1/translate attention equals attend explore's data", check_attention, server)
        r.check("/v1/translate prefix equals attend translate --prefix-file", check_prefix, server)
        r.check("bad input: each its status and a JSON error; still serving", check_bad_input, server)
        r.check("slow-loris connections closed after --timeout, others served", check_slow_loris, server)
        r.check("no CORS header unless --allow-origin", check_cors, server)
        r.check("an access log line per request", lambda: ("\"POST /translate\" 200" in server.log()) or
                (_ for _ in ()).throw(AssertionError(server.log()[-500:])))
        assert server.stop() == 0
    r.check("a multilingual model: source and target choose the languages", check_multilingual)
    r.check("a T5 model: tasks from /v1 and --task, as attend translate --task", check_t5_tasks)
    r.check("a full queue: 503 with Retry-After", check_queue_full)
    r.check("SIGTERM finishes the requests in flight, exits 0", check_signal, signal.SIGTERM)
    r.check("SIGINT likewise", check_signal, signal.SIGINT)
    r.finish()


if __name__ == "__main__":
    main()
