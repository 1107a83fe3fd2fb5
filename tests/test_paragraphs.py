#!/usr/bin/python3
"""Paragraphs in, whole translations out (attend_params.split): lines of 1-5 consecutive
held-out sentences (the news, Anki and Tatoeba slices tools/train.py kept out of training)
translate with the shipped model exactly as the same sentences one per line, joined with the
source's spaces; the library, the command, Python and the server agree; --split none keeps
each line one sequence. Run: /usr/bin/python3 tests/test_paragraphs.py"""
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import servelib as S  # noqa: E402
import evaluate  # noqa: E402  (tools/: the held-out slices, carved as training carved them)

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
STOP = (".", "!", "?")


def heldout_sentences(per_set=40):
    """per_set sentences of each held-out slice that end in a stop (a line without one
    is not two sentences to anyone) and are one sentence to the splitter."""
    sets = evaluate.load_sets(T.DATA, 1234, 1000)
    pick = []
    for name in ("news", "anki", "tatoeba"):
        cand = [de for de, _ in sets[name] if de.rstrip().endswith(STOP) and len(de) < 300]
        pick += cand[:per_set * 2]
    one = [s for s, parts in zip(pick, split_cmd(pick)) if len(parts) == 1]
    return one[:per_set * 3]


def split_cmd(lines, lang="de"):
    """attend split's sentences of each line: one a line, an empty line after each input's."""
    out, cur = [], []
    for x in T.run_attend(["split", "--lang", lang], "\n".join(lines) + "\n").stdout.split("\n")[:-1]:
        if x:
            cur.append(x)
        else:
            out.append(cur)
            cur = []
    assert len(out) == len(lines), (len(out), len(lines))
    return out


def paragraphs(sents, seed=7):
    """The sentences grouped into consecutive runs of 1-5: (line, [its sentences])."""
    rng, out, i = random.Random(seed), [], 0
    while i < len(sents):
        k = rng.randint(1, 5)
        out.append((" ".join(sents[i:i + k]), sents[i:i + k]))
        i += k
    return out


def translate(lines, *args):
    out = T.run_attend(["translate", "-m", MODEL, *args], "\n".join(lines) + "\n").stdout
    got = out.split("\n")[:-1]
    assert len(got) == len(lines), f"{len(got)} lines out for {len(lines)} in"
    return got


