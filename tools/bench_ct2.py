#!/usr/bin/python3
"""attend against CTranslate2 on the shipped model: translation time of Multi30k lines, side by
side, interleaved (issue 37's table, measured on this machine).

    tools/bench_ct2.py --ct2 BUILD [--lines 1000] [--rounds 2] [--threads 2]
                       [--dtypes f32,int8] [--searches greedy,beam4] [--batches 1,32]
                       [--ct2-env OMP_WAIT_POLICY=passive]

BUILD is tools/build_ct2.sh's folder. Made once in --work: the CTranslate2 folder of
models/de-en.gguf (tools/ct2_convert.py), attend's int8 file (`attend quantize`), the first
--lines lines of Multi30k test_2016_flickr.de (../shared/data). CTranslate2 loads the same f16
weights as float32 or quantizes them to int8 at load (one scale per row), as `attend
quantize` does ahead of time.

Each round runs every configuration once, attend and CTranslate2 one after the other (the
order swapped every round), each in a fresh process with 2 threads. attend: `attend translate
--split none -b B --beam K` on the file, its time the process wall clock less the median wall
clock of the same command on empty input (start and model load); CTranslate2 (tools/ct2_run.py):
tokenize + translate_batch(max_batch_size=B, beam_size=K) + detokenize, timed inside the
process after the model is loaded. The table: medians over rounds, "attend / CT2" the median of
each round's ratio (below 1: attend faster), and the lines on which both wrote the same text.
The 1-minute load average before each round is printed: other processes share the machine."""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import data_paths  # noqa: E402

SEARCH = {"greedy": 1, "beam4": 4}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def prepare(a):
    """Paths of the source file, attend's f32 (as shipped) and int8 files, the CT2 folder."""
    os.makedirs(a.work, exist_ok=True)
    p = {"src": os.path.join(a.work, f"multi30k-{a.lines}.de"), "f32": a.model,
         "int8": os.path.join(a.work, "de-en-int8.gguf"), "ct2": os.path.join(a.work, "de-en-ct2")}
    if not os.path.exists(p["src"]):
        src = data_paths.corpus("multi30k", "test_2016_flickr.de.gz")
        with gzip.open(src, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")[: a.lines]
        with open(p["src"], "w", encoding="utf-8") as f:
            f.write("".join(x + "\n" for x in lines))
    if not os.path.exists(p["int8"]):
        subprocess.run([a.attend, "quantize", a.model, p["int8"]], check=True)
    if not os.path.exists(os.path.join(p["ct2"], "model.bin")):
        subprocess.run([sys.executable, os.path.join(HERE, "ct2_convert.py"), "marian", a.model, p["ct2"],
                        "--ct2", a.ct2], check=True)
    return p


def attend_cmd(a, model, batch, beam):
    search = ["--greedy"] if beam == 1 else ["--beam", str(beam)]
    return [a.attend, "translate", "-m", model, "-t", str(a.threads), "-b", str(batch), "--split", "none"] + search


def timed(cmd, stdin_path, env=None):
    with open(stdin_path, "rb") as f:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdin=f, capture_output=True, env=dict(os.environ, **(env or {})))
        wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()[-2000:]}")
    return p.stdout.decode("utf-8").split("\n")[:-1], p.stderr.decode("utf-8"), wall


def attend_run(a, p, dt, batch, beam):
    out, _, wall = timed(attend_cmd(a, p[dt], batch, beam), p["src"])
    _, _, start = timed(attend_cmd(a, p[dt], batch, beam), os.devnull)
    return out, wall, start


def ct2_run(a, p, dt, batch, beam):
    cmd = [sys.executable, os.path.join(HERE, "ct2_run.py"), "translate", p["ct2"], a.model, "--compute", dt,
           "-t", str(a.threads), "-b", str(batch), "--beam", str(beam), "--ct2", a.ct2]
    env = dict(kv.split("=", 1) for kv in a.ct2_env.split(",") if kv)
    out, err, _ = timed(cmd, p["src"], env)
    return out, json.loads(err.strip().split("\n")[-1])["translate"]


def table(res, lines):
    rows = ["| weights | search | batch | attend s | CTranslate2 s | attend ms/line | CT2 ms/line | attend / CT2 "
            "| same line |", "|---|---|---|---|---|---|---|---|---|"]
    for (dt, search, batch), r in res.items():
        at, ct = statistics.median(r["attend"]), statistics.median(r["ct2"])
        ratio = statistics.median(x / y for x, y in zip(r["attend"], r["ct2"]))
        rows.append(f"| {dt} | {search} | {batch} | {at:.2f} | {ct:.2f} | {1e3 * at / lines:.1f} | "
                    f"{1e3 * ct / lines:.1f} | {ratio:.2f} | {r['same']}/{lines} |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ct2", required=True, help="tools/build_ct2.sh's build folder")
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--model", default=os.path.join(ROOT, "models", "de-en.gguf"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench-ct2"))
    p.add_argument("--lines", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtypes", default="f32,int8")
    p.add_argument("--searches", default="greedy,beam4", help="greedy, beam4")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--ct2-env", default="", help="variables for CTranslate2's runs, e.g. OMP_WAIT_POLICY=passive "
                   "(its OpenMP threads sleep at barriers instead of spinning: needed when the cores are shared)")
    a = p.parse_args(argv)
    paths = prepare(a)
    configs = [(dt, s, int(b)) for b in a.batches.split(",") for dt in a.dtypes.split(",")
               for s in a.searches.split(",")]
    res = {c: {"attend": [], "ct2": [], "start": [], "same": 0} for c in configs}
    loads = []
    for r in range(a.rounds):
        loads.append(os.getloadavg()[0])
        for dt, s, b in configs:
            cell = res[(dt, s, b)]
            for side in (("attend", "ct2") if r % 2 == 0 else ("ct2", "attend")):
                if side == "attend":
                    out_a, wall, start = attend_run(a, paths, dt, b, SEARCH[s])
                    cell["start"].append(start)
                else:
                    out_c, secs = ct2_run(a, paths, dt, b, SEARCH[s])
                    cell["ct2"].append(secs)
            cell["attend"].append(wall - start)
            cell["same"] = sum(x == y for x, y in zip(out_a, out_c))
            log(f"round {r + 1}: {dt} {s} batch {b}: attend {wall - start:.2f} s (start {start:.2f}), "
                f"CT2 {cell['ct2'][-1]:.2f} s, same {cell['same']}/{len(out_a)}")
        log(f"round {r + 1}/{a.rounds} done")
    print(table(res, a.lines))
    print(f"\nMedians of {a.rounds} rounds, {a.lines} lines, {a.threads} threads; load average before each round: "
          f"{', '.join(f'{x:.2f}' for x in loads)}, after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
