#!/usr/bin/python3
"""What word timestamps cost: attend transcribe on one 30-s window with and without
--word-timestamps, greedy and with beams, interleaved rounds, medians of attend's own
--timing (encoder, decoder) and of each process's wall clock.

The checkpoint is tools/bench_whisper.py's random one of a published shape (cached in
--work), exported again with that shape's real alignment heads (whisper-tiny's six: the
heads are what word timestamps read, and a random checkpoint's default is one). Random
weights never emit <|endoftext|>: every run decodes --tokens tokens.

    tools/bench_words.py [--shape tiny] [--tokens 100] [--rounds 5] [--threads 2] [--beams 1,5]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import bench_whisper  # noqa: E402

# openai/whisper-tiny's and -base's generation_config alignment_heads
HEADS = {"tiny": [[2, 2], [3, 0], [3, 2], [3, 3], [3, 4], [3, 5]],
         "base": [[3, 1], [4, 2], [4, 3], [4, 7], [5, 1], [5, 2], [5, 4], [5, 6]]}


def with_heads(paths, shape, work):
    """The checkpoint exported with the shape's alignment heads (cached)."""
    out = os.path.join(work, shape, f"whisper-{shape}-heads.gguf")
    if os.path.exists(out):
        return out
    hf = os.path.join(work, shape, "hf-heads")
    shutil.rmtree(hf, ignore_errors=True)
    shutil.copytree(paths["dir"], hf)
    gen = os.path.join(hf, "generation_config.json")
    with open(gen) as f:
        g = json.load(f)
    g["alignment_heads"] = HEADS[shape]
    with open(gen, "w") as f:
        json.dump(g, f)
    subprocess.run([sys.executable, os.path.join(HERE, "export_whisper.py"), hf, out, "--name", f"whisper-{shape}"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def run(attend, model, features, tokens, threads, beams, words):
    """(wall, encoder, decoder) seconds of one transcription."""
    cmd = [attend, "transcribe", "-m", model, "--language", "en", "--max-length", str(tokens + 4), "-t", str(threads),
           "--beam", str(beams), "--timing", "--output", "json", features] + (["--word-timestamps"] if words else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    m = re.search(r"encoder ([\d.]+) s, decoder ([\d.]+) s", p.stderr)
    return wall, float(m.group(1)), float(m.group(2))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench-whisper"))
    p.add_argument("--shape", default="tiny", choices=sorted(HEADS))
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beams", default="1,5")
    a = p.parse_args(argv)
    paths = bench_whisper.build(a.work, a.shape)
    model = with_heads(paths, a.shape, a.work)
    cases = [(int(b), w) for b in a.beams.split(",") for w in (False, True)]
    times = {c: [] for c in cases}
    load = os.getloadavg()[0]
    for _ in range(a.rounds):
        for c in cases:
            times[c].append(run(a.attend, model, paths["features"], a.tokens, a.threads, *c))
    print(f"whisper-{a.shape} (random, {len(HEADS[a.shape])} alignment heads), one 30-s window, {a.tokens} tokens, "
          f"{a.threads} threads, {a.rounds} rounds; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| beams | word timestamps | wall s | encoder s | decoder s |\n|---|---|---|---|---|")
    for (beams, words), rows in times.items():
        med = [statistics.median(x) for x in zip(*rows)]
        print(f"| {beams} | {'yes' if words else 'no'} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
