#!/usr/bin/python3
"""tools/word_align.py (IBM Model 1 -> diagonal-prior Model 2 -> HMM, both directions,
grow-diag-final-and) on synthetic parallel text whose alignment is known: a one-to-one
dictionary, local reorderings and words with no counterpart; a corpus whose halves swap,
where only the HMM's jumps place a repeated word; the HMM's forward-backward against brute
force (and a long pair: the scaling against underflow); --hmm 0's output against the digest
of the aligner before the HMM; and the symmetrisation on hand-made link sets.
Run: /usr/bin/python3 tests/test_word_align.py"""
import hashlib
import itertools
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import word_align as W  # noqa: E402
import word_align_hmm as HMM  # noqa: E402
import aer as AER  # noqa: E402
import numpy as np  # noqa: E402

# sha256 of `word_align.py --source s --target t --corpus c.src c.tgt` on hmm_zero's files, recorded
# with the aligner before it had an HMM stage (Model 1 -> Model 2 only)
BEFORE_HMM = "8351c9845b03d56452cf62bea3a56138cc1d2c4e99d13ecc4730cff7c27982f1"


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
    hyp = W.align(src, tgt, test, hmm=0)  # Model 2's links
    g = [(links, links) for links in gold[-test:]]
    score = AER.aer(g, [set(h) for h in hyp])
    assert score == 0.0, (score, [(sorted(a), sorted(b)) for a, b in zip(hyp, gold[-test:]) if set(a) != b][:2])
    assert AER.aer(g, [set(h) for h in W.align(src, tgt, test)]) < 0.005  # the HMM's: one link off
    # the two directions before symmetrising: grow-diag-final-and of them is align()'s output
    fwd, rev = W.align(src, tgt, test, hmm=0, directed_only=True)
    assert [sorted(W.grow_diag_final_and(f, r, 0, 0)) for f, r in zip(fwd, rev)] == hyp
    assert AER.aer(g, fwd) == 0.0 and AER.aer(g, rev) == 0.0
    # without EM (uniform word translation, the diagonal prior alone) it is far from it
    rough = W.align(src, tgt, test, model1=0, model2=0, hmm=0)
    assert AER.aer(g, [set(h) for h in rough]) > 0.05


def swapped_halves(n, seed):
    """n pairs whose target is the translation of the source's second half, then of its first:
    far from the diagonal. Each half holds the word s0 (t0 in the target) once: only where its
    neighbours went tells which s0 a t0 is. Returns source, target, true links."""
    rng = random.Random(seed)
    src, tgt, gold = [], [], []
    for _ in range(n):
        words = rng.sample(range(1, 40), rng.randint(4, 10))
        cut = rng.randint(2, len(words) - 2)
        a, b = [0] + words[:cut], [0] + words[cut:]
        rng.shuffle(a)
        rng.shuffle(b)
        order = list(range(len(a), len(a) + len(b))) + list(range(len(a)))  # source index per target word
        s = [f"s{w}" for w in a + b]
        src.append(s)
        tgt.append(["t" + s[i][1:] for i in order])
        gold.append({(i, j) for j, i in enumerate(order)})
    return src, tgt, gold


def hmm_places_repeated_words():
    src, tgt, gold = swapped_halves(1500, 3)
    test = 50
    g = [(links, links) for links in gold[-test:]]
    model2 = AER.aer(g, [set(h) for h in W.align(src, tgt, test, hmm=0)])
    hmm = AER.aer(g, [set(h) for h in W.align(src, tgt, test, hmm=4)])
    assert model2 > 0.05 and hmm == 0.0, (model2, hmm)


def brute_force(t_real, t_null, c, p0, J):
    """Posteriors and expected jumps of one sentence pair by enumerating every state sequence
    (real state i: ('r', i); NULL state remembering i: ('n', i)), straight from the model's
    definition. t_real[j][i], t_null[j]: emissions."""
    m, n = len(t_real), len(t_real[0])
    b = lambda w: min(max(w, -J), J) + J  # noqa: E731
    def jump(frm, to):  # frm -1: the position before the sentence
        return c[b(to - frm)] / sum(c[b(k - frm)] for k in range(n))
    real, null, jumps = np.zeros((m, n)), np.zeros(m), np.zeros(2 * J + 1)
    total = 0.0
    for path in itertools.product([(k, i) for k in "rn" for i in range(n)], repeat=m):
        p, mem, js = 1.0, -1, []
        for j, (kind, i) in enumerate(path):
            if kind == "r":
                p *= (1 - p0) * jump(mem, i) * t_real[j][i]
                js.append(b(i - mem))
            elif j == 0:  # a NULL first word remembers a position drawn as a first jump
                p *= p0 * jump(-1, i) * t_null[j]
                js.append(b(i + 1))
            else:
                p *= p0 * t_null[j] * (i == mem)
            mem = i
        total += p
        for j, (kind, i) in enumerate(path):
            if kind == "r":
                real[j, i] += p
            else:
                null[j] += p
        for w in js:
            jumps[w] += p
    return real / total, null / total, jumps / total


