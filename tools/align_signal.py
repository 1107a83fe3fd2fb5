#!/usr/bin/python3
"""A second signal for word alignments besides the 100-pair development set, made only from
data the project has (no other gold alignment is read), and every method scored on both.

  align_signal.py [-m MODEL] [--work DIR] [--preset VIEW ...] [--hyp NAME PREFIX ...]

The sets (built once, cached in WORK, default build/align-signal):
  dev.{de,en,wa}       ../shared/data/align-deen-bicici as it is: 100 lowercased Europarl
                       pairs, hand-aligned, sure links only.
  devcased.{de,en,wa}  the same pairs and the same gold links, the text truecased: every word
                       takes the casing it has most often in the model's training pairs away
                       from a sentence's start (German nouns capitalised, "Mr", "EU"), and a
                       sentence's first word starts with a capital. The tokens stay the same, so
                       the hand links still hold: what casing alone does to a method.
  silver.{de,en,wa}    --news pairs of the news held-out slice after the first 300 (those chose
                       the shipped view: tools/align_recipe.py) and the first --tatoeba pairs of
                       the Tatoeba held-out slice: cased text no model was trained on, split into
                       words and punctuation (word_align.split_words). Links: tools/word_align.py
                       (IBM 1 -> 2 -> HMM) trained on every training pair of the model and these
                       sentences, in both directions; sure where grow-diag-final-and puts links
                       (its symmetrised output), possible where either direction has one. Sure
                       and possible links, as the standard benchmarks have them; the labels are
                       statistical, so this set ranks methods, it does not measure them.

Then every method is scored on the three: AER, precision and recall (tools/aer.py), and the
time per sentence (force-decoding and reading the links, the model loaded once; silver set,
the threads -t gives). Methods: the model's own view, each --preset VIEW (the Python API,
the library's own code), each --hyp NAME PREFIX (Pharaoh files PREFIX.dev.wa,
PREFIX.devcased.wa and PREFIX.silver.wa written by any other aligner), and word_align.py's
grow-diag-final-and links on dev and devcased (it made the silver labels: no silver score), and
with --reverse-model the links of both directions (attend align --reverse-model).
--json FILE writes the table as JSON."""
import argparse
import json
import os
import re
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import aer as AER  # noqa: E402
import data_paths as D  # noqa: E402
import word_align as W  # noqa: E402

SETS = ("dev", "devcased", "silver")
NEWS_SKIP = 300  # the news pairs tools/align_recipe.py chose the shipped view on


def log(msg):
    print(f"align_signal: {msg}", file=sys.stderr, flush=True)


def write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))
    return path


# --------------------------------------------------------------------------------------
# Truecasing the development set

PART = re.compile(r"\w+", re.UNICODE)


def casing_table(pairs):
    """lowercased word -> its most frequent form in the pairs' text away from a sentence's
    first word (both sides: German and English share the table; they rarely share a word)."""
    counts = {}
    for de, en in pairs:
        for line in (de, en):
            for w in W.split_words(line, True)[1:]:
                counts.setdefault(w.lower(), Counter())[w] += 1
    return {k: c.most_common(1)[0][0] for k, c in counts.items()}


def truecase(line, table):
    """Whitespace tokens kept; each token cased as the table says (whole, else its word parts
    one by one), the first letter of the line capitalised."""
    out = []
    for tok in line.split():
        if tok in table:
            out.append(table[tok])
        else:
            out.append(PART.sub(lambda m: table.get(m.group(0), m.group(0)), tok))
    text = " ".join(out)
    for k, ch in enumerate(text):
        if ch.isalpha():
            return text[:k] + ch.upper() + text[k + 1:]
    return text


# --------------------------------------------------------------------------------------
# Building the sets

def heldout_pairs(news, tatoeba):
    import types
    import train
    a = types.SimpleNamespace(data_dir=D.data_dir(), corpora="multi30k,tatoeba,anki,news,wmt10k", seed=1234,
                              heldout=1000, heldout_anki=2000, heldout_news=500, multi30k_repeat=1)
    d = train.prepare_data(a)
    held = d["heldout_sets"]
    return d["train"], held["news"][NEWS_SKIP:NEWS_SKIP + news] + held["tatoeba"][:tatoeba]


