#!/usr/bin/python3
"""attend serve against hostile and broken clients (issue 35), on raw sockets: each case
answered with exactly one response whose body is JSON {"error"} (never an HTML page, never
a head sent twice), and the server still translating correctly after each. Overflowing and
negative Content-Length, a half-closed client, slow clients trickling header bytes (a
per-address cap and a head deadline), every error of the HTTP layer (431, bad chunk size,
malformed request line and headers, unknown transfer coding, HTTP/2.0), a 2 MiB body over
--max-body (the client reads its 413 instead of a broken pipe), too many connections,
pipelined requests, Expect: 100-continue, control characters translated whole.
Run: /usr/bin/python3 tests/test_serve_hostile.py"""
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

TEXT = "Ich habe Hunger."
WANT = None


def exchange(port, data, half_close=False, timeout=10, source="127.0.0.1"):
    """Send data, read until the server closes (or timeout): the bytes received."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    s.sendall(data)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out


def responses(raw):
    """[(status, headers dict, body bytes)] of every response in raw."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        n = int(headers.get("content-length", 0))
        out.append((status, headers, rest[:n]))
        raw = rest[n:]
    return out


def one_json_error(raw, status):
    got = responses(raw)
    assert len(got) == 1, raw[:400]
    assert got[0][0] == status and got[0][1]["content-type"].startswith("application/json"), got
    assert json.loads(got[0][2])["error"], got
    return json.loads(got[0][2])["error"]


def still_translating(server):
    status, _, body = server.post("/translate", {"q": TEXT})
    assert status == 200 and body["translatedText"] == WANT, (status, body)


