#!/usr/bin/python3
"""Benchmark attend against the PyTorch reference on an opus-mt-en-de-shaped random model.

Builds (once, cached in --work) a random MarianMT with the opus-mt-en-de shape (d_model 512,
6+6 layers, 8 heads, ffn 2048, vocabulary 58,101, swish, tied embeddings) through
tools/reference.py, exports it to f32, f16 and int8 .gguf files like any user checkpoint, then
times `attend bench` and a PyTorch greedy decoder on the same weights, same shapes and the
same thread counts, interleaved round by round, and reports medians and ratios. A second
section does the same for beam search (--beam, default 4): attend greedy and beam 4 side by
side, and a cached PyTorch beam search. With --md it also writes BENCHMARKS.md (machine,
commands, tables, ratios, the issues' targets).

The PyTorch side is the reference model's own modules driven the way Hugging Face's
generate() drives them: encoder once, cross-attention keys/values once, a self-attention
cache, logits for the last position only, argmax with </s> and <pad> banned (EOS ignored, as
in `attend bench`). Its f32 matmuls go to the BLAS behind Debian's libblas.so.3: `make bench` installs OpenBLAS
(libopenblas0-pthread) first, since the default reference BLAS would flatter attend.

A third section (--nllb, issue 12) does the greedy comparison on an NLLB-200-distilled-600M-
shaped random M2M-100 (tools/reference_m2m100.py -> HF-style directory -> export_m2m100.py,
f16 and int8, about 1.9 GB cached in --work/nllb-600m/) against the M2M-100 reference's f32,
and measures peak RSS against the file size and the time from process start to the first
token, with the file in the page cache and dropped from it. Its tables go to
docs/benchmarks.md (--nllb-md), BENCHMARKS.md keeping a pointer to them (BENCHMARKS.md holds
what is true now in at most 250 lines: tests/test_docs_size.py).

    tools/bench.py                      # print the table
    tools/bench.py --md BENCHMARKS.md   # what `make bench` runs
    tools/bench.py --nllb only --md docs/benchmarks.md   # the NLLB section alone (make bench-nllb)
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

# PyTorch's libgomp spins long at its barriers by default; a short spin, set before torch
# loads libgomp, waits about as briefly as attend's own pool (engine/pool.c), so both
# systems are measured on equal terms.
os.environ.setdefault("GOMP_SPINCOUNT", "3000")
# OpenBLAS's own worker threads (torch's f32 matmuls) likewise spin-wait after each call by
# default; they live in this process while attend runs, so they must sleep promptly too.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import data_paths as D  # noqa: E402  (the shared corpora: ../shared/data or $ATTEND_DATA)

SHAPE = {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8,
         "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048,
         "activation_function": "swish", "share_encoder_decoder_embeddings": True,
         "tie_word_embeddings": True, "max_length": 512}
VOCAB = 58101

# The reference points (CTranslate2 4.8.1, 2 threads, medians), measured on a 2-core
# Intel Sapphire Rapids machine: on another CPU they are context, not a side-by-side result.
CT2_CPU = "Intel Sapphire Rapids"
CT2 = {"f32_b1_ms": 274, "int8_b1_ms": 184, "f32_b64_toks": 563, "int8_b64_toks": 1322,
       "f32_rss": 360, "int8_rss": 150}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# The benchmark models

def train_spm(work, lang, size=1000):
    """A small SentencePiece model in work/ (the benchmarks feed random ids; text is never
    used), trained on 5,000 Tatoeba lines of lang from the shared corpora (tools/data_paths.py;
    a missing file stops here with its name). Its path."""
    import gzip
    import sentencepiece as spm
    prefix = os.path.join(work, f"spm.{lang}")
    if os.path.exists(prefix + ".model"):
        return prefix + ".model"
    data = D.corpus("tatoeba-deu-eng", f"tatoeba-deu-eng.train.{lang}.gz")
    txt = os.path.join(work, f"spm.{lang}.txt")
    with gzip.open(data, "rt", encoding="utf-8") as f, open(txt, "w") as o:
        for i, line in zip(range(5000), f):
            o.write(line)
    spm.SentencePieceTrainer.train(input=txt, model_prefix=prefix, vocab_size=size, minloglevel=2)
    return prefix + ".model"


def build_model(work):
    """HF-style directory + f32/f16/int8 .gguf exports in work/ (reused when present)."""
    import reference as R
    hf = os.path.join(work, "hf")
    paths = {dt: os.path.join(work, f"en-de-shape-{dt}.gguf") for dt in ("f32", "f16", "int8")}
    if all(os.path.exists(p) for p in paths.values()):
        return hf, paths
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(os.path.join(hf, "config.json")):
        spms = [train_spm(work, lang) for lang in ("en", "de")]
        vocab = R.build_vocab(*spms)
        vocab.pop("<pad>")  # <pad> goes last, after the filler pieces
        i = 0
        while len(vocab) < VOCAB - 1:  # opus-mt's vocabulary size: filler pieces
            vocab[f"<filler{i}>"] = len(vocab)
            i += 1
        vocab["<pad>"] = VOCAB - 1
        config = dict(SHAPE, vocab_size=VOCAB, decoder_vocab_size=VOCAB, pad_token_id=VOCAB - 1,
                      decoder_start_token_id=VOCAB - 1, bad_words_ids=[[VOCAB - 1]],
                      eos_token_id=0, forced_eos_token_id=0)
        log("building the random opus-mt-en-de-shaped model ...")
        m = R.random_model(config, seed=0)
        blobs = [open(p, "rb").read() for p in spms]
        R.save_hf_dir(m, hf, blobs[0], blobs[1], vocab)
    for dt, p in paths.items():
        if not os.path.exists(p):
            log(f"exporting {dt} ...")
            subprocess.run([sys.executable, os.path.join(HERE, "export_marian.py"), hf, p,
                            "--dtype", dt], check=True, stdout=subprocess.DEVNULL)
    return hf, paths


# NLLB-200-distilled-600M's shape (facebook/nllb-200-distilled-600M's config.json: model_type
# m2m_100, d_model 1024, 12+12 layers, 16 heads, ffn 4096, vocabulary 256,206, ReLU, scaled and
# shared embeddings tied to the output, 1024 positions), and a tiny one for the tests.
NLLB_SHAPES = {
    "600m": {"d_model": 1024, "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 16,
             "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096,
             "vocab_size": 256206},
    "tiny": {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
             "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
             "vocab_size": 3000},
}
NLLB_COMMON = {"model_type": "m2m_100", "activation_function": "relu", "scale_embedding": True,
               "tie_word_embeddings": True, "max_position_embeddings": 1024, "max_length": 200,
               "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2}
NLLB_LANGUAGES = 202  # NLLB-200's language tokens, after the pieces
NLLB_DTYPES = ("f16", "int8")


def nllb_languages():
    """202 placeholder codes in NLLB's xxx_Xxxx form (the benchmark only needs their number:
    sources start with the first, which is also the target)."""
    return [f"l{i:03d}_Latn" for i in range(NLLB_LANGUAGES)]


def build_nllb_model(work, shape="600m"):
    """An NLLB-shaped random M2M-100 (tools/reference_m2m100.py) saved as an HF-style
    directory (model.safetensors, vocab.json, sentencepiece.bpe.model, __xx__ language
    tokens) and exported by tools/export_m2m100.py in f16 and int8, in work/nllb-SHAPE/
    (reused when present). Returns (hf directory, {dtype: .gguf path})."""
    work = os.path.join(work, f"nllb-{shape}")
    hf = os.path.join(work, "hf")
    paths = {dt: os.path.join(work, f"nllb-{shape}-{dt}.gguf") for dt in NLLB_DTYPES}
    if all(os.path.exists(p) for p in paths.values()):
        return hf, paths
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(os.path.join(hf, "model.safetensors")):
        import reference_m2m100 as M
        sp = train_spm(work, "en")
        vocab = M.m2m_build_vocab(sp)
        langs = nllb_languages()
        V = NLLB_SHAPES[shape]["vocab_size"]
        i = 0
        while len(vocab) < V - NLLB_LANGUAGES:  # NLLB's vocabulary size: filler pieces
            vocab[f"<filler{i}>"] = len(vocab)
            i += 1
        config = dict(NLLB_COMMON, **NLLB_SHAPES[shape])
        log(f"building the random NLLB-200-distilled-600M-shaped model ({shape}) ...")
        m = M.m2m_random_model(config, seed=0)
        with open(sp, "rb") as f:
            M.m2m_save_hf_dir(m, hf + ".tmp", f.read(), vocab, langs)
        del m
        if os.path.exists(hf):
            import shutil
            shutil.rmtree(hf)
        os.replace(hf + ".tmp", hf)
    for dt, p in paths.items():
        if not os.path.exists(p):
            log(f"exporting NLLB-shaped {dt} ...")
            subprocess.run([sys.executable, os.path.join(HERE, "export_m2m100.py"), hf, p, "--dtype", dt,
                            "--name", f"nllb-{shape}-shape"], check=True, stdout=subprocess.DEVNULL)
    return hf, paths


# --------------------------------------------------------------------------------------
# PyTorch: greedy decoding with caches, as HF generate() does it

class CachedAttention:
    """The attention of one cached decoder step over `rows` rows, as HF's generate() computes
    it for both runners: heads split from d, cross-attention keys/values once per source,
    self-attention keys/values appended to a per-layer cache."""

    def __init__(self, rows, d, heads):
        self.rows, self.d, self.heads, self.hd = rows, d, heads, d // heads

    def split(self, t):
        return t.view(self.rows, -1, self.heads, self.hd).transpose(1, 2)

    def cross_kv(self, layers, memory):
        return ([self.split(L.encoder_attn.k_proj(memory)) for L in layers],
                [self.split(L.encoder_attn.v_proj(memory)) for L in layers])

    def append(self, attn, h, sk, sv, i):
        """Layer i's new keys and values from h onto its caches sk[i], sv[i]."""
        import torch
        k, v = self.split(attn.k_proj(h)), self.split(attn.v_proj(h))
        sk[i] = k if sk[i] is None else torch.cat([sk[i], k], 2)
        sv[i] = v if sv[i] is None else torch.cat([sv[i], v], 2)

    def __call__(self, attn, h, k, v):
        """out_proj(softmax(q kᵀ) v) with q from h."""
        q = self.split(attn.q_proj(h) * self.hd ** -0.5)
        p = (q @ k.transpose(-1, -2)).softmax(-1)
        return attn.out_proj((p @ v).transpose(1, 2).reshape(self.rows, 1, self.d))


