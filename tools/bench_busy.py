#!/usr/bin/python3
"""attend's latency with the cores busy: `attend bench` idle and with one `yes >/dev/null` per
core, for one or more binaries, alternating (issue 15: busy ÷ idle ≤ 3 for int8 batch 1).

Each round runs every binary idle, then every binary with the `yes` processes running (their
order swapped every round); the table gives the median ms per sentence of each side over the
rounds, the range, and busy ÷ idle.

    tools/bench_busy.py -m MODEL.gguf BIN [BIN ...] [--batch 1] [--threads 2] [--rounds 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def ms_per_sentence(binary, model, batch, threads):
    cmd = [binary, "bench", "-m", model, "-b", str(batch), "-t", str(threads), "-r", "5", "--no-bandwidth", "--json"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["ms_per_sentence"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binaries", nargs="+")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args(argv)
    res = {}
    for r in range(a.rounds):
        for busy in (False, True):
            hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(os.cpu_count() or 1)] if busy else []
            try:
                for b in a.binaries[:: 1 if r % 2 == 0 else -1]:
                    res.setdefault((b, busy), []).append(ms_per_sentence(b, a.model, a.batch, a.threads))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
    print("| binary | idle ms/sentence (min–max) | busy ms/sentence (min–max) | busy ÷ idle |")
    print("|---|---|---|---|")
    for b in a.binaries:
        idle, busy = res[(b, False)], res[(b, True)]
        mi, mb = statistics.median(idle), statistics.median(busy)
        print(f"| {b} | {mi:.2f} ({min(idle):.2f}–{max(idle):.2f}) | {mb:.2f} ({min(busy):.2f}–{max(busy):.2f}) "
              f"| **{mb / mi:.2f}x** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
