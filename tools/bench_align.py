#!/usr/bin/python3
"""What --alignment costs: `attend translate` on the same lines with and without
`--alignment` (the model's own view), run alternately (the order swapped every round) so
both see the same machine load; the CPU time (user + system) of each run, which other jobs on
a shared machine disturb less than wall time, and its wall time: the median per mode and the
median of each round's ratio.

  tools/bench_align.py [-m MODEL] [--lines N] [--rounds R] [-t THREADS] [--extra ARGS]

Input: the first N German sentences of Multi30k test_2016_flickr (../shared/data)."""
import argparse
import gzip
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_paths as D  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, path):
    with open(path, "rb") as f:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode:
        raise SystemExit(f"bench_align.py: {' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()[:300]}")
    return (cpu, wall), p.stdout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--attend", default=os.path.join(REPO, "build", "attend"))
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-t", "--threads", type=int, default=1)
    p.add_argument("--extra", default="", help="more attend translate options, e.g. '--greedy'")
    a = p.parse_args(argv)
    with gzip.open(D.corpus("multi30k/test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f][: a.lines]
    with tempfile.TemporaryDirectory(prefix="bench-align-") as d:
        src = os.path.join(d, "in.de")
        with open(src, "w", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in lines))
        base = [a.attend, "translate", "-m", a.model, "-t", str(a.threads)] + a.extra.split()
        modes = {"plain": base, "alignment": base + ["--alignment"]}
        times = {k: [] for k in modes}  # (cpu, wall) per run
        ratios = []
        run(modes["plain"], src)  # warm the page cache
        for r in range(a.rounds):
            order = list(modes) if r % 2 == 0 else list(modes)[::-1]
            got = {}
            for k in order:
                got[k], out = run(modes[k], src)
                times[k].append(got[k])
                if k == "plain":
                    plain_out = out
                else:
                    aligned = out
            ratios.append(tuple(x / y for x, y in zip(got["alignment"], got["plain"])))
            assert [l.split(b" ||| ")[0] for l in aligned.split(b"\n")] == plain_out.split(b"\n"), \
                "the translations differ with --alignment"
    print(f"{len(lines)} lines, {a.rounds} rounds, {a.threads} thread(s), {' '.join(a.extra.split()) or 'the model search settings'}")
    for i, what in enumerate(("CPU", "wall")):
        for k in modes:
            v = [x[i] for x in times[k]]
            print(f"{what:<4} {k:<10} median {statistics.median(v):.3f} s  min {min(v):.3f} s")
        r = [x[i] for x in ratios]
        print(f"{what:<4} alignment / plain: median of round ratios {statistics.median(r):.3f}x "
              f"(rounds: {', '.join(f'{x:.3f}' for x in r)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
