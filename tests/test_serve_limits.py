#!/usr/bin/python3
"""attend serve's keys, limits and files (issue 35), as LibreTranslate has them: --api-keys
(403 without a known key, on translate, detect and file requests only), a key's own rate and
--req-limit per address (429 with a sane Retry-After, never for a valid key under its limit),
--char-limit in characters (400), /frontend/settings reporting them, POST /translate_file for
.txt and .html with the shipped model (the same text /translate gives), GET /download_file,
unsupported formats, hostile multipart (400, the server still answering) and a file over
--max-body (413). The gate's arithmetic itself is tests/test_serve_limits.c.
Run: /usr/bin/python3 tests/test_serve_limits.py"""
import json
import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
TEXT = "Das Haus ist klein. Der Hund schläft.\n\nWo ist der Bahnhof?\nIch habe Hunger.\n"
HTML = "<p>Das Haus ist <b>klein</b>. Der Hund schläft.</p>\n<p>Wo ist der Bahnhof?</p>\n"


def multipart(fields, boundary="attendTestBoundary"):
    """(body, headers) of a multipart/form-data form; a field's value is bytes/str, or a
    (filename, bytes) pair for a file."""
    out = b""
    for name, value in fields.items():
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
        if isinstance(value, tuple):
            head += f'; filename="{value[0]}"\r\nContent-Type: application/octet-stream'
            value = value[1]
        out += (head + "\r\n\r\n").encode() + (value.encode() if isinstance(value, str) else value) + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def post_file(server, fields, boundary="attendTestBoundary"):
    body, headers = multipart(fields, boundary)
    return server.request("POST", "/translate_file", body, headers=headers)


