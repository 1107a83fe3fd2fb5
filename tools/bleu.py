#!/usr/bin/python3
"""Corpus BLEU with sacreBLEU's default settings, written for attend's evaluations.

Settings (sacreBLEU's defaults for corpus BLEU): the "13a" tokenizer of mteval-v13a.pl,
case-sensitive, maximum n-gram order 4, the "exp" smoothing method (which only acts when
some order has zero matches), brevity penalty against the effective reference length,
which is the reference length closest to each hypothesis (ties: the shorter one); with a
single reference that is simply its length. Hypotheses and references have trailing
whitespace stripped before tokenization.

Library use:
    score, d = corpus_bleu(hyps, refs)     # refs: one reference per hypothesis, or
                                           # a list of reference streams [[r1...], [r2...]]
    print(format_bleu(d))

Command line:
    tools/bleu.py HYP_FILE REF_FILE [REF_FILE ...]
prints  BLEU = 34.12 65.1/41.0/27.9/19.5 (BP = 0.987 ratio = 0.987 hyp_len = N ref_len = M)
"""
import argparse
import math
import re
import sys
from collections import Counter

MAX_ORDER = 4

# --------------------------------------------------------------------------------------
# 13a tokenization (mteval-v13a.pl's language-independent part + its punctuation rules)

# Every character of these ASCII ranges becomes its own token:
#   '{' .. '~'  ->  { | } ~
#   '[' .. '`'  ->  [ \ ] ^ _ `
#   ' ' .. '&'  ->  space ! " # $ % &
#   '(' .. '+'  ->  ( ) * +
#   ':' .. '@'  ->  : ; < = > ? @
#   '/'
# Not in the set: apostrophe, comma, hyphen, period, digits, letters.
_PUNCT = re.compile(r"([{-~\[-` -&(-+:-@/])")
_PERIOD_COMMA_NOT_AFTER_DIGIT = re.compile(r"([^0-9])([.,])")
_PERIOD_COMMA_NOT_BEFORE_DIGIT = re.compile(r"([.,])([^0-9])")
_DASH_AFTER_DIGIT = re.compile(r"([0-9])(-)")


def tokenize_13a(line):
    """Return the 13a-tokenized form of one line (tokens joined by single spaces)."""
    line = line.replace("<skipped>", "")
    line = line.replace("-\n", "")
    line = line.replace("\n", " ")
    if "&" in line:
        # SGML entities, in this order (so "&amp;quot;" becomes "&quot;", not '"')
        line = line.replace("&quot;", '"')
        line = line.replace("&amp;", "&")
        line = line.replace("&lt;", "<")
        line = line.replace("&gt;", ">")
    line = " " + line + " "
    line = _PUNCT.sub(r" \1 ", line)
    line = _PERIOD_COMMA_NOT_AFTER_DIGIT.sub(r"\1 \2 ", line)
    line = _PERIOD_COMMA_NOT_BEFORE_DIGIT.sub(r" \1 \2", line)
    line = _DASH_AFTER_DIGIT.sub(r"\1 \2 ", line)
    return " ".join(line.split())


# --------------------------------------------------------------------------------------
# Statistics and score

def ngram_counts(tokens, max_order=MAX_ORDER):
    """Counter of all n-grams (tuples) of orders 1..max_order."""
    c = Counter()
    for n in range(1, max_order + 1):
        for i in range(len(tokens) - n + 1):
            c[tuple(tokens[i:i + n])] += 1
    return c


def closest_ref_len(hyp_len, ref_lens):
    """Reference length closest to hyp_len; on a tie the shorter one."""
    best_diff, best_len = None, None
    for r in ref_lens:
        diff = abs(hyp_len - r)
        if best_diff is None or diff < best_diff:
            best_diff, best_len = diff, r
        elif diff == best_diff:
            best_len = min(best_len, r)
    return best_len


def segment_stats(hyp, refs, max_order=MAX_ORDER):
    """(hyp_len, ref_len, correct[n], total[n]) of one hypothesis against its references."""
    h = tokenize_13a(hyp.rstrip()).split()
    ref_toks = [tokenize_13a(r.rstrip()).split() for r in refs]
    ref_max = Counter()
    for rt in ref_toks:
        for g, k in ngram_counts(rt, max_order).items():
            if k > ref_max[g]:
                ref_max[g] = k
    correct = [0] * max_order
    total = [max(0, len(h) - n) for n in range(max_order)]
    for g, k in ngram_counts(h, max_order).items():
        correct[len(g) - 1] += min(k, ref_max.get(g, 0))
    return len(h), closest_ref_len(len(h), [len(r) for r in ref_toks]), correct, total


def _log(x):
    return -9999999999.0 if x == 0.0 else math.log(x)


def compute_bleu(correct, total, sys_len, ref_len, max_order=MAX_ORDER):
    """BLEU (0-100) from corpus sums, with sacreBLEU's 'exp' smoothing. Returns the score
    and a dict of the pieces (precisions in percent, bp, ratio, lengths, counts)."""
    if sys_len < ref_len:
        bp = math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    precisions = [0.0] * max_order
    details = {"correct": list(correct), "total": list(total), "sys_len": sys_len,
               "ref_len": ref_len, "bp": bp, "precisions": precisions,
               "ratio": sys_len / ref_len if ref_len > 0 else 0.0}
    if not any(correct):
        details["score"] = 0.0
        return 0.0, details
    smooth = 1.0
    for n in range(max_order):
        if total[n] == 0:
            break
        if correct[n] == 0:
            smooth *= 2
            precisions[n] = 100.0 / (smooth * total[n])
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    score = bp * math.exp(sum(_log(p) for p in precisions) / max_order)
    details["score"] = score
    return score, details


def corpus_bleu(hyps, refs, max_order=MAX_ORDER):
    """hyps: list of strings. refs: list of strings (one reference per hypothesis) or a
    list of reference streams, each a list of strings as long as hyps."""
    hyps = list(hyps)
    refs = list(refs)
    if refs and isinstance(refs[0], str):
        streams = [refs]
    else:
        streams = [list(s) for s in refs]
    for s in streams:
        if len(s) != len(hyps):
            raise ValueError(f"{len(hyps)} hypotheses but a reference stream has {len(s)} lines")
    correct, total = [0] * max_order, [0] * max_order
    sys_len = ref_len = 0
    for i, h in enumerate(hyps):
        hl, rl, c, t = segment_stats(h, [s[i] for s in streams], max_order)
        sys_len += hl
        ref_len += rl
        for n in range(max_order):
            correct[n] += c[n]
            total[n] += t[n]
    return compute_bleu(correct, total, sys_len, ref_len, max_order)


def format_bleu(d):
    prec = "/".join(f"{p:.1f}" for p in d["precisions"])
    return (f"BLEU = {d['score']:.2f} {prec} (BP = {d['bp']:.3f} ratio = {d['ratio']:.3f} "
            f"hyp_len = {d['sys_len']:d} ref_len = {d['ref_len']:d})")


def _read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description="Corpus BLEU as sacreBLEU computes it by default "
                                "(13a tokenization, cased, 4-grams, exp smoothing).")
    p.add_argument("hyp_file")
    p.add_argument("ref_files", nargs="+", metavar="REF_FILE")
    a = p.parse_args(argv)
    hyps = _read_lines(a.hyp_file)
    refs = [_read_lines(r) for r in a.ref_files]
    try:
        _, d = corpus_bleu(hyps, refs)
    except ValueError as e:
        print(f"bleu.py: {e}", file=sys.stderr)
        return 1
    print(format_bleu(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
