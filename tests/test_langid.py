"""Language identification (cli/langid.cc over libcld2): accuracy on real German and English
sentences from the shared corpora, the restriction to candidate languages, hostile input, and
POST /detect and "source": "auto" through a real server (docs/serve.md, docs/cli.md)."""
import gzip
import os
import subprocess

import servelib as S
import testlib as T

M2M = os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf")
NLLB = os.path.join(T.REPO, "tests", "data", "tiny-nllb.gguf")
# (corpus file pattern, lines skipped): lines far from the start, which no test here trains on
CORPORA = [("tatoeba-deu-eng/tatoeba-deu-eng.train.{}.gz", 5000), ("tatoeba-anki-deu-eng/train.{}.gz", 5000),
           ("wmt-newstest-extra-deen/train.{}.gz", 0), ("multi30k/test_2016_flickr.{}.gz", 0)]


def sentences(pattern, side, skip, n=400):
    out = []
    with gzip.open(T.data_path(pattern.format(side)), "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            line = line.strip()
            if i >= skip and line:
                out.append(line)
            if len(out) >= n:
                break
    return out


def detect(lines, *args, data=None):
    """attend detect's answers, one (code, confidence) per input line."""
    out = subprocess.run([T.ATTEND, "detect", *args], input=data if data is not None else
                         ("\n".join(lines) + "\n").encode(), capture_output=True, timeout=60)
    assert out.returncode == 0, out
    rows = out.stdout.decode().split("\n")[:-1]
    return [tuple(r.split("\t")) if r else () for r in rows]


def rates(among):
    """Share right, for lines of >= 20 characters and for shorter ones, over every corpus."""
    right = {True: 0, False: 0}
    total = {True: 0, False: 0}
    for pattern, skip in CORPORA:
        for side in ("de", "en"):
            lines = sentences(pattern, side, skip)
            got = detect(lines, *(["--among", among] if among else []))
            assert len(got) == len(lines), (pattern, side, len(got))
            for line, g in zip(lines, got):
                long_ = len(line) >= 20
                total[long_] += 1
                right[long_] += g[0] == side
    return right[True] / total[True], right[False] / max(1, total[False]), total


def check_accuracy_any_language():
    # measured: 99.6% of 3,002 lines >= 20 chars; 90% of the 198 shorter ones (cld2 is weak there)
    long_rate, short_rate, total = rates(None)
    assert total[True] > 2500 and total[False] > 150, total
    assert long_rate >= 0.985, long_rate
    assert short_rate >= 0.85, short_rate


def check_accuracy_among_de_en():
    # measured: 99.9% of lines >= 20 chars, 98% of the 198 shorter ones
    long_rate, short_rate, _ = rates("de,en")
    assert long_rate >= 0.995, long_rate
    assert short_rate >= 0.95, short_rate


def check_candidates():
    fr = "Le chat dort sur la table de la cuisine depuis ce matin."
    got = detect([fr, fr, fr, "Das ist ein ganz gewöhnlicher deutscher Satz."], "--among", "deu_Latn,eng_Latn")
    assert got[0][0] in ("deu_Latn", "eng_Latn"), got  # never an answer outside the candidates
    assert float(got[0][1]) < 50, got                  # ... and not a confident one
    assert detect([fr])[0][0] == "fr"  # without candidates cld2 says French
    assert got[3][0] == "deu_Latn" and float(got[3][1]) >= 90, got
    got = detect([fr], "--among", "de_DE,fr_XX,en_XX")
    assert got[0][0] == "fr_XX", got  # mBART's spelling given back
    got = detect(["This is an ordinary English sentence."], "--among=__de__,__en__")
    assert got[0][0] == "__en__", got


def check_hostile_input():
    big = ("Das ist ein ganz gewöhnlicher deutscher Satz. " * 25000).encode()  # over 1 MB on one line
    data = b"\xff\xfe\xc0\xaf broken \xed\xa0\x80 utf-8\n" + b"mit\x00NUL\x00Zeichen darin und so weiter\n" + \
        b"\n" + b"   \t\n" + b"12345 67890\n" + big + b"\n" + b"\xe2\x82" + b"\n" + "Zwei Kinder spielen im Schnee.".encode()
    got = detect(None, data=data)
    assert len(got) == 8, got  # one line out per line in, the unfinished last one too
    assert got[2] == () and got[3] == (), got
    assert got[4] == ("und", "0"), got
    assert got[5][0] == "de" and got[7][0] == "de", got
    assert detect(None, "--among", "de,en", data=b"12345\n")[0] == ("de", "0")
    out = subprocess.run([T.ATTEND, "detect", "--among", ","], capture_output=True, timeout=30)
    assert out.returncode == 2 and b"--among" in out.stderr, out
    out = subprocess.run([T.ATTEND, "detect", "--nope"], capture_output=True, timeout=30)
    assert out.returncode == 2, out
    out = subprocess.run([T.ATTEND, "detect", "--help"], capture_output=True, timeout=30)
    assert out.returncode == 0 and b"usage: attend detect" in out.stdout, out


def check_serve_pair_model():
    with S.Server(S.SHIPPED, "-t", "1") as s:
        status, _, body = s.post("/detect", {"q": "Ich habe Hunger."})
        assert status == 200 and body[0]["language"] == "de" and body[0]["confidence"] >= 90, body
        status, _, body = s.post("/detect", {"q": "This is clearly an English sentence."})
        assert status == 200 and body == [{"confidence": 0.0, "language": "de"}], body  # de-en reads only de
        status, _, body = s.post("/detect", {"q": "I am hungry."})  # cld2 is sure: not German at all
        assert status == 200 and body == [{"confidence": 0.0, "language": "de"}], body
        status, _, body = s.post("/detect", {"q": "\ufffd\u0001" * 1000})
        assert status == 200 and body[0]["language"] == "de", body
        status, _, body = s.post("/translate", {"q": "Wo ist der Bahnhof?", "source": "auto", "target": "en"})
        assert status == 200 and body["detectedLanguage"]["language"] == "de", body
        assert body["detectedLanguage"]["confidence"] >= 90, body
        assert body["translatedText"] == S.translate_cli(S.SHIPPED, ["Wo ist der Bahnhof?"])[0], body
        assert s.stop() == 0


def check_serve_multilingual():
    with S.Server(M2M, "-t", "1") as s:
        _, _, model = s.get("/v1/model")
        assert sorted(model["languages"]) == ["de", "en", "fr"], model
        for text, lang in (("Le chat dort sur la table de la cuisine.", "fr"),
                           ("Zwei Kinder spielen im Schnee vor dem Haus.", "de"),
                           ("Two children are playing in the snow.", "en")):
            status, _, body = s.post("/detect", {"q": text})
            assert status == 200 and body[0]["language"] == lang, (text, body)
            assert all(e["language"] in model["languages"] for e in body), body
            assert body == sorted(body, key=lambda e: -e["confidence"]), body
            status, _, auto = s.post("/translate", {"q": text, "source": "auto", "target": "en"})
            assert status == 200 and auto["detectedLanguage"]["language"] == lang, auto
            _, _, named = s.post("/translate", {"q": text, "source": lang, "target": "en"})
            assert auto["translatedText"] == named["translatedText"], (auto, named)  # auto used what it found
        status, _, body = s.post("/translate", {"q": "Hallo", "source": "de", "target": "auto"})
        assert status == 400 and "auto" in body["error"], body
        assert s.stop() == 0
    with S.Server(NLLB, "-t", "1") as s:  # NLLB's codes map to cld2's and back
        status, _, body = s.post("/detect", {"q": "Zwei Kinder spielen im Schnee vor dem Haus."})
        assert status == 200 and body[0]["language"] == "deu_Latn", body
        status, _, body = s.post("/translate", {"q": "Zwei Kinder spielen.", "source": "auto", "target": "eng_Latn"})
        assert status == 200 and body["detectedLanguage"]["language"] == "deu_Latn", body
        assert s.stop() == 0


def main():
    r = T.Runner()
    r.check("accuracy, any language: >= 98.5% on lines of 20+ characters", check_accuracy_any_language)
    r.check("accuracy among de,en: >= 99.5% (20+ characters), >= 95% shorter", check_accuracy_among_de_en)
    r.check("--among: answers only candidates, in their own spelling", check_candidates)
    r.check("hostile input: invalid UTF-8, NUL, 1 MB line, blank, no letters", check_hostile_input)
    r.check("serve de-en.gguf: /detect and source auto", check_serve_pair_model)
    r.check("serve tiny-m2m.gguf, tiny-nllb.gguf: /detect among their languages, auto translates",
            check_serve_multilingual)
    r.finish()


if __name__ == "__main__":
    main()