class TorchRunner:
    def __init__(self, hf):
        import torch
        import reference as R
        self.torch = torch
        self.m = R.load_hf_dir(hf)
        self.m.eval()

    def run(self, src, T, beams=1):
        """Encode src [B,S] and decode exactly T tokens per sentence. Returns (encode_s,
        decode_s). beams > 1: beam search as HF generate(num_beams=...) runs it (encoder
        outputs repeated per beam, cross K/V from them once, 2*beams candidates a step over
        each sentence's beams * V log-probabilities, self-attention caches reordered to the
        surviving beams), </s> banned before the last step so every beam runs to the limit."""
        torch = self.torch
        m, c = self.m, self.m.config
        with torch.no_grad():
            t0 = time.perf_counter()
            memory, _ = m.encode(src)
            B, S, d = memory.shape
            K = beams
            if K > 1:
                memory = memory.repeat_interleave(K, 0)  # HF's _expand_inputs_for_generation
            R = B * K
            layers = m.model.decoder.layers
            att = CachedAttention(R, d, c["decoder_attention_heads"])
            ck, cv = att.cross_kv(layers, memory)
            t1 = time.perf_counter()
            sk, sv = [None] * len(layers), [None] * len(layers)
            tok = torch.full((R, 1), c["decoder_start_token_id"], dtype=torch.long)
            pad, eos = c["pad_token_id"], c["eos_token_id"]
            if K > 1:
                scores = torch.zeros(B, K)
                scores[:, 1:] = -1e9  # HF: only beam 0 is live at the first step
                base = (torch.arange(B) * K)[:, None]
                hist = tok  # HF's input_ids: every beam's tokens so far
            for t in range(T):
                y = m.model.decoder.embed_tokens(tok) * m.embed_scale + m.positions[t:t + 1]
                for i, L in enumerate(layers):  # post-norm blocks
                    att.append(L.self_attn, y, sk, sv, i)
                    y = L.self_attn_layer_norm(y + att(L.self_attn, y, sk[i], sv[i]))
                    y = L.encoder_attn_layer_norm(y + att(L.encoder_attn, y, ck[i], cv[i]))
                    y = L.final_layer_norm(y + L.fc2(L.act(L.fc1(y))))
                logits = m.lm_head(y[:, -1]) + m.final_logits_bias
                logits[:, pad] = float("-inf")
                if K == 1:
                    if t < T - 1:
                        logits[:, eos] = float("-inf")
                    tok = logits.argmax(-1, keepdim=True)
                    continue
                logp = logits.log_softmax(-1)
                if t < T - 1:
                    logp[:, eos] = float("-inf")
                V = logp.shape[1]
                cand = (logp + scores.view(R, 1)).view(B, K * V)
                top, idx = cand.topk(2 * K, dim=1)  # HF keeps 2*beams: room for </s> ones
                scores = top[:, :K].contiguous()  # </s> is banned: the first K survive
                src_row = (torch.div(idx[:, :K], V, rounding_mode="floor") + base).reshape(R)
                tok = (idx[:, :K] % V).reshape(R, 1)
                hist = torch.cat([hist.index_select(0, src_row), tok], 1)
                if t < T - 1:  # HF's _reorder_cache: the caches follow the surviving beams
                    sk = [x.index_select(0, src_row) for x in sk]
                    sv = [x.index_select(0, src_row) for x in sv]
            t2 = time.perf_counter()
            if K > 1:
                self.last_beam = (scores, hist)  # [B, K] sums of log-probs, [R, 1 + T] ids
        return t1 - t0, t2 - t1


class M2MTorchRunner:
    """The M2M-100 reference (tools/reference_m2m100.py) driven as HF generate() drives
    M2M100ForConditionalGeneration: encoder once, cross-attention keys/values once, a
    self-attention cache, pre-LayerNorm blocks and the decoder's final LayerNorm on the new
    position only, logits from the shared embedding (no bias), argmax with </s> banned until
    the last step (EOS ignored, as in `attend bench`; M2M-100 bans nothing else)."""

    def __init__(self, hf):
        import torch
        import reference_m2m100 as M
        self.torch = torch
        self.m = M.m2m_load_hf_dir(hf)
        self.m.eval()
        c = self.m.config
        self.vocab = c["vocab_size"]
        self.eos = c["eos_token_id"]
        self.lang = c["vocab_size"] - NLLB_LANGUAGES  # the first language token
        self.last_tokens = None

    def sources(self, B, S, seed=1):
        """[B,S] random ordinary ids, the first language token first, </s> last."""
        torch = self.torch
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(4, self.lang, (B, S), generator=g)
        ids[:, 0] = self.lang
        ids[:, -1] = self.eos
        return ids

    def run(self, src, T, beams=1):
        """Encode src [B,S] and decode exactly T tokens per sentence (greedy). Returns
        (encode_s, decode_s); the tokens are in self.last_tokens [B,T]."""
        assert beams == 1, "the M2M-100 runner decodes greedily"
        torch = self.torch
        F = torch.nn.functional
        m, c = self.m, self.m.config
        pad = c["pad_token_id"]
        with torch.no_grad():
            t0 = time.perf_counter()
            memory, _ = m.encode(src)
            B, S, d = memory.shape
            layers = m.model.decoder.layers
            att = CachedAttention(B, d, c["decoder_attention_heads"])
            ck, cv = att.cross_kv(layers, memory)
            t1 = time.perf_counter()
            sk, sv = [None] * len(layers), [None] * len(layers)
            tok = torch.full((B, 1), c["decoder_start_token_id"], dtype=torch.long)
            W = m.model.shared.weight
            out = []
            for t in range(T):
                # fairseq positions: step t's token is at t + pad + 1
                y = m.model.shared(tok) * m.embed_scale + m.positions[t + pad + 1:t + pad + 2]
                for i, L in enumerate(layers):  # pre-norm blocks
                    h = L.self_attn_layer_norm(y)
                    att.append(L.self_attn, h, sk, sv, i)
                    y = y + att(L.self_attn, h, sk[i], sv[i])
                    y = y + att(L.encoder_attn, L.encoder_attn_layer_norm(y), ck[i], cv[i])
                    y = y + L.fc2(L.act(L.fc1(L.final_layer_norm(y))))
                logits = F.linear(m.model.decoder.layer_norm(y[:, -1]), W)  # HF's lm_head: no bias
                if t < T - 1:
                    logits[:, self.eos] = float("-inf")
                tok = logits.argmax(-1, keepdim=True)
                out.append(tok)
            t2 = time.perf_counter()
            self.last_tokens = torch.cat(out, 1)
        return t1 - t0, t2 - t1


