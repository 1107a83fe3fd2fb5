#!/usr/bin/python3
"""What the trained alignment head costs: the same pairs force-decoded with attention and
aligned (attend's Python API, as tools/align_signal.py times a view), by a model file
without the head under its own view and by the same file with the head under its own view
(tools/add_align_head.py's), rounds alternating (the order swapped every round) so both see
the same machine load. Prints the median seconds per sentence of each, wall and CPU (this
process's, which other jobs on a shared machine disturb less), and the median of the rounds'
ratios.

  tools/bench_align_head.py PLAIN.gguf HEAD.gguf [--set build/align-signal/silver] [--rounds 5] [-t 1]
                            [--reverse]

PLAIN and HEAD must hold the same model (HEAD = PLAIN + the head); the set's .de/.en files
are whitespace-tokenised pairs (tools/align_signal.py writes them); --reverse, for an
English->German model, reads .en as the source."""
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
    """(wall, CPU) seconds per sentence of force-decoding and aligning every pair."""
    t0, c0 = time.perf_counter(), time.process_time()
    res = model.score(src, tgt, attention=True, threads=threads)
    [r.alignment() for r in res]
    return (time.perf_counter() - t0) / len(src), (time.process_time() - c0) / len(src)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plain")
    p.add_argument("head")
    p.add_argument("--set", default=os.path.join(os.path.dirname(HERE), "build", "align-signal", "silver"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("--reverse", action="store_true", help="English->German models: .en is the source")
    a = p.parse_args(argv)
    src, tgt = (read(f"{a.set}.{x}") for x in (("en", "de") if a.reverse else ("de", "en")))
    models = {"view": attend.Model(a.plain), "head": attend.Model(a.head)}
    if models["head"].config.align_head_width == 0:
        p.error(f"{a.head} has no alignment head")
    times = {k: [] for k in models}
    for r in range(a.rounds):
        for k in (("view", "head") if r % 2 == 0 else ("head", "view")):
            times[k].append(one_run(models[k], src, tgt, a.threads))
    for k, m in models.items():
        wall, cpu = (statistics.median(t[i] for t in times[k]) for i in (0, 1))
        print(f"{k:5} {m.config.alignment_view:28} {wall:.4f} s/sentence wall, {cpu:.4f} CPU "
              f"({len(src)} pairs, {a.rounds} rounds, {a.threads} thread(s))")
    for i, what in enumerate(("wall", "CPU")):
        ratio = statistics.median(h[i] / v[i] for h, v in zip(times["head"], times["view"]))
        print(f"head / view, {what}: {ratio:.3f} (median of the rounds' ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