def sure_possible(fwd, rev):
    """Silver gold of one pair from the aligner's two directions: sure where
    grow-diag-final-and puts links (the aligner's own output), possible where either direction
    has one."""
    sure = W.grow_diag_final_and(fwd, rev, 0, 0)
    possible = fwd | rev
    return " ".join([f"{i}-{j}" for i, j in sorted(sure)] + [f"{i}p{j}" for i, j in sorted(possible - sure)])


def build(a):
    """Write the three sets and word_align.py's links for dev and devcased into a.work."""
    done = os.path.join(a.work, "silver.wa")
    if os.path.exists(done):
        return
    os.makedirs(a.work, exist_ok=True)
    base = os.path.dirname(D.corpus("align-deen-bicici", "de-en.wa"))
    dde = W.read_lines(os.path.join(base, "test.de"))  # utf-8-sig: the BOM of test.de dropped
    den = W.read_lines(os.path.join(base, "test.en"))
    gold = W.read_lines(os.path.join(base, "de-en.wa"))
    train_pairs, held = heldout_pairs(a.news, a.tatoeba)
    log(f"{len(train_pairs):,} training pairs, {len(held)} held-out pairs")
    table = casing_table(train_pairs)
    if a.max_pairs and len(train_pairs) > a.max_pairs:  # a fixed random subset (tests: fast)
        import numpy as np
        keep = sorted(np.random.default_rng(0).choice(len(train_pairs), a.max_pairs, False))
        train_pairs = [train_pairs[i] for i in keep]
    cde, cen = [truecase(x, table) for x in dde], [truecase(x, table) for x in den]
    sde = [" ".join(W.split_words(x, True)) for x, _ in held]
    sen = [" ".join(W.split_words(y, True)) for _, y in held]
    for name, de, en in (("dev", dde, den), ("devcased", cde, cen), ("silver", sde, sen)):
        write(os.path.join(a.work, f"{name}.de"), de)
        write(os.path.join(a.work, f"{name}.en"), en)
    write(os.path.join(a.work, "dev.wa"), gold)
    write(os.path.join(a.work, "devcased.wa"), gold)
    # one training run: all training pairs, then the pairs to align (dev, devcased, silver)
    test = list(zip(dde + cde + sde, den + cen + sen))
    src = [W.split_words(x) for x, _ in train_pairs] + [x.lower().split() for x, _ in test]
    tgt = [W.split_words(y) for _, y in train_pairs] + [y.lower().split() for _, y in test]
    fwd, rev = W.align(src, tgt, len(test), log=log, directed_only=True)
    n_dev = len(dde)
    sym = [" ".join(f"{i}-{j}" for i, j in sorted(W.grow_diag_final_and(f, r, 0, 0))) for f, r in zip(fwd, rev)]
    write(os.path.join(a.work, "word_align.dev.wa"), sym[:n_dev])
    write(os.path.join(a.work, "word_align.devcased.wa"), sym[n_dev:2 * n_dev])
    with open(os.path.join(a.work, "directions.json"), "w") as f:  # every pair's two directions
        json.dump({"fwd": [sorted(x) for x in fwd], "rev": [sorted(x) for x in rev]}, f)
    silver = [sure_possible(f, r) for f, r in zip(fwd[2 * n_dev:], rev[2 * n_dev:])]
    write(done + ".tmp", silver)
    os.replace(done + ".tmp", done)


# --------------------------------------------------------------------------------------
# Scoring

def read_set(work, name):
    return (AER.read_lines(os.path.join(work, f"{name}.de")), AER.read_lines(os.path.join(work, f"{name}.en")),
            AER.read_gold(os.path.join(work, f"{name}.wa"), False, False))


def score(gold, hyp):
    p, r = AER.precision_recall(gold, hyp)
    return {"aer": AER.aer(gold, hyp), "precision": p, "recall": r}


def view_links(model, view, src, tgt, threads):
    """The view's links for each pair (the model's own with view None) and seconds per pair."""
    t0 = time.perf_counter()
    res = model.score(src, tgt, attention=True, threads=threads)
    links = [set(r.alignment(view)) for r in res]
    return links, (time.perf_counter() - t0) / max(1, len(src))


