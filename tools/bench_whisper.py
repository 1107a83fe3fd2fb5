#!/usr/bin/python3
"""Whisper's real-time factor: attend (and whisper.cpp, given its binary) on the same random
weights and the same 30-s window.

Builds once, cached in --work: a random Whisper checkpoint of a published shape (tiny or
base; tools/reference_whisper.py, the tokenizer folder tests/test_whisper.py writes),
exported to .gguf (f32, int8) by tools/export_whisper.py, the same weights as whisper.cpp's
ggml .bin (tools/whisper_ggml.py: f32, and q8_0 through its own `quantize` tool when
--whisper-cpp is given), and one window of random log-mel features (.npy for attend).

Random weights never emit <|endoftext|>, so both decode to a fixed length: attend with
--max-length, whisper.cpp with its token limit (-ml 0 -nf -ng --max-context 0 and a
patched-free `-mc`: see docs/benchmarks.md). Each round runs every system once, interleaved;
the tables give medians. attend's encoder time is the run with one decoded token (load +
encoder + one step); its decoder time the difference to the full run, per token.
whisper.cpp prints its own encode and decode times.

    tools/bench_whisper.py [--shape tiny] [--tokens 100] [--rounds 3] [--threads 2]
                           [--whisper-cpp WHISPER_CPP_DIR/build/bin/whisper-cli]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

SECONDS = 30.0  # one window of features: 3000 frames of 10 ms


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def build(work, shape, seed=0):
    """The cached checkpoint of `shape`: {'dir', 'f32', 'int8', 'features', 'config'}."""
    import numpy as np
    import reference_whisper as R
    from test_whisper import write_tokenizer
    base = os.path.join(work, shape)
    paths = {"dir": os.path.join(base, "hf"), "features": os.path.join(base, "window.npy")}
    for dt in ("f32", "int8"):
        paths[dt] = os.path.join(base, f"whisper-{shape}-{dt}.gguf")
    config = R.shape_config(shape)
    paths["config"] = config
    if all(os.path.exists(paths[k]) for k in ("f32", "int8", "features")):
        return paths
    log(f"building a random whisper-{shape} checkpoint in {base}")
    os.makedirs(base, exist_ok=True)
    tok = os.path.join(base, "tokenizer")
    write_tokenizer(tok, config)
    R.save_checkpoint(R.random_model(config, seed=seed), paths["dir"], tok)
    for dt in ("f32", "int8"):
        subprocess.run([sys.executable, os.path.join(HERE, "export_whisper.py"), paths["dir"], paths[dt],
                        "--dtype", dt, "--name", f"whisper-{shape}"], check=True, stdout=subprocess.DEVNULL)
    np.save(paths["features"], R.random_features(config["num_mel_bins"], seed=seed + 1))
    return paths


def timed(cmd, env=None):
    """Wall and CPU (user + sys of the child) seconds of one run, and its stdout and stderr."""
    e = dict(os.environ, **(env or {}))
    t0 = time.perf_counter()
    r0 = os.times()
    p = subprocess.run(cmd, capture_output=True, text=True, env=e)
    wall = time.perf_counter() - t0
    r1 = os.times()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return wall, cpu, p.stdout, p.stderr


PROMPT = 4  # <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>


def attend_cmd(binary, model, features, tokens, threads):
    """attend transcribe for `tokens` generated tokens after the 4-token prompt."""
    return [binary, "transcribe", "-m", model, "--language", "en", "--greedy", "--output", "json",
            "--max-length", str(PROMPT + tokens), "-t", str(threads), features]


def attend_round(binary, model, features, tokens, threads):
    """attend's wall seconds for the whole window, the encoder part (a one-token run) and the
    decoder's tokens; checks that it decoded `tokens` tokens."""
    full, _, out, _ = timed(attend_cmd(binary, model, features, tokens, threads))
    got = sum(len(s["tokens"]) for s in json.loads(out)["segments"])
    if got != tokens:
        raise RuntimeError(f"attend decoded {got} tokens, not {tokens} (an <|endoftext|>?)")
    one, _, _, _ = timed(attend_cmd(binary, model, features, 1, threads))
    return {"total": full, "encode": one, "decode": full - one}


WCPP_TIME = re.compile(r"whisper_print_timings:\s+(\w+) time =\s+([\d.]+) ms")


def wcpp_round(binary, model, wav, tokens, threads):
    """whisper.cpp's wall seconds and its own timings (load, mel, encode, decode ...) in s."""
    cmd = [binary, "-m", model, "-f", wav, "-t", str(threads), "-l", "en", "-bs", "1", "-bo", "1", "-nf", "-ng",
           "-nt", "-ml", "0", "-mc", "0", "-ntok", str(tokens)] if tokens else None
    wall, _, _, err = timed(cmd)
    t = {k: float(v) / 1e3 for k, v in WCPP_TIME.findall(err)}
    return {"total": wall, "encode": t.get("encode", float("nan")),
            "decode": t.get("decode", 0.0) + t.get("batchd", 0.0) + t.get("prompt", 0.0), "raw": t}


def table(res, tokens):
    rows = ["| system | weights | total s (median) | RTF | encoder s | decoder ms/token |", "|---|---|---|---|---|---|"]
    for (system, dt), runs in res.items():
        tot = statistics.median(r["total"] for r in runs)
        enc = statistics.median(r["encode"] for r in runs)
        dec = statistics.median(r["decode"] for r in runs)
        rows.append(f"| {system} | {dt} | {tot:.3f} | {tot / SECONDS:.4f} | {enc:.3f} | {1e3 * dec / tokens:.2f} |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--whisper-cpp", help="whisper.cpp's whisper-cli binary (built beside its quantize tool)")
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench-whisper"))
    p.add_argument("--shape", default="tiny", choices=("tiny", "base"))
    p.add_argument("--tokens", type=int, default=100, help="tokens decoded after the prompt")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtypes", default="f32,int8")
    a = p.parse_args(argv)
    paths = build(a.work, a.shape)
    systems = [("attend", dt) for dt in a.dtypes.split(",")]
    res = {s: [] for s in systems}
    for r in range(a.rounds):
        for system, dt in systems:
            res[(system, dt)].append(attend_round(a.attend, paths[dt], paths["features"], a.tokens, a.threads))
        log(f"round {r + 1}/{a.rounds}: load {os.getloadavg()[0]:.2f}")
    print(table(res, a.tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