def forward_backward_exact():
    """Posteriors of a chunk of pairs of different lengths (padding between them) equal brute
    force, sum to one per target word, and so do the expected jumps."""
    rng = np.random.default_rng(4)
    src = [["a", "b"], ["a", "c", "b"], ["c"], ["b", "a", "c"]]
    tgt = [["x", "y", "z"], ["y", "x"], ["z", "z", "x", "y"], ["x", "y", "y", "z"]]
    vs, vt = W.Vocab(), W.Vocab()
    d = W.Direction([vs.encode(x) for x in src], [vt.encode(x) for x in tgt], len(vs.ids))
    d.t = rng.uniform(0.05, 1.0, len(d.t))
    J, p0 = 2, 0.3
    c = rng.uniform(0.1, 1.0, 2 * J + 1)
    chunk = HMM.Chunk(d, np.arange(len(src)), len(d.t))
    post = HMM.Posteriors(chunk, np.append(d.t, 0.0), c, p0, J)
    total = post.real.sum(2) + post.null
    assert np.allclose(total[chunk.active], 1.0, atol=1e-12) and not total[~chunk.active].any(), total
    jumps = np.zeros(2 * J + 1)
    t = d.t[d.pair].reshape(-1)
    for b, s in enumerate(chunk.sents):
        n, m = len(src[s]), len(tgt[s])
        cand = [d.starts[d.tok_off[s] + j] for j in range(m)]  # each target word's candidates, NULL first
        real, null, jmp = brute_force([[t[k + 1 + i] for i in range(n)] for k in cand], [t[k] for k in cand],
                                      c, p0, J)
        assert np.allclose(post.real[:m, b, :n], real, atol=1e-12), (s, post.real[:m, b, :n], real)
        assert np.allclose(post.null[:m, b], null, atol=1e-12), (s, post.null[:m, b], null)
        jumps += jmp
    assert np.allclose(post.jumps, jumps, atol=1e-12), (post.jumps, jumps)
    # a long pair with small emissions: unscaled, its path probabilities (~1e-7 per word) underflow
    long_s, long_t = [[f"s{k}" for k in range(150)]], [[f"t{k}" for k in range(160)]]
    d = W.Direction([vs.encode(x) for x in long_s], [vt.encode(x) for x in long_t], len(vs.ids))
    d.t = rng.uniform(1e-8, 1e-6, len(d.t))
    chunk = HMM.Chunk(d, np.arange(1), len(d.t))
    post = HMM.Posteriors(chunk, np.append(d.t, 0.0), np.exp(-np.abs(np.arange(-7, 8) - 1.0)), 0.2, 7)
    total = post.real.sum(2) + post.null
    assert np.allclose(total, 1.0, atol=1e-9) and np.isfinite(post.jumps).all(), total.ravel()[:5]


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


def write_pairs(d, src, tgt, n_test):
    """The last n_test pairs to align, the rest as --corpus files: word_align.py's arguments."""
    def write(name, lines):
        p = os.path.join(d, name)
        with open(p, "w", encoding="utf-8") as f:
            f.write("".join(" ".join(l) + "\n" for l in lines))
        return p
    return ["--source", write("s", src[-n_test:]), "--target", write("t", tgt[-n_test:]),
            "--corpus", write("c.src", src[:-n_test]), write("c.tgt", tgt[:-n_test])]


def hmm_zero(d):
    """--hmm 0 prints what the aligner printed before the HMM, on a corpus where the HMM's
    output differs."""
    src, tgt, _ = swapped_halves(600, 9)
    args = [T.PYTHON, os.path.join(T.TOOLS, "word_align.py")] + write_pairs(d, src, tgt, 30)
    zero = subprocess.run(args + ["--hmm", "0"], capture_output=True, check=True).stdout
    assert hashlib.sha256(zero).hexdigest() == BEFORE_HMM, "--hmm 0 is no longer the aligner before the HMM"
    assert subprocess.run(args + ["--hmm", "3"], capture_output=True, check=True).stdout != zero
    # sentences with an empty side only: empty lines out, whichever stage links
    os.makedirs(os.path.join(d, "empty"))
    empty = write_pairs(os.path.join(d, "empty"), [[], src[0]], [tgt[0], []], 2)[:4]
    for hmm in ("0", "2"):
        out = subprocess.run(args[:2] + empty + args[6:] + ["--hmm", hmm], capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout == "\n\n", (hmm, out.stderr[-300:])


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
    # grow-diag-final (final_and=False): a link joins when either of its words is unaligned
    assert gdfa({(0, 0), (3, 3)}, {(0, 0), (3, 2), (2, 3)}, 4, 4, final_and=False) == \
        {(0, 0), (3, 3), (3, 2), (2, 3)}
    assert gdfa({(0, 0), (0, 3)}, {(0, 0)}, 4, 4, final_and=False) == {(0, 0), (0, 3)}
    assert gdfa({(0, 0), (0, 3)}, {(0, 0)}, 4, 4) == {(0, 0)}


def main():
    run = T.Runner()
    d = T.tempdir()
    run.check("grow-diag-final(-and) on hand-made links", symmetrisation)
    run.check("the known alignment of a synthetic corpus", recovers_known_alignment)
    run.check("the HMM's forward-backward against brute force", forward_backward_exact)
    run.check("the HMM places repeated words that Model 2 cannot", hmm_places_repeated_words)
    run.check("the command line", command_line, d)
    run.check("--hmm 0: the aligner before the HMM; pairs with an empty side", hmm_zero, d)
    run.finish()


if __name__ == "__main__":
    main()
