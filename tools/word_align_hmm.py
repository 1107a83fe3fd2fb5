"""The HMM alignment model (Vogel, Ney & Tillmann 1996) for tools/word_align.py, one direction:
each word f_j of a sentence of m words is emitted by a hidden state that is one of the n
words e_i of the other side or NULL, and the state moves from word to word by a jump.

  states       n real ones (e_1..e_n) and, as Och & Ney (2003) do, n NULL ones: NULL state i
               stands for "NULL, the last real state was i", so a jump after a NULL word starts
               from where the sentence was
  transitions  from real or NULL state i': to NULL state i' with p0, to real state i with
               (1 - p0) c(i - i') / sum_{i''=1..n} c(i'' - i'); the jump widths i - i' are
               clipped to [-J, J] (one bucket each end for every longer jump)
  first word   the jump from a position 0 before the sentence (width i), to real state i with
               (1 - p0) or, with p0, to NULL state i (the first real word then jumps from i)
  emissions    t(f | e_i) for real state i, t(f | NULL) for every NULL state

EM: forward-backward with each step's forward mass normalised to one (the scaling that keeps
long sentences from underflowing), t re-estimated from the posteriors as in Model 1, c from
the expected jumps. c's update is the fixed point of its likelihood under the normalisation
above: c(b) = E(b) / O(b), E(b) the expected jumps in bucket b and O(b) the expected number of
times bucket b was on offer (each transition's start weighted by 1 / its normaliser). Decoding
by posteriors: each word's most probable source word, linked when its posterior beats NULL's
(all NULL states together) and a threshold (0.5 by default: more likely linked there than not).

Sentence pairs are sorted by length and padded to the longest pair of a chunk; the jump
normaliser depends on the sentence only through which positions exist, so every step of a
chunk is one matrix product with the shared jump matrix C[i', i] = c(i - i')."""
import numpy as np

CELLS = 1 << 21  # a chunk's padded (pair, target word, candidate) cells: memory against speed
RATIO = (5, 4)  # a chunk's longest side at most this times its shortest, +1


class Chunk:
    """Sentence pairs padded to N source and M target words: the t table entry of each (target
    word, source word) cell (real) and of each target word's NULL (null); past a sentence's
    end, the dummy entry (t = 0). Target positions first: each step reads contiguous memory."""

    def __init__(self, d, sents, dummy):
        n, m = d.n[sents], d.m[sents]
        N, M = int(n.max()), int(m.max())
        self.sents = sents
        j, i = np.arange(M), np.arange(1, N + 1)
        tok = d.starts[d.tok_off[sents][None] + np.minimum(j[:, None], m[None] - 1)]    # [M, B]
        on = j[:, None] < m[None]
        self.null = np.where(on, d.pair[tok], dummy).astype(np.int32)
        k = tok[:, :, None] + np.minimum(i[None, None], n[None, :, None])
        self.real = np.where(on[:, :, None] & (i[None, None] <= n[None, :, None]), d.pair[k], dummy).astype(np.int32)
        self.mask = (i[None] <= n[:, None]).astype(np.float64)                          # [B, N]
        self.active = on                                                                 # [M, B]


def chunks(d, sents, dummy):
    """sents (pairs with words on both sides) in chunks of similar lengths: sorted by source
    then target length, a new chunk where the cells would pass CELLS or where either side's
    longest would pass RATIO times its shortest: padding costs as much as words."""
    order = sents[np.lexsort((d.m[sents], d.n[sents]))]
    n, m = d.n[order].astype(np.int64), d.m[order].astype(np.int64)
    out, begin, lo, hi = [], 0, 0, 0
    for k in range(len(order) + 1):
        if k < len(order):
            lo2, hi2 = (min(lo, m[k]), max(hi, m[k])) if k > begin else (m[k], m[k])
            fits = (k - begin + 1) * hi2 * (n[k] + 1) <= CELLS
            alike = RATIO[1] * hi2 <= RATIO[0] * lo2 + RATIO[1] and RATIO[1] * n[k] <= RATIO[0] * n[begin] + RATIO[1]
            if k == begin or (fits and alike):
                lo, hi = lo2, hi2
                continue
        if k > begin:
            out.append(Chunk(d, order[begin:k], dummy))
        if k < len(order):
            begin, lo, hi = k, m[k], m[k]
    return out


def bucket(width, J):
    return np.clip(width, -J, J) + J


