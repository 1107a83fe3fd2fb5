#!/usr/bin/python3
"""Run CTranslate2 once, in its own process, and time it: the other side of attend in
tools/bench_ct2.py and tools/bench_whisper.py (each round starts a fresh process, as each
attend run does).

    ct2_run.py translate CT2_DIR MODEL.gguf [--compute float32|int8] [-t 2] [-b 32] [--beam 1]
               < source lines > translations
    ct2_run.py whisper CT2_DIR FEATURES.npy [--compute ...] [-t 2] [--tokens 100]

translate: MODEL.gguf is the Marian file CT2_DIR was converted from (tools/ct2_convert.py);
its SentencePiece models and pieces tokenize and detokenize exactly as tools/reference.py
(HF's MarianTokenizer) does. Sources get </s>; <pad> is banned as HF bans it. whisper: the
features [n_mels, 3000] of one window, prompt <|startoftranscript|> <|en|> <|transcribe|>
<|notimestamps|>, greedy, exactly --tokens tokens after it (random weights never end).
Timings go to stderr as one JSON line: load s, then translate s (tokenize + translate +
detokenize) or encode s and decode s; whisper prints the ids to stdout.
Options: --ct2 BUILD (tools/build_ct2.sh's folder) for the package."""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ct2_convert import import_ct2  # noqa: E402

COMPUTE = {"f32": "float32", "float32": "float32", "int8": "int8"}


def marian_tokenizer(gguf_path, tmp):
    """reference.MarianTok from the .gguf's own SentencePiece models and pieces."""
    import gguf_io
    import reference as R
    m = gguf_io.GGUFFile(gguf_path).metadata
    files = []
    for side in ("source", "target"):
        path = os.path.join(tmp, f"{side}.spm")
        with open(path, "wb") as f:
            f.write(np.asarray(m[f"tokenizer.{side}_spm"], dtype=np.uint8).tobytes())
        files.append(path)
    src = {p: i for i, p in enumerate(m["tokenizer.source_pieces"])}
    tgt = {p: i for i, p in enumerate(m["tokenizer.target_pieces"])}
    return R.MarianTok(files[0], files[1], src, tgt), list(m["tokenizer.source_pieces"]), tgt


def translate(ct2, a):
    lines = sys.stdin.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    with tempfile.TemporaryDirectory() as tmp:
        tok, src_pieces, tgt_ids = marian_tokenizer(a.gguf, tmp)
        t0 = time.perf_counter()
        tr = ct2.Translator(a.model, device="cpu", compute_type=COMPUTE[a.compute], intra_threads=a.threads,
                            inter_threads=1)
        t1 = time.perf_counter()
        sources = [[src_pieces[i] for i in tok.encode(line)] for line in lines]
        res = tr.translate_batch(sources, max_batch_size=a.batch, batch_type="examples", beam_size=a.beam,
                                 max_decoding_length=a.max_length, suppress_sequences=[["<pad>"]])
        out = [tok.decode([tgt_ids[p] for p in r.hypotheses[0]]) for r in res]
        t2 = time.perf_counter()
    sys.stdout.write("".join(o + "\n" for o in out))
    print(json.dumps({"load": t1 - t0, "translate": t2 - t1, "lines": len(lines)}), file=sys.stderr)


def whisper(ct2, a):
    feats = np.load(a.features).astype(np.float32)[None]
    t0 = time.perf_counter()
    model = ct2.models.Whisper(a.model, device="cpu", compute_type=COMPUTE[a.compute], intra_threads=a.threads,
                               inter_threads=1)
    t1 = time.perf_counter()
    enc = model.encode(ct2.StorageView.from_array(np.ascontiguousarray(feats)), to_cpu=False)
    t2 = time.perf_counter()
    prompt = ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
    # Whisper.generate decodes at most min(max_length / 2, max_length - prompt) tokens
    # (src/models/whisper.cc, as OpenAI's sample_len = n_text_ctx // 2)
    res = model.generate(enc, [prompt], beam_size=1, max_length=max(2 * a.tokens, len(prompt) + a.tokens),
                         suppress_blank=True,
                         suppress_tokens=[-1], return_scores=False)
    t3 = time.perf_counter()
    ids = res[0].sequences_ids[0]
    print(" ".join(map(str, ids)))
    print(json.dumps({"load": t1 - t0, "encode": t2 - t1, "decode": t3 - t2, "tokens": len(ids)}), file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("translate", help="translate standard input, one line per line")
    t.add_argument("model")
    t.add_argument("gguf", help="the Marian .gguf the model was converted from (its tokenizer)")
    t.add_argument("-b", "--batch", type=int, default=32)
    t.add_argument("--beam", type=int, default=1)
    t.add_argument("--max-length", type=int, default=255, help="generated tokens at most (attend's 256 counts <pad>)")
    w = sub.add_parser("whisper", help="encode and decode one window of features")
    w.add_argument("model")
    w.add_argument("features")
    w.add_argument("--tokens", type=int, default=100)
    for s in (t, w):
        s.add_argument("--compute", default="float32", choices=sorted(COMPUTE))
        s.add_argument("-t", "--threads", type=int, default=2)
        s.add_argument("--ct2", help="tools/build_ct2.sh's build folder")
    a = p.parse_args(argv)
    ct2 = import_ct2(a.ct2)
    (translate if a.cmd == "translate" else whisper)(ct2, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
