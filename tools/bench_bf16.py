#!/usr/bin/python3
"""bf16 against f32 compute, side by side: `attend bench --compute f32|bf16` alternating on one
binary and model, medians (issue 37: bf16 at least 1.5x attend's own f32 at batch 32).

Every configuration runs f32, bf16, f32, bf16, ... (--rounds times each), so drifts in the
machine's speed hit both alike. The table gives each side's median ms per sentence, the
f32 / bf16 ratio of the medians (the speed-up), and the linear layers' share of each compute
type's own multiply-add peak (vfmadd for f32, vdpbf16ps for bf16) in the decoder, measured in
the same runs. Needs a CPU with AVX-512 BF16.

    tools/bench_bf16.py [--attend build/attend] [--model models/de-en.gguf] [--batches 1,32]
                        [--beams 1,4] [--threads 2] [--rounds 5] [--bench-rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from bench_text import cpu_name  # noqa: E402


def bench(a, compute, batch, beam):
    cmd = [a.attend, "bench", "-m", a.model, "--compute", compute, "-b", str(batch), "--beam", str(beam),
           "-t", str(a.threads), "-r", str(a.bench_rounds), "--no-bandwidth", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"bench_bf16: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--model", default=os.path.join(ROOT, "models", "de-en.gguf"))
    p.add_argument("--batches", default="1,32")
    p.add_argument("--beams", default="1,4")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--bench-rounds", type=int, default=5, help="timed rounds inside each attend bench run")
    a = p.parse_args(argv)
    configs = [(b, k) for b in map(int, a.batches.split(",")) for k in map(int, a.beams.split(","))]
    runs = {}
    for r in range(a.rounds):
        for b, k in configs:
            for compute in ("f32", "bf16"):
                runs.setdefault((b, k, compute), []).append(bench(a, compute, b, k))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"{cpu_name()}, {os.cpu_count()} logical CPUs, {a.threads} threads, {os.path.basename(a.model)}, "
          f"medians of {a.rounds} interleaved runs of {a.bench_rounds} rounds")
    print("| batch | beams | f32 ms/sentence | bf16 ms/sentence | f32 / bf16 | f32 decoder peak share | "
          "bf16 decoder peak share |")
    print("|---|---|---|---|---|---|---|")
    for b, k in configs:
        f, h = runs[(b, k, "f32")], runs[(b, k, "bf16")]
        fm = statistics.median(x["ms_per_sentence"] for x in f)
        hm = statistics.median(x["ms_per_sentence"] for x in h)
        fs = statistics.median(x["decoder_peak_fraction"] for x in f)
        hs = statistics.median(x["decoder_peak_fraction"] for x in h)
        print(f"| {b} | {k} | {fm:.3f} | {hm:.3f} | {fm / hm:.2f} | {100 * fs:.0f}% | {100 * hs:.0f}% |")


if __name__ == "__main__":
    main()
