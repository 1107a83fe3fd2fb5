#!/usr/bin/python3
"""Several models in one attend serve (issue 35): the shipped German→English model, the tiny
multilingual M2M-100 test model and a tiny Marian test model named en-de on the command line
(-m FILE:SRC-TGT). Requests for every pair, interleaved from 16 client threads, equal attend
translate's outputs with each model; a pair no model covers is a 400 naming the pairs; /v1
"model" picks a file; /languages merges the models; --models DIR loads a folder; a single
model's server answers as before.
Run: /usr/bin/python3 tests/test_serve_multi.py"""
import os
import queue
import random
import shutil
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

M2M = os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf")
DE = T.corpus_lines("multi30k", "de", 40, skip=8000)
EN = T.corpus_lines("multi30k", "en", 40, skip=8000)


def models_args():
    return ["-m", S.SHIPPED, "-m", M2M, "-m", S.TINY + ":en-de", "-t", "1"]


def check_interleaved(server):
    """160 requests (de→en on the shipped model, en→de on tiny-v1, de→fr and en→fr on
    tiny-m2m), shuffled, from 16 threads: each equals attend translate with its model."""
    want = {
        ("de", "en"): S.translate_cli(S.SHIPPED, DE, "-t", "1"),
        ("en", "de"): S.translate_cli(S.TINY, EN, "-t", "1"),
        ("de", "fr"): S.translate_cli(M2M, DE, "-t", "1", "--src-lang", "de", "--tgt-lang", "fr"),
        ("en", "fr"): S.translate_cli(M2M, EN, "-t", "1", "--src-lang", "en", "--tgt-lang", "fr"),
    }
    jobs = [(pair, i) for pair in want for i in range(len(DE))]
    random.Random(5).shuffle(jobs)
    todo, got, errors = queue.Queue(), {}, []
    for j in jobs:
        todo.put(j)

    def client():
        conn = server.connect()
        while True:
            try:
                (src, tgt), i = todo.get_nowait()
            except queue.Empty:
                return
            line = (DE if src == "de" else EN)[i]
            status, _, body = server.post("/translate", {"q": line, "source": src, "target": tgt}, conn=conn)
            if status != 200:
                errors.append((src, tgt, i, status, body))
            else:
                got[(src, tgt), i] = body["translatedText"]
    threads = [threading.Thread(target=client) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for (pair, i) in jobs:
        assert got[pair, i] == want[pair][i], (pair, i, got[pair, i], want[pair][i])


def check_unknown_pair(server):
    status, _, body = server.post("/translate", {"q": "Bonjour", "source": "fr", "target": "es"})
    assert status == 400, (status, body)
    for part in ("fr to es", "de-en (de-en.gguf)", "en-de (tiny-v1.gguf)", "tiny-m2m.gguf"):
        assert part in body["error"], body


def check_v1_model(server):
    want = S.translate_cli(S.TINY, ["Ein Hund läuft."], "-t", "1")[0]
    for name in ("tiny-v1", "tiny-v1.gguf"):
        status, _, body = server.post("/v1/translate", {"q": "Ein Hund läuft.", "model": name})
        assert status == 200 and body["translations"][0]["text"] == want, (status, body)
    status, _, body = server.post("/v1/translate", {"q": "Hallo", "model": "nope"})
    assert status == 400 and "de-en.gguf, tiny-m2m.gguf, tiny-v1.gguf" in body["error"], (status, body)
    status, _, body = server.get("/v1/model")
    assert status == 200 and body["name"] == "de-en.gguf", body
    assert [(m["name"], m["pair"]) for m in body["models"]] == [
        ("de-en.gguf", ["de", "en"]), ("tiny-m2m.gguf", None), ("tiny-v1.gguf", ["en", "de"])], body["models"]


def check_languages(server):
    status, _, body = server.get("/languages")
    assert status == 200, (status, body)
    by_code = {e["code"]: set(e["targets"]) for e in body}
    _, _, m2m = server.get("/v1/model")
    m2m_langs = next(m["languages"] for m in m2m["models"] if m["name"] == "tiny-m2m.gguf")
    assert {"de", "en"} <= set(by_code), by_code
    assert "en" in by_code["de"] and "de" in by_code["en"], by_code
    for code in m2m_langs:
        assert set(m2m_langs) - {code} <= by_code[code], (code, by_code)


def check_models_dir():
    """--models DIR: every .gguf in it, by name; a folder without one is a start-up error."""
    d = T.tempdir()
    try:
        shutil.copy(S.TINY, os.path.join(d, "en-de.gguf"))
        shutil.copy(M2M, os.path.join(d, "m2m.gguf"))
        open(os.path.join(d, "notes.txt"), "w").write("not a model\n")
        with S.Server(S.TINY, "--models", d, "-t", "1") as server:
            _, _, body = server.get("/v1/model")
            assert [m["name"] for m in body["models"]] == ["tiny-v1.gguf", "en-de.gguf", "m2m.gguf"], body
            status, _, body = server.post("/translate", {"q": "A dog.", "source": "en", "target": "de"})
            assert status == 200 and body["translatedText"] == S.translate_cli(S.TINY, ["A dog."])[0], body
            assert server.stop() == 0
        empty = T.tempdir()
        out = T.run_attend(["serve", "--models", empty, "--port", "0"], check=False, timeout=30)
        assert out.returncode == 2 and "no .gguf file" in out.stderr, out
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_auto_and_hostile(server):
    """"source": "auto" with several models; bodies that are not a request object are 400s
    (never a crash), and the server still answers."""
    status, _, body = server.post("/translate", {"q": "Guten Morgen.", "source": "auto", "target": "en"})
    assert status == 200 and body["translatedText"] == S.translate_cli(S.SHIPPED, ["Guten Morgen."])[0], body
    for bad in (b"[1,2]", b"null", b'{"q": ', b"\xff\xfe", b'{"q": "x", "source": 7, "target": []}'):
        status, _, body = server.post("/translate", bad)
        assert status == 400 and "error" in body, (bad, status, body)
        status, _, body = server.post("/v1/translate", bad)
        assert status == 400 and "error" in body, (bad, status, body)
    S.alive(server)


def check_same_name():
    out = T.run_attend(["serve", "-m", M2M, "-m", M2M, "--port", "0"], check=False, timeout=30)
    assert out.returncode == 2 and "two models named tiny-m2m.gguf" in out.stderr, out


def check_bad_pairs():
    """--languages with several models, a bad FILE:PAIR, a pair on a multilingual model:
    start-up errors that say what to do."""
    out = T.run_attend(["serve", "-m", S.TINY, "-m", M2M, "--languages", "de-en", "--port", "0"], check=False,
                       timeout=30)
    assert out.returncode == 2 and "-m FILE:SRC-TGT" in out.stderr, out
    out = T.run_attend(["serve", "-m", M2M + ":de-en", "-m", S.TINY, "--port", "0"], check=False, timeout=30)
    assert out.returncode == 2 and "names its own languages" in out.stderr, out
    out = T.run_attend(["serve", "-m", S.TINY + ":english", "-m", M2M, "--port", "0"], check=False, timeout=30)
    assert out.returncode == 2 and "english: give the pair as SRC-TGT" in out.stderr, out


def main():
    r = T.Runner()
    with S.Server(S.SHIPPED, *models_args()[2:]) as server:
        r.check("three models: 160 interleaved requests from 16 clients equal attend translate", check_interleaved,
                server)
        r.check("a pair no model covers: 400 naming the pairs", check_unknown_pair, server)
        r.check("/v1/translate \"model\"; /v1/model lists the models", check_v1_model, server)
        r.check("/languages merges the models", check_languages, server)
        r.check("source auto; hostile bodies 400, still serving", check_auto_and_hostile, server)
        assert server.stop() == 0
    r.check("--models DIR", check_models_dir)
    r.check("start-up errors for pairs", check_bad_pairs)
    r.check("a model name given twice: a start-up error", check_same_name)
    r.finish()


if __name__ == "__main__":
    main()
