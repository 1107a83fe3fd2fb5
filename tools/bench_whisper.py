#!/usr/bin/python3
"""Whisper's real-time factor: attend and (given its build) whisper.cpp on the same random
weights and the same 30-s window, greedy, a fixed number of tokens, interleaved rounds.

Built once, cached in --work/SHAPE: a random Whisper checkpoint of a published shape (tiny,
base: tools/reference_whisper.py, the tokenizer folder tests/test_whisper.py writes),
exported by tools/export_whisper.py to f32 and int8 .gguf; for whisper.cpp the same weights
as its ggml file (tools/whisper_ggml.py: f32, and f16 quantized to q8_0 by its
whisper-quantize), a 30-s
clip (16 kHz float32: a tone under noise) and tools/whisper_cpp_run.c compiled against its
library. attend reads log-mel features (one window of random ones), whisper.cpp computes its
own from the clip (its "mel" time, shown apart): the model's work is the same, one encoder
pass over 1500 frames and the same decoder steps.

Random weights never emit <|endoftext|>, so both decode a fixed count: attend with
--max-length (prompt + N), whisper.cpp with max_tokens N - 1 (it samples one token more than
its limit); both after the prompt <|startoftranscript|> <|en|> <|transcribe|>
<|notimestamps|>. Times: attend's own (--timing: load, encoder, decoder), whisper.cpp's own
(whisper_print_timings: load, mel, encode, decode + batchd + prompt), and each process's wall
clock. RTF = (encoder + decoder) / 30 s. Medians of the rounds; each round runs every
system once, in turn.

    tools/bench_whisper.py [--shape tiny] [--tokens 100] [--rounds 3] [--threads 1,2]
                           [--whisper-cpp WHISPER_CPP_DIR]   # a checkout built in its build/
                           [--ct2 BUILD]                     # tools/build_ct2.sh's folder

CTranslate2 (--ct2) reads the same features as attend (it has no log-mel front end; its
users compute features in Python), through tools/ct2_run.py: the checkpoint converted by
tools/ct2_convert.py, float32 or int8 (quantized at load), encode() then generate(), greedy.
"""
import argparse
import glob
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

SECONDS = 30.0  # one window: 3000 feature frames of 10 ms, 480,000 samples at 16 kHz
PROMPT = 4      # <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def build(work, shape, seed=0):
    """The cached checkpoint of `shape`: paths of the HF folder, .gguf files, features."""
    import numpy as np
    import reference_whisper as R
    from test_whisper import write_tokenizer
    base = os.path.join(work, shape)
    paths = {"dir": os.path.join(base, "hf"), "features": os.path.join(base, "window.npy"),
             "clip": os.path.join(base, "clip.f32"), "ggml-f32": os.path.join(base, f"ggml-{shape}-f32.bin"),
             "ggml-q8_0": os.path.join(base, f"ggml-{shape}-q8_0.bin")}
    for dt in ("f32", "int8"):
        paths[dt] = os.path.join(base, f"whisper-{shape}-{dt}.gguf")
    if all(os.path.exists(paths[k]) for k in ("f32", "int8", "features", "clip")):
        return paths
    log(f"building a random whisper-{shape} checkpoint in {base}")
    os.makedirs(base, exist_ok=True)
    config = R.shape_config(shape)
    tok = os.path.join(base, "tokenizer")
    write_tokenizer(tok, config)
    R.save_checkpoint(R.random_model(config, seed=seed), paths["dir"], tok)
    for dt in ("f32", "int8"):
        subprocess.run([sys.executable, os.path.join(HERE, "export_whisper.py"), paths["dir"], paths[dt],
                        "--dtype", dt, "--name", f"whisper-{shape}"], check=True, stdout=subprocess.DEVNULL)
    np.save(paths["features"], R.random_features(config["num_mel_bins"], seed=seed + 1))
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * SECONDS)) / 16000.0
    clip = 0.1 * rng.standard_normal(t.size) + 0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(np.pi * t)
    clip.astype(np.float32).tofile(paths["clip"])
    return paths