class Posteriors:
    """Forward-backward over one chunk: real[j, b, i] = p(a_j = e_i), null[j, b] = p(a_j = NULL)
    (they sum to one over each target word); jumps, offered: the chunk's E(b) and O(b)."""

    def __init__(self, ch, t, c, p0, J):
        M, B, N = ch.real.shape
        emit, emit_null = t[ch.real], p0 * t[ch.null]     # the NULL states' p0 folded in
        pos = np.arange(N)
        width = bucket(pos[None] - pos[:, None], J)
        C = c[width]                                      # C[i', i] = c(i - i')
        Z = ch.mask @ C.T                                 # [B, N] each start's normaliser
        zi = (1 - p0) / Z
        start = c[bucket(pos + 1, J)] * ch.mask
        z0 = start.sum(1, keepdims=True)
        start /= z0
        alpha, mem, scale = self.forward(ch, emit, emit_null, C, zi, start, p0)
        self.real, self.null = np.empty((M, B, N)), np.empty((M, B))
        jumps, left = np.zeros((N, N)), np.zeros((B, N))
        beta = np.ones((B, N))  # word j's scaled future, by the position its state remembers (real or NULL alike)
        for j in range(M - 1, -1, -1):
            self.real[j] = alpha[j] * beta
            before = mem[j - 1] if j else start
            self.null[j] = emit_null[j] / scale[j] * (before * beta).sum(1)
            if not j:
                break
            after = emit[j] * (beta / scale[j][:, None])   # a jump into real state i at word j: what follows it
            g = after @ C.T
            frm = mem[j - 1] * zi
            jumps += frm.T @ after                        # times C: expected jumps i' -> i into word j
            left += frm * g                               # the mass that jumped from i' (for O)
            beta = np.where(ch.active[j][:, None], g * zi + (emit_null[j] / scale[j])[:, None] * beta, 1.0)
        self.jumps = np.bincount(width.ravel(), (C * jumps).ravel(), 2 * J + 1)
        self.offered = np.bincount(width.ravel(), ((left / Z).T @ ch.mask).ravel(), 2 * J + 1)
        first = self.real[0] + (emit_null[0] / scale[0])[:, None] * start * beta   # from position 0
        self.jumps += np.bincount(bucket(pos + 1, J), first.sum(0), 2 * J + 1)
        self.offered += np.bincount(bucket(pos + 1, J), (ch.mask / z0).sum(0), 2 * J + 1)

    @staticmethod
    def forward(ch, emit, emit_null, C, zi, start, p0):
        """Scaled forward pass: alpha[j] (real states), mem[j] (real and NULL states by the
        position they remember), each step normalised to one by scale[j]."""
        M, B, N = emit.shape
        alpha, mem, scale = np.empty((M, B, N)), np.empty((M, B, N)), np.ones((M, B))
        for j in range(M):
            before = mem[j - 1] if j else start         # sums to one on a live row
            r = ((before * zi) @ C) * emit[j] if j else (1 - p0) * start * emit[0]
            s = np.where(ch.active[j], np.maximum(r.sum(1) + emit_null[j], 1e-300), np.inf)
            alpha[j] = r / s[:, None]
            mem[j] = alpha[j] + (emit_null[j] / s)[:, None] * before
            scale[j] = np.where(ch.active[j], s, 1.0)
        return alpha, mem, scale


class HMM:
    """The model over a word_align.Direction, its t table started from the Direction's."""

    def __init__(self, d, p0, J=7):
        self.d, self.p0, self.J = d, p0, J
        self.c = np.full(2 * J + 1, 1.0 / (2 * J + 1))  # jumps start uniform
        self.dummy = len(d.t)
        ok = (d.n > 0) & (d.m > 0)
        self.train = chunks(d, np.nonzero(ok)[0], self.dummy)
        # target words of sentences with no source word: NULL's, always
        no_src = np.nonzero((d.n == 0)[d.sent_of_tok])[0]
        self.null_only = np.bincount(d.pair[d.starts[no_src]], minlength=self.dummy)

    def t(self):
        return np.append(self.d.t, 0.0)

    def em(self, iterations):
        for _ in range(iterations):
            t, counts = self.t(), self.null_only.astype(np.float64)
            jumps, offered = np.zeros_like(self.c), np.zeros_like(self.c)
            cells, weights = [], []
            for k, ch in enumerate(self.train):
                post = Posteriors(ch, t, self.c, self.p0, self.J)
                cells += [ch.real.ravel(), ch.null.ravel()]
                weights += [post.real.ravel(), post.null.ravel()]
                jumps += post.jumps
                offered += post.offered
                if sum(map(len, cells)) > 4 * CELLS or k == len(self.train) - 1:  # one pass over t per batch
                    counts += np.bincount(np.concatenate(cells), np.concatenate(weights), self.dummy + 1)[:-1]
                    cells, weights = [], []
            self.d._normalise(counts)
            c = jumps / np.maximum(offered, 1e-300)
            self.c = np.maximum(c / c.sum(), 1e-12)

    def decode(self, first_sentence, threshold=0.5):
        """(sentence, source word, target word) links of sentences >= first_sentence, as
        Direction.viterbi gives them: each target word's most probable source word when its
        posterior passes threshold and NULL's (all NULL states together)."""
        d = self.d
        sents = np.arange(first_sentence, len(d.n))
        sents = sents[(d.n[sents] > 0) & (d.m[sents] > 0)]
        out_s, out_i, out_j, t = [], [], [], self.t()
        for ch in chunks(d, sents, self.dummy):
            post = Posteriors(ch, t, self.c, self.p0, self.J)
            best = post.real.argmax(2)
            p = np.take_along_axis(post.real, best[:, :, None], 2)[:, :, 0]
            j, b = np.nonzero(ch.active & (p > post.null) & (p > threshold))
            out_s.append(ch.sents[b])
            out_i.append(best[j, b])
            out_j.append(j)
        cat = lambda x: np.concatenate(x) if x else np.zeros(0, np.int64)  # noqa: E731
        return cat(out_s), cat(out_i), cat(out_j)