def random_sources(B, S, seed=1):
    import torch
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB - 1, (B, S), generator=g)
    ids[:, -1] = 0  # </s>
    return ids


# --------------------------------------------------------------------------------------
# Runs

def attend_bench(binary, model, B, S, T, threads, rounds, bandwidth=False, isa=None, beams=1):
    cmd = [binary, "bench", "-m", model, "-b", str(B), "-s", str(S), "-n", str(T), "-t", str(threads),
           "-r", str(rounds), "--json"]
    if beams > 1:
        cmd += ["--beam", str(beams)]
    if not bandwidth:
        cmd.append("--no-bandwidth")
    env = dict(os.environ)
    if isa:
        env["ATTEND_ISA"] = isa
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out), cmd


def quality(binary, model, work, threads=2):
    """int8 against f32 on the shipped model: BLEU on Multi30k test_2016_flickr and the share
    of identical sentences. Returns Markdown, or None without the model; a missing test set
    stops here with its name (tools/data_paths.py)."""
    import gzip
    import bleu
    if not os.path.exists(model):
        return None
    data = {lang: D.corpus("multi30k", f"test_2016_flickr.{lang}.gz") for lang in ("de", "en")}
    with gzip.open(data["de"], "rt", encoding="utf-8") as f:
        src = f.read()
    with gzip.open(data["en"], "rt", encoding="utf-8") as f:
        refs = f.read().rstrip("\n").split("\n")
    q = os.path.join(work, "de-en-int8.gguf")
    subprocess.run([binary, "quantize", model, q], check=True)
    outs, secs = {}, {}
    for name, path in (("f32", model), ("int8", q)):
        t0 = time.perf_counter()
        p = subprocess.run([binary, "translate", "-m", path, "-t", str(threads), "-b", "32"], input=src,
                           capture_output=True, text=True, check=True)
        secs[name] = time.perf_counter() - t0
        outs[name] = p.stdout.rstrip("\n").split("\n")
    b = {k: bleu.corpus_bleu(v, refs)[0] for k, v in outs.items()}
    same = sum(a == c for a, c in zip(outs["f32"], outs["int8"])) / len(refs)
    ok_bleu, ok_same = b["f32"] - b["int8"] <= 0.5, same >= 0.9
    return "\n".join([
        "## int8 quality on the shipped model\n",
        f"`models/de-en.gguf` as shipped (f16) and `attend quantize models/de-en.gguf` (int8) on Multi30k "
        f"test_2016_flickr ({len(refs)} sentences, de→en, `-t {threads} -b 32`), BLEU from tools/bleu.py:\n",
        "| | BLEU | time |", "|---|---|---|",
        f"| shipped (f16) | {b['f32']:.2f} | {secs['f32']:.1f} s |",
        f"| int8 | {b['int8']:.2f} | {secs['int8']:.1f} s |", "",
        "| target | measured | |", "|---|---|---|",
        f"| int8 BLEU within 0.5 of f32 | {b['int8'] - b['f32']:+.2f} | {'met' if ok_bleu else 'NOT met'} |",
        f"| ≥ 90% of sentences identical | {100 * same:.1f}% | {'met' if ok_same else 'NOT met'} |", ""])


def machine():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = f"{kb / 1048576:.1f} GiB"
    except OSError:
        pass
    flags = info.get("Flags", "").split()
    simd = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                        "avx_vnni", "amx_int8") if f in flags]
    return {
        "cpu": info.get("Model name", platform.processor()),
        "cpus": info.get("CPU(s)", "?"),
        "threads_per_core": info.get("Thread(s) per core", "?"),
        "l2": info.get("L2 cache", "?"), "l3": info.get("L3 cache", "?"),
        "mem": mem, "simd": " ".join(simd),
        "kernel": platform.release(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def torch_blas():
    """The BLAS library Debian's torch calls for f32 matmuls: libblas.so.3 through the
    alternatives system (the reference netlib BLAS unless OpenBLAS is installed)."""
    try:
        target = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    except OSError:
        return "unknown"
    if "openblas" in target:
        return f"OpenBLAS ({target})"
    if target.endswith("/blas/libblas.so.3"):
        return f"reference netlib BLAS, unoptimised ({target}): install libopenblas0-pthread"
    return target


def others_running():
    """Other heavy processes (a shared machine): names of the busiest, for the report."""
    try:
        out = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu"], capture_output=True,
                             text=True).stdout.splitlines()[1:8]
    except OSError:
        return []
    busy = []
    for line in out:
        f = line.split(None, 2)
        if len(f) < 3 or int(f[0]) == os.getpid() or f[2].split()[0].endswith(("/attend", "ps")):
            continue
        try:
            if float(f[1]) > 20:
                busy.append(f"`{' '.join(f[2].split()[:3])[:60]}` ({f[1]}% CPU)")
        except ValueError:
            pass
    return busy



def add_ratios(md, ratios):
    """A ratio table's section, when there is one."""
    if ratios:
        md.append("### Ratios (same threads, same shapes, interleaved)\n")
        md += ratios
        md.append("")


def add_targets(md, measured, rows):
    """A target table: target, measured, verdict."""
    md.append(f"| target | {measured} | |")
    md.append("|---|---|---|")
    md += rows
    md.append("")


def print_tables(lines, ratios, targets):
    """Results, ratios (when any) and targets on the terminal, a blank line between."""
    print("\n".join(lines))
    if ratios:
        print()
        print("\n".join(ratios))
    print()
    print("\n".join(targets))


# --------------------------------------------------------------------------------------
# NLLB-200-distilled-600M shape (issue 12): greedy speed, peak RSS and load time

NLLB_HEADING = "## NLLB-200-distilled-600M shape (issue 12)"
LOAD_RUNS = 3  # warm and cold load measurements per dtype and round


def page_cache_mib(path):
    """MiB of path in the page cache (fincore), or None when it cannot be told."""
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                             capture_output=True, text=True, check=True).stdout
        return int(out.split()[0]) / 2 ** 20
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def evict(path):
    """Drop path's pages from the page cache (POSIX_FADV_DONTNEED: clean pages that no
    process maps go; no privileges needed, other files' pages stay)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages (a file just written) would stay
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def load_time(binary, model, threads, S, cold):
    """Process start -> model opened -> first translated token, for one fresh process:
    `attend bench -b 1 -s S -n 2 -r 1` (the warm-up round translates one S-token source to
    its first two tokens: the forced language token and the first token the model chooses).
    Times from just before this process spawns it (wall clock): to attend's main(), to the
    model opened (attend_load: map, checks, CRC-32s, packing), to the end of that first
    round. cold: the file's pages are dropped from the page cache first."""
    if cold:
        evict(model)
    else:  # read it in again: on this VM idle page cache was seen to shrink with memory free
        with open(model, "rb") as f:
            while f.read(1 << 24):
                pass
    cached = page_cache_mib(model)
    cmd = [binary, "bench", "-m", model, "-b", "1", "-s", str(S), "-n", "2", "-t", str(threads), "-r", "1",
           "--no-bandwidth", "--no-peak", "--json"]
    t0 = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return {"total_ms": 1e3 * (j["unix_first_round"] - t0), "exec_ms": 1e3 * (j["unix_main"] - t0),
            "opened_ms": 1e3 * (j["unix_loaded"] - t0), "load_ms": j["load_ms"],
            "first_round_ms": j["first_round_ms"], "cached_mib": cached}, cmd


