#!/usr/bin/python3
"""attend serve with several models (issue 35): -m repeated, -m FILE=SRC-TGT, --models DIR.
Requests for two pairs interleaved from 16 client threads each equal attend translate's
output for the model that covers the pair (a pair model before a multilingual one); a pair no
model covers is a 400 naming the pairs; /v1/translate's "model"; /languages merged; /v1/model
lists every model; start-up errors are clear.
Run: /usr/bin/python3 tests/test_serve_multi.py"""
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

M2M = os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf")
DE = ["Guten Morgen.", "Das Haus ist klein.", "Wo ist der Bahnhof?", "Ich habe Hunger."]
EN = ["Good morning.", "The house is small.", "Where is the station?", "I am hungry."]


def translate(server, text, src, tgt):
    status, _, body = server.post("/translate", {"q": text, "source": src, "target": tgt})
    assert status == 200, (text, src, tgt, status, body)
    return body["translatedText"]


def check_interleaved(server):
    """de->en goes to de-en.gguf (tiny-m2m covers it too: the pair model wins), en->de to
    tiny-m2m; 16 threads, both pairs at once."""
    want = {("de", "en"): dict(zip(DE, S.translate_cli(S.SHIPPED, DE))),
            ("en", "de"): dict(zip(EN, S.translate_cli(M2M, EN, "--src-lang", "en", "--tgt-lang", "de")))}
    jobs = [(t, "de", "en") for t in DE] + [(t, "en", "de") for t in EN]
    failures = []

    def client(k):
        for i in range(6):
            text, src, tgt = jobs[(k + i) % len(jobs)]
            got = translate(server, text, src, tgt)
            if got != want[(src, tgt)][text]:
                failures.append((text, src, tgt, got, want[(src, tgt)][text]))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "clients still waiting"
    assert not failures, failures[:3]


def check_unknown_pair(server):
    status, _, body = server.post("/translate", {"q": "x", "source": "fr", "target": "ja"})
    assert status == 400 and "fr to ja" in body["error"], (status, body)
    assert "de-en" in body["error"] and "tiny-m2m" in body["error"], body
    status, _, body = server.post("/translate", {"q": DE[0], "source": "auto", "target": "en"})
    assert status == 200 and body["detectedLanguage"]["language"] == "de", (status, body)
    assert body["translatedText"] == S.translate_cli(S.SHIPPED, DE[:1])[0], body
    for bad in (b"[1,2]", b"null", b"{\"q\": ", b"\xff\xfe"):
        status, _, body = server.post("/translate", bad)
        assert status == 400 and "error" in body, (bad, status, body)
    S.alive(server)


def check_v1_model(server):
    """"model" picks the file even where another model would win the pair."""
    want = S.translate_cli(M2M, DE[:1], "--src-lang", "de", "--tgt-lang", "en")[0]
    status, _, body = server.post("/v1/translate", {"q": DE[0], "model": "tiny-m2m", "src_lang": "de",
                                                    "tgt_lang": "en"})
    assert status == 200 and body["translations"][0]["text"] == want, (status, body, want)
    status, _, body = server.post("/v1/translate", {"q": DE[0], "model": "de-en"})
    assert status == 200 and body["translations"][0]["text"] == S.translate_cli(S.SHIPPED, DE[:1])[0], body
    status, _, body = server.post("/v1/translate", {"q": DE[0], "model": "nllb"})
    assert status == 400 and "de-en, tiny-m2m" in body["error"], (status, body)
    status, _, body = server.post("/v1/translate", {"q": DE[0], "model": 7})
    assert status == 400 and "de-en, tiny-m2m" in body["error"], (status, body)


def check_languages(server):
    _, _, body = server.get("/languages")
    targets = {e["code"]: set(e["targets"]) for e in body}
    assert targets == {"de": {"en", "fr"}, "en": {"de", "fr"}, "fr": {"de", "en"}}, body
    assert all(e["name"] for e in body), body


