#!/usr/bin/python3
"""tools/align_vote.py: the vote and the growing on hand-made links, and a run on 30 pairs of
the development set (word_align.py on 2,000 training pairs): each line is the vote of what
`attend align` prints and the aligner's two directions, --grow adds only the view's links;
with --reverse and the English->German model, the vote of its links and the same two directions
read the other way round.
Run: /usr/bin/python3 tests/test_align_vote.py"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import aer as AER  # noqa: E402
import align_vote as V  # noqa: E402
import word_align as W  # noqa: E402

TOOL = os.path.join(T.TOOLS, "align_vote.py")


def hand_made():
    view, fwd, rev = {(0, 0), (1, 1), (2, 3)}, {(0, 0), (1, 2), (2, 3)}, {(0, 0), (1, 1), (3, 3)}
    assert V.vote(view, fwd, rev) == {(0, 0), (1, 1), (2, 3)}
    assert V.vote(set(), fwd, rev) == fwd & rev
    # growing: (1, 2) is next to (1, 1) with target word 2 free, (3, 3) next to (2, 3) with
    # source word 3 free: both join; (5, 5) is next to no link
    assert V.grow({(1, 1), (2, 3)}, {(1, 2), (3, 3), (5, 5)}) == {(1, 1), (2, 3), (1, 2), (3, 3)}
    # both words already linked: no join
    assert V.grow({(0, 0), (1, 1)}, {(0, 1)}) == {(0, 0), (1, 1)}


def development_pairs(d):
    base = os.path.dirname(T.data_path("align-deen-bicici", "de-en.wa"))
    src, tgt = (W.read_lines(os.path.join(base, f"test.{x}"))[:30] for x in ("de", "en"))
    paths = []
    for name, lines in (("de", src), ("en", tgt)):
        paths.append(os.path.join(d, name))
        with open(paths[-1], "w", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in lines))
    return src, tgt, paths


def votes_of_what_attend_prints(d, keep):
    src, tgt, (sp, tp) = development_pairs(d)
    out = {}
    for flag in ("", "--grow"):
        p = subprocess.run([T.PYTHON, TOOL, "--source", sp, "--target", tp, "--max-pairs", "2000"] +
                           ([flag] if flag else []), capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        out[flag] = [AER.parse_links(l)[1] for l in p.stdout.splitlines()]
        assert len(out[flag]) == 30
    fwd, rev = V.directions(src, tgt, 2000)
    for k, (s, t) in enumerate(zip(src, tgt)):
        js = json.loads(subprocess.run([T.ATTEND, "align", "--target", t, "--format", "json", "--", s],
                                       capture_output=True, text=True, check=True).stdout)
        view = {tuple(x) for x in js["links"]}
        assert out[""][k] == V.vote(view, fwd[k], rev[k]), k
        assert out[""][k] <= out["--grow"][k] <= out[""][k] | view, k
    assert sum(len(x) for x in out["--grow"]) > sum(len(x) for x in out[""])
    keep["directions"] = fwd, rev


def reverse_votes(d, keep):
    """--reverse: English sources, German targets; the aligner's directions (German->English,
    as always) transposed, the English->German model's own links."""
    src, tgt, (sp, tp) = development_pairs(d)
    ende = os.path.join(T.REPO, "models", "en-de.gguf")
    p = subprocess.run([T.PYTHON, TOOL, "--reverse", "-m", ende, "--source", tp, "--target", sp,
                        "--max-pairs", "2000"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = [AER.parse_links(l)[1] for l in p.stdout.splitlines()]
    assert len(out) == 30
    fwd, rev = keep["directions"]  # the check before's (German->English)
    flip = lambda links: {(j, i) for i, j in links}  # noqa: E731
    for k, (s, t) in enumerate(zip(src, tgt)):
        js = json.loads(subprocess.run([T.ATTEND, "align", "-m", ende, "--target", s, "--format", "json", "--", t],
                                       capture_output=True, text=True, check=True).stdout)
        view = {tuple(x) for x in js["links"]}
        assert out[k] == V.vote(view, flip(rev[k]), flip(fwd[k])), k
        assert all(i < len(t.split()) and j < len(s.split()) for i, j in out[k]), k  # English word first


def main():
    run = T.Runner()
    d = T.tempdir()
    run.check("the vote and the growing on hand-made links", hand_made)
    keep = {}
    run.check("30 development pairs: the vote of attend align's links and both directions",
              votes_of_what_attend_prints, d, keep)
    run.check("--reverse: the English->German model's links and both directions transposed",
              reverse_votes, d, keep)
    run.finish()


if __name__ == "__main__":
    main()