def score_views(a, sets, views):
    sys.path.insert(0, os.path.join(REPO, "python"))
    import attend
    model = attend.Model(a.model, threads=a.threads)
    rows = []
    for view in views:
        row = {"method": view or f"{model.config.alignment_view} (the model's own view)"}
        for name in SETS:
            src, tgt, gold = sets[name]
            links, sec = view_links(model, view, src, tgt, a.threads)
            row[name] = score(gold, links)
            if name == "silver":
                row["seconds_per_sentence"] = sec
        rows.append(row)
    model.close()
    return rows


def score_both(a, sets):
    """--reverse-model: the links the model's own view and the reverse model's own view agree
    on (attend align --reverse-model), and seconds per pair for both models."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    import attend
    fwd, rev = attend.Model(a.model, threads=a.threads), attend.Model(a.reverse_model, threads=a.threads)
    row = {"method": f"{fwd.config.alignment_view} + {os.path.basename(a.reverse_model)}'s "
                     f"{rev.config.alignment_view} (both directions)"}
    for name in SETS:
        src, tgt, gold = sets[name]
        t0 = time.perf_counter()
        res = fwd.score(src, tgt, attention=True, threads=a.threads)
        back = rev.score(tgt, src, attention=True, threads=a.threads)
        links = [set(r.alignment(reverse=b)) for r, b in zip(res, back)]
        row[name] = score(gold, links)
        if name == "silver":
            row["seconds_per_sentence"] = (time.perf_counter() - t0) / max(1, len(src))
    fwd.close()
    rev.close()
    return row


def score_files(name, prefix, sets):
    row = {"method": name}
    for s in SETS:
        path = f"{prefix}.{s}.wa"
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            hyp = [AER.parse_links(l.rstrip("\n"), lineno=i + 1, what="hypothesis")[1] for i, l in enumerate(f)]
        row[s] = score(sets[s][2], hyp)
    return row


def print_table(rows):
    cols = [f"{s} AER (P / R)" for s in SETS]
    print(f"{'method':<44} " + " ".join(f"{c:>22}" for c in cols) + f" {'s/sentence':>10}")
    for r in rows:
        cells = [f"{r[s]['aer']:.4f} ({r[s]['precision']:.3f}/{r[s]['recall']:.3f})" if s in r else "-"
                 for s in SETS]
        sec = f"{r['seconds_per_sentence']:.4f}" if "seconds_per_sentence" in r else "-"
        print(f"{r['method']:<44} " + " ".join(f"{c:>22}" for c in cells) + f" {sec:>10}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--work", default=os.path.join(REPO, "build", "align-signal"))
    p.add_argument("--news", type=int, default=200, help="news held-out pairs after the first 300 (200)")
    p.add_argument("--tatoeba", type=int, default=300, help="Tatoeba held-out pairs (300)")
    p.add_argument("--max-pairs", type=int, default=0,
                   help="train word_align.py on this many training pairs (0: all, the default)")
    p.add_argument("--preset", action="append", default=[], help="a view to score (repeatable)")
    p.add_argument("--hyp", nargs=2, action="append", default=[], metavar=("NAME", "PREFIX"),
                   help="score PREFIX.{dev,devcased,silver}.wa as NAME (repeatable)")
    p.add_argument("--no-views", action="store_true", help="score no view (not even the model's own)")
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("--reverse-model", metavar="MODEL2", help="a model of the other direction (English->German): "
                   "also score the links both models' own views agree on")
    p.add_argument("--json", help="write the table as JSON here")
    a = p.parse_args(argv)
    build(a)
    sets = {s: read_set(a.work, s) for s in SETS}
    rows = [] if a.no_views else score_views(a, sets, [None] + a.preset)
    if a.reverse_model:
        rows.append(score_both(a, sets))
    rows += [score_files(n, pre, sets) for n, pre in a.hyp]
    rows.append(score_files("word_align.py (IBM 1-2-HMM, gdfa; made the silver labels)",
                            os.path.join(a.work, "word_align"), {k: v for k, v in sets.items() if k != "silver"}))
    print_table(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