def main():
    run = T.Runner()
    state = {}

    def round_trip():
        sents = heldout_sentences()
        assert len(sents) >= 100, f"only {len(sents)} held-out sentences"
        one = dict(zip(sents, translate(sents)))
        paras = paragraphs(sents)
        got = translate([p for p, _ in paras])
        bad = [(p, g, " ".join(one[s] for s in ss)) for (p, ss), g in zip(paras, got)
               if g != " ".join(one[s] for s in ss)]
        multi = sum(len(ss) > 1 for _, ss in paras)
        print(f"  {len(paras)} lines of 1-5 held-out sentences ({multi} of several), "
              f"{len(sents)} sentences: {len(paras) - len(bad)} equal the sentences one per line")
        state["paras"], state["got"] = paras, got
        assert not bad, "differs from the sentences one per line:\n" + "\n".join(map(repr, bad[:5]))

    def whole_line_is_one_sequence_with_split_none():
        paras = [p for p, ss in state["paras"] if len(ss) >= 3][:5]
        split = translate(paras)
        none = translate(paras, "--split", "none")
        assert split != none, "--split none changed nothing on lines of three or more sentences"
        # the example: 'Can you' was lost when the line was one sequence
        line = ("Ein Mann fährt mit dem Fahrrad durch die Stadt. Zwei Kinder spielen im Schnee. "
                "Kannst du mir bitte helfen?")
        parts = translate(["Ein Mann fährt mit dem Fahrrad durch die Stadt.", "Zwei Kinder spielen im Schnee.",
                           "Kannst du mir bitte helfen?"])
        assert translate([line]) == [" ".join(parts)], (translate([line]), parts)

    def separators_kept():
        a, b = "Ich habe Hunger.", "Wo ist der Bahnhof?"
        ta, tb = translate([a, b])
        got = translate([f"{a}  {b}", f"{a}\t{b}", f"  {a} {b}  "])
        assert got[0] == f"{ta}  {tb}" and got[1] == f"{ta}\t{tb}", got
        assert got[2] == f"{ta} {tb}", got  # the spaces around the line are the line's, not a sentence's

    def python_and_alignment_agree():
        env = dict(os.environ, PYTHONPATH=os.path.join(T.REPO, "python"),
                   ATTEND_LIBRARY=os.path.join(T.REPO, "build", "libattend.so"))
        paras = state["paras"][:12]
        code = ("import attend, json, sys\n"
                f"m = attend.Model({MODEL!r})\n"
                "lines = json.load(sys.stdin)\n"
                "rs = m.translate(lines, attention=True)\n"
                "print(json.dumps([[r.text, [[s.source, s.text, s.src_start, s.n_src, s.tgt_start, s.n_tgt]"
                " for s in r.sentences], r.alignment(), r.cross.shape] for r in rs]))\n")
        p = subprocess.run([sys.executable, "-c", code], input=json.dumps([p for p, _ in paras]),
                           capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        res = json.loads(p.stdout)
        for (line, ss), got, (text, sents, links, shape) in zip(paras, state["got"], res):
            assert text == got, (text, got)
            assert len(sents) == (len(ss) if len(ss) > 1 else 0), (line, sents)
            assert [s[0] for s in sents] == (ss if len(ss) > 1 else []), (sents, ss)
            # the tokens of the sentences tile the line's, and the alignment indexes its words
            assert not sents or sum(s[3] for s in sents) == shape[3], (sents, shape)
            n_src_words, n_tgt_words = len(line.split()), len(text.split())
            assert all(0 <= i < n_src_words and 0 <= j < n_tgt_words for i, j in links), (line, links)
            if len(ss) > 1:  # every sentence has links inside its own words only
                assert links, (line, text)

    def python_split_sentences_equals_attend_split():
        env = dict(os.environ, PYTHONPATH=os.path.join(T.REPO, "python"),
                   ATTEND_LIBRARY=os.path.join(T.REPO, "build", "libattend.so"))
        lines = [p for p, _ in state["paras"][:20]] + ["Er kam am 3. Oktober. z. B. hier!  Ja.", "", "今天很好。明天见！"]
        code = ("import attend, json, sys\n"
                "print(json.dumps([attend.split_sentences(x, 'de') for x in json.load(sys.stdin)]))\n")
        p = subprocess.run([sys.executable, "-c", code], input=json.dumps(lines), capture_output=True, text=True,
                           env=env)
        assert p.returncode == 0, p.stderr
        got = json.loads(p.stdout)
        want = split_cmd(lines)
        assert got == want, (got, want)
        assert got[-1] == ["今天很好。", "明天见！"] and got[-2] == [], got[-2:]

    def cli_alignment_over_whole_line():
        line = "Ich habe Hunger. Wo ist der Bahnhof?"
        out = T.run_attend(["translate", "-m", MODEL, "--alignment", line]).stdout.strip()
        text, links = out.split(" ||| ")
        pairs = [tuple(map(int, x.split("-"))) for x in links.split()]
        # Hunger (2) -> hungry (1); Bahnhof? (6) -> station? (last word); nothing across sentences
        assert (2, 1) in pairs and any(i == 6 and j == len(text.split()) - 1 for i, j in pairs), out
        assert all((i < 3) == (j < 2) for i, j in pairs), f"a link crosses the sentence boundary: {out}"

    def nbest_joins_sentences():
        line = "Ich habe Hunger. Wo ist der Bahnhof?"
        out = T.run_attend(["translate", "-m", MODEL, "--n-best", "2", line]).stdout.split("\n")[:-1]
        a = T.run_attend(["translate", "-m", MODEL, "--n-best", "2", "Ich habe Hunger."]).stdout.split("\n")[:-1]
        b = T.run_attend(["translate", "-m", MODEL, "--n-best", "2", "Wo ist der Bahnhof?"]).stdout.split("\n")[:-1]
        for k in range(2):
            ta, sa = a[k].split(" ||| ")[1:3]
            tb, sb = b[k].split(" ||| ")[1:3]
            t, s = out[k].split(" ||| ")[1:3]
            assert t == f"{ta} {tb}", (out, a, b)
            assert abs(float(s) - float(sa) - float(sb)) < 1e-4, (s, sa, sb)

    def serve_agrees():
        lines = [p for p, _ in state["paras"][:8]]
        with S.Server(MODEL, "-t", "1") as srv:
            status, _, body = srv.post("/translate", {"q": lines, "source": "de", "target": "en"})
            assert status == 200 and body["translatedText"] == state["got"][:8], body
            status, _, body = srv.post("/translate", {"q": lines[:3], "split": False})
        assert status == 200 and body["translatedText"] == translate(lines[:3], "--split", "none"), body

    run.check("paragraph round trip (held-out sentences)", round_trip)
    if "paras" in state:
        run.check("--split none: one sequence per line", whole_line_is_one_sequence_with_split_none)
        run.check("the source's separators kept", separators_kept)
        run.check("Python: same text, Result.sentences, alignment over the line", python_and_alignment_agree)
        run.check("attend.split_sentences = attend split", python_split_sentences_equals_attend_split)
        run.check("--alignment indexes the whole line's words", cli_alignment_over_whole_line)
        run.check("--n-best: the k-th joins each sentence's k-th", nbest_joins_sentences)
        run.check("serve /translate splits too; \"split\": false", serve_agrees)
    run.finish()


if __name__ == "__main__":
    main()
