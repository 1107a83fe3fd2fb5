#!/usr/bin/python3
"""POST /translate with "source": "auto" and q a list, as LibreTranslate answers it: each
entry detected on its own when longer than 40 characters (code points, not bytes), a shorter
one taking the detection of all the entries together; each entry translated from its own
language (the request split into one request per language, the answers merged in the
entries' order); detectedLanguage one per entry with its own confidence; an entry in a
language no model translates into the target is a 400 naming it, never translated from
another language. /detect is the oracle of each detection (same candidates: every source
language of the server).
Run: /usr/bin/python3 tests/test_serve_auto.py"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402

EN_DE = os.path.join(T.REPO, "models", "en-de.gguf")
M2M = os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf")  # languages de, en, fr

DE_A = "Zwei junge Männer spielen auf einer Wiese mit einem roten Ball."
DE_B = "Ein Mann in pinkfarbenem T-Shirt singt ein Lied."  # > 40: CLD2 finds neither de nor en
DE_C = "Eine Frau mit einem großen Hut sitzt auf einer Bank und liest die Zeitung."
EN_A = "Two young men are playing with a red ball on a green meadow."
FR_A = "Deux jeunes hommes jouent avec un ballon rouge dans un grand pré vert."
FR_SHORT = "Où est la gare? Je ne sais pas où elle."  # 39 characters, 41 bytes: not alone


def detect(server, text):
    """/detect's best guess for text: what an entry detected on its own gets."""
    status, _, body = server.post("/detect", {"q": text})
    assert status == 200, (status, body)
    return body[0]


def want_detected(server, q):
    """Each entry's detectedLanguage by LibreTranslate's rule, from /detect."""
    overall = detect(server, "\n".join(q))
    return [detect(server, e) if len(e) > 40 else overall for e in q]


def check_one_language(server):
    """All entries German: one request as with "source": "de" (the same translations and
    alternatives), detectedLanguage per entry with each one's own confidence."""
    q = [DE_A, DE_B, "Ein Hund."]
    status, _, named = server.post("/translate", {"q": q, "source": "de", "target": "en", "alternatives": 2})
    assert status == 200, (status, named)
    status, _, body = server.post("/translate", {"q": q, "source": "auto", "target": "en", "alternatives": 2})
    assert status == 200, (status, body)
    assert body["translatedText"] == named["translatedText"] == S.translate_cli(S.SHIPPED, q, "-t", "1"), body
    assert body["alternatives"] == named["alternatives"], body
    assert body["detectedLanguage"] == want_detected(server, q), body
    assert [d["language"] for d in body["detectedLanguage"]] == ["de"] * 3, body
    confidences = {d["confidence"] for d in body["detectedLanguage"]}
    assert len(confidences) > 1, body  # each entry its own, not one for all


def check_unsupported(server):
    """de-en and en-de: into en only German is translated, into de only English. An entry
    detected in the target's own language is a 400 naming it (LibreTranslate: "en is not
    supported"), never translated as German."""
    for q, target, lang in (([DE_A, EN_A], "en", "en"), ([EN_A, DE_A], "de", "de"), ([EN_A], "en", "en")):
        status, _, body = server.post("/translate", {"q": q, "source": "auto", "target": target})
        assert status == 400, (q, target, status, body)
        assert f"{lang} is not supported" in body["error"] and f"no model translates {lang} to {lang}" in body["error"], body
    status, _, body = server.post("/translate", {"q": [EN_A, 5], "source": "auto", "target": "en"})
    assert status == 400 and "list of strings" in body["error"], (status, body)
    # a string is detected as a list's entry is: the same 400, not English read as German
    status, _, body = server.post("/translate", {"q": EN_A, "source": "auto", "target": "en"})
    assert status == 400 and "en is not supported" in body["error"], (status, body)
    S.alive(server)


def part_answers(server, q, langs, **opts):
    """What each language's entries get sent on their own with that source: {lang: answer}."""
    out = {}
    for lang in dict.fromkeys(langs):
        sub = [e for e, l in zip(q, langs) if l == lang]
        status, _, body = server.post("/translate", dict(opts, q=sub, source=lang))
        assert status == 200, (lang, status, body)
        out[lang] = body
    return out


def merged(parts, langs, field):
    """The field of the parts' answers, entry by entry in q's order."""
    seen = {lang: 0 for lang in parts}
    out = []
    for lang in langs:
        out.append(parts[lang][field][seen[lang]])
        seen[lang] += 1
    return out