def check_model_list(server):
    status, _, body = server.get("/v1/model")
    assert status == 200 and body["name"] == "de-en.gguf", body  # the first model's fields, as before
    assert [m["name"] for m in body["models"]] == ["de-en.gguf", "tiny-m2m.gguf"], body["models"]
    assert body["models"][0]["pair"] == "de-en" and "pair" not in body["models"][1], body["models"]
    status, _, body = server.get("/health")
    assert status == 200 and body == {"status": "ok", "pending": 0}, body


def check_models_dir():
    """--models DIR: every .gguf in it, sorted, after the -m files; a pair from each name."""
    with tempfile.TemporaryDirectory() as d:
        os.symlink(S.TINY, os.path.join(d, "b-fr-de.gguf"))
        os.symlink(S.TINY, os.path.join(d, "a-en-fr.gguf"))
        open(os.path.join(d, "notes.txt"), "w").close()
        with S.Server(M2M, "-t", "1", "--models", d) as s:
            _, _, body = s.get("/v1/model")
            assert [m["name"] for m in body["models"]] == ["tiny-m2m.gguf", "a-en-fr.gguf", "b-fr-de.gguf"], body
            want = S.translate_cli(S.TINY, EN[:1])[0]
            assert translate(s, EN[0], "en", "fr") == want  # the pair model, not tiny-m2m
            want = S.translate_cli(M2M, EN[:1], "--src-lang", "en", "--tgt-lang", "fr")[0]
            status, _, body = s.post("/v1/translate", {"q": EN[0], "model": "tiny-m2m", "src_lang": "en",
                                                       "tgt_lang": "fr"})
            assert status == 200 and body["translations"][0]["text"] == want, body
            assert s.stop() == 0


def check_explicit_pair():
    with S.Server(S.SHIPPED, "-t", "1", "-m", S.TINY + "=en-xx") as s:
        want = S.translate_cli(S.TINY, EN[:1])[0]
        assert translate(s, EN[0], "en", "xx") == want
        assert translate(s, DE[0], "de", "en") == S.translate_cli(S.SHIPPED, DE[:1])[0]
        assert s.stop() == 0


def check_stop(server):
    assert server.stop() == 0, server.log()


def start_error(*args):
    r = subprocess.run([S.ATTEND, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr


def check_start_errors():
    rc, err = start_error("-m", M2M, "-m", S.TINY)
    assert rc == 2 and "FILE=SRC-TGT" in err, (rc, err)
    rc, err = start_error("-m", M2M, "-m", M2M)
    assert rc == 2 and "two models named tiny-m2m" in err, (rc, err)
    rc, err = start_error("-m", S.SHIPPED, "-m", M2M + "=de-en")
    assert rc == 2 and "names its own languages" in err, (rc, err)
    rc, err = start_error("-m", S.SHIPPED, "-m", S.TINY + "=english")
    assert rc == 2 and "SRC-TGT" in err, (rc, err)
    rc, err = start_error("--models", os.path.join(T.REPO, "docs"))
    assert rc == 2 and "no .gguf" in err, (rc, err)
    rc, err = start_error("-m", S.SHIPPED, "-m", M2M, "--languages", "de-en")
    assert rc == 2 and "--languages" in err, (rc, err)


def main():
    r = T.Runner()
    with S.Server(S.SHIPPED, "-t", "1", "-m", M2M) as server:
        r.check("two models, 16 threads, both pairs interleaved: each equals attend translate", check_interleaved,
                server)
        r.check("a pair no model covers: 400 naming the pairs", check_unknown_pair, server)
        r.check("/v1/translate \"model\" picks the file; unknown names 400", check_v1_model, server)
        r.check("GET /languages merges the models", check_languages, server)
        r.check("GET /v1/model lists every model; /health", check_model_list, server)
        r.check("SIGTERM drains every scheduler, exits 0", check_stop, server)
    r.check("--models DIR: its .gguf files, sorted", check_models_dir)
    r.check("-m FILE=SRC-TGT names a pair", check_explicit_pair)
    r.check("start-up errors: no pair, a name twice, a pair for a multilingual model, empty DIR", check_start_errors)
    r.finish()


if __name__ == "__main__":
    main()
