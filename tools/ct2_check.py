#!/usr/bin/python3
"""Check tools/ct2_convert.py's folders: CTranslate2 must compute what attend computes.

    ct2_check.py marian --ct2 BUILD [--lines 100]     # models/de-en.gguf, Multi30k, greedy f32
    ct2_check.py whisper --ct2 BUILD [--shape tiny]   # a random checkpoint, an espeak-ng clip

marian: the first --lines lines of Multi30k test_2016_flickr.de translated by `attend translate
--greedy --split none -b 1` and by CTranslate2 (float32, greedy, batch 1); prints the share
of identical lines and the lines that differ. whisper: tools/bench_whisper.py's random
checkpoint of --shape, a sentence spoken by espeak-ng, its features from `attend features`;
both decode --tokens tokens greedily after <|startoftranscript|> <|en|> <|transcribe|>
<|notimestamps|> (random weights never end); prints whether the ids are equal and where they
first differ. Exit status 0 when the marian share is >= --min-same or the whisper ids match."""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def marian(a):
    import data_paths
    with gzip.open(data_paths.corpus("multi30k", "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")[: a.lines]
    work = os.path.join(a.work, "de-en-ct2")
    if not os.path.exists(os.path.join(work, "model.bin")):
        subprocess.run([sys.executable, os.path.join(HERE, "ct2_convert.py"), "marian", a.model, work, "--ct2", a.ct2],
                       check=True)
    text = "".join(x + "\n" for x in lines)
    cmd = [a.attend, "translate", "-m", a.model, "-t", "2", "-b", "1", "--split", "none", "--greedy"]
    ours = subprocess.run(cmd, input=text, capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
    cmd = [sys.executable, os.path.join(HERE, "ct2_run.py"), "translate", work, a.model, "-b", "1", "--ct2", a.ct2]
    theirs = subprocess.run(cmd, input=text, capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
    same = sum(x == y for x, y in zip(ours, theirs))
    for i, (x, y) in enumerate(zip(ours, theirs)):
        if x != y:
            print(f"line {i + 1}:\n  attend: {x}\n  CT2:    {y}")
    print(f"identical lines: {same}/{len(lines)} ({100.0 * same / len(lines):.1f}%)")
    return 0 if same >= a.min_same * len(lines) else 1


def whisper(a):
    import bench_whisper as B
    paths = B.build(a.work, a.shape)
    model = B.ct2_setup(a.ct2, os.path.join(a.work, a.shape), paths)
    with tempfile.TemporaryDirectory() as tmp:
        wav, feats = os.path.join(tmp, "say.wav"), os.path.join(tmp, "say.npy")
        subprocess.run(["espeak-ng", "-w", wav, a.text], check=True)
        subprocess.run([a.attend, "features", wav, "-o", feats], check=True, capture_output=True)
        out = subprocess.run([a.attend, "transcribe", "-m", paths["f32"], "--language", "en", "--greedy",
                              "--output", "json", "--max-length", str(B.PROMPT + a.tokens), "-t", "2", feats],
                             capture_output=True, text=True, check=True).stdout
        ours = [t for s in json.loads(out)["segments"] for t in s["tokens"]]
        out = subprocess.run([sys.executable, os.path.join(HERE, "ct2_run.py"), "whisper", model, feats,
                              "--tokens", str(a.tokens), "--ct2", a.ct2], capture_output=True, text=True,
                             check=True).stdout
        theirs = [int(x) for x in out.split()]
    first = next((i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y), None)
    print(f"attend: {len(ours)} ids {ours[:12]}...\nCT2:    {len(theirs)} ids {theirs[:12]}...")
    print("ids equal" if ours == theirs else f"ids differ (first at step {first})")
    return 0 if ours == theirs else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=("marian", "whisper"))
    p.add_argument("--ct2", required=True, help="tools/build_ct2.sh's build folder")
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--model", default=os.path.join(ROOT, "models", "de-en.gguf"))
    p.add_argument("--work", help="default build/bench-ct2 (marian), build/bench-whisper (whisper)")
    p.add_argument("--lines", type=int, default=100)
    p.add_argument("--min-same", type=float, default=0.9)
    p.add_argument("--shape", default="tiny", choices=("tiny", "base"))
    p.add_argument("--tokens", type=int, default=60)
    p.add_argument("--text", default="The quick brown fox jumps over the lazy dog.")
    a = p.parse_args(argv)
    a.work = a.work or os.path.join(ROOT, "build", "bench-ct2" if a.kind == "marian" else "bench-whisper")
    return marian(a) if a.kind == "marian" else whisper(a)


if __name__ == "__main__":
    sys.exit(main())
