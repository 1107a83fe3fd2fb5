#!/usr/bin/python3
"""A statistical word aligner: IBM Model 1, then IBM Model 2 with a diagonal prior (the
reparameterisation fast_align uses: Dyer et al. 2013), then the HMM alignment model (Vogel
et al. 1996, tools/word_align_hmm.py), trained by EM in both directions and symmetrised with
grow-diag-final-and. numpy, vectorised over every (source, target) word pair of the corpus
at once.

  word_align.py --source SRC --target TGT [-o OUT]        align SRC/TGT (Pharaoh lines, src-tgt)
  word_align.py ... --corpus DE EN [--corpus DE EN ...]   also train on these files (unaligned)
  word_align.py ... --train-corpus                        also train on tools/train.py's
                                                          training pairs (the shipped model's)

SRC and TGT are whitespace-tokenised (one sentence a line); their words are what the links
index, and they are always part of the training text (their text only: alignment is
unsupervised). --corpus files and the training pairs are split into words and punctuation
marks first; everything is lowercased (--keep-case keeps the case). Output: one line per SRC line,
'i-j' with i the source and j the target word (0-based), as tools/aer.py reads them.

The model, per direction (aligning each word f_j of a sentence of m words to one of the n
words e_i of the other side, or to NULL):
  p(a_j = 0) = p0,  p(a_j = i) = (1 - p0) exp(-lambda |i/n - j/m|) / Z_j  (i, j from 1),
  p(f_j | e_i) = t(f_j | e_i), EM on t: --model1 iterations with a uniform prior first
  (p0 still applied), then --model2 iterations with the diagonal one.
Then --hmm iterations of the HMM, its t started from Model 2's: a_j depends on a_{j-1} through
the jump a_j - a_{j-1} (widths clipped to -7..7, learnt), NULL with --hmm-p0 (Och & Ney's NULL
states, which remember the last position); forward-backward posteriors decide the links (the
most probable source word, above --hmm-threshold). --hmm 0: Model 2's Viterbi links, exactly as
before the HMM. The default, 1 iteration with threshold 0.5, is the best on the development
set (AER 0.229 against 0.268 without the HMM; docs/alignment-and-attention.md).
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from word_align_hmm import HMM  # noqa: E402

HMM_ITERATIONS = 1  # chosen by the development set's AER: see docs/alignment-and-attention.md
WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def split_words(line, keep_case=False):
    return WORD.findall(line if keep_case else line.lower())


class Vocab:
    def __init__(self):
        self.ids = {"<null>": 0}

    def encode(self, words):
        return np.array([self.ids.setdefault(w, len(self.ids)) for w in words], dtype=np.int64)


class Direction:
    """Every (target position, candidate source position or NULL) of a corpus, flattened:
    each target word's candidates are contiguous, NULL first."""

    def __init__(self, src, tgt, n_src_vocab):
        n = np.array([len(s) for s in src], dtype=np.int64)
        m = np.array([len(t) for t in tgt], dtype=np.int64)
        src_flat = np.concatenate(src) if len(src) else np.zeros(0, np.int64)
        tgt_flat = np.concatenate(tgt) if len(tgt) else np.zeros(0, np.int64)
        src_off = np.concatenate([[0], np.cumsum(n)[:-1]])
        sent_of_tok = np.repeat(np.arange(len(src)), m)          # [G] target words
        j = np.arange(len(tgt_flat)) - np.repeat(np.concatenate([[0], np.cumsum(m)[:-1]]), m)
        count = n[sent_of_tok] + 1                                # candidates of each target word
        self.starts = np.concatenate([[0], np.cumsum(count)[:-1]])
        g = np.repeat(np.arange(len(tgt_flat)), count)            # [K] the target word of each
        i = np.arange(len(g)) - self.starts[g]                    # 0 = NULL, else source word i-1
        s = sent_of_tok[g]
        e = np.where(i > 0, src_flat[np.minimum(src_off[s] + i - 1, max(len(src_flat) - 1, 0))], 0)
        key = e * (int(tgt_flat.max(initial=0)) + 1) + tgt_flat[g]
        pairs, inv = np.unique(key, return_inverse=True)
        self.pair = inv.astype(np.int32)                          # [K] entry of the t table
        self.pair_src = (pairs // (int(tgt_flat.max(initial=0)) + 1)).astype(np.int64)
        self.n_src_vocab = n_src_vocab
        self.is_null = i == 0
        # |i/n - j/m| with 1-based i and j (fast_align's h), for the real candidates
        nn, mm = n[s].astype(np.float64), m[s].astype(np.float64)
        self.dist = np.abs(np.maximum(i, 1) / np.maximum(nn, 1) - (j[g] + 1) / np.maximum(mm, 1))
        self.group = g.astype(np.int32)
        self.sent_of_tok, self.j, self.i = sent_of_tok, j, i
        self.n, self.m, self.tok_off = n, m, np.concatenate([[0], np.cumsum(m)[:-1]]).astype(np.int64)
        self.t = np.full(len(pairs), 1.0)                         # uniform start (normalised below)
        self._normalise(self.t)

    def _normalise(self, counts):
        total = np.bincount(self.pair_src, weights=counts, minlength=self.n_src_vocab)
        self.t = counts / np.maximum(total[self.pair_src], 1e-300)

    def prior(self, lam, p0):
        """p(a_j = i) for every candidate: NULL p0, the rest (1 - p0) softmax(-lam * dist)."""
        w = np.where(self.is_null, 0.0, np.exp(-lam * self.dist))
        z = np.add.reduceat(w, self.starts)
        return np.where(self.is_null, p0, (1 - p0) * w / np.maximum(z[self.group], 1e-300))

    def em(self, iterations, lam, p0):
        prior = self.prior(lam, p0) if iterations else None  # fixed within a phase
        for _ in range(iterations):
            p = self.t[self.pair] * prior
            p /= np.maximum(np.add.reduceat(p, self.starts)[self.group], 1e-300)  # posteriors
            self._normalise(np.bincount(self.pair, weights=p, minlength=len(self.t)))

    def viterbi(self, lam, p0, first_sentence):
        """(sentence, source word, target word) links of sentences >= first_sentence: each
        target word's most probable candidate, none when it is NULL."""
        p = self.t[self.pair] * self.prior(lam, p0)
        best = np.maximum.reduceat(p, self.starts)
        win = (p == best[self.group]) & ~self.is_null
        # the first winner of each target word (ties: the lower source position)
        k = np.nonzero(win)[0]
        k = k[np.concatenate([[True], self.group[k][1:] != self.group[k][:-1]])] if len(k) else k
        g = self.group[k]
        null_best = p[self.starts[g]] >= best[g]
        k, g = k[~null_best], g[~null_best]
        s = self.sent_of_tok[g]
        keep = s >= first_sentence
        return s[keep], self.i[k][keep] - 1, self.j[g][keep]


def grow_diag_final_and(fwd, rev, n, m, final_and=True):
    """Symmetrise two link sets of one sentence ((source, target) pairs; n source and m
    target words): Koehn et al.'s grow-diag-final-and, or with final_and=False
    grow-diag-final (the final step then adds a link of either direction when either of its
    words is unaligned)."""
    union, links = fwd | rev, set(fwd & rev)
    src_on = {i for i, _ in links}
    tgt_on = {j for _, j in links}
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                a, b = i + di, j + dj
                if (a, b) in union and (a, b) not in links and (a not in src_on or b not in tgt_on):
                    links.add((a, b))
                    src_on.add(a)
                    tgt_on.add(b)
                    grown = True
    for one in (fwd, rev):  # final-and: links of either direction whose words are both unaligned
        for i, j in sorted(one):
            if (i not in src_on and j not in tgt_on) if final_and else (i not in src_on or j not in tgt_on):
                links.add((i, j))
                src_on.add(i)
                tgt_on.add(j)
    return links


def align(src, tgt, n_test, model1=5, model2=5, lam=4.0, p0=0.08, log=None, hmm=HMM_ITERATIONS, hmm_p0=0.2,
          hmm_threshold=0.5, directed_only=False):
    """src, tgt: lists of word lists (the last n_test pairs are the ones to align). Returns
    n_test sorted lists of (source, target) links (grow-diag-final-and), or with
    directed_only the two directions' link sets unsymmetrised: (source->target list,
    target->source list), both as (source, target) pairs."""
    vs, vt = Vocab(), Vocab()
    s_ids = [vs.encode(x) for x in src]
    t_ids = [vt.encode(x) for x in tgt]
    first = len(src) - n_test
    directed = []
    for name, a, b, na in (("source->target", s_ids, t_ids, len(vs.ids)), ("target->source", t_ids, s_ids,
                                                                              len(vt.ids))):
        d = Direction(a, b, na)
        if log:
            log(f"{name}: {len(d.pair):,} candidate links, {len(d.t):,} word pairs")
        d.em(model1, 0.0, p0)
        d.em(model2, lam, p0)
        if hmm:
            h = HMM(d, hmm_p0)
            h.em(hmm)
            sent, i, j = h.decode(first, hmm_threshold)
            del h
        else:
            sent, i, j = d.viterbi(lam, p0, first)
        links = [set() for _ in range(n_test)]
        for s, x, y in zip(sent.tolist(), i.tolist(), j.tolist()):
            links[s - first].add((x, y) if name == "source->target" else (y, x))
        directed.append(links)
        del d
    if directed_only:
        return directed[0], directed[1]
    return [sorted(grow_diag_final_and(f, r, len(src[first + k]), len(tgt[first + k])))
            for k, (f, r) in enumerate(zip(*directed))]


def read_lines(path):
    with open(path, encoding="utf-8-sig") as f:
        return [l.rstrip("\n") for l in f]


def training_pairs():
    """tools/train.py's training pairs with its default corpora and held-out rule."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import types
    import data_paths as D
    import train
    a = types.SimpleNamespace(data_dir=D.data_dir(), corpora="multi30k,tatoeba,anki,news,wmt10k", seed=1234,
                              heldout=1000, heldout_anki=2000, heldout_news=500, multi30k_repeat=1)
    return train.prepare_data(a)["train"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--source", required=True, help="whitespace-tokenised source sentences to align")
    p.add_argument("--target", required=True, help="their translations, whitespace-tokenised")
    p.add_argument("-o", "--output", help="Pharaoh output (default: standard output)")
    p.add_argument("--corpus", nargs=2, action="append", default=[], metavar=("SRC", "TGT"),
                   help="more parallel text to train on (raw lines; repeatable)")
    p.add_argument("--train-corpus", action="store_true", help="also train on tools/train.py's training pairs")
    p.add_argument("--max-pairs", type=int, default=0,
                   help="with --train-corpus: a fixed random subset of this many pairs (0: all)")
    p.add_argument("--keep-case", action="store_true", help="do not lowercase --corpus text")
    p.add_argument("--model1", type=int, default=5, help="IBM Model 1 iterations (5)")
    p.add_argument("--model2", type=int, default=5, help="diagonal-prior iterations (5)")
    p.add_argument("--lam", type=float, default=4.0, help="diagonal tension (4.0, fast_align's start)")
    p.add_argument("--p0", type=float, default=0.08, help="NULL probability (0.08, fast_align's)")
    p.add_argument("--hmm", type=int, default=HMM_ITERATIONS,
                   help=f"HMM iterations after Model 2 ({HMM_ITERATIONS}; 0: Model 2's links, as before the HMM)")
    p.add_argument("--hmm-p0", type=float, default=0.2, help="the HMM's NULL transition probability (0.2)")
    p.add_argument("--hmm-threshold", type=float, default=0.5,
                   help="the HMM links a word to its most probable one only above this posterior (0.5)")
    a = p.parse_args(argv)
    if a.hmm < 0 or not 0 <= a.hmm_p0 < 1:
        raise SystemExit("word_align.py: --hmm must be 0 or more and --hmm-p0 in [0, 1)")
    src, tgt = read_lines(a.source), read_lines(a.target)
    if len(src) != len(tgt):
        raise SystemExit(f"word_align.py: {len(src)} source but {len(tgt)} target lines")
    extra = []
    for s, t in a.corpus:
        cs, ct = read_lines(s), read_lines(t)
        if len(cs) != len(ct):
            raise SystemExit(f"word_align.py: {s} has {len(cs)} lines, {t} {len(ct)}")
        extra += list(zip(cs, ct))
    if a.train_corpus:
        pairs = training_pairs()
        if a.max_pairs and len(pairs) > a.max_pairs:  # a fixed random subset
            pairs = [pairs[i] for i in sorted(np.random.default_rng(0).choice(len(pairs), a.max_pairs, False))]
        extra += pairs
    def words(line):  # SRC/TGT: their own tokens (the links index them), cased as the corpus
        return (line if a.keep_case else line.lower()).split()
    train_s = [split_words(x, a.keep_case) for x, _ in extra] + [words(x) for x in src]
    train_t = [split_words(y, a.keep_case) for _, y in extra] + [words(y) for y in tgt]
    links = align(train_s, train_t, len(src), a.model1, a.model2, a.lam, a.p0,
                  log=lambda s: print(f"word_align.py: {s}", file=sys.stderr), hmm=a.hmm, hmm_p0=a.hmm_p0,
                  hmm_threshold=a.hmm_threshold)
    text = "".join(" ".join(f"{i}-{j}" for i, j in l) + "\n" for l in links)
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
