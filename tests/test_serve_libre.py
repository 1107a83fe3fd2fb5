#!/usr/bin/python3
"""attend serve as LibreTranslate's clients see it (issue 35, its client part): GET /languages
(the pair from the model file's name or --languages; a multilingual model's codes), GET
/frontend/settings, POST /detect and "source": "auto", "alternatives" from the n-best list,
every error a JSON {"error"} with LibreTranslate's status, a NUL inside q refused (never cut),
and the npm client libretranslate (installed by make test into build/npm) translating,
detecting and reading the language list against a real server.
Run: /usr/bin/python3 tests/test_serve_libre.py"""
import json
import os
import shutil
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

M2M = os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf")
NPM = os.path.join(T.REPO, "build", "npm")
NPM_VERSION = "1.0.1"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def check_languages(server):
    status, headers, body = server.get("/languages")
    assert status == 200 and headers["Content-Type"].startswith("application/json"), (status, headers)
    assert body == [{"code": "de", "name": "German", "targets": ["en"]},
                    {"code": "en", "name": "English", "targets": []}], body


def check_languages_rule():
    """--languages overrides the name; a name without a pair lists nothing (and "auto" is
    refused, naming the option); a multilingual model lists its codes, each to every other."""
    with S.Server(S.TINY, "-t", "1", "--languages", "fr-xx") as s:
        _, _, body = s.get("/languages")
        assert body == [{"code": "fr", "name": "French", "targets": ["xx"]},
                        {"code": "xx", "name": "xx", "targets": []}], body
        assert s.stop() == 0
    with S.Server(S.TINY, "-t", "1") as s:
        _, _, body = s.get("/languages")
        assert body == [], body
        status, _, body = s.post("/translate", {"q": "Hallo", "source": "auto", "target": "en"})
        assert status == 400 and "--languages" in body["error"], (status, body)
        status, _, body = s.post("/detect", {"q": "Hallo"})
        assert status == 400 and "--languages" in body["error"], (status, body)
        assert s.stop() == 0
    with S.Server(M2M, "-t", "1") as s:
        _, _, model = s.get("/v1/model")
        _, _, body = s.get("/languages")
        assert [e["code"] for e in body] == model["languages"], body
        for e in body:
            assert e["targets"] == [c for c in model["languages"] if c != e["code"]], e
        assert {"code": "de", "name": "German"}.items() <= body[model["languages"].index("de")].items()
        status, _, body = s.post("/detect", {"q": "Je voudrais un café, s'il vous plaît."})
        assert status == 200 and body[0]["language"] == "fr", (status, body)
        assert s.stop() == 0
    # the file-name rule (docs/serve.md): the last xx-yy, two letters each side, not touching a letter
    tmp = T.tempdir()
    try:
        for name, pair in (("opus-mt-de-en", ["de", "en"]), ("opus-mt-de-en-big.gguf", ["de", "en"]),
                           ("marian.fr-es.q8.gguf", ["fr", "es"]), ("deu-eng.gguf", []), ("tiny-v1.gguf", [])):
            os.symlink(S.TINY, os.path.join(tmp, name))
            with S.Server(os.path.join(tmp, name), "-t", "1") as s:
                _, _, body = s.get("/languages")
                assert [e["code"] for e in body] == pair, (name, body)
                assert s.stop() == 0
    finally:
        shutil.rmtree(tmp)
    for bad in (["--languages", "deen"], ["--languages", "de-en-fr"]):
        out = subprocess.run([S.ATTEND, "serve", "-m", S.TINY, "--port", "0", *bad], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 2 and "SRC-TGT" in out.stderr, (bad, out)
    out = subprocess.run([S.ATTEND, "serve", "-m", M2M, "--port", "0", "--languages", "de-en"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "its own languages" in out.stderr, out


def check_settings(server):
    status, _, body = server.get("/frontend/settings")
    assert status == 200, status
    assert body == {"charLimit": -1, "frontendTimeout": 500, "apiKeys": False, "keyRequired": False,
                    "suggestions": False, "filesTranslation": True, "supportedFilesFormat": [".txt", ".html", ".htm"],
                    "language": {"source": {"code": "de", "name": "German"},
                                 "target": {"code": "en", "name": "English"}}}, body


def check_detect(server):
    """Detection among the server's source languages (CLD2): German text is German with a
    high confidence; text in no source language of the server gets that language with
    confidence 0."""
    status, _, body = server.post("/detect", {"q": "Ich habe Hunger.", "api_key": "x"})
    assert status == 200 and [e["language"] for e in body] == ["de"] and body[0]["confidence"] > 80, (status, body)
    status, _, body = server.request("POST", "/detect", b"q=Wo+ist+der+Bahnhof%3F&api_key=", headers=FORM)
    assert status == 200 and [e["language"] for e in body] == ["de"] and body[0]["confidence"] > 80, (status, body)
    status, _, body = server.post("/detect", {"q": "Where is the railway station, please?"})
    assert status == 200 and body == [{"confidence": 0.0, "language": "de"}], (status, body)
    for bad in (b'{}', b'{"q": ""}', b'{"q": 5}', b'{"q": "Hallo', b'[1]'):
        status, _, body = server.post("/detect", bad)
        assert status == 400 and body["error"], (bad, status, body)


def check_auto(server):
    lines = ["Wo ist der Bahnhof?", "Ich habe Hunger.\nZwei Kinder spielen im Schnee."]
    status, _, plain = server.post("/translate", {"q": lines[0], "source": "de", "target": "en"})
    assert status == 200 and "detectedLanguage" not in plain, plain
    status, _, body = server.post("/translate", {"q": lines[0], "source": "auto", "target": "en"})
    assert status == 200 and body["translatedText"] == plain["translatedText"], body
    assert body["detectedLanguage"]["language"] == "de" and body["detectedLanguage"]["confidence"] > 80, body
    status, _, body = server.post("/translate", {"q": lines, "source": "auto", "target": "en"})
    assert status == 200 and [d["language"] for d in body["detectedLanguage"]] == ["de"] * 2, body
    assert body["translatedText"] == S.translate_cli(S.SHIPPED, lines[:1]) + [
        "\n".join(S.translate_cli(S.SHIPPED, lines[1].split("\n")))], body
    for src, tgt in (("fr", "es"), ("de", "fr"), ("en", "de")):
        status, _, body = server.post("/translate", {"q": "Hallo", "source": src, "target": tgt})
        assert status == 400 and "de to en" in body["error"], (src, tgt, status, body)
    with S.Server(M2M, "-t", "1") as s:  # a multilingual model: detected among its languages
        for text, lang in (("Ich habe Hunger und möchte etwas essen.", "de"), ("Je voudrais un café, s'il vous plaît.", "fr")):
            status, _, body = s.post("/translate", {"q": text, "source": "auto", "target": "en"})
            want = S.translate_cli(M2M, [text], "--src-lang", lang, "--tgt-lang", "en")[0]
            assert status == 200 and body["detectedLanguage"]["language"] == lang, (text, status, body)
            assert body["translatedText"] == want, (text, body, want)
        assert s.stop() == 0


def check_alternatives(server):
    """N more translations: the n-best list of attend translate --beam 4 --n-best 4, each
    once and none the translation itself."""
    q = "Wo ist der Bahnhof?"
    nbest = [line.split(" ||| ")[1] for line in S.translate_cli(S.SHIPPED, [q], "--n-best", "4")]
    status, _, body = server.post("/translate", {"q": q, "alternatives": 3})
    assert status == 200 and body["translatedText"] == nbest[0], (body, nbest)
    alts = body["alternatives"]
    assert alts and len(alts) <= 3 and len(set(alts)) == len(alts) and nbest[0] not in alts, alts
    assert all(a in nbest[1:] for a in alts) and alts == [a for a in nbest[1:] if a != nbest[0]][:3], (alts, nbest)
    status, _, body = server.post("/translate", {"q": q, "alternatives": 1})
    assert status == 200 and body["alternatives"] == alts[:1], body
    status, _, body = server.post("/translate", {"q": [q, "Ich habe Hunger."], "alternatives": 2})
    assert status == 200 and len(body["alternatives"]) == 2 and body["alternatives"][0] == alts[:2], body
    assert all(isinstance(a, list) and len(a) <= 2 for a in body["alternatives"]), body
    status, _, body = server.post("/translate", {"q": q, "alternatives": 0})
    assert status == 200 and "alternatives" not in body, body
    status, _, body = server.request("POST", "/translate", b"q=Wo+ist+der+Bahnhof%3F&alternatives=2", headers=FORM)
    assert status == 200 and body["alternatives"] == alts[:2], body
    status, _, body = server.post("/translate", {"q": "<p>Hallo</p>", "format": "html", "alternatives": 2})
    assert status == 200 and body["alternatives"] == [], body
    for bad in (5, -1, 1.5, "x", [1]):
        status, _, body = server.post("/translate", {"q": q, "alternatives": bad})
        assert status == 400 and "alternatives" in body["error"], (bad, status, body)


def check_errors(server):
    """Every error of the LibreTranslate endpoints is JSON {"error"} with its status."""
    cases = [("POST", "/translate", b'{"q": "Hallo'), ("POST", "/translate", b'{"q": ""}'),
             ("POST", "/detect", b'{"q": 1}'), ("POST", "/detect", b'nope'),
             ("GET", "/detect", None), ("POST", "/languages", b'{}'), ("POST", "/frontend/settings", b'{}'),
             ("GET", "/translate", None), ("GET", "/frontend", None), ("GET", "/languages/x", None)]
    want = [400, 400, 400, 400, 405, 405, 405, 405, 404, 404]
    for (method, path, body), code in zip(cases, want):
        status, headers, answer = server.request(method, path, body)
        assert status == code and headers["Content-Type"].startswith("application/json"), (path, status, headers)
        assert isinstance(answer, dict) and list(answer) == ["error"] and answer["error"], (path, answer)
        if code == 405:
            assert headers["Allow"] == ("POST" if path in ("/detect", "/translate") else "GET"), (path, headers)
    s = S.raw_socket(server.port)
    s.sendall(b"POST /detect HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (2 << 20))
    head = s.recv(65536)
    assert head.startswith(b"HTTP/1.1 413") and b'{"error":' in head, head
    s.close()
    S.alive(server)


def check_nul(server):
    """A NUL inside q is refused with 400, never cut (cJSON's strings end there)."""
    for path in ("/translate", "/v1/translate", "/detect"):
        status, _, body = server.post(path, b'{"q": "Ich habe Hunger.\\u0000 Wo ist der Bahnhof?"}')
        assert status == 400 and body == {"error": "q contains a NUL character"}, (path, status, body)
    # "source": "auto" too: the body is read once, so the NUL is seen after the language is found
    status, _, body = server.post("/translate", b'{"q": "Ich habe Hunger.\\u0000 Wo ist der Bahnhof?", '
                                                b'"source": "auto", "target": "en"}')
    assert status == 400 and body == {"error": "q contains a NUL character"}, (status, body)
    status, _, body = server.post("/translate", {"q": ["Hallo", "Ich habe Hunger.\u0000 Wo ist der Bahnhof?"]})
    assert status == 400 and "NUL" in body["error"], body
    status, _, body = server.post("/translate", b'{"q": "Hallo\x00 Welt"}')
    assert status == 400 and "NUL" in body["error"], body
    for path in ("/translate", "/detect"):
        status, _, body = server.request("POST", path, b"q=Ich+habe+Hunger.%00+Wo+ist+der+Bahnhof%3F", headers=FORM)
        assert status == 400 and body == {"error": "q contains a NUL character"}, (path, status, body)
    # an escaped backslash before "u0000" is text, not a NUL
    status, _, body = server.post("/translate", {"q": "Hallo \\u0000"})
    assert status == 200 and body["translatedText"], body
    status, _, body = server.post("/translate", {"q": "Ich habe Hunger. Wo ist der Bahnhof?"})
    assert status == 200 and body["translatedText"] == S.translate_cli(
        S.SHIPPED, ["Ich habe Hunger. Wo ist der Bahnhof?"])[0], body


def check_npm_client(server):
    """The npm package libretranslate, as its README shows, against the server."""
    package = os.path.join(NPM, "node_modules", "libretranslate", "package.json")
    assert os.path.exists(package), (
        f"the npm client is not installed in {NPM}: make test installs it with "
        f"`npm install --prefix build/npm libretranslate@{NPM_VERSION}` (no network, or no npm?)")
    with open(package) as f:
        assert json.load(f)["version"] == NPM_VERSION
    node = shutil.which("node")
    assert node, "node is not installed (Node 20 runs tests/libre_client.js)"
    out = subprocess.run([node, os.path.join(T.REPO, "tests", "libre_client.js"), f"http://127.0.0.1:{server.port}"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, NODE_PATH=os.path.join(NPM, "node_modules")))
    assert out.returncode == 0, out
    got = json.loads(out.stdout)
    want = S.translate_cli(S.SHIPPED, ["Wo ist der Bahnhof?", "Ich habe Hunger."])
    assert got == {"translated": want[0], "detected": want[1],
                   "unlisted": "This language was not found/does not exist."}, got
    log = server.log()
    assert '"GET /languages" 200' in log and '"POST /translate" 200' in log, log[-800:]


def main():
    r = T.Runner()
    with S.Server(S.SHIPPED, "-t", "2") as server:
        r.check("GET /languages: the pair from the file name (de-en.gguf)", check_languages, server)
        r.check("GET /frontend/settings: LibreTranslate's fields", check_settings, server)
        r.check("POST /detect: the model's source language; bad input 400", check_detect, server)
        r.check("source auto: detectedLanguage beside translatedText; other pairs 400", check_auto, server)
        r.check("alternatives: the n-best list, each once", check_alternatives, server)
        r.check("errors: JSON {error} with LibreTranslate's status on every endpoint", check_errors, server)
        r.check("a NUL inside q: 400, never cut", check_nul, server)
        r.check("the npm client libretranslate translates, detects, reads /languages", check_npm_client, server)
        assert server.stop() == 0
    r.check("--languages, names without a pair, a multilingual model", check_languages_rule)
    r.finish()


if __name__ == "__main__":
    main()
