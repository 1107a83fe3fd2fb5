#!/usr/bin/python3
"""tools/word_align.py (IBM Model 1 -> diagonal-prior Model 2, both directions,
grow-diag-final-and) on synthetic parallel text whose alignment is known: a one-to-one
dictionary, local reorderings and words with no counterpart; and the symmetrisation on
hand-made link sets. Run: /usr/bin/python3 tests/test_word_align.py"""
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import word_align as W  # noqa: E402
import aer as AER  # noqa: E402


def synthetic(n, seed):
    """n sentence pairs over a 60-word dictionary (source sK <-> target tK), 3..12 distinct words; each
    adjacent pair of target words swapped with probability 0.25; a target filler word 'uh'
    (no source counterpart) inserted in a third of the sentences. Returns source and target
    word lists and the true links (source index, target index)."""
    rng = random.Random(seed)
    src, tgt, gold = [], [], []
    for _ in range(n):
        words = rng.sample(range(60), rng.randint(3, 12))  # no word twice: one right answer
        order = list(range(len(words)))
        k = 0
        while k + 1 < len(order):
            if rng.random() < 0.25:
                order[k], order[k + 1] = order[k + 1], order[k]
                k += 2
            else:
                k += 1
        t = [f"t{words[i]}" for i in order]
        links = {(i, pos) for pos, i in enumerate(order)}
        if rng.random() < 1 / 3:
            at = rng.randrange(len(t) + 1)
            t.insert(at, "uh")
            links = {(i, p + (p >= at)) for i, p in links}
        src.append([f"s{w}" for w in words])
        tgt.append(t)
        gold.append(links)
    return src, tgt, gold


def recovers_known_alignment():
    src, tgt, gold = synthetic(3000, 11)
    test = 50
    hyp = W.align(src, tgt, test)
    g = [(links, links) for links in gold[-test:]]
    score = AER.aer(g, [set(h) for h in hyp])
    assert score == 0.0, (score, [(sorted(a), sorted(b)) for a, b in zip(hyp, gold[-test:]) if set(a) != b][:2])
    # without EM (uniform word translation, the diagonal prior alone) it is far from it
    rough = W.align(src, tgt, test, model1=0, model2=0)
    assert AER.aer(g, [set(h) for h in rough]) > 0.05


def command_line(d):
    """The command: --corpus text plus the sentences to align, Pharaoh lines out."""
    src, tgt, gold = synthetic(1500, 5)
    def write(name, lines):
        p = os.path.join(d, name)
        with open(p, "w", encoding="utf-8") as f:
            f.write("".join(" ".join(l) + "\n" for l in lines))
        return p
    cs, ct = write("c.src", src[:-20]), write("c.tgt", tgt[:-20])
    s, t = write("s", src[-20:]), write("t", tgt[-20:])
    out = os.path.join(d, "out.wa")
    p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "word_align.py"), "--source", s, "--target", t,
                        "--corpus", cs, ct, "-o", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    hyp = [AER.parse_links(l.rstrip("\n"))[1] for l in open(out, encoding="utf-8")]
    assert AER.aer([(g, g) for g in gold[-20:]], hyp) == 0.0
    bad = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "word_align.py"), "--source", s, "--target", cs],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "20 source but 1480 target lines" in bad.stderr, bad.stderr


def symmetrisation():
    gdfa = W.grow_diag_final_and
    # the union's neighbours of the intersection join when one of their words is unaligned
    assert gdfa({(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (1, 2)}, 3, 3) == {(0, 0), (1, 1), (2, 1), (1, 2)}
    # ... and not when both are already aligned
    assert gdfa({(0, 0), (1, 1)}, {(0, 0), (1, 1), (0, 1)}, 2, 2) == {(0, 0), (1, 1)}
    # final-and: a directional link far from the rest, both words unaligned, joins
    assert gdfa({(0, 0), (3, 3)}, {(0, 0)}, 4, 4) == {(0, 0), (3, 3)}
    # ... in order (source->target's first), each only while both its words are unaligned
    assert gdfa({(0, 0), (3, 3)}, {(0, 0), (3, 2), (2, 3)}, 4, 4) == {(0, 0), (3, 3)}
    assert gdfa({(0, 0)}, {(0, 0), (3, 2), (2, 3)}, 4, 4) == {(0, 0), (2, 3), (3, 2)}


def main():
    run = T.Runner()
    d = T.tempdir()
    run.check("grow-diag-final-and on hand-made links", symmetrisation)
    run.check("the known alignment of a synthetic corpus", recovers_known_alignment)
    run.check("the command line", command_line, d)
    run.finish()


if __name__ == "__main__":
    main()
