#!/usr/bin/python3
"""Alignment error rate (AER) of attend's attention views against a gold word alignment.

  aer.py GOLD HYP                          score Pharaoh alignments (one line per sentence;
                                           'text ||| 0-0 1-2' lines from attend translate
                                           --alignment are accepted too)
  aer.py GOLD -m MODEL --source SRC --target TGT [--preset VIEW]
                                           force-decode each (source, target) pair with
                                           build/attend align and score its alignment
                                           (without --preset: the model's own view, exactly
                                           what attend align prints by default)
  aer.py GOLD -m MODEL --source SRC --target TGT --reverse-model MODEL2
                                           the same with a model of the other direction:
                                           the links both agree on (attend align
                                           --reverse-model)
  aer.py GOLD -m MODEL --source SRC --target TGT --sweep
                                           score every decoder layer x head (and each layer's
                                           average, and all:avg; each also with the file's
                                           alignment head if it has one), plain and shifted, links
                                           per piece and per word (",words"), links by
                                           argmax, ",mutual" or ",grow", and print the
                                           table, best first

GOLD: one line per sentence of links 'i-j' (sure) and 'ipj' (possible), i the source and j
the target word (swap with --gold-order tgt-src; 1-based with --one-based). Words are the
whitespace-separated tokens of SRC and TGT, which is what attend's word merging at
SentencePiece's '▁' yields on such text.

AER (Och & Ney 2003) over the corpus, with sure links S, possible links P (S is part of P)
and hypothesis links A:  AER = 1 - (|A & S| + |A & P|) / (|A| + |S|); printed with precision
|A & P| / |A| and recall |A & S| / |S|.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTEND = os.path.join(REPO, "build", "attend")
WORD_START = "\u2581"


# --------------------------------------------------------------------------------------
# Reading alignments

def parse_links(line, one_based=False, swap=False, lineno=0, what="gold"):
    """'0-1 2p3' -> (sure set, possible set) of (source, target) pairs; possible includes sure."""
    if " ||| " in line:
        line = line.split(" ||| ", 1)[1]
    sure, possible = set(), set()
    for tok in line.split():
        sep = "-" if "-" in tok else "p" if "p" in tok else "?" if "?" in tok else None
        try:
            a, b = (int(x) for x in tok.split(sep)) if sep else (None, None)
        except ValueError:
            a = None
        if a is None:
            raise SystemExit(f"aer.py: {what} line {lineno}: '{tok}' is not a link like 3-4 or 3p4")
        if one_based:
            a, b = a - 1, b - 1
        if a < 0 or b < 0:
            raise SystemExit(f"aer.py: {what} line {lineno}: negative index in '{tok}' "
                             f"({'--one-based given' if one_based else 'use --one-based?'})")
        if swap:
            a, b = b, a
        possible.add((a, b))
        if sep == "-":
            sure.add((a, b))
    return sure, possible


def read_gold(path, one_based, swap):
    with open(path, encoding="utf-8") as f:
        return [parse_links(l.rstrip("\n"), one_based, swap, i + 1) for i, l in enumerate(f)]


def aer(gold, hyp):
    """Corpus AER. gold: list of (sure, possible); hyp: list of link sets."""
    if len(gold) != len(hyp):
        raise SystemExit(f"aer.py: {len(gold)} gold lines but {len(hyp)} hypothesis lines")
    a_s = a_p = n_a = n_s = 0
    for (s, p), a in zip(gold, hyp):
        a_s += len(a & s)
        a_p += len(a & p)
        n_a += len(a)
        n_s += len(s)
    return 1.0 - (a_s + a_p) / (n_a + n_s) if n_a + n_s else 0.0


def precision_recall(gold, hyp):
    """Corpus precision |A & P| / |A| and recall |A & S| / |S| (Och & Ney 2003): which side
    of AER a hypothesis loses on."""
    a_s = sum(len(a & s) for (s, _), a in zip(gold, hyp))
    a_p = sum(len(a & p) for (_, p), a in zip(gold, hyp))
    n_a, n_s = sum(len(a) for a in hyp), sum(len(s) for s, _ in gold)
    return (a_p / n_a if n_a else 0.0), (a_s / n_s if n_s else 0.0)


def score_line(gold, hyp, what):
    """'AER 0.1795 (100 sentences, view ...); precision 0.8091, recall 0.8321'."""
    p, r = precision_recall(gold, hyp)
    return f"AER {aer(gold, hyp):.4f} ({what}); precision {p:.4f}, recall {r:.4f}"


# --------------------------------------------------------------------------------------
# Views, word merging and hard alignment, as model/align.c does them (see align.h)

def words_of(pieces):
    out, w = [], -1
    for p in pieces:
        if p in ("</s>", "<pad>", "<s>"):
            out.append(-1)
            continue
        if p.startswith(WORD_START) or w < 0:
            w += 1
        out.append(w)
    return out


def view(cross, layers_heads, shift, head=None):
    """Mean of cross[l][h] ([T, S]) over the (l, h) pairs, and of the trained alignment head's
    rows when head is given (one more item, as a view's `align`); shifted: row t <- row t+1."""
    import numpy as np
    A = np.mean([cross[l][h] for l, h in layers_heads] + ([head] if head is not None else []), axis=0)
    if shift:
        A = np.concatenate([A[1:], np.zeros_like(A[:1])])
    return A


def hard_links(A, src_pieces, tgt_pieces, words=False, links="argmax"):
    """The word links of view matrix A ([T, S]) as model/align_links.c reads them: off the
    piece grid (rows: target pieces, columns: source pieces) or, with words, the word grid
    (a pair's weight summed over both words' pieces), special tokens in neither; each row's
    argmax, the mutual argmaxes, or those grown ("grow")."""
    import numpy as np
    sw, tw = words_of(src_pieces), words_of(tgt_pieces)
    if words:
        M = np.zeros((max(tw, default=-1) + 1, max(sw, default=-1) + 1))
        for t, w in enumerate(tw):
            for j, x in enumerate(sw):
                if w >= 0 and x >= 0:
                    M[w, x] += float(A[t, j])
        row_word, col_word = list(range(M.shape[0])), list(range(M.shape[1]))
    else:
        keep = np.outer(np.array(tw) >= 0, np.array(sw) >= 0)
        M = np.where(keep, np.asarray(A, dtype=np.float64), 0.0)
        row_word, col_word = tw, sw
    cells = {"argmax": row_argmax, "mutual": mutual_argmax, "grow": grow_mutual}[links](M)
    return {(col_word[c], row_word[r]) for r, c in cells}


def _best(v):
    """Index of v's largest positive entry (the first of equals), or None."""
    return int(v.argmax()) if v.size and v.max() > 0 else None


def row_argmax(M):
    return {(r, _best(M[r])) for r in range(M.shape[0]) if _best(M[r]) is not None}


def mutual_argmax(M):
    return {(r, c) for r, c in row_argmax(M) if _best(M[:, c]) == r}


def grow_mutual(M):
    """Mutual argmaxes, then neighbours (eight around a link) that hold more than half of
    their row's or column's weight and whose row or column is still unlinked; each pass
    visits the links it began with by (column, row), until a pass adds none."""
    links = mutual_argmax(M)
    rows, cols = M.sum(1), M.sum(0)
    around = [(0, -1), (-1, 0), (0, 1), (1, 0), (-1, -1), (1, -1), (-1, 1), (1, 1)]
    grew = True
    while grew:
        grew = False
        for r, c in sorted(links, key=lambda rc: (rc[1], rc[0])):
            for dr, dc in around:
                n = (r + dr, c + dc)
                if not (0 <= n[0] < M.shape[0] and 0 <= n[1] < M.shape[1]) or n in links:
                    continue
                row_free = all(x != n[0] for x, _ in links)
                col_free = all(y != n[1] for _, y in links)
                w = M[n]
                if (row_free or col_free) and w > 0 and (w > 0.5 * rows[n[0]] or w > 0.5 * cols[n[1]]):
                    links.add(n)
                    grew = True
    return links


# --------------------------------------------------------------------------------------
# Running attend

def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]