def nllb_section(a, threads, S, T):
    """Build (once) and measure the NLLB-shaped model: attend f16 / int8 against the PyTorch
    reference's f32 (greedy, interleaved rounds), load times warm and cold, the issue's
    targets. Prints the tables; returns the report section as Markdown lines."""
    t_start = time.time()
    batches = [int(x) for x in a.nllb_batches.split(",")]
    dtypes = a.nllb_dtypes.split(",")
    hf, paths = build_nllb_model(a.work, a.nllb_shape)
    busy_before = others_running()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    runner = None if a.no_torch else M2MTorchRunner(hf)
    th2 = 2 if 2 in threads else threads[-1]
    res, cmds, loads = {}, {}, {}
    for r in range(a.rounds):
        log(f"NLLB-shaped model: round {r + 1}/{a.rounds}")
        greedy_round(r, res, cmds, a.attend, paths, runner, runner.sources if runner else None, threads, batches,
                     dtypes, S, T, a.per_round, bandwidth=not a.no_bandwidth, batched_reps=1)
        for dt in dtypes:  # warm and cold alternating, LOAD_RUNS of each (a run takes 1-3 s)
            for _ in range(LOAD_RUNS):
                for cold in (True, False) if r % 2 else (False, True):
                    x, cmd = load_time(a.attend, paths[dt], th2, S, cold)
                    loads.setdefault((dt, cold), []).append(x)
                    cmds[("load", dt)] = cmd
        # the next round's runs start from a cached file
        for dt in dtypes:
            with open(paths[dt], "rb") as f:
                while f.read(1 << 24):
                    pass
    busy = sorted(set(busy_before + others_running()))

    table, lines, ratios = greedy_tables(res, threads, batches, dtypes, runner is not None)

    def summary(key):
        return summarize(res.get(key))
    size_mib = {dt: os.path.getsize(p) / 2 ** 20 for dt, p in paths.items()}
    load_lines = ["| file | page cache | process start → first token, ms (median / min–max) | "
                  "of which: to main() | opening the model (attend_load) | first translation (2 tokens) | "
                  "file cached before, MiB |", "|---|---|---|---|---|---|---|"]
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    for dt in dtypes:
        for cold in (False, True):
            xs = loads.get((dt, cold))
            if not xs:
                continue
            cached = [x["cached_mib"] for x in xs if x["cached_mib"] is not None]
            lo_c, hi_c = (f"{min(cached):.0f}", f"{max(cached):.0f}") if cached else ("?", "?")
            cached_txt = f"{lo_c} of {size_mib[dt]:.0f}" if lo_c == hi_c else f"{lo_c}–{hi_c} of {size_mib[dt]:.0f}"
            load_lines.append(
                f"| {dt} ({size_mib[dt]:.0f} MiB) | {'cold' if cold else 'warm'} | {med(xs, 'total_ms'):.0f} / "
                f"{min(x['total_ms'] for x in xs):.0f}–{max(x['total_ms'] for x in xs):.0f} | "
                f"{med(xs, 'exec_ms'):.0f} | {med(xs, 'load_ms'):.0f} | {med(xs, 'first_round_ms'):.0f} | {cached_txt} |")

    targets = []

    def target(text, value, ok):
        targets.append(f"| {text} | {value} | {'met' if ok else 'NOT met'} |")
    if runner and 1 in batches and "int8" in dtypes:
        for th in threads:
            ref, s = summary(("torch", "f32", 1, th)), summary(("attend", "int8", 1, th))
            if ref and s:
                x = ref["ms_per_sentence"] / s["ms_per_sentence"]
                target(f"int8 batch-1 latency ≥ 8x the PyTorch reference's f32 ({th} thread{'s' if th > 1 else ''})",
                       f"{x:.2f}x ({s['ms_per_sentence']:.0f} vs {ref['ms_per_sentence']:.0f} ms)", x >= 8)
    for B in batches:
        for th in threads:
            s = summary(("attend", "int8", B, th))
            if s and "peak_rss_mib" in s and "int8" in size_mib and (B == 1 or th == th2):
                x = s["peak_rss_mib"] / size_mib["int8"]
                target(f"peak RSS, int8, batch {B}, {th} thread{'s' if th > 1 else ''} ≤ 1.2x the file "
                       f"({1.2 * size_mib['int8']:.0f} MiB)", f"{s['peak_rss_mib']:.0f} MiB, {x:.2f}x", x <= 1.2)
    for cold in (False, True):
        xs = loads.get(("int8", cold))
        if xs:
            v = med(xs, "total_ms")
            target(f"load (process start → first token) ≤ 1 s, int8, page cache {'cold' if cold else 'warm'}",
                   f"{v / 1e3:.2f} s", v <= 1000)
    # what bounds the targets, from the shapes and the measurements
    shape = dict(NLLB_COMMON, **NLLB_SHAPES[a.nllb_shape])
    d, f, L, V = shape["d_model"], shape["decoder_ffn_dim"], shape["decoder_layers"], shape["vocab_size"]
    notes = []
    s8 = {th: summary(("attend", "int8", 1, th)) for th in threads}
    refs = {th: summary(("torch", "f32", 1, th)) for th in threads}
    if runner and all(s8.values()) and all(refs.values()) and all("step_weight_mb" in x for x in s8.values()):
        f32_mb = 4 * (L * (6 * d * d + 2 * d * f + 13 * d + f) + V * d) / 1e6  # weights, biases, norms a step reads
        i8_mb = next(iter(s8.values()))["step_weight_mb"]
        proj_mb = (V * d + 8 * V) / 1e6
        def per(th):
            x = s8[th]
            txt = (f"{th} thread{'s' if th > 1 else ''}: attend {x['step_gbps']:.1f} GB/s, the reference "
                   f"{f32_mb / (refs[th]['decode_ms'] / T):.1f} GB/s")
            if x.get("triad_gbps"):
                ratio = refs[th]["ms_per_sentence"] / x["ms_per_sentence"]
                txt += (f"; attend at {100 * x['bw_fraction']:.0f}% of the triad ({x['triad_gbps']:.1f} GB/s), where "
                        f"the same reference timings would give {ratio * x['triad_gbps'] / x['step_gbps']:.1f}x")
            return txt
        notes.append(
            f"- int8 batch-1 latency: a batch-1 decoder step reads every decoder weight once, so both systems are "
            f"bound by memory bandwidth. attend's int8 step reads {i8_mb:.0f} MB ({proj_mb:.0f} MB of it the "
            f"{V:,} × {d} output projection), the reference's f32 step {f32_mb:.0f} MB: at equal bandwidth the "
            f"ratio would be {f32_mb / i8_mb:.1f}x, and 8x needs the reference at {f32_mb / i8_mb / 8:.2f}x attend's "
            "bandwidth or less. "
            f"Step bandwidth: {'. '.join(per(th) for th in threads)}. Beyond that, only fewer bytes a step on "
            "attend's side (e.g. 4-bit weights for the output projection) raise the ratio.")
    b1 = summary(("attend", "int8", 1, th2))
    bb = [B for B in batches if B > 1]
    if bb and b1 and "peak_rss_mib" in b1:
        B = bb[-1]
        sb = summary(("attend", "int8", B, th2))
        if sb and "peak_rss_mib" in sb:
            cache = L * 2 * B * S * d * 4 / 2 ** 20  # cross-attention keys and values
            selfc = L * 2 * B * T * d * 4 / 2 ** 20  # self-attention keys and values after T steps
            logits = B * V * 4 / 2 ** 20
            notes.append(
                f"- Peak RSS at batch {B}: {sb['peak_rss_mib'] - b1['peak_rss_mib']:.0f} MiB above batch 1, what the "
                f"batch's decoder state needs at least: cross-attention keys and values ({L} layers × 2 × {B} × {S} "
                f"× {d} floats, {cache:.0f} MiB), self-attention keys and values after {T} steps ({selfc:.0f} MiB) "
                f"and one step's logits ({B} × {V:,} floats, {logits:.0f} MiB), {cache + selfc + logits:.0f} MiB "
                f"together. The weights themselves take {b1['peak_rss_mib']:.0f} MiB at batch 1 "
                f"({b1['peak_rss_mib'] / size_mib['int8']:.2f}x the file): the packed matrices, the vectors, the "
                "vocabulary and tokenizer, the file's mapping let go after loading.")

    print("\n".join(lines))
    if ratios:
        print()
        print("\n".join(ratios))
    print()
    print("\n".join(load_lines))
    print()
    print("\n".join(targets))
    if notes:
        print()
        print("\n".join(notes))

    mc = machine()
    isa = next((s.get("isa") for *_, s in table if s.get("isa")), "?")
    ex = cmds.get(("attend", "int8", 1, th2)) or next(c for k, c in cmds.items() if k[0] == "attend")
    rel = lambda c: " ".join(shlex.quote(x) for x in c).replace(ROOT + "/", "")  # noqa: E731
    import torch
    md = [NLLB_HEADING + "\n"]
    md.append(f"Written by `tools/bench.py` (`make bench`, or this section alone: `make bench-nllb` = "
              f"`tools/bench.py --nllb only --md docs/benchmarks.md`) on "
              f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} in {(time.time() - t_start) / 60:.1f} min.\n")
    md.append(f"- Machine: {mc['cpu']}, {mc['cpus']} logical CPUs; memory {mc['mem']}; Linux {mc['kernel']}; "
              f"SIMD {mc['simd']}; attend kernel set `{isa}`. Load average at the start {load_before}, at the end "
              f"{mc['load']}." + (f" **Shared machine**: other busy processes during the run: {', '.join(busy)}; "
                                  "absolute times are depressed, the ratios (interleaved) less so." if busy else ""))
    md.append(f"- Model: random weights in the shape of facebook/nllb-200-distilled-600M (model_type m2m_100, "
              f"d_model {shape['d_model']}, {shape['encoder_layers']}+{shape['decoder_layers']} layers, "
              f"{shape['encoder_attention_heads']} heads, ffn {shape['encoder_ffn_dim']}, vocabulary "
              f"{shape['vocab_size']:,} of which {NLLB_LANGUAGES} language tokens, ReLU, scaled embeddings shared "
              f"by encoder, decoder and output, {shape['max_position_embeddings']} positions), made by "
              "`tools/reference_m2m100.py` (`m2m_random_model`, `m2m_save_hf_dir`: an HF-style directory with "
              "model.safetensors, vocab.json, sentencepiece.bpe.model and `__xx__` language tokens; the codes are "
              "placeholders, only their number matters) and exported with `tools/export_m2m100.py --dtype "
              f"f16|int8`: " + ", ".join(f"{dt} {size_mib[dt]:.0f} MiB" for dt in dtypes) +
              f" (`{os.path.relpath(os.path.dirname(paths[dtypes[0]]), ROOT)}/`, built on the first run).")
    md.append(f"- Speed: as the opus-mt-en-de-shaped tables of BENCHMARKS.md: {S}-token random sources (the first language "
              f"token first, </s> last), exactly {T} target tokens (the first forced to that language, </s> "
              f"banned before the last), greedy; {a.rounds} interleaved rounds, {a.per_round} timed repetitions "
              "per round after a warm-up at batch 1 (at batch > 1, to keep `make bench` short: attend one timed "
              "run per round after its warm-up, PyTorch one run in the first round only), medians of the "
              "round medians, min/max over everything; peak RSS is the `attend bench` process's `VmHWM` "
              "(maximum over rounds).")
    md.append("- PyTorch reference: `tools/reference_m2m100.py`'s model (f32) driven as HF `generate()` drives "
              "M2M100ForConditionalGeneration: encoder once, cross K/V once, cached self-attention, pre-LayerNorm "
              "blocks, the decoder's final LayerNorm and the logits (shared embedding, no bias) for the new "
              f"position only; `torch.set_num_threads` = threads; torch {torch.__version__}, BLAS: {torch_blas()}.")
    md.append(f"- Load: a fresh `attend bench -b 1 -s {S} -n 2 -r 1` process per measurement; \"process start → "
              "first token\" is wall-clock time from just before tools/bench.py spawns it to the end of its first "
              f"round, which translates one {S}-token source to its first two tokens (the forced language token "
              "and the first token the model chooses): exec and dynamic linking, opening the model "
              "(`attend_load`: mapping the file, binding and checking the tensors with the int8 row sums, the "
              "CRC-32 of every tensor, the finiteness scan, packing the matrices into the kernels' layout), and "
              f"that translation ({th2} thread{'s' if th2 > 1 else ''}). Warm: the file was read just before, so it is in the page "
              "cache (on this VM a model file was once seen 545 of 601 MiB cached after some idle minutes, "
              "with 17 GiB free; a kernel `kdamond` thread runs); cold: its pages were "
              "dropped first with `posix_fadvise(POSIX_FADV_DONTNEED)`, so the file is read from disk (the "
              f"\"file cached before\" column, from `fincore`, checks both). {LOAD_RUNS} warm and {LOAD_RUNS} cold "
              f"runs per dtype and round, alternating; medians over all {LOAD_RUNS * a.rounds}.")
    md.append("")
    md.append("Commands:\n")
    md.append("```")
    md.append("tools/bench.py --nllb only --md docs/benchmarks.md   # this section alone (make bench-nllb)")
    md.append(rel(ex))
    if ("load", "int8") in cmds:
        md.append(rel(cmds[("load", "int8")]) + "   # load time")
    md.append("```\n")
    md += lines
    md.append("")
    add_ratios(md, ratios)
    md.append("### Load time\n")
    md += load_lines
    md.append("")
    md.append("### Targets (issue 12)\n")
    add_targets(md, "measured", targets)
    if notes:
        md += notes
        md.append("")
    return md