def post(body, extra=b""):
    return (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def check_content_length(server):
    body = json.dumps({"q": TEXT}).encode()
    for value in (b"99999999999999999999999", b"-1", b"12abc", b"", b"1e3"):
        raw = exchange(server.port, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: " + value + b"\r\n\r\n" +
                       body)
        assert "Content-Length" in one_json_error(raw, 400), (value, raw)
    raw = exchange(server.port, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n")
    one_json_error(raw, 400)
    still_translating(server)


def check_half_close(server):
    """The whole request, then shutdown(SHUT_WR): the answer still comes (twice in a row)."""
    for _ in range(2):
        raw = exchange(server.port, post(json.dumps({"q": TEXT}).encode()), half_close=True)
        got = responses(raw)
        assert len(got) == 1 and got[0][0] == 200 and json.loads(got[0][2])["translatedText"] == WANT, raw
    assert '"POST /translate" 200' in server.log(), server.log()[-400:]
    still_translating(server)


def check_http_errors(server):
    """Errors found before routing: JSON, one response, the connection closed."""
    cases = [
        (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", 431),
        (b"POST /translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n", 400),
        (b"POST /translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n", 400),
        (b"POST /translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST /translate HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", 400),
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET  /health HTTP/1.1\r\n\r\n", 400),
        (b"GET /health HTTP/2.0\r\n\r\n", 505),
        (b"GET /health HTTP/1.1\r\nBad Header\r\n\r\n", 400),
        (b"GET /health HTTP/1.1\r\n folded: x\r\n\r\n", 400),
        (b"GET /he\x00alth HTTP/1.1\r\n\r\n", 400),
    ]
    for data, status in cases:
        one_json_error(exchange(server.port, data), status)
    # a chunked body that is well formed is read whole
    body = json.dumps({"q": TEXT}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    raw = exchange(server.port, b"POST /translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                   b"Connection: close\r\n\r\n" + chunked)
    got = responses(raw)
    assert got[0][0] == 200 and json.loads(got[0][2])["translatedText"] == WANT, raw
    still_translating(server)


def check_big_body():
    """2 MiB over --max-body 1 MiB, 20 times from http.client: always the 413 JSON."""
    with S.Server(S.TINY, "-t", "1", "--no-access-log") as server:
        payload = json.dumps({"q": "x" * (2 << 20)}).encode()
        for _ in range(20):
            c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            c.request("POST", "/translate", body=payload, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            assert r.status == 413 and "max-body" in json.loads(r.read())["error"], r.status
            c.close()
        status, _, body = server.post("/translate", {"q": "Hallo"})
        assert status == 200, (status, body)
        assert server.stop() == 0


def trickle(port, stop, results, i):
    """Send a request head one byte at a time, one every 50 ms, until the server answers."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.settimeout(0.05)
    head, got, k = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 10000, b"", 0
    try:
        while not stop.is_set():
            if k < len(head):
                s.send(head[k:k + 1])
                k += 1
            try:
                d = s.recv(4096)
                if not d:
                    break
                got += d
            except socket.timeout:
                pass
    except OSError:
        pass
    results[i] = got
    s.close()


def check_slow_clients():
    """100 connections trickling header bytes from 127.0.0.1, cap 40 an address and a 2 s
    head deadline: 60 are refused at once (503), a client from 127.0.0.2 is served while
    they trickle, and the 40 get 408 at the deadline although they keep sending."""
    with S.Server(S.SHIPPED, "-t", "1", "--max-per-address", "40", "--head-timeout", "2", "--no-access-log") as server:
        stop, results = threading.Event(), [None] * 100
        threads = [threading.Thread(target=trickle, args=(server.port, stop, results, i)) for i in range(100)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        t0 = time.time()
        raw = exchange(server.port, post(json.dumps({"q": TEXT}).encode(), b"Connection: close\r\n"),
                       source="127.0.0.2")
        assert responses(raw)[0][0] == 200 and time.time() - t0 < 5, raw
        time.sleep(2.5)
        stop.set()
        for t in threads:
            t.join()
        statuses = sorted(responses(r)[0][0] for r in results if r)
        assert statuses.count(503) == 60 and statuses.count(408) == 40, statuses
        for r in results:
            assert json.loads(responses(r)[0][2])["error"], r
        still_translating(server)
        assert server.stop() == 0


def check_max_connections():
    with S.Server(S.TINY, "-t", "1", "--max-connections", "20", "--no-access-log") as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
        time.sleep(0.3)
        assert "--max-connections" in one_json_error(exchange(server.port, b"GET /health HTTP/1.1\r\n\r\n"), 503)
        for s in idle:
            s.close()
        time.sleep(0.3)
        status, _, _ = server.get("/health")
        assert status == 200
        assert server.stop() == 0


def check_pipelining_and_continue(server):
    """Two requests in one write: two answers, in order; Expect: 100-continue: 100, then 200."""
    a = post(json.dumps({"q": TEXT}).encode())
    b = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    got = responses(exchange(server.port, a + b))
    assert [g[0] for g in got] == [200, 200] and json.loads(got[0][2])["translatedText"] == WANT, got
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    body = json.dumps({"q": TEXT}).encode()
    s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body))
    assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    s.sendall(body)
    raw = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        raw += d
    s.close()
    assert responses(raw)[0][0] == 200, raw


def check_control_characters(server):
    """NUL in q is refused (400), never cut; other control characters are translated whole,
    as attend translate reads them."""
    for api, field in (("/translate", "translatedText"), ("/v1/translate", None)):
        status, _, body = server.post(api, {"q": "Ich habe Hunger.\u0000 Wo ist der Bahnhof?"})
        assert status == 400 and "NUL" in body["error"], (api, status, body)
        text = "Ich habe Hunger.\u0007 Wo ist der Bahnhof?"
        status, _, body = server.post(api, {"q": text})
        got = body[field] if field else body["translations"][0]["text"]
        assert status == 200 and got == S.translate_cli(S.SHIPPED, [text])[0], (api, body)
    status, _, body = server.request("POST", "/translate", b"q=Hallo%00Welt",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "NUL" in body["error"], (status, body)


def main():
    global WANT
    WANT = S.translate_cli(S.SHIPPED, [TEXT])[0]
    r = T.Runner()
    with S.Server(S.SHIPPED, "-t", "1") as server:
        r.check("Content-Length overflowing, negative, not a number, twice: one JSON 400", check_content_length,
                server)
        r.check("a half-closed client gets its answer", check_half_close, server)
        r.check("errors of the HTTP layer: JSON, one response each", check_http_errors, server)
        r.check("pipelined requests; Expect: 100-continue", check_pipelining_and_continue, server)
        r.check("NUL refused, other control characters translated whole", check_control_characters, server)
        assert server.stop() == 0
    r.check("2 MiB over --max-body, 20 times: always the 413", check_big_body)
    r.check("slow clients: per-address cap (503) and head deadline (408); others served", check_slow_clients)
    r.check("--max-connections: 503 JSON past it, then served again", check_max_connections)
    r.finish()


if __name__ == "__main__":
    main()