def whisper_cpp_setup(wdir, work, paths):
    """Compile tools/whisper_cpp_run.c against the whisper.cpp checkout wdir (built with cmake
    in wdir/build) and write its ggml files; returns the driver's path."""
    libs = sorted(glob.glob(os.path.join(wdir, "build", "**", "libwhisper.so"), recursive=True))
    if not libs:
        raise SystemExit(f"no libwhisper.so under {wdir}/build: build whisper.cpp first (docs/benchmarks.md)")
    libdir = os.path.dirname(libs[0])
    driver = os.path.join(work, "whisper_cpp_run")
    subprocess.run(["cc", "-O2", os.path.join(HERE, "whisper_cpp_run.c"), "-I", os.path.join(wdir, "include"),
                    "-I", os.path.join(wdir, "ggml", "include"), "-L", libdir, "-lwhisper",
                    f"-Wl,-rpath,{libdir}", "-o", driver], check=True)
    if not os.path.exists(paths["ggml-f32"]):
        subprocess.run([sys.executable, os.path.join(HERE, "whisper_ggml.py"), paths["dir"], paths["ggml-f32"]],
                       check=True)
    if not os.path.exists(paths["ggml-q8_0"]):  # from an f16 file, as from whisper.cpp's published ones
        quantize = glob.glob(os.path.join(wdir, "build", "**", "whisper-quantize"), recursive=True)
        if quantize:
            f16 = paths["ggml-q8_0"].replace("q8_0", "f16")
            subprocess.run([sys.executable, os.path.join(HERE, "whisper_ggml.py"), paths["dir"], f16, "--f16"],
                           check=True)
            subprocess.run([quantize[0], f16, paths["ggml-q8_0"], "q8_0"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return driver


def run(cmd, env=None):
    """stdout, stderr and wall seconds of one run (env: variables added)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout, p.stderr, wall


ATTEND_TIME = re.compile(r"timing: load ([\d.]+) s, encoder ([\d.]+) s, decoder ([\d.]+) s, (\d+) steps")


def attend_round(binary, model, features, tokens, threads):
    out, err, wall = run([binary, "transcribe", "-m", model, "--language", "en", "--greedy", "--output", "json",
                          "--max-length", str(PROMPT + tokens), "-t", str(threads), "--timing", features])
    got = sum(len(s["tokens"]) for s in json.loads(out)["segments"])
    if got != tokens:
        raise RuntimeError(f"attend decoded {got} tokens, not {tokens}")
    load, enc, dec, _ = ATTEND_TIME.search(err).groups()
    return {"wall": wall, "load": float(load), "mel": 0.0, "encode": float(enc), "decode": float(dec)}


WCPP_TIME = re.compile(r"whisper_print_timings:\s+(\w+) time =\s+([\d.]+) ms")


def wcpp_round(driver, model, clip, tokens, threads, env=None):
    out, err, wall = run([driver, model, clip, str(threads), str(tokens - 1)], env)
    if int(out.split()[0]) != tokens:
        raise RuntimeError(f"whisper.cpp decoded {out.split()[0]} tokens, not {tokens}")
    t = {k: float(v) / 1e3 for k, v in WCPP_TIME.findall(err)}
    return {"wall": wall, "load": t["load"], "mel": t["mel"], "encode": t["encode"],
            "decode": t["decode"] + t.get("batchd", 0.0) + t.get("prompt", 0.0)}


def ct2_setup(build, work, paths):
    """The CTranslate2 folder of the checkpoint (tools/ct2_convert.py), made once."""
    out = os.path.join(work, "ct2")
    if not os.path.exists(os.path.join(out, "model.bin")):
        subprocess.run([sys.executable, os.path.join(HERE, "ct2_convert.py"), "whisper", paths["dir"], out,
                        "--ct2", build], check=True)
    return out


def ct2_round(build, model, features, tokens, threads, dtype, env=None):
    """tools/ct2_run.py: CTranslate2 fed the same features as attend; its encode() then
    generate() on the encoder output, greedy, the same prompt and token count."""
    out, err, wall = run([sys.executable, os.path.join(HERE, "ct2_run.py"), "whisper", model, features,
                          "--compute", dtype, "-t", str(threads), "--tokens", str(tokens), "--ct2", build], env)
    t = json.loads(err.strip().split("\n")[-1])
    if len(out.split()) != tokens:
        raise RuntimeError(f"CTranslate2 decoded {len(out.split())} tokens, not {tokens}")
    return {"wall": wall, "load": t["load"], "mel": 0.0, "encode": t["encode"], "decode": t["decode"]}


def table(res, tokens, loads):
    rows = ["| system | weights | threads | encoder s | decoder s | ms / token | RTF (enc + dec) / 30 s | mel s "
            "| load s | process wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (system, dt, th), runs in res.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        rtf = (med["encode"] + med["decode"]) / SECONDS
        mel = f"{med['mel']:.3f}" if system.startswith("whisper.cpp") else "(input)"
        rows.append(f"| {system} | {dt} | {th} | {med['encode']:.3f} | {med['decode']:.3f} | "
                    f"{1e3 * med['decode'] / tokens:.2f} | {rtf:.4f} | {mel} | {med['load']:.3f} | {med['wall']:.3f} |")
    rows.append(f"\nMedians of {len(loads)} rounds, {tokens} tokens each; load average before each round: "
                f"{', '.join(f'{x:.2f}' for x in loads)}")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--whisper-cpp", help="a whisper.cpp checkout built with cmake in its build/")
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench-whisper"))
    p.add_argument("--shape", default="tiny", choices=("tiny", "base"))
    p.add_argument("--tokens", type=int, default=100, help="tokens decoded after the prompt")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="2", help="thread counts, e.g. 1,2")
    p.add_argument("--omp-passive", action="store_true",
                   help="whisper.cpp and CTranslate2 also with OMP_WAIT_POLICY=passive (their threads sleep "
                        "at barriers instead of spinning: faster when other processes share the cores)")
    p.add_argument("--dtypes", default="f32,int8", help="attend's; whisper.cpp runs f32 and q8_0 beside them")
    p.add_argument("--ct2", help="tools/build_ct2.sh's build folder: CTranslate2 (float32, int8) beside attend")
    a = p.parse_args(argv)
    paths = build(a.work, a.shape)
    driver = whisper_cpp_setup(a.whisper_cpp, os.path.join(a.work, a.shape), paths) if a.whisper_cpp else None
    ct2_model = ct2_setup(a.ct2, os.path.join(a.work, a.shape), paths) if a.ct2 else None
    runs = []
    for th in (int(x) for x in a.threads.split(",")):
        for dt in a.dtypes.split(","):
            runs.append(("attend", dt, th, lambda dt=dt, th=th: attend_round(a.attend, paths[dt], paths["features"],
                                                                             a.tokens, th)))
            if ct2_model:
                runs.append(("CTranslate2", dt, th, lambda dt=dt, th=th: ct2_round(
                    a.ct2, ct2_model, paths["features"], a.tokens, th, dt)))
                if a.omp_passive and th > 1:
                    runs.append(("CTranslate2, OMP_WAIT_POLICY=passive", dt, th, lambda dt=dt, th=th: ct2_round(
                        a.ct2, ct2_model, paths["features"], a.tokens, th, dt, {"OMP_WAIT_POLICY": "passive"})))
            wdt = "f32" if dt == "f32" else "q8_0"
            if driver and os.path.exists(paths[f"ggml-{wdt}"]):
                runs.append(("whisper.cpp", wdt, th, lambda wdt=wdt, th=th: wcpp_round(
                    driver, paths[f"ggml-{wdt}"], paths["clip"], a.tokens, th)))
                if a.omp_passive and th > 1:
                    runs.append(("whisper.cpp, OMP_WAIT_POLICY=passive", wdt, th, lambda wdt=wdt, th=th: wcpp_round(
                        driver, paths[f"ggml-{wdt}"], paths["clip"], a.tokens, th, {"OMP_WAIT_POLICY": "passive"})))
    res, loads = {(s, dt, th): [] for s, dt, th, _ in runs}, []
    for r in range(a.rounds):
        loads.append(os.getloadavg()[0])
        for system, dt, th, fn in runs:
            res[(system, dt, th)].append(fn())
        log(f"round {r + 1}/{a.rounds} done (load {loads[-1]:.2f})")
    print(table(res, a.tokens, loads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
