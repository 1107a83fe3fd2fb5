#!/usr/bin/python3
"""The batch-32 encoder against PyTorch + OpenBLAS (issue 15), on bench.py's model.

The opus-mt-en-de-shaped random model of tools/bench.py (built and cached the same way, in
--work), 32 random sources of 20 tokens: attend's encoder time (`attend bench` encode_ms,
one target token decoded) against the PyTorch reference's encoder (bench.TorchRunner, the
reference model's own modules, f32 matmuls through Debian's libblas.so.3: OpenBLAS once
`make bench` has installed it), same threads, rounds interleaved, medians. Prints a Markdown
table; the numbers go into BENCHMARKS.md by hand.

    tools/bench_encoder.py [--batch 32] [--threads 1,2] [--rounds 5] [--dtypes f32,f16,int8]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (sets GOMP_SPINCOUNT / OPENBLAS_THREAD_TIMEOUT before torch loads)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(B.ROOT, "build", "attend"))
    p.add_argument("--work", default=os.path.join(B.ROOT, "build", "bench"))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dtypes", default="f32,f16,int8")
    a = p.parse_args(argv)
    hf, paths = B.build_model(a.work)
    runner = B.TorchRunner(hf)
    import torch
    src = B.random_sources(a.batch, a.src_len)
    res = {}
    for r in range(a.rounds):
        for th in (int(x) for x in a.threads.split(",")):
            torch.set_num_threads(th)
            if r == 0:
                runner.run(src, 1)  # warm-up
            enc, _ = runner.run(src, 1)
            res.setdefault(("torch", "f32", th), []).append(1e3 * enc)
            for dt in a.dtypes.split(","):
                j, _ = B.attend_bench(a.attend, paths[dt], a.batch, a.src_len, 1, th, 1)
                res.setdefault(("attend", dt, th), []).append(j["encode_ms"])
        B.log(f"round {r + 1}/{a.rounds} done")
    print(f"| system | dtype | threads | encoder ms, batch {a.batch} (median of {a.rounds}) | min | PyTorch / this |")
    print("|---|---|---|---|---|---|")
    for (sysname, dt, th), v in sorted(res.items(), key=lambda kv: (kv[0][2], kv[0][0] != "torch", kv[0][1])):
        ref = statistics.median(res[("torch", "f32", th)])
        med = statistics.median(v)
        print(f"| {sysname} | {dt} | {th} | {med:.1f} | {min(v):.1f} | {ref / med:.2f}x |")
    print(f"\nMachine: {B.machine()}; BLAS: {B.torch_blas()}")


if __name__ == "__main__":
    sys.exit(main())
