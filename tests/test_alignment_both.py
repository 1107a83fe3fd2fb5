#!/usr/bin/python3
"""Alignments from two directions (issue 38): attend align --reverse-model, attend translate
--alignment --reverse-model and Python's Result.alignment(reverse=) give the links of the
shipped German->English and English->German models together, computed here again with numpy
from each model's own view (word matrices, row-normalised, added, grown as tools/aer.py's
grow_mutual reads model/align_links.c); they align the development set better than the forward
view alone; and what cannot be combined is refused with a message.
Run: /usr/bin/python3 tests/test_alignment_both.py"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
sys.path.insert(0, os.path.join(T.REPO, "tools"))
import aer as AER  # noqa: E402
import attend  # noqa: E402

DE_EN = os.path.join(T.REPO, "models", "de-en.gguf")
EN_DE = os.path.join(T.REPO, "models", "en-de.gguf")
EXIT_USAGE = 2


def dev(n=None):
    base = T.data_path("align-deen-bicici")
    src = open(os.path.join(base, "test.de"), encoding="utf-8-sig").read().split("\n")[:100]
    tgt = open(os.path.join(base, "test.en"), encoding="utf-8").read().split("\n")[:100]
    gold = AER.read_gold(os.path.join(base, "de-en.wa"), False, False)
    return src[:n], tgt[:n], gold[:n]


def word_matrix(A, src_pieces, tgt_pieces):
    sw, tw = AER.words_of(src_pieces), AER.words_of(tgt_pieces)
    M = np.zeros((max(tw) + 1, max(sw) + 1))
    for t, w in enumerate(tw):
        for j, x in enumerate(sw):
            if w >= 0 and x >= 0:
                M[w, x] += A[t, j]
    return M


def rows_normalised(M):
    s = M.sum(1, keepdims=True)
    return np.where(s > 0, M / np.where(s > 0, s, 1), 0.0)


def both_numpy(fwd, rev):
    """The links of a forward Result and a reverse one, computed here."""
    F = rows_normalised(word_matrix(fwd.view(), fwd.src_pieces, fwd.tgt_pieces))   # [tgt words, src words]
    R = rows_normalised(word_matrix(rev.view(), rev.src_pieces, rev.tgt_pieces))   # [src words, tgt words]
    return {(c, r) for r, c in AER.grow_mutual(F + R.T)}


def scored(n):
    src, tgt, gold = dev(n)
    with attend.Model(DE_EN) as f, attend.Model(EN_DE) as r:
        return src, tgt, gold, f.score(src, tgt), r.score(tgt, src)


def python_equals_numpy():
    src, tgt, _, fwd, rev = scored(12)
    differ = 0
    for a, b in zip(fwd, rev):
        mine = set(a.alignment(reverse=b))
        assert mine == both_numpy(a, b), (mine ^ both_numpy(a, b))
        differ += mine != set(a.alignment())
    assert differ > 0, "the reverse model changed no pair's links: it is not being read"


def cli_equals_python():
    src, tgt, _, fwd, rev = scored(6)
    for s, t, a, b in zip(src, tgt, fwd, rev):
        p = T.run_attend(["align", "-m", DE_EN, "--reverse-model", EN_DE, "--target", t, "--format", "json", "--", s])
        js = json.loads(p.stdout)
        assert js["alignment"] == a.pharaoh(reverse=b), (js["alignment"], a.pharaoh(reverse=b))
        assert {tuple(x) for x in js["links"]} == set(a.alignment(reverse=b))
        assert js["reverse_view"] == attend.Model(EN_DE).config.alignment_view, js
    text = T.run_attend(["align", "-m", DE_EN, "--reverse-model", EN_DE, "--color", "never", "--", src[0]]).stdout
    assert "reverse:" in text and "alignment:" in text, text


def translate_equals_align():
    src = dev(8)[0]
    lines = T.run_attend(["translate", "-m", DE_EN, "--alignment", "--reverse-model", EN_DE],
                         "\n".join(src) + "\n").stdout.split("\n")[:-1]
    one = T.run_attend(["translate", "-m", DE_EN, "--alignment"], "\n".join(src) + "\n").stdout.split("\n")[:-1]
    assert len(lines) == len(one) == len(src), (lines, one)
    differ = 0
    for s, line, single in zip(src, lines, one):
        text, links = line.split(" ||| ")
        js = json.loads(T.run_attend(["align", "-m", DE_EN, "--reverse-model", EN_DE, "--format", "json", "--",
                                      s]).stdout)
        assert (text, links) == (js["translation"], js["alignment"]), (line, js["translation"], js["alignment"])
        assert single.split(" ||| ")[0] == text, (single, line)
        differ += single != line
    assert differ > 0, "the reverse model changed no line's links: it is not being read"
    for extra in ([], ["--alignment", "--n-best", "2", "--beam", "2"]):
        p = T.run_attend(["translate", "-m", DE_EN, "--reverse-model", EN_DE] + extra + [src[0]], check=False)
        assert p.returncode == EXIT_USAGE and "--reverse-model" in p.stderr and not p.stdout, p
    assert "--reverse-model" in T.run_attend(["translate", "--help"]).stdout


def reverse_past_its_limit():
    """A translation longer than the reverse model reads keeps its text with the forward model's
    links (stderr says why), and the lines after it are aligned both ways as before."""
    long_line, short = " ".join(["Haus"] * 400), dev(1)[0][0]
    p = T.run_attend(["translate", "-m", DE_EN, "--alignment", "--reverse-model", EN_DE],
                     long_line + "\n" + short + "\n")
    one = T.run_attend(["translate", "-m", DE_EN, "--alignment"], long_line + "\n").stdout.split("\n")[0]
    lines = p.stdout.split("\n")[:-1]
    assert len(lines) == 2 and lines[0] == one and len(lines[0].split(" ||| ")[0].split()) > 300, lines[0][:200]
    assert "line 1" in p.stderr and "length limit" in p.stderr and "forward model" in p.stderr, p.stderr
    js = json.loads(T.run_attend(["align", "-m", DE_EN, "--reverse-model", EN_DE, "--format", "json", "--",
                                  short]).stdout)
    assert lines[1] == js["translation"] + " ||| " + js["alignment"], (lines[1], js)


def better_than_one_direction():
    _, _, gold, fwd, rev = scored(None)
    one = AER.aer(gold, [set(a.alignment()) for a in fwd])
    two = AER.aer(gold, [set(a.alignment(reverse=b)) for a, b in zip(fwd, rev)])
    assert two < one - 0.002, (one, two)


def refusals():
    src, tgt, _, fwd, rev = scored(2)
    with attend.Model(EN_DE) as r:
        other = r.score("one two three four five six seven eight nine ten eleven", src[0])
    try:
        fwd[0].alignment(reverse=other)
        raise AssertionError("a reverse result of other words was taken")
    except attend.AttendError as e:
        assert "other words" in str(e), e
    d = T.tempdir()
    gold = os.path.join(d, "g")
    open(gold, "w").write("0-0\n")
    p = T.run_attend(["align", "-m", DE_EN, "--calibrate", gold, "--source", gold, "--target", gold,
                      "--reverse-model", EN_DE], check=False)
    assert p.returncode == EXIT_USAGE and "--reverse-model" in p.stderr, p
    p = T.run_attend(["align", "-m", DE_EN, "--reverse-model", os.path.join(d, "missing.gguf"), src[0]], check=False)
    assert p.returncode != 0 and "missing.gguf" in p.stderr and not p.stdout, p


def main():
    run = T.Runner()
    run.check("Python's links of both directions equal numpy's", python_equals_numpy)
    run.check("attend align --reverse-model prints Python's links", cli_equals_python)
    run.check("attend translate --alignment --reverse-model prints attend align's", translate_equals_align)
    run.check("a translation past the reverse model's length keeps the forward links", reverse_past_its_limit)
    run.check("both directions align the development set better", better_than_one_direction)
    run.check("what cannot be combined is refused", refusals)
    run.finish()


if __name__ == "__main__":
    main()
