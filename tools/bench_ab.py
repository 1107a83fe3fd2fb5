#!/usr/bin/python3
"""Two attend binaries side by side: `attend bench` runs alternating between them, medians.

For before/after comparisons of a change on a shared or noisy machine: every configuration
runs BEFORE, AFTER, BEFORE, AFTER, ... (--rounds times each), so drifts in the machine's
speed hit both alike; the table gives each side's median target tok/s, encoder ms, the
linear layers' fraction of the measured multiply-add peak (of that same run; for int8 on AMX
also of tdpbusd's peak), and the after/before ratio of the medians.

    tools/bench_ab.py OLD/attend NEW/attend [--models build/bench/en-de-shape-{f32,f16,int8}.gguf]
                      [--batches 1,64] [--threads 1,2] [--rounds 5] [--src-len 20] [--tgt-len 20]
                      [--bench-rounds 1] [--beam 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(binary, model, b, th, s, t, rounds=1, beam=1):
    cmd = [binary, "bench", "-m", model, "-b", str(b), "-t", str(th), "-s", str(s), "-n", str(t), "-r", str(rounds),
           "--no-bandwidth", "--json"]
    if beam > 1:
        cmd += ["--beam", str(beam)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    default = ",".join(os.path.join(ROOT, "build", "bench", f"en-de-shape-{d}.gguf") for d in ("f32", "f16", "int8"))
    p.add_argument("--models", default=default)
    p.add_argument("--batches", default="1,64")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--tgt-len", type=int, default=20)
    p.add_argument("--bench-rounds", type=int, default=1,
                   help="timed rounds inside each attend bench run (its median is the run's figure)")
    p.add_argument("--beam", type=int, default=1, help="beam search with N beams (attend bench --beam N)")
    a = p.parse_args(argv)
    res = {}
    for r in range(a.rounds):
        for model in a.models.split(","):
            for th in (int(x) for x in a.threads.split(",")):
                for b in (int(x) for x in a.batches.split(",")):
                    for side, binary in (("before", a.before), ("after", a.after))[:: 1 if r % 2 == 0 else -1]:
                        j = bench(binary, model, b, th, a.src_len, a.tgt_len, a.bench_rounds, a.beam)
                        res.setdefault((model, b, th, side), []).append(j)
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
    print("| model | batch | threads | before tok/s | after tok/s | after / before | before → after encoder ms "
          "| linear layers, % of peak (before → after) | after, % of the AMX peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for th in (int(x) for x in a.threads.split(",")):
            for b in (int(x) for x in a.batches.split(",")):
                B, A = res[(model, b, th, "before")], res[(model, b, th, "after")]
                # an older binary may lack a field (peak_fraction before the peak probes): nan
                med = lambda rows, k: statistics.median(x.get(k, float("nan")) for x in rows)  # noqa: E731
                # int8 on AMX tiles: the same work against tdpbusd's peak (0 where not measured)
                amx = lambda rows: (f"{100 * med(rows, 'amx_peak_fraction'):.0f}%"  # noqa: E731
                                    if med(rows, "amx_peak_fraction") > 0 else "")
                tb, ta = med(B, "tok_s"), med(A, "tok_s")
                print(f"| {os.path.basename(model)} | {b} | {th} | {tb:.1f} | {ta:.1f} | **{ta / tb:.2f}x** "
                      f"| {med(B, 'encode_ms'):.1f} → {med(A, 'encode_ms'):.1f} "
                      f"| {100 * med(B, 'peak_fraction'):.0f}% → {100 * med(A, 'peak_fraction'):.0f}% "
                      f"| {amx(A)} |")


if __name__ == "__main__":
    sys.exit(main())
