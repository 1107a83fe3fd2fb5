#!/usr/bin/python3
"""What the trained alignment head costs: the same pairs force-decoded with attention and
aligned (attend's Python API, as tools/align_signal.py times a view), by a model file
without the head under its own view and by the same file with the head under its own view
(tools/add_align_head.py's), rounds alternating (the order swapped every round) so both see
the same machine load. Prints the median seconds per sentence of each and the median of the
rounds' ratios.

  tools/bench_align_head.py PLAIN.gguf HEAD.gguf [--set build/align-signal/silver] [--rounds 5] [-t 1]

PLAIN and HEAD must hold the same model (HEAD = PLAIN + the head); the set's .de/.en files
are whitespace-tokenised pairs (tools/align_signal.py writes them)."""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import attend_package  # noqa: E402,F401  (the checkout's python/ on sys.path)
import attend  # noqa: E402


def read(path):
    with open(path, encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]


def one_run(model, src, tgt, threads):
    t0 = time.perf_counter()
    res = model.score(src, tgt, attention=True, threads=threads)
    links = [r.alignment() for r in res]
    return (time.perf_counter() - t0) / len(src), links


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plain")
    p.add_argument("head")
    p.add_argument("--set", default=os.path.join(os.path.dirname(HERE), "build", "align-signal", "silver"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-t", "--threads", type=int, default=1)
    a = p.parse_args(argv)
    src, tgt = read(a.set + ".de"), read(a.set + ".en")
    models = {"view": attend.Model(a.plain), "head": attend.Model(a.head)}
    if models["head"].config.align_head_width == 0:
        p.error(f"{a.head} has no alignment head")
    times = {k: [] for k in models}
    for r in range(a.rounds):
        for k in (("view", "head") if r % 2 == 0 else ("head", "view")):
            times[k].append(one_run(models[k], src, tgt, a.threads)[0])
    for k, m in models.items():
        print(f"{k:5} {m.config.alignment_view:28} {statistics.median(times[k]):.4f} s/sentence "
              f"({len(src)} pairs, {a.rounds} rounds, {a.threads} thread(s))")
    ratio = statistics.median(h / v for h, v in zip(times["head"], times["view"]))
    print(f"head / view: {ratio:.3f} (median of the rounds' ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