def write_keys(text):
    path = os.path.join(T.tempdir(), "keys.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


# ---------------------------------------------------------------------------------------
# Keys and limits

def check_settings_keys(server):
    status, _, body = server.get("/frontend/settings")
    assert status == 200, status
    want = {"apiKeys": True, "keyRequired": True, "charLimit": 40, "filesTranslation": True,
            "supportedFilesFormat": [".txt", ".html", ".htm"]}
    assert want.items() <= body.items(), body


def check_open_endpoints(server):
    """GET /languages, /frontend/settings, /health: no key, and never counted."""
    for _ in range(3):
        for path in ("/languages", "/frontend/settings", "/health"):
            status, _, _ = server.get(path)
            assert status == 200, (path, status)


def check_403(server):
    q = {"q": "Hallo", "source": "de", "target": "en"}
    cases = [("/translate", dict(q), None), ("/translate", dict(q, api_key="wrong"), None),
             ("/translate", dict(q, api_key=""), None), ("/detect", {"q": "Hallo"}, None),
             ("/v1/translate", {"q": "Hallo"}, None), ("/v1/translate", {"q": "Hallo", "api_key": "nope"}, None),
             ("/translate", b"q=Hallo&source=de&target=en&api_key=wrong", FORM),
             ("/detect", b"q=Hallo", FORM)]
    for path, body, headers in cases:
        status, _, answer = server.request("POST", path, body, headers=headers)
        assert status == 403 and "API key" in answer["error"], (path, body, status, answer)
    status, _, answer = post_file(server, {"file": ("a.txt", b"Hallo"), "source": "de", "target": "en"})
    assert status == 403 and "API key" in answer["error"], (status, answer)
    status, _, answer = post_file(server, {"file": ("a.txt", b"Hallo"), "api_key": "wrong"})
    assert status == 403, (status, answer)


def check_valid_key_under_limit(server):
    """A key of 1000 a minute: twelve requests, three times the address limit, all 200; the
    same key in a form, in /v1/translate, /detect and a file."""
    want = S.translate_cli(S.SHIPPED, ["Hallo Welt."])[0]
    for _ in range(12):
        status, _, body = server.post("/translate", {"q": "Hallo Welt.", "source": "de", "target": "en",
                                                     "api_key": "fast"})
        assert status == 200 and body == {"translatedText": want}, (status, body)
    status, _, body = server.request("POST", "/translate", b"q=Hallo+Welt.&source=de&target=en&api_key=fast",
                                     headers=FORM)
    assert status == 200 and body == {"translatedText": want}, (status, body)
    status, _, body = server.post("/v1/translate", {"q": "Hallo Welt.", "api_key": "fast"})
    assert status == 200 and body["translations"][0]["text"] == want, (status, body)
    status, _, body = server.post("/detect", {"q": "Hallo", "api_key": "fast"})
    assert status == 200, (status, body)
    status, _, body = post_file(server, {"file": ("a.txt", b"Hallo Welt."), "api_key": "fast"})
    assert status == 200 and "translatedFileUrl" in body, (status, body)


def check_multipart_forms(server):
    """POST /translate and /detect as LibreTranslate's web page sends them (FormData: a
    multipart form), the key among the fields; its empty key when none is stored is 403."""
    want = S.translate_cli(S.SHIPPED, ["Wo ist der Bahnhof?"])[0]
    page = {"q": "Wo ist der Bahnhof?", "source": "de", "target": "en", "format": "text", "api_key": "fast"}
    body, headers = multipart(page, boundary="----WebKitFormBoundaryx1y2z3")
    status, _, answer = server.request("POST", "/translate", body, headers=headers)
    assert status == 200 and answer == {"translatedText": want}, (status, answer)
    body, headers = multipart({"q": "Hallo", "api_key": "fast"})
    status, _, answer = server.request("POST", "/detect", body, headers=headers)
    assert status == 200 and answer[0]["language"] == "de", (status, answer)
    body, headers = multipart(dict(page, api_key=""))
    status, _, answer = server.request("POST", "/translate", body, headers=headers)
    assert status == 403, (status, answer)
    body, headers = multipart(page)
    status, _, answer = server.request("POST", "/translate", body[:-30], headers=headers)
    assert status == 400 and "cut short" in answer["error"], (status, answer)


def check_char_limit(server):
    """--char-limit 40 counts characters (code points), not bytes, over all of q."""
    ok = "ä" * 40  # 80 bytes
    status, _, body = server.post("/translate", {"q": ok, "source": "de", "target": "en", "api_key": "fast"})
    assert status == 200, (status, body)
    for q in ("ä" * 41, ["ä" * 20, "b" * 21]):
        status, _, body = server.post("/translate", {"q": q, "source": "de", "target": "en", "api_key": "fast"})
        assert status == 400 and "(41)" in body["error"] and "(40)" in body["error"], (q, status, body)
    status, _, body = server.post("/v1/translate", {"q": "x" * 41, "api_key": "fast"})
    assert status == 400 and "text limit (40)" in body["error"], (status, body)
    status, _, body = post_file(server, {"file": ("a.txt", ("ö" * 41).encode()), "api_key": "fast"})
    assert status == 400 and "text limit (40)" in body["error"], (status, body)


def retry_after(headers):
    value = headers.get("Retry-After")
    assert value is not None and re.fullmatch(r"[0-9]+", value), headers
    return int(value)


def check_key_limit(server):
    """A key of 2 a minute: two pass, the third is 429 with Retry-After in 1..30 s; another
    key and the address are untouched by it."""
    q = {"q": "Hallo", "source": "de", "target": "en", "api_key": "slow"}
    for _ in range(2):
        status, _, body = server.post("/translate", q)
        assert status == 200, (status, body)
    for path in ("/translate", "/detect"):
        status, headers, body = server.post(path, q)
        assert status == 429 and body["error"].startswith("Slowdown:"), (path, status, body)
        assert 1 <= retry_after(headers) <= 30, headers
    status, _, _ = server.post("/translate", dict(q, api_key="fast"))
    assert status == 200, status


def check_address_limit(server):
    """A key without a limit of its own is held to --req-limit 4 per address: four pass, the
    fifth (and a file) is 429 with Retry-After in 1..15 s; GET stays open."""
    q = {"q": "Hallo", "source": "de", "target": "en", "api_key": "open"}
    for i in range(4):
        status, _, body = server.post("/translate", q)
        assert status == 200, (i, status, body)
    status, headers, body = server.post("/translate", q)
    assert status == 429 and "Slowdown" in body["error"], (status, body)
    assert 1 <= retry_after(headers) <= 15, headers
    status, headers, body = post_file(server, {"file": ("a.txt", b"Hallo"), "api_key": "open"})
    assert status == 429 and 1 <= retry_after(headers) <= 15, (status, headers, body)
    status, _, _ = server.get("/health")
    assert status == 200, status


def check_no_key_limit():
    """--req-limit without keys: any client, counted by address; a malformed keys file stops
    the start with the line named."""
    with S.Server(S.TINY, "-t", "1", "--req-limit", "2") as s:
        codes = [s.post("/v1/translate", {"q": "a b"})[0] for _ in range(3)]
        assert codes == [200, 200, 429], codes
        assert s.stop() == 0
    bad = write_keys("good\nbad 0\n")
    out = subprocess.run([S.ATTEND, "serve", "-m", S.TINY, "--port", "0", "--api-keys", bad],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and f"{bad}:2:" in out.stderr, out
    out = subprocess.run([S.ATTEND, "serve", "-m", S.TINY, "--port", "0", "--api-keys", bad + ".none"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and ".none" in out.stderr, out


# ---------------------------------------------------------------------------------------
# Files

def download(server, url):
    m = re.fullmatch(rf"http://127\.0\.0\.1:{server.port}(/download_file/[0-9a-f]{{16}}\.[A-Za-z0-9._-]+)", url)
    assert m, url
    conn = server.connect()
    conn.request("GET", m.group(1))
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), data


def check_txt_file(server):
    """A .txt file: line by line, each line's sentences split: what /translate gives for it."""
    _, _, want = server.post("/translate", {"q": TEXT, "source": "de", "target": "en"})
    status, _, body = post_file(server, {"file": ("notes.txt", TEXT.encode()), "source": "de", "target": "en"})
    assert status == 200 and list(body) == ["translatedFileUrl"], (status, body)
    status, headers, data = download(server, body["translatedFileUrl"])
    assert status == 200 and data.decode() == want["translatedText"], (status, data, want)
    assert headers["Content-Type"].startswith("text/plain"), headers
    assert headers["Content-Disposition"] == 'attachment; filename="notes.txt"', headers
    assert data.decode().count("\n") == TEXT.count("\n") and "house" in data.decode().lower(), data
    again = download(server, body["translatedFileUrl"])
    assert again[0] == 200 and again[2] == data, again[:2]


def check_html_file(server):
    """An .html (.HTM) file: the HTML path, as "format": "html"."""
    _, _, want = server.post("/translate", {"q": HTML, "source": "de", "target": "en", "format": "html"})
    for name in ("page.html", "PAGE.HTM"):
        status, _, body = post_file(server, {"file": (name, HTML.encode()), "source": "de", "target": "en"})
        assert status == 200, (status, body)
        status, headers, data = download(server, body["translatedFileUrl"])
        assert status == 200 and data.decode() == want["translatedText"], (data, want)
        assert headers["Content-Type"].startswith("text/html"), headers
        assert "<b>" in data.decode() and "<p>" in data.decode(), data


def check_file_names(server):
    """A path in the upload's name is cut to its last part, odd characters replaced."""
    status, _, body = post_file(server, {"file": ("../../etc/pass wd.txt", b"Hallo.")})
    assert status == 200, (status, body)
    assert body["translatedFileUrl"].endswith(".pass_wd.txt"), body
    status, headers, _ = download(server, body["translatedFileUrl"])
    assert status == 200 and headers["Content-Disposition"] == 'attachment; filename="pass_wd.txt"', headers
    for path in ("/download_file/0123456789abcdef.notes.txt", "/download_file/../etc/passwd", "/download_file/"):
        status, _, body = server.get(path)
        assert status == 404 and "error" in body, (path, status, body)


def check_file_url_host(server):
    """The URL names the Host the client asked; without one (HTTP/1.0), or with one that is not
    a plain host:port, the address and port the server is bound to."""
    body, headers = multipart({"file": ("a.txt", b"Hallo.")})
    status, _, answer = server.request("POST", "/translate_file", body, headers=dict(headers, Host="example.org:99"))
    assert status == 200 and answer["translatedFileUrl"].startswith("http://example.org:99/download_file/"), answer
    status, _, answer = server.request("POST", "/translate_file", body, headers=dict(headers, Host="x/<y>"))
    assert status == 200 and answer["translatedFileUrl"].startswith(f"http://127.0.0.1:{server.port}/"), answer
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /translate_file HTTP/1.0\r\nContent-Type: " + headers["Content-Type"].encode()
                     + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    answer = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    assert raw.startswith(b"HTTP/1.") and b" 200 " in raw.split(b"\r\n")[0], raw
    status, _, data = download(server, answer["translatedFileUrl"])
    assert status == 200 and data.decode() == "Hello.", (status, data)


def check_file_errors(server):
    """Unsupported formats and bad files: 400 naming what is wrong."""
    for name in ("doc.pdf", "doc.docx", "noextension", ".txt"):
        status, _, body = post_file(server, {"file": (name, b"Hallo")})
        assert status == 400 and ".txt" in body["error"] and ".html" in body["error"], (name, status, body)
    cases = [({"source": "de"}, "missing file"), ({"file": "not a file"}, "missing file"),
             ({"file": ("a.txt", b"")}, "empty"), ({"file": ("a.txt", b"Hal\x00lo")}, "NUL"),
             ({"file": ("a.txt", b"\xff\xfe bad")}, "UTF-8"),
             ({"file": ("a.txt", b"Hallo"), "target": "fr"}, "not supported"),
             ({"file": ("a.txt", b"Hallo"), "source": "d\x00e"}, "NUL")]
    for fields, words in cases:
        status, _, body = post_file(server, fields)
        assert status == 400 and words in body["error"], (fields, status, body)


def check_hostile_multipart(server):
    """No boundary, cut parts, huge headers, garbage: 400, and the server goes on."""
    good, _ = multipart({"file": ("a.txt", b"Hallo Welt.")})
    bodies = [
        (good, "multipart/form-data"), (good, "application/json"), (good, "text/plain"),
        (good, "multipart/form-data; boundary=other"), (good[: len(good) // 2], None),
        (good[:-22], None), (b"", None), (b"\x00" * 100, None), (b"--attendTestBoundary--\r\n", None),
        (b"--attendTestBoundary\r\nX: " + b"a" * 20000 + b"\r\n\r\nx\r\n--attendTestBoundary--", None),
        (b"--attendTestBoundary\r\n"
         + b"Content-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--attendTestBoundary\r\n" * 40
         + b"--attendTestBoundary--", None),
    ]
    for body, kind in bodies:
        headers = {"Content-Type": kind or "multipart/form-data; boundary=attendTestBoundary"}
        status, _, answer = server.request("POST", "/translate_file", body, headers=headers)
        assert status == 400 and answer["error"], (body[:60], kind, status, answer)
    status, _, body = server.get("/health")
    assert status == 200, status
    status, _, body = post_file(server, {"file": ("a.txt", b"Hallo Welt.")})
    assert status == 200, (status, body)


def check_file_too_big():
    """A file over --max-body: 413."""
    with S.Server(S.TINY, "-t", "1", "--max-body", "65536") as s:
        status, _, body = post_file(s, {"file": ("big.txt", b"a b\n" * 40000)})
        assert status == 413 and "--max-body" in body["error"], (status, body)
        status, _, body = post_file(s, {"file": ("small.txt", b"a b\n")})
        assert status == 200, (status, body)
        assert s.stop() == 0


def main():
    r = T.Runner()
    keys = write_keys("# attend serve keys\nopen\nfast 1000\n\nslow 2   # two a minute\n")
    with S.Server(S.SHIPPED, "-t", "2", "--api-keys", keys, "--req-limit", "4", "--char-limit", "40") as server:
        r.check("/frontend/settings: apiKeys, keyRequired, charLimit, file formats", check_settings_keys, server)
        r.check("GET /languages, /frontend/settings, /health: open, not counted", check_open_endpoints, server)
        r.check("403: no key or an unknown one, on every POST endpoint", check_403, server)
        r.check("a valid key under its limit: never 403 or 429", check_valid_key_under_limit, server)
        r.check("multipart /translate and /detect, as LibreTranslate's page posts", check_multipart_forms, server)
        r.check("--char-limit: characters, not bytes; 400", check_char_limit, server)
        r.check("a key's own limit: 429 with Retry-After", check_key_limit, server)
        r.check("--req-limit per address for a key without one: 429 with Retry-After", check_address_limit, server)
        assert server.stop() == 0
    r.check("--req-limit without keys; a malformed keys file stops the start", check_no_key_limit)
    with S.Server(S.SHIPPED, "-t", "2") as server:
        r.check("translate_file .txt: what /translate gives; download", check_txt_file, server)
        r.check("translate_file .html/.htm: the HTML path", check_html_file, server)
        r.check("upload names cleaned; unknown downloads 404", check_file_names, server)
        r.check("the download URL's host: Host, else the bound address", check_file_url_host, server)
        r.check("unsupported formats and bad files: 400", check_file_errors, server)
        r.check("hostile multipart: 400, the server goes on", check_hostile_multipart, server)
        assert server.stop() == 0
    r.check("a file over --max-body: 413", check_file_too_big)
    r.finish()


if __name__ == "__main__":
    main()
