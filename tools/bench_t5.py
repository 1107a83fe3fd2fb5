#!/usr/bin/python3
"""Greedy speed of a t5-small-shaped random T5 (issue 29): attend (f32, int8) against the
PyTorch reference (tools/reference_t5.py's model, f32, with a key/value cache as HF
generate() keeps one), batch 1 and 32, on the same thread count.

The model: d_model 512, 6+6 layers, 8 heads, d_kv 64, ReLU FFN 2048, vocabulary 32,128
(a SentencePiece model of 8,000 pieces trained on the shared corpora, the 100 extra ids,
rows without a piece after them), tied output; random weights (reference_t5.t5_random_model),
saved as an HF directory and exported with tools/export_t5.py (f32 and int8), cached in
--work. Every sentence decodes to max_length 20 (a random model rarely says </s>), so both
sides do the same steps. Prints one Markdown table.

    tools/bench_t5.py --threads 2 --sentences 32
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import reference_t5 as R  # noqa: E402

SHAPES = {
    "t5-small": dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8,
                     feed_forward_proj="relu", vocab_size=32128, max_length=20),
    # MADLAD-400-3B's width (d_model 1024, 16 heads of 128, gated-GELU FFN 8192, untied output)
    # with 4 + 4 of its 32 + 32 layers and a 32,128-piece vocabulary, to fit this machine
    "madlad-width": dict(d_model=1024, d_kv=128, d_ff=8192, num_layers=4, num_decoder_layers=4,
                         num_heads=16, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                         vocab_size=32128, max_length=20),
}


def build(work, shape):
    """The HF directory and the f32 / int8 exports of a shape of SHAPES (cached)."""
    import subprocess
    import testlib as T
    hf = os.path.join(work, f"{shape}-shape")
    paths = {dt: os.path.join(work, f"{shape}-shape-{dt}.gguf") for dt in ("f32", "int8")}
    if all(os.path.exists(p) for p in paths.values()) and os.path.isdir(hf):
        return hf, paths
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(os.path.join(work, "t5-8k.model")):
        T.train_spm(work, "t5-8k", T.bilingual_lines(), 8000, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    m = R.t5_random_model(SHAPES[shape], seed=0)
    with open(os.path.join(work, "t5-8k.model"), "rb") as f:
        R.t5_save_hf_dir(m, hf, f.read())
    for dt, p in paths.items():
        subprocess.run([sys.executable, os.path.join(HERE, "export_t5.py"), hf, p, "--dtype", dt],
                       check=True, stdout=subprocess.DEVNULL)
    return hf, paths


def heads(x, m):
    B, T, _ = x.shape
    return x.view(B, T, m.H, m.dk).transpose(1, 2)


def attend_to(m, x, k, v, bias):
    """Multi-head attention of queries from x over cached keys/values [B, H, S, dk]."""
    q = heads(m.q(x), m)
    p = torch.softmax(torch.matmul(q, k.transpose(3, 2)) + bias, dim=-1)
    o = torch.matmul(p, v).transpose(1, 2).reshape(x.shape[0], x.shape[1], m.H * m.dk)
    return m.o(o)


@torch.no_grad()
def reference_greedy(model, batch):
    """Greedy decoding of a batch of source id lists with a key/value cache: sources padded
    with <pad> and masked, every row run to max_length."""
    c = model.config
    B, S = len(batch), max(len(s) for s in batch)
    src = torch.zeros(B, S, dtype=torch.long)
    keep = torch.zeros(B, S)
    for i, s in enumerate(batch):
        src[i, :len(s)] = torch.tensor(s)
        keep[i, :len(s)] = 1
    mask = (1 - keep)[:, None, None, :] * torch.finfo(torch.float32).min
    x = model.shared(src)
    enc_bias = model.encoder.block[0].layer[0].SelfAttention.compute_bias(S, S) + mask
    for blk in model.encoder.block:
        sa, ff = blk.layer
        h = sa.layer_norm(x)
        x = x + sa.SelfAttention(h, h, enc_bias)[0]
        x = x + ff.DenseReluDense(ff.layer_norm(x))
    memory = model.encoder.final_layer_norm(x)
    cross = [(heads(b.layer[1].EncDecAttention.k(memory), b.layer[1].EncDecAttention),
              heads(b.layer[1].EncDecAttention.v(memory), b.layer[1].EncDecAttention)) for b in model.decoder.block]
    cache = [None] * len(model.decoder.block)
    rel = model.decoder.block[0].layer[0].SelfAttention
    tok = torch.full((B, 1), c["decoder_start_token_id"], dtype=torch.long)
    out = []
    for t in range(c["max_length"] - 1):
        y = model.shared(tok)
        bias = rel.compute_bias(t + 1, t + 1)[:, :, -1:, :]
        for l, blk in enumerate(model.decoder.block):
            sa, ca, ff = blk.layer
            a = sa.SelfAttention
            h = sa.layer_norm(y)
            k, v = heads(a.k(h), a), heads(a.v(h), a)
            if cache[l] is not None:
                k, v = torch.cat([cache[l][0], k], 2), torch.cat([cache[l][1], v], 2)
            cache[l] = (k, v)
            y = y + attend_to(a, h, k, v, bias)
            y = y + attend_to(ca.EncDecAttention, ca.layer_norm(y), cross[l][0], cross[l][1], mask)
            y = y + ff.DenseReluDense(ff.layer_norm(y))
        y = model.decoder.final_layer_norm(y)
        if c["tie_word_embeddings"]:
            tok = (y * (c["d_model"] ** -0.5) @ model.shared.weight.t()).argmax(-1)
        else:
            tok = model.lm_head(y).argmax(-1)
        out.append(tok)
    return torch.cat(out, 1)


def timed(fn, rounds):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(prog="bench_t5.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2, help="the best of this many runs (default 2)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="t5-small")
    a = p.parse_args(argv)
    import attend
    import testlib as T
    hf, paths = build(a.work, a.shape)
    model = R.t5_load_hf_dir(hf).eval()
    model.tok = R.T5Tok(os.path.join(hf, "spiece.model"))
    lines = T.corpus_lines("tatoeba", "en", a.sentences, skip=4000)
    if len(lines) < a.sentences:
        sys.exit(f"bench_t5.py: only {len(lines)} corpus lines")
    ids = [model.tok.encode(s) for s in lines]
    torch.set_num_threads(a.threads)
    rows = []
    for batch in (1, 32):
        chunks = [ids[i:i + batch] for i in range(0, len(ids), batch)]
        ref = timed(lambda: [reference_greedy(model, ch) for ch in chunks], a.rounds)
        rows.append((batch, "PyTorch reference f32", ref, 1.0))
        for dt, path in paths.items():
            m = attend.Model(path, threads=a.threads)
            s = timed(lambda: m.translate(lines, greedy=True, batch_size=batch), a.rounds)
            rows.append((batch, f"attend {dt}", s, ref / s))
    print(f"{a.shape} shape, {len(lines)} sentences, greedy to max_length 20, {a.threads} thread(s), "
          f"torch {torch.__version__}\n")
    print("| batch | engine | seconds | sentences/s | vs reference |\n|---|---|---|---|---|")
    for batch, name, s, x in rows:
        print(f"| {batch} | {name} | {s:.2f} | {len(lines) / s:.1f} | {x:.2f}x |")


if __name__ == "__main__":
    main()