def replace_section(path, heading, section):
    """Put section (lines, its heading first) into the report at path in place of the one
    under heading (up to the next "## " heading), or before the first kept hand-written
    section, or at the end."""
    try:
        with open(path) as f:
            lines = f.read().rstrip("\n").split("\n")
    except OSError:
        lines = ["# Benchmarks", ""]
    section = list(section)
    while section and not section[-1].strip():
        section.pop()
    section.append("")
    start = next((i for i, l in enumerate(lines) if l.strip() == heading), None)
    if start is None:
        at = next((i for i, l in enumerate(lines) if l.strip() in KEPT_HEADINGS), len(lines))
        if at == len(lines) and lines[-1].strip():
            lines.append("")
        lines[at:at] = section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = section
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


def torch_time(runner, src, T, threads, reps, warm, beams=1):
    """The PyTorch runner on src [B,S] at `threads`: a 2-token warm-up when warm, then reps
    timed runs of T tokens; the median run as a result row."""
    import torch
    torch.set_num_threads(threads)
    B = src.shape[0]
    if warm:
        runner.run(src, 2, beams=beams)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        enc, dec = runner.run(src, T, beams=beams)
        times.append((time.perf_counter() - t0, enc, dec))
    times.sort()
    tot, enc, dec = times[len(times) // 2]
    return {"ms_per_sentence": 1e3 * tot / B, "ms_per_sentence_min": 1e3 * times[0][0] / B,
            "tok_s": B * T / tot, "tok_s_max": B * T / times[0][0],
            "encode_ms": 1e3 * enc, "decode_ms": 1e3 * dec}


def greedy_round(r, res, cmds, binary, paths, runner, sources, threads, batches, dtypes, S, T, per_round,
                 bandwidth=True, batched_reps=None):
    """Round r of the greedy comparison: every (threads, batch) configuration, attend in each
    dtype then the PyTorch reference (batch 1 every round, per_round repetitions; a batch > 1
    once, in the first round: those runs take a minute or more). Rows go to res[(system,
    dtype, B, threads)], commands to cmds; sources(B, S) gives PyTorch's source ids.
    batched_reps: attend's timed repetitions at batch > 1 (default per_round)."""
    for th in threads:
        for B in batches:
            for dt in dtypes:
                # bandwidth at batch 1 in every round, beside that round's step: the
                # machine's bandwidth drifts between rounds (22-35 GB/s in one session)
                reps = per_round if B == 1 or batched_reps is None else batched_reps
                j, cmd = attend_bench(binary, paths[dt], B, S, T, th, reps, bandwidth=bandwidth and B == 1)
                assert j["tokens"] == B * T, j
                res.setdefault(("attend", dt, B, th), []).append(j)
                cmds[("attend", dt, B, th)] = cmd
            if runner and (B == 1 or r == 0):
                res.setdefault(("torch", "f32", B, th), []).append(
                    torch_time(runner, sources(B, S), T, th, per_round if B == 1 else 1, r == 0))


def summarize(rows):
    """Medians over rounds (min / max for the extremes, max for peak RSS) of result rows."""
    if not rows:
        return None
    s = {k: statistics.median(x[k] for x in rows) for k in ("ms_per_sentence", "tok_s", "encode_ms", "decode_ms")}
    s["ms_min"] = min(x["ms_per_sentence_min"] for x in rows)
    s["tok_s_max"] = max(x["tok_s_max"] for x in rows)
    for k in ("peak_rss_mib", "step_ms", "step_gbps", "step_weight_mb", "isa"):
        if k in rows[0]:
            s[k] = rows[0][k] if k == "isa" else (max if k == "peak_rss_mib" else statistics.median)(x[k] for x in rows)
    bwrow = [x for x in rows if x.get("triad_gbps")]
    if bwrow:  # medians over rounds of each round's own figures
        for k in ("triad_gbps", "bw_fraction", "read_gbps", "read_fraction"):
            if all(k in x for x in bwrow):
                s[k] = statistics.median(x[k] for x in bwrow)
    return s


def greedy_tables(res, threads, batches, dtypes, with_torch):
    """(table rows, result table lines, ratio table lines) of a greedy comparison."""
    table = []
    for th in threads:
        for B in batches:
            for sysname, dt in [("attend", d) for d in dtypes] + ([("torch", "f32")] if with_torch else []):
                s = summarize(res.get((sysname, dt, B, th)))
                if s:
                    table.append((sysname, dt, B, th, s))
    lines = []
    hdr = ("| system | dtype | batch | threads | ms/sentence (median / min) | target tok/s (median / max) "
           "| encoder ms | decoder ms | peak RSS MiB | step: GB/s, % of triad, % of read-only |")
    lines.append(hdr)
    lines.append("|" + "---|" * 10)
    for sysname, dt, B, th, s in table:
        rss = f"{s['peak_rss_mib']:.0f}" if "peak_rss_mib" in s else "—"
        bwtxt = "—"
        if B == 1 and "step_gbps" in s:
            bwtxt = f"{s['step_gbps']:.1f}"
            if "bw_fraction" in s:
                bwtxt += f", {100 * s['bw_fraction']:.0f}% of {s['triad_gbps']:.1f}"
            if s.get("read_gbps"):
                bwtxt += f", {100 * s['read_fraction']:.0f}% of {s['read_gbps']:.1f}"
        name = "attend" if sysname == "attend" else "PyTorch reference"
        lines.append(f"| {name} | {dt} | {B} | {th} | {s['ms_per_sentence']:.1f} / {s['ms_min']:.1f} | "
                     f"{s['tok_s']:.0f} / {s['tok_s_max']:.0f} | {s['encode_ms']:.1f} | {s['decode_ms']:.1f} | "
                     f"{rss} | {bwtxt} |")
    ratios = []
    if with_torch:
        ratios.append("| dtype | batch | threads | attend speed-up over the PyTorch reference (median time ratio) |")
        ratios.append("|---|---|---|---|")
        for th in threads:
            for B in batches:
                ref = summarize(res.get(("torch", "f32", B, th)))
                for dt in dtypes:
                    s = summarize(res.get(("attend", dt, B, th)))
                    if ref and s:
                        ratios.append(f"| {dt} | {B} | {th} | {ref['ms_per_sentence'] / s['ms_per_sentence']:.1f}x |")
    return table, lines, ratios


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attend", default=os.path.join(ROOT, "build", "attend"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--per-round", type=int, default=3, help="timed repetitions per round (default 3)")
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--tgt-len", type=int, default=20)
    p.add_argument("--batches", default="1,64")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--dtypes", default="f32,f16,int8")
    p.add_argument("--beam", type=int, default=4, help="beam search section: beams (default 4; 1: no section)")
    p.add_argument("--beam-runs", default="1x2,32x2,1x1",
                   help="beam section: BATCHxTHREADS configurations (default 1x2,32x2,1x1)")
    p.add_argument("--beam-dtypes", default="f32,int8")
    p.add_argument("--no-torch", action="store_true", help="attend only")
    p.add_argument("--no-bandwidth", action="store_true", help="skip attend bench's bandwidth measurements")
    p.add_argument("--md", help="write this Markdown report (BENCHMARKS.md)")
    p.add_argument("--nllb", choices=("yes", "no", "only"), default="yes",
                   help="the NLLB-200-distilled-600M-shaped section (issue 12): yes (default: written into "
                        "--nllb-md), no, only (with --md: replace just that section of that file)")
    p.add_argument("--nllb-md", default=os.path.join(ROOT, "docs", "benchmarks.md"),
                   help="where --md's run puts the NLLB section (default docs/benchmarks.md); the report "
                        "points there")
    p.add_argument("--nllb-batches", default="1,32", help="NLLB section: batch sizes (default 1,32)")
    p.add_argument("--nllb-dtypes", default=",".join(NLLB_DTYPES), help="NLLB section: dtypes (default f16,int8)")
    p.add_argument("--nllb-shape", choices=sorted(NLLB_SHAPES), default="600m",
                   help="NLLB section: 600m (the real shape, default) or tiny (for the tests)")
    a = p.parse_args(argv)
    batches = [int(x) for x in a.batches.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    dtypes = a.dtypes.split(",")
    K = a.beam
    beam_runs = [tuple(int(v) for v in x.split("x")) for x in a.beam_runs.split(",")] if K > 1 else []
    beam_threads = [th for _, th in beam_runs]
    beam_dtypes = a.beam_dtypes.split(",")
    S, T = a.src_len, a.tgt_len
    if a.nllb == "only":
        nmd = nllb_section(a, threads, S, T)
        if a.md:
            replace_section(a.md, NLLB_HEADING, nmd)
            log(f"wrote the NLLB section of {a.md}")
        return 0
    t_start = time.time()
    hf, paths = build_model(a.work)
    busy_before = others_running()
    runner = None if a.no_torch else TorchRunner(hf)
    import torch

    res = {}   # (system, dtype, B, threads) -> list of per-round dicts
    cmds = {}
    for r in range(a.rounds):
        log(f"round {r + 1}/{a.rounds}")
        greedy_round(r, res, cmds, a.attend, paths, runner, random_sources, threads, batches, dtypes, S, T,
                     a.per_round, bandwidth=not a.no_bandwidth)
        # beam search: attend greedy and beam K side by side (their order alternating by
        # round), then the PyTorch reference's beam K
        for B, th in beam_runs:
            for dt in beam_dtypes:
                for beams in ((1, K) if r % 2 == 0 else (K, 1)):
                    j, cmd = attend_bench(a.attend, paths[dt], B, S, T, th, a.per_round, beams=beams)
                    assert j["tokens"] == B * T and j["steps"] == T, j
                    res.setdefault(("attend", dt, B, th, beams), []).append(j)
                    cmds[("attend", dt, B, th, beams)] = cmd
            if runner and (B == 1 or r == 0):
                res.setdefault(("torch", "f32", B, th, K), []).append(
                    torch_time(runner, random_sources(B, S), T, th, a.per_round if B == 1 else 1, r == 0, beams=K))

    def summary(key):
        return summarize(res.get(key))

    table, lines, ratios = greedy_tables(res, threads, batches, dtypes, runner is not None)

    # targets (the issue's; CTranslate2 numbers are the measurements on this machine kind)
    def get(dt, B, th):
        return summary(("attend", dt, B, th))
    targets = []

    def target(text, value, ok):
        targets.append(f"| {text} | {value} | {'met' if ok else 'NOT met'} |")
    th2 = 2 if 2 in threads else threads[-1]
    if 1 in batches:
        s8, s32 = get("int8", 1, th2), get("f32", 1, th2)
        if s8:
            target(f"batch 1, int8 ≤ 0.5x CTranslate2 int8 ({0.5 * CT2['int8_b1_ms']:.0f} ms/sentence)",
                   f"{s8['ms_per_sentence']:.1f} ms", s8["ms_per_sentence"] <= 0.5 * CT2["int8_b1_ms"])
        if s32:
            target(f"batch 1, f32 ≤ 0.8x CTranslate2 f32 ({0.8 * CT2['f32_b1_ms']:.0f} ms/sentence)",
                   f"{s32['ms_per_sentence']:.1f} ms", s32["ms_per_sentence"] <= 0.8 * CT2["f32_b1_ms"])
    if 64 in batches:
        s8, s32 = get("int8", 64, th2), get("f32", 64, th2)
        if s8:
            target(f"batch 64, int8 ≥ 1.2x CTranslate2 int8 ({1.2 * CT2['int8_b64_toks']:.0f} tok/s)",
                   f"{s8['tok_s']:.0f} tok/s", s8["tok_s"] >= 1.2 * CT2["int8_b64_toks"])
        if s32:
            target(f"batch 64, f32 ≥ CTranslate2 f32 ({CT2['f32_b64_toks']} tok/s)",
                   f"{s32['tok_s']:.0f} tok/s", s32["tok_s"] >= CT2["f32_b64_toks"])
    if runner and 1 in batches:
        ref = summary(("torch", "f32", 1, th2))
        for dt, want in (("f32", 3), ("int8", 8)):
            s = get(dt, 1, th2)
            if s and ref:
                x = ref["ms_per_sentence"] / s["ms_per_sentence"]
                target(f"batch 1, {dt} ≥ {want}x the PyTorch reference (same threads)", f"{x:.1f}x", x >= want)
    if 1 in batches:
        for dt in dtypes:
            s = get(dt, 1, th2)
            if s and "bw_fraction" in s:
                target(f"batch-1 decoder step ≥ 70% of triad bandwidth ({dt})",
                       f"{100 * s['bw_fraction']:.0f}%", s["bw_fraction"] >= 0.7)
        for dt, lim in (("f32", CT2["f32_rss"]), ("int8", CT2["int8_rss"])):
            s = get(dt, 1, th2)
            if s and "peak_rss_mib" in s:
                target(f"peak RSS, {dt}, batch 1 ≤ {lim} MiB", f"{s['peak_rss_mib']:.0f} MiB", s["peak_rss_mib"] <= lim)

    # beam search: attend greedy / beam K and the PyTorch reference's beam K
    def per_round_ratio(key_a, key_b, field):
        """Median over rounds of each round's a ÷ b (the two ran side by side)."""
        ra, rb = res.get(key_a), res.get(key_b)
        if not ra or not rb:
            return None
        return statistics.median(x[field] / y[field] for x, y in zip(ra, rb))

    beam_lines, beam_ratios, beam_targets = [], [], []
    if K > 1:
        beam_lines.append("| system | search | dtype | batch | threads | ms/sentence (median / min) "
                          "| target tok/s (median / max) | encoder ms | decoder ms | peak RSS MiB "
                          "| beam ÷ greedy: time, peak RSS |")
        beam_lines.append("|" + "---|" * 11)
        for B, th in beam_runs:
            rows = [("attend", dt, bm) for dt in beam_dtypes for bm in (1, K)]
            rows += [("torch", "f32", K)] if runner else []
            for sysname, dt, bm in rows:
                s = summary((sysname, dt, B, th, bm))
                if not s:
                    continue
                rss = f"{s['peak_rss_mib']:.0f}" if "peak_rss_mib" in s else "—"
                vs = "—"
                if sysname == "attend" and bm > 1:
                    g = summary(("attend", dt, B, th, 1))
                    x = per_round_ratio(("attend", dt, B, th, bm), ("attend", dt, B, th, 1), "ms_per_sentence")
                    if g and x:
                        vs = f"{x:.2f}x, {s['peak_rss_mib'] / g['peak_rss_mib']:.2f}x"
                name = "attend" if sysname == "attend" else "PyTorch reference"
                beam_lines.append(
                    f"| {name} | {'greedy' if bm == 1 else f'beam {bm}'} | {dt} | {B} | {th} | "
                    f"{s['ms_per_sentence']:.1f} / {s['ms_min']:.1f} | {s['tok_s']:.0f} / {s['tok_s_max']:.0f} | "
                    f"{s['encode_ms']:.1f} | {s['decode_ms']:.1f} | {rss} | {vs} |")
        if runner:
            beam_ratios.append(f"| dtype | batch | threads | attend beam {K} speed-up over the PyTorch reference's "
                               f"beam {K} (median time ratio) |")
            beam_ratios.append("|---|---|---|---|")
            for B, th in beam_runs:
                ref = summary(("torch", "f32", B, th, K))
                for dt in beam_dtypes:
                    s = summary(("attend", dt, B, th, K))
                    if ref and s:
                        beam_ratios.append(f"| {dt} | {B} | {th} | "
                                           f"{ref['ms_per_sentence'] / s['ms_per_sentence']:.1f}x |")
        bth = 2 if 2 in beam_threads else beam_threads[-1]

        def btarget(text, value, ok):
            beam_targets.append(f"| {text} | {value} | {'met' if ok else 'NOT met'} |")
        if (1, bth) in beam_runs:
            for dt in beam_dtypes:
                g, b = summary(("attend", dt, 1, bth, 1)), summary(("attend", dt, 1, bth, K))
                x = per_round_ratio(("attend", dt, 1, bth, K), ("attend", dt, 1, bth, 1), "ms_per_sentence")
                if g and b and x:
                    btarget(f"beam-{K} batch-1 latency ≤ 2x greedy latency ({dt})",
                            f"{x:.2f}x ({b['ms_per_sentence']:.1f} vs {g['ms_per_sentence']:.1f} ms)", x <= 2)
        if runner:
            for B in [B for B, th in beam_runs if th == bth]:
                ref = summary(("torch", "f32", B, bth, K))
                for dt in beam_dtypes:
                    s = summary(("attend", dt, B, bth, K))
                    if ref and s:
                        x = ref["ms_per_sentence"] / s["ms_per_sentence"]
                        btarget(f"beam {K} ≥ 5x the PyTorch reference at beam {K} ({dt}, batch {B})",
                                f"{x:.1f}x", x >= 5)
        for B in [B for B, th in beam_runs if th == bth]:
            for dt in beam_dtypes:
                g, b = summary(("attend", dt, B, bth, 1)), summary(("attend", dt, B, bth, K))
                if g and b and "peak_rss_mib" in g and "peak_rss_mib" in b:
                    x = b["peak_rss_mib"] / g["peak_rss_mib"]
                    btarget(f"peak RSS at beam {K} ≤ 1.3x greedy's ({dt}, batch {B})",
                            f"{x:.2f}x ({b['peak_rss_mib']:.0f} vs {g['peak_rss_mib']:.0f} MiB)", x <= 1.3)

    print_tables(lines, ratios, targets)
    if beam_lines:
        print()
        print_tables(beam_lines, beam_ratios, beam_targets)
    nmd = None
    if a.nllb == "yes":
        print()
        nmd = nllb_section(a, threads, S, T)

    if a.md:
        mc = machine()
        busy_after = others_running()
        isa = next((s.get("isa") for *_, s in table if s.get("isa")), "?")
        ex = cmds.get(("attend", "int8", 1, th2)) or next(iter(cmds.values()))
        md = []
        md.append("# Benchmarks\n")
        md.append(f"Written by `make bench` (tools/bench.py) on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} "
                  f"in {(time.time() - t_start) / 60:.1f} min. Regenerate with `make bench`.\n")
        md.append(INTRO)
        md.append("## Machine\n")
        md.append(f"- CPU: {mc['cpu']}, {mc['cpus']} logical CPUs ({mc['threads_per_core']} thread(s) per core); "
                  f"L2 {mc['l2']}, L3 {mc['l3']}; memory {mc['mem']}; Linux {mc['kernel']}")
        md.append(f"- SIMD: {mc['simd']}; attend kernel set: `{isa}`")
        md.append(f"- load average at the end: {mc['load']}")
        if busy_before or busy_after:
            md.append(f"- **shared machine**: other busy processes during the run: "
                      f"{', '.join(sorted(set(busy_before + busy_after)))}. Absolute numbers are depressed; "
                      f"the ratios (both systems measured interleaved in the same minutes) are the meaningful part.")
        md.append("")
        md.append("## Model and method\n")
        md.append("- Random weights in the opus-mt-en-de shape (d_model 512, 6+6 layers, 8 heads, ffn 2048, "
                  "vocabulary 58,101, swish, tied embeddings), made by `tools/reference.py` (`random_model`, "
                  "`save_hf_dir`) and exported with `tools/export_marian.py --dtype f32|f16|int8`.")
        md.append(f"- {S}-token random sources, exactly {T} target tokens (EOS ignored), greedy. "
                  f"{a.rounds} interleaved rounds (attend and PyTorch alternate, every configuration each round), "
                  f"{a.per_round} timed repetitions per round after a warm-up (PyTorch at batch > 1: one run, first round only, to keep `make bench` short), "
                  "medians of the round medians, min/max over everything.")
        md.append("- attend: `attend bench` (one process per configuration and round; peak RSS is that process's "
                  "`VmHWM`). Memory bandwidth: STREAM-like triad over 3 × 640 MiB, same thread count, in a child "
                  "process, and a pass that only reads the same arrays (a decoder step only reads weights), best "
                  "of 5 each, measured in every round right after that round's batch-1 run; \"step\" = weight "
                  "bytes a batch-1 decoder step reads ÷ median step time; the percentages are medians over rounds "
                  "of each round's step ÷ that round's bandwidth. The issue's target is against the triad. A step can "
                  "exceed 100%: the triad also writes (and, as STREAM, does not count the write-allocate reads), "
                  "and weights smaller than the last-level cache may be served partly from it.")
        md.append("- PyTorch runs with `GOMP_SPINCOUNT=3000` (libgomp's default long spin makes 2-thread runs collapse "
                  "when other processes share the cores); attend's own thread pool spins about 20 µs between "
                  "parallel loops, then sleeps.")
        md.append("- PyTorch reference: `tools/reference.py`'s model driven as HF `generate()` drives it (cached "
                  f"self-attention, cross K/V once, last-position logits), f32, `torch.set_num_threads` = threads; "
                  f"torch {torch.__version__}, BLAS: {torch_blas()} (`make bench` installs OpenBLAS so the "
                  "reference is not slowed by the unoptimised default).")
        md.append("")
        md.append("Commands:\n")
        md.append("```")
        md.append("make bench                      # = " + " ".join(["tools/bench.py", "--md", "BENCHMARKS.md"]))
        md.append(" ".join(shlex.quote(c) for c in ex).replace(ROOT + "/", ""))
        bex = cmds.get(("attend", "int8", 1, 2 if 2 in beam_threads else (beam_threads or [0])[-1], K))
        if bex:
            md.append(" ".join(shlex.quote(c) for c in bex).replace(ROOT + "/", ""))
        md.append("```\n")
        md.append("## Results\n")
        md += lines
        md.append("")
        add_ratios(md, ratios)
        md.append("## Targets (issue 5)\n")
        cpu = machine()["cpu"]
        same_cpu = "intel" in cpu.lower()
        md.append("CTranslate2 figures are the issue's own measurements on a 2-core " + CT2_CPU + " machine "
                  "(CTranslate2 is not installed here, so they are not side by side); PyTorch ratios are."
                  + ("" if same_cpu else f" **This run's CPU is {cpu}, not {CT2_CPU}: the CTranslate2 rows "
                     "compare different machines and say little either way.**") + "\n")
        add_targets(md, "measured (2 threads)", targets)
        if beam_lines:
            md.append(f"## Beam search (beam {K})\n")
            md.append(f"- Same model, sources and {T} target tokens per sentence as above, `attend bench --beam {K}`: "
                      f"n-best 1 and the model's other generation settings; </s> is banned before the last step, "
                      f"so all {K} beams of every sentence run to the limit ({K} decoder rows a step per sentence). "
                      "Greedy and beam runs of each configuration alternate, their order swapped every round; "
                      "\"beam ÷ greedy\" time is the median over rounds of each round's ratio, peak RSS the ratio "
                      "of the peaks (`VmHWM`, maximum over rounds).")
            md.append(f"- PyTorch reference at beam {K}: the cached decoder above, driven as HF `generate(num_beams={K})` "
                      f"drives it: encoder outputs repeated per beam (`_expand_inputs_for_generation`), cross K/V from "
                      f"them once, log-softmax with <pad> banned, the {2 * K} best of each sentence's {K} × vocabulary "
                      "scores (`topk`), self-attention caches and token histories reordered to the surviving beams "
                      "(`_reorder_cache`, `index_select`), </s> banned before the last step as in `attend bench`. "
                      "Its beam scores were checked against a full recomputation of every beam's path. "
                      f"Batch 1 in every round ({a.per_round} repetitions), batch > 1 one run in the first round.")
            md.append("")
            md += beam_lines
            md.append("")
            add_ratios(md, beam_ratios)
            md.append("### Targets (beam search)\n")
            add_targets(md, f"measured ({bth} threads)", beam_targets)
        qmd = quality(a.attend, os.path.join(ROOT, "models", "de-en.gguf"), a.work)
        if qmd:
            md.append(qmd)
        else:
            md.append("## int8 quality on the shipped model\n\nNot measured: `models/de-en.gguf` "
                      "was missing when this ran.\n")
        if nmd:
            replace_section(a.nllb_md, NLLB_HEADING, nmd)
            log(f"wrote the NLLB section of {a.nllb_md}")
        md += nllb_pointer(a.md, a.nllb_md)
        md.extend(kept_sections(a.md))
        with open(a.md, "w") as f:
            f.write("\n".join(md) + "\n")
        log(f"wrote {a.md}")
    return 0


# Hand-written sections of BENCHMARKS.md that a regeneration keeps (measured by other means
# than this script), each from its heading to the next "## " heading. Older ones live in
# docs/benchmarks.md, which the last lists.
KEPT_HEADINGS = ("## bf16 compute (issue 37)", "## Against CTranslate2, side by side (issues 37, 39)",
                 "## Whisper (issue 39)", "## Older measurements")


def nllb_pointer(md_path, nllb_md):
    """The report's NLLB section: where its tables are (nllb_md, a path relative to the
    report's folder in the link)."""
    rel = os.path.relpath(os.path.abspath(nllb_md), os.path.dirname(os.path.abspath(md_path)))
    anchor = NLLB_HEADING[3:].lower().replace(" ", "-").replace("(", "").replace(")", "").replace(".", "")
    return [NLLB_HEADING + "\n",
            f"Speed against the PyTorch reference, peak RSS, load time and the issue's targets on an "
            f"NLLB-200-distilled-600M-shaped model: [{rel}]({rel}#{anchor}), written there by `make bench` "
            f"and `make bench-nllb` with the machine, method and commands of that run.\n"]

# What the report is, above its first table (written each time, so a regeneration keeps it).
INTRO = ("What holds now, and the commands that measured it, in at most 250 lines. The sections from "
         "\"Machine\" to the NLLB pointer are written by `make bench` and replaced whole by its next run "
         "(the NLLB tables themselves go to docs/benchmarks.md, also by `make bench-nllb`); the others are "
         "measured by hand or by the tools they name (the serving one by `tools/bench_serve.py`), and "
         "`make bench` keeps them. Per-configuration tables and older sections, each with its machine and "
         "commands: [docs/benchmarks.md](docs/benchmarks.md). Earlier measurements and what each change "
         "did: `git log -p BENCHMARKS.md`.\n")


def kept_sections(path, extra=()):
    """The KEPT_HEADINGS (and extra) sections of the existing report at path, as lines (none
    if absent)."""
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError:
        return []
    out, keep = [], False
    for line in lines:
        if line.startswith("## "):
            keep = line.strip() in KEPT_HEADINGS or line.strip() in extra
        if keep:
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


if __name__ == "__main__":
    sys.exit(main())
