#!/usr/bin/python3
"""Word alignments by a vote of three aligners: the model's own attention view (what `attend
align` prints) and the two directions of tools/word_align.py (IBM 1 -> 2 -> HMM, source->target
and target->source). A link is kept when at least two of the three hold it; with --grow, the
view's other links next to a kept one join while one of their words is still unlinked
(grow-diag's rule, the vote standing for the intersection and the view for the union).

  align_vote.py --source SRC --target TGT [-m MODEL] [-o OUT] [--grow] [--max-pairs N]

SRC and TGT are whitespace-tokenised, one sentence a line (the words the links index, as
tools/aer.py and attend's word merging read them). word_align.py trains on them and on the
model's training pairs (tools/train.py's selection; --max-pairs: a fixed random subset, 0 all,
the default), so a run costs the aligner's training (101 s for 500 pairs on all 245,222
training pairs here) plus a forced decode per pair. Output: Pharaoh lines 'i-j' (source word
i, target word j).

Why: the view and the statistical aligner err differently. On the development set the view
scores AER 0.180, word_align.py (all training pairs) 0.216, this vote 0.149 (precision 0.906,
recall 0.802), with --grow 0.152 (0.854 / 0.841); models/README.md has the table."""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import aer as AER  # noqa: E402
import word_align as W  # noqa: E402

NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def vote(*link_sets):
    """The links at least two of the sets hold."""
    return {l for l in set().union(*link_sets) if sum(l in s for s in link_sets) >= 2}


def grow(core, extra):
    """core, then links of extra next to a link (eight around it) while the new link's source
    or target word is unlinked, pass after pass until none joins (grow-diag's growing)."""
    links = set(core)
    src_on, tgt_on = {i for i, _ in links}, {j for _, j in links}
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                n = (i + di, j + dj)
                if n in extra and n not in links and (n[0] not in src_on or n[1] not in tgt_on):
                    links.add(n)
                    src_on.add(n[0])
                    tgt_on.add(n[1])
                    grown = True
    return links


def view_links(model_path, src, tgt, threads=1):
    """The model's own view's links of each pair (the Python API: attend align's links)."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    import attend
    with attend.Model(model_path, threads=threads) as m:
        return [set(r.alignment()) for r in m.score(src, tgt)]


def directions(src, tgt, max_pairs, log=None):
    """word_align.py's two directions for each pair, trained on the training pairs and these."""
    import numpy as np
    pairs = W.training_pairs()
    if max_pairs and len(pairs) > max_pairs:
        pairs = [pairs[i] for i in sorted(np.random.default_rng(0).choice(len(pairs), max_pairs, False))]
    s = [W.split_words(x) for x, _ in pairs] + [x.lower().split() for x in src]
    t = [W.split_words(y) for _, y in pairs] + [y.lower().split() for y in tgt]
    return W.align(s, t, len(src), log=log, directed_only=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--source", required=True, help="whitespace-tokenised source sentences")
    p.add_argument("--target", required=True, help="their translations, whitespace-tokenised")
    p.add_argument("-o", "--output", help="Pharaoh output (default: standard output)")
    p.add_argument("--grow", action="store_true", help="grow the vote into the view's links")
    p.add_argument("--max-pairs", type=int, default=0, help="word_align.py's training pairs (0: all)")
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("--reverse", action="store_true",
                   help="MODEL translates English->German: SRC is English and TGT German (the aligner's "
                        "links, trained with German as source, are swapped)")
    a = p.parse_args(argv)
    src, tgt = AER.read_lines(a.source), AER.read_lines(a.target)
    if len(src) != len(tgt):
        raise SystemExit(f"align_vote.py: {len(src)} source but {len(tgt)} target lines")
    view = view_links(a.model, src, tgt, a.threads)
    say = lambda s: print(f"align_vote.py: {s}", file=sys.stderr)  # noqa: E731
    if a.reverse:  # the aligner runs German->English as always; its links read the other way round
        de_en, en_de = directions(tgt, src, a.max_pairs, log=say)
        fwd, rev = ([{(j, i) for i, j in l} for l in d] for d in (en_de, de_en))
    else:
        fwd, rev = directions(src, tgt, a.max_pairs, log=say)
    out = []
    for v, f, r in zip(view, fwd, rev):
        links = vote(v, f, r)
        out.append(" ".join(f"{i}-{j}" for i, j in sorted(grow(links, v) if a.grow else links)))
    text = "".join(l + "\n" for l in out)
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