def run_align(attend, model, src, tgt, extra):
    p = subprocess.run([attend, "align", "-m", model, "--target", tgt, "--format", "json"] + extra +
                       ["--", src], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"aer.py: attend align failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def hyp_from_model(a, srcs, tgts):
    """The links attend align prints for each pair, and the view's name."""
    out, name = [], a.preset
    for s, t in zip(srcs, tgts):
        extra = (["--preset", a.preset] if a.preset else []) + (
            ["--reverse-model", a.reverse_model] if a.reverse_model else [])
        js = run_align(a.attend, a.model, s, t, extra)
        out.append({tuple(x) for x in js["links"]})
        name = js["view"] + (f" + {os.path.basename(a.reverse_model)}'s {js['reverse_view']}" if a.reverse_model else "")
    return out, name


def sweep(a, gold, srcs, tgts):
    import numpy as np
    sents = []
    with tempfile.TemporaryDirectory(prefix="aer-") as tmp:
        for i, (s, t) in enumerate(zip(srcs, tgts)):
            npz = os.path.join(tmp, f"{i}.npz")
            run_align(a.attend, a.model, s, t, ["--dump-attention", npz])
            z = np.load(npz)
            L = sum(1 for k in z.files if k.startswith("s0/cross/"))
            sents.append(dict(cross=[z[f"s0/cross/l{l}"] for l in range(L)],
                              head=z["s0/align_head"] if "s0/align_head" in z.files else None,
                              src=[str(x) for x in z["s0/src_pieces"]],
                              tgt=[str(x) for x in z["s0/tgt_pieces"]]))
    L = len(sents[0]["cross"])
    H = sents[0]["cross"][0].shape[0]
    views = []
    for l in range(L):
        for h in range(H):
            views.append((f"{l}:{h}", [(l, h)]))
        views.append((f"{l}:avg", [(l, h) for h in range(H)]))
    views.append(("all:avg", [(l, h) for l in range(L) for h in range(H)]))
    views = [(n, lh, False) for n, lh in views]
    if sents[0]["head"] is not None:  # the file's trained alignment head: each view with it, and alone
        views += [(n + ",align", lh, True) for n, lh, _ in views] + [("align", [], True)]
    rows = []
    for name, lh, align in views:
        for shift in (False, True):
            for words in (False, True):
                for links in ("argmax", "mutual", "grow"):
                    hyp = [hard_links(view(s["cross"], lh, shift, s["head"] if align else None), s["src"], s["tgt"],
                                      words, links) for s in sents]
                    rows.append((aer(gold, hyp), name + (",shift" if shift else "") + (",words" if words else "")
                                 + ("," + links if links != "argmax" else "")))
    rows.sort(key=lambda r: (r[0], r[1]))
    print(f"{'view':<20} {'AER':>7}")
    for e, name in rows:
        print(f"{name:<20} {e:7.4f}")
    print(f"best: {rows[0][1]} (AER {rows[0][0]:.4f}; {L} layers x {H} heads, {len(sents)} sentences)")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("gold", help="gold alignment file (i-j sure, ipj possible)")
    p.add_argument("hyp", nargs="?", help="hypothesis alignment file (Pharaoh)")
    p.add_argument("--one-based", action="store_true", help="gold indices start at 1")
    p.add_argument("--gold-order", choices=["src-tgt", "tgt-src"], default="src-tgt",
                   help="which side the gold file's first index is (default src-tgt)")
    p.add_argument("--hyp-order", choices=["src-tgt", "tgt-src"], default="src-tgt",
                   help="the same for HYP (attend writes src-tgt)")
    p.add_argument("-m", "--model", help="model .gguf: compute the hypothesis with attend")
    p.add_argument("--source", help="source sentences, whitespace-tokenised, one per line")
    p.add_argument("--target", help="target sentences (the gold's), whitespace-tokenised")
    p.add_argument("--preset", help="attention view (default: the model's own, as attend align)")
    p.add_argument("--reverse-model", help="a model of the other direction: score the links both agree on")
    p.add_argument("--sweep", action="store_true", help="score every layer x head (x shift)")
    p.add_argument("--attend", default=ATTEND, help="the attend binary (default build/attend)")
    a = p.parse_args(argv)
    gold = read_gold(a.gold, a.one_based, a.gold_order == "tgt-src")
    if a.hyp:
        with open(a.hyp, encoding="utf-8") as f:
            hyp = [parse_links(l.rstrip("\n"), False, a.hyp_order == "tgt-src", i + 1, "hypothesis")[1]
                   for i, l in enumerate(f)]
        print(score_line(gold, hyp, f"{len(gold)} sentences"))
        return 0
    if not (a.model and a.source and a.target):
        p.error("give HYP, or --model with --source and --target")
    srcs, tgts = read_lines(a.source), read_lines(a.target)
    if not (len(srcs) == len(tgts) == len(gold)):
        raise SystemExit(f"aer.py: {len(srcs)} source, {len(tgts)} target and {len(gold)} gold lines")
    if a.sweep and a.reverse_model:
        p.error("--sweep scores one model's views; --reverse-model is not taken there")
    if a.sweep:
        sweep(a, gold, srcs, tgts)
    else:
        hyp, name = hyp_from_model(a, srcs, tgts)
        print(score_line(gold, hyp, f"{len(gold)} sentences, view {name}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
