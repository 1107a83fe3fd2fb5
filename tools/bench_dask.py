#!/usr/bin/python3
"""Benchmark `python3 -m attend.dask` (corpus translation on a local Dask cluster) against
`attend translate` on the same file, and print a markdown table.

Runs, interleaved round by round (--rounds, medians reported):

- `attend translate -m MODEL -t 1` and `-t 2` (stdin to /dev/null);
- `python3 -m attend.dask -m MODEL --workers W --threads 1` for W in --workers (default
  1,2): a local cluster of W single-threaded worker processes, each loading the model once.

For the Dask runs it reports, from `--stats`: the wall time end to end (cluster start,
model loads, translation, writing OUT), the translation phase alone and its lines/s, the
model load time per worker (the WorkerPlugin's setup), and the overhead per chunk: the
worker time of the translation phase not spent inside Model.translate,
(translate seconds x workers - sum of Model.translate seconds) / chunks, which holds
scheduling, moving chunks and results, the driver writing chunk files, and the workers
idle at the end. Every Dask output is compared with the CLI's (byte for byte).

    tools/bench_dask.py                                  # 2,000 Tatoeba lines, greedy
    tools/bench_dask.py --input corpus.de --chunk-lines 200 --beam 4
    tools/bench_dask.py --lines 40 --rounds 1            # a quick check that it works

Run it with /usr/bin/python3 (Debian's python3-distributed) on an otherwise idle machine.
"""
import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTEND = os.path.join(REPO, "build", "attend")
PYDIR = os.path.join(REPO, "python")
sys.path.insert(0, os.path.join(REPO, "tools"))
import data_paths as D  # noqa: E402  (the shared corpora: ../shared/data or $ATTEND_DATA)


def corpus(path, n, skip):
    try:
        data = D.corpus("tatoeba-deu-eng", "tatoeba-deu-eng.train.de.gz")
    except D.MissingData as e:
        sys.exit(f"bench_dask.py: {e}; or pass --input FILE")
    out = []
    with gzip.open(data, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= skip + n:
                break
            if i >= skip:
                out.append(line)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(out)


def count_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def run_cli(model, threads, src, opts):
    t0 = time.perf_counter()
    with open(src, "rb") as f:
        p = subprocess.run([ATTEND, "translate", "-m", model, "-t", str(threads), *opts], stdin=f,
                           capture_output=True)
    dt = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"bench_dask.py: attend translate failed: {p.stderr.decode(errors='replace').strip()}")
    return dt, p.stdout


def run_dask(model, workers, src, opts, chunk_lines, tmp):
    out = os.path.join(tmp, f"out-{workers}.txt")
    st = os.path.join(tmp, f"stats-{workers}.json")
    env = dict(os.environ, PYTHONPATH=PYDIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "attend.dask", "-m", model, "--workers", str(workers), "--threads", "1",
           "--chunk-lines", str(chunk_lines), "--stats", st, "-q", *opts, src, out]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"bench_dask.py: attend.dask failed ({p.returncode}): {p.stderr.strip()}")
    with open(st) as f:
        s = json.load(f)
    with open(out, "rb") as f:
        text = f.read()
    os.unlink(out)
    return dt, s, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    ap.add_argument("--input", help="text to translate (default: --lines Tatoeba German lines)")
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--skip", type=int, default=10000, help="Tatoeba lines skipped first")
    ap.add_argument("--chunk-lines", type=int, default=100)
    ap.add_argument("--workers", default="1,2", help="Dask worker counts, comma-separated")
    ap.add_argument("--cli-threads", default="1,2", help="attend translate -t values")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--beam", type=int, help="--beam N for every run (default: --greedy)")
    a = ap.parse_args()
    try:
        import distributed
    except ImportError:
        sys.exit(f"bench_dask.py: no distributed for {sys.executable}: apt-get install "
                 "python3-distributed and run /usr/bin/python3")
    opts = ["--beam", str(a.beam)] if a.beam else ["--greedy"]
    tmp = tempfile.mkdtemp(prefix="attend-bench-dask-")
    try:
        src = a.input or os.path.join(tmp, "in.txt")
        if not a.input:
            corpus(src, a.lines, a.skip)
        n = count_lines(src)
        workers = [int(x) for x in a.workers.split(",") if x]
        cli_threads = [int(x) for x in a.cli_threads.split(",") if x]
        cli = {t: [] for t in cli_threads}
        dsk = {w: [] for w in workers}
        ref = None
        for r in range(a.rounds):
            for t in cli_threads:
                dt, out = run_cli(a.model, t, src, opts)
                if ref is None:
                    ref = out
                assert out == ref, "attend translate gave different output across thread counts"
                cli[t].append(dt)
            for w in workers:
                dt, s, out = run_dask(a.model, w, src, opts, a.chunk_lines, tmp)
                if out != ref:
                    sys.exit(f"bench_dask.py: attend.dask --workers {w} output differs from attend translate")
                dsk[w].append((dt, s))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)

        med = statistics.median
        print(f"Machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}; "
              f"distributed {distributed.__version__}; model {os.path.basename(a.model)}; "
              f"{n} lines, {' '.join(opts)}, chunks of {a.chunk_lines} lines; "
              f"medians of {a.rounds} round{'s' if a.rounds != 1 else ''}.\n")
        print("| run | processes x threads | wall s | translate s | lines/s (translate) "
              "| lines/s (end to end) | model load s per worker | overhead per chunk ms |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for t in cli_threads:
            w = med(cli[t])
            print(f"| `attend translate -t {t}` | 1 x {t} | {w:.2f} | {w:.2f} | {n / w:.1f} | {n / w:.1f} | | |")
        for w in workers:
            runs = dsk[w]
            wall = med(dt for dt, _ in runs)
            tr = med(s["translate_seconds"] for _, s in runs)
            loads = [x["load_seconds"] for _, s in runs for x in s["workers"].values()]
            over = med((s["translate_seconds"] * len(s["workers"]) - sum(s["model_seconds"]))
                       / max(s["chunks_translated"], 1) for _, s in runs)
            print(f"| `attend.dask --workers {w}` | {w} x 1 | {wall:.2f} | {tr:.2f} | {n / tr:.1f} | "
                  f"{n / wall:.1f} | {med(loads):.3f} | {1000 * over:.1f} |")
        print("\nwall: the whole command (for attend.dask: Python start, cluster start, model loads, "
              "translation, OUT written); translate: attend.dask's translation phase alone; "
              "overhead per chunk: worker time in that phase outside Model.translate, per chunk.")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