def check_mixed(server):
    """German, French and English entries into en on de-en + tiny-m2m: each from its own
    language (German on de-en, French and English on the multilingual model), merged in
    order: translatedText, alternatives and detectedLanguage as the parts sent one by one.
    Short entries (FR_SHORT: 39 characters, 41 bytes) take the detection of all."""
    q = [DE_A, FR_A, "Ein Hund.", EN_A, DE_C, FR_SHORT, "Good morning, friend."]
    opts = {"target": "en", "alternatives": 1}
    status, _, body = server.post("/translate", dict(opts, q=q, source="auto"))
    assert status == 200, (status, body)
    want = want_detected(server, q)
    assert body["detectedLanguage"] == want, (body, want)
    langs = [d["language"] for d in want]
    assert langs == ["de", "fr", "de", "en", "de", "de", "de"], langs
    parts = part_answers(server, q, langs, **opts)
    assert body["translatedText"] == merged(parts, langs, "translatedText"), body
    assert body["alternatives"] == merged(parts, langs, "alternatives"), body
    german = [e for e, l in zip(q, langs) if l == "de"]
    assert parts["de"]["translatedText"] == S.translate_cli(S.SHIPPED, german, "-t", "1", "--beam", "2"), parts
    m2m = S.translate_cli(M2M, [FR_A], "-t", "1", "--beam", "2", "--src-lang", "fr", "--tgt-lang", "en")
    assert body["translatedText"][1] == m2m[0], (body, m2m)


def check_npm_client(server):
    """The npm client libretranslate (its default source is auto) with a list: the entries
    translated each from its own language, as the raw request answers them."""
    npm = os.path.join(T.REPO, "build", "npm", "node_modules")
    assert os.path.exists(os.path.join(npm, "libretranslate")), (
        f"the npm client is not installed in {npm}: make test installs it (see tests/test_serve_libre.py)")
    node = shutil.which("node")
    assert node, "node is not installed (Node 20 runs tests/libre_client.js)"
    q = [DE_A, FR_A, "Ein Hund."]
    out = subprocess.run([node, os.path.join(T.REPO, "tests", "libre_client.js"), f"http://127.0.0.1:{server.port}",
                          "--list", "en", *q], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, NODE_PATH=npm))
    assert out.returncode == 0, out
    parts = part_answers(server, q, ["de", "fr", "de"], target="en")
    assert json.loads(out.stdout) == merged(parts, ["de", "fr", "de"], "translatedText"), (out.stdout, parts)


def check_limit(server):
    """--max-queue 8 counts a request's sentences, split or not: 4 German + 4 French entries
    pass, 5 + 5 (two parts of 5) are a 400 as 10 German are, and a list of more entries than
    the limit is refused before any detection."""
    for q, status_want in (([DE_A] * 4 + [FR_A] * 4, 200), ([DE_A, FR_A] * 5, 400), ([DE_A] * 10, 400),
                           (["x"] * 5000, 400)):
        status, _, body = server.post("/translate", {"q": q, "source": "auto", "target": "en"})
        assert status == status_want, (len(q), status, body)
        if status == 400:
            assert "more than 8 sentences in one request" in body["error"], body
    S.alive(server)


def check_one_model(server):
    """One multilingual model: a part per source language, each with its own src_lang."""
    q = [FR_A, DE_A, FR_A]
    status, _, body = server.post("/translate", {"q": q, "source": "auto", "target": "en"})
    assert status == 200, (status, body)
    assert [d["language"] for d in body["detectedLanguage"]] == ["fr", "de", "fr"], body
    fr = S.translate_cli(M2M, [FR_A], "-t", "1", "--src-lang", "fr", "--tgt-lang", "en")[0]
    de = S.translate_cli(M2M, [DE_A], "-t", "1", "--src-lang", "de", "--tgt-lang", "en")[0]
    assert body["translatedText"] == [fr, de, fr], (body, fr, de)


def main():
    r = T.Runner()
    with S.Server(S.SHIPPED, "-m", EN_DE, "-t", "1") as server:
        r.check("a German list: per-entry detectedLanguage, translations as source de", check_one_language, server)
        r.check("an entry in a language not translated into target: 400 naming it", check_unsupported, server)
        assert server.stop() == 0
    with S.Server(S.SHIPPED, "-m", M2M, "--beam", "2", "-t", "1") as server:
        r.check("de, fr, en entries on two models: each from its own language, merged in order", check_mixed,
                server)
        r.check("the npm client libretranslate with a list in two languages", check_npm_client, server)
        assert server.stop() == 0
    with S.Server(S.SHIPPED, "-m", M2M, "-t", "1", "--max-queue", "8") as server:
        r.check("--max-queue: a split request's sentences count together", check_limit, server)
        assert server.stop() == 0
    with S.Server(M2M, "-t", "1") as server:
        r.check("one multilingual model: a part per source language", check_one_model, server)
        assert server.stop() == 0
    r.finish()


if __name__ == "__main__":
    main()
