#!/usr/bin/python3
"""The T5 family (model_type t5: t5-small/base, flan-t5, mT5, MADLAD-400): what HF
transformers 4.x's T5ForConditionalGeneration and T5Tokenizer (legacy behaviour) compute,
written independently for attend's tests from transformers' rules (transformers itself is
not installed here).

Where T5 differs from the other families: pre-norm blocks with an RMS LayerNorm (no mean,
no bias) and a final norm after each stack; no biases in any linear layer; attention scores
not divided by sqrt(d_kv), and heads * d_kv may differ from d_model; no absolute positions:
a learned bias per head and relative-distance bucket (bidirectional in the encoder, causal
in the decoder), held by the first layer of each stack and added in every layer's
self-attention; a ReLU FFN (v1.0) or a gated one, gelu_new(wi_0 x) * wi_1 x (v1.1, flan-t5,
mT5, MADLAD); a tied output scaled by d_model^-0.5, or an untied lm_head; decoding starts
from <pad> (0) and ends at </s> (1)."""
import json
import math
import os
import re
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402
from reference import beam_loop, greedy_loop, load_state_dict, write_dump  # noqa: E402

# T5Config's defaults (t5-small's shape)
T5_DEFAULT_CONFIG = {
    "model_type": "t5",
    "architectures": ["T5ForConditionalGeneration"],
    "vocab_size": 32128,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_decoder_layers": None,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.1,
    "layer_norm_epsilon": 1e-6,
    "initializer_factor": 1.0,
    "feed_forward_proj": "relu",
    "is_encoder_decoder": True,
    "use_cache": True,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "decoder_start_token_id": 0,
    "tie_word_embeddings": True,
}

EXTRA_IDS = 100

# feed_forward_proj's activation names (HF's ACT2FN), and T5Config's rename of gated-gelu
ACTS = {"relu": torch.relu, "gelu": lambda x: torch.nn.functional.gelu(x),
        "silu": torch.nn.functional.silu,
        "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))}


def parse_ffn(proj):
    """feed_forward_proj -> (activation name, gated) as T5Config reads it."""
    parts = proj.split("-")
    gated = parts[0] == "gated"
    if len(parts) > 2 or (len(parts) == 2 and not gated) or parts[-1] not in ("relu", "gelu", "silu", "gelu_new"):
        raise ValueError(f"feed_forward_proj {proj!r} is not a valid activation")
    act = parts[-1]
    if proj == "gated-gelu":
        act = "gelu_new"
    return act, gated


def relative_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5Attention._relative_position_bucket on a LongTensor of key - query distances."""
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0).to(torch.long) * num_buckets
        rel = torch.abs(rel)
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(small, rel, large)


class T5LayerNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class T5Attention(nn.Module):
    def __init__(self, c, has_bias, bidirectional):
        super().__init__()
        self.H, self.dk = c["num_heads"], c["d_kv"]
        inner = self.H * self.dk
        d = c["d_model"]
        self.q = nn.Linear(d, inner, bias=False)
        self.k = nn.Linear(d, inner, bias=False)
        self.v = nn.Linear(d, inner, bias=False)
        self.o = nn.Linear(inner, d, bias=False)
        self.bidirectional = bidirectional
        self.nb = c["relative_attention_num_buckets"]
        self.md = c["relative_attention_max_distance"]
        if has_bias:
            self.relative_attention_bias = nn.Embedding(self.nb, self.H)

    def compute_bias(self, qlen, klen):
        """[1, H, qlen, klen]: query i at position i, key j at j."""
        rel = torch.arange(klen)[None, :] - torch.arange(qlen)[:, None]
        b = relative_bucket(rel, self.bidirectional, self.nb, self.md)
        return self.relative_attention_bias(b).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, kv, bias):
        B, T, _ = x.shape
        S = kv.shape[1]

        def heads(t, n):
            return t.view(B, n, self.H, self.dk).transpose(1, 2)

        q, k, v = heads(self.q(x), T), heads(self.k(kv), S), heads(self.v(kv), S)
        scores = torch.matmul(q, k.transpose(3, 2)) + bias
        probs = torch.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.matmul(probs, v).transpose(1, 2).contiguous().view(B, T, self.H * self.dk)
        return self.o(out), probs


class DenseReluDense(nn.Module):
    """T5DenseActDense (wi, wo) or T5DenseGatedActDense (wi_0, wi_1, wo); the attribute
    names are HF's, so the state dict is too."""

    def __init__(self, c):
        super().__init__()
        d, f = c["d_model"], c["d_ff"]
        self.act_name, self.gated = parse_ffn(c["feed_forward_proj"])
        if self.gated:
            self.wi_0 = nn.Linear(d, f, bias=False)
            self.wi_1 = nn.Linear(d, f, bias=False)
        else:
            self.wi = nn.Linear(d, f, bias=False)
        self.wo = nn.Linear(f, d, bias=False)

    def forward(self, x):
        act = ACTS[self.act_name]
        h = act(self.wi_0(x)) * self.wi_1(x) if self.gated else act(self.wi(x))
        return self.wo(h)


class SelfAttnLayer(nn.Module):
    def __init__(self, c, has_bias, bidirectional):
        super().__init__()
        self.SelfAttention = T5Attention(c, has_bias, bidirectional)
        self.layer_norm = T5LayerNorm(c["d_model"], c["layer_norm_epsilon"])


class CrossAttnLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.EncDecAttention = T5Attention(c, False, True)
        self.layer_norm = T5LayerNorm(c["d_model"], c["layer_norm_epsilon"])


class FFLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.DenseReluDense = DenseReluDense(c)
        self.layer_norm = T5LayerNorm(c["d_model"], c["layer_norm_epsilon"])


class Block(nn.Module):
    def __init__(self, c, first, decoder):
        super().__init__()
        parts = [SelfAttnLayer(c, first, not decoder)] + ([CrossAttnLayer(c)] if decoder else []) + [FFLayer(c)]
        self.layer = nn.ModuleList(parts)


class Stack(nn.Module):
    def __init__(self, c, n, decoder):
        super().__init__()
        self.block = nn.ModuleList([Block(c, i == 0, decoder) for i in range(n)])
        self.final_layer_norm = T5LayerNorm(c["d_model"], c["layer_norm_epsilon"])


class T5(nn.Module):
    """T5ForConditionalGeneration's computation (no dropout: inference only)."""

    def __init__(self, config):
        super().__init__()
        c = dict(T5_DEFAULT_CONFIG, **config)
        if c.get("num_decoder_layers") is None:
            c["num_decoder_layers"] = c["num_layers"]
        self.config = c
        self.shared = nn.Embedding(c["vocab_size"], c["d_model"])
        self.encoder = Stack(c, c["num_layers"], False)
        self.decoder = Stack(c, c["num_decoder_layers"], True)
        if not c["tie_word_embeddings"]:
            self.lm_head = nn.Linear(c["d_model"], c["vocab_size"], bias=False)
        self.tok = None

    def encode(self, src):
        """src [1, S] -> (states [1, S, d], per-layer probabilities [1, H, S, S])."""
        x = self.shared(src)
        S = src.shape[1]
        bias = self.encoder.block[0].layer[0].SelfAttention.compute_bias(S, S)
        probs = []
        for blk in self.encoder.block:
            sa, ff = blk.layer
            h = sa.layer_norm(x)
            a, p = sa.SelfAttention(h, h, bias)
            x = x + a
            x = x + ff.DenseReluDense(ff.layer_norm(x))
            probs.append(p)
        return self.encoder.final_layer_norm(x), probs

    def decode(self, tgt, memory):
        """tgt [1, T] decoder inputs -> (logits [1, T, V], self probs, cross probs per layer)."""
        y = self.shared(tgt)
        T, S = tgt.shape[1], memory.shape[1]
        causal = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), diagonal=1)
        bias = self.decoder.block[0].layer[0].SelfAttention.compute_bias(T, T) + causal
        zeros = torch.zeros(1, self.config["num_heads"], T, S)
        self_p, cross_p = [], []
        for blk in self.decoder.block:
            sa, ca, ff = blk.layer
            h = sa.layer_norm(y)
            a, p = sa.SelfAttention(h, h, bias)
            y = y + a
            a, q = ca.EncDecAttention(ca.layer_norm(y), memory, zeros)
            y = y + a
            y = y + ff.DenseReluDense(ff.layer_norm(y))
            self_p.append(p)
            cross_p.append(q)
        y = self.decoder.final_layer_norm(y)
        if self.config["tie_word_embeddings"]:
            logits = (y * (self.config["d_model"] ** -0.5)) @ self.shared.weight.t()
        else:
            logits = self.lm_head(y)
        return logits, self_p, cross_p

    def hf_state_dict(self, with_duplicates):
        """HF's tensor names: shared.weight, encoder./decoder.block.N.layer.M..., the final
        norms, lm_head.weight when untied. with_duplicates: also the tied copies a
        pytorch_model.bin holds (encoder/decoder.embed_tokens.weight, lm_head.weight)."""
        sd = {k: v.detach().clone() for k, v in self.state_dict().items()}
        if with_duplicates:
            for k in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
                sd[k] = sd["shared.weight"].clone()
            if self.config["tie_word_embeddings"]:
                sd["lm_head.weight"] = sd["shared.weight"].clone()
        return sd


# --------------------------------------------------------------------------------------
# T5Tokenizer (slow, legacy): SentencePiece ids as they are, <extra_id_0> the last of the
# 100 ids after the SentencePiece model's

EXTRA = re.compile(r"<extra_id_(\d+)>")


class T5Tok:
    """T5Tokenizer's rules, written from its source: the text is split at the special
    tokens typed in it (<pad>, </s>, <unk> as they are; <extra_id_N> also eat the
    whitespace on both sides: lstrip and rstrip), each other piece is SentencePiece-encoded
    on its own, </s> is appended unless the ids already end in it. Decoding skips the special
    tokens, decodes the rest with SentencePiece, strips and applies HF's clean-up."""

    def __init__(self, spm_file, max_len=None):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=spm_file)
        self.n = self.sp.get_piece_size()
        self.pad, self.eos, self.unk = 0, 1, 2
        self.extra = {f"<extra_id_{i}>": self.n + EXTRA_IDS - 1 - i for i in range(EXTRA_IDS)}
        self.specials = {"<pad>": 0, "</s>": 1, "<unk>": 2, **self.extra}
        self.max_len = max_len

    def split(self, text):
        """[(is_special, str)]: the longest special token at the leftmost place first."""
        out, i, start = [], 0, 0
        while i < len(text):
            best = None
            if text[i] == "<":
                for t in self.specials:
                    if text.startswith(t, i) and (best is None or len(t) > len(best)):
                        best = t
            if best is None:
                i += 1
                continue
            out.append((False, text[start:i]))
            out.append((True, best))
            i += len(best)
            start = i
        out.append((False, text[start:]))
        # extra ids strip the whitespace beside them (lstrip, rstrip)
        for k, (sp, t) in enumerate(out):
            if sp and t in self.extra:
                if k > 0:
                    out[k - 1] = (False, out[k - 1][1].rstrip())
                if k + 1 < len(out):
                    out[k + 1] = (False, out[k + 1][1].lstrip())
        return out

    def encode(self, text):
        ids = []
        for special, t in self.split(text):
            if special:
                ids.append(self.specials[t])
            elif t:
                ids.extend(self.sp.encode(t))
        if not ids or ids[-1] != self.eos:
            ids.append(self.eos)
        if self.max_len is not None and len(ids) > self.max_len:
            ids = ids[:self.max_len - 1] + [self.eos]
        return ids

    def decode(self, ids):
        pieces = [self.sp.id_to_piece(i) for i in ids if i not in self.specials.values() and 3 <= i < self.n]
        text = self.sp.decode_pieces(pieces).strip()
        for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                     (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
            text = text.replace(a, b)
        return text


# --------------------------------------------------------------------------------------
# Generation, as generate() does for T5ForConditionalGeneration (nothing banned; <pad>
# may be generated)

def t5_limits(c, max_length=None):
    ml = max_length if max_length is not None else c.get("max_length", 20) or 20
    return ml


def _process(scores, cur_len, c, ml, min_length=0):
    eos = c["eos_token_id"]
    if min_length > 0 and cur_len < min_length:
        scores[:, eos] = float("-inf")
    if c.get("forced_eos_token_id") is not None and cur_len == ml - 1:
        scores[:] = float("-inf")
        scores[:, eos] = 0.0
    return scores


@torch.no_grad()
def t5_greedy(model, src_ids, max_length=None):
    c = model.config
    ml = t5_limits(c, max_length)
    return greedy_loop(model, src_ids, [c["decoder_start_token_id"]],
                       lambda s, beams: _process(s, len(beams[0]), c, ml), ml)


@torch.no_grad()
def t5_beam_search(model, src_ids, num_beams, length_penalty=1.0, early_stopping=False, num_return_sequences=1,
                   max_length=None):
    c = model.config
    ml = t5_limits(c, max_length)
    return beam_loop(model, src_ids, [c["decoder_start_token_id"]],
                     lambda logp, beams: _process(logp, len(beams[0]), c, ml),
                     num_beams, length_penalty, early_stopping, num_return_sequences, ml)


@torch.no_grad()
def t5_dump(model, lines, out_path, num_beams=1, max_length=None, prefix=""):
    """As `reference.py dump` (the same .npz keys): each line (after prefix) greedy or with
    beams (the best hypothesis teacher-forced for its attention, s{i}/score)."""
    best = None if num_beams == 1 else lambda src: t5_beam_search(model, src, num_beams, max_length=max_length)[0]
    write_dump(out_path, model, [model.tok.encode(prefix + line) for line in lines],
               lambda src: t5_greedy(model, src, max_length), best)


# --------------------------------------------------------------------------------------
# Random models and HF directories

@torch.no_grad()
def t5_random_model(config, seed=0, gain=1.5):
    """Random T5 weights: matrices std gain/sqrt(fan_in), queries also / sqrt(d_kv) (as
    HF's T5 initialisation: the scores are not scaled), the embedding std 1 (T5 does not
    scale it), norm gains in 0.5..1.5, relative biases std 1."""
    torch.manual_seed(seed)
    m = T5(config)
    for name, p in m.named_parameters():
        if "relative_attention_bias" in name:
            p.normal_(0.0, 1.0)
        elif name == "shared.weight":
            p.normal_(0.0, 1.0)
        elif name.endswith(".q.weight"):
            p.normal_(0.0, gain / math.sqrt(p.shape[1] * m.config["d_kv"]))
        elif p.dim() == 2:
            p.normal_(0.0, gain / math.sqrt(p.shape[1]))
        else:
            p.uniform_(0.5, 1.5)
    return m


def t5_save_hf_dir(model, path, spm_blob, fmt="safetensors", model_max_length=512, task_specific_params=None):
    """Write an HF-style T5 directory as save_pretrained lays it out: config.json (T5Config's
    keys), model.safetensors (the tied copies left out) or pytorch_model.bin (with them),
    spiece.model, tokenizer_config.json and special_tokens_map.json (the 100 extra ids)."""
    os.makedirs(path, exist_ok=True)
    c = dict(model.config)
    if task_specific_params is not None:
        c["task_specific_params"] = task_specific_params
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if fmt == "safetensors":
        sd = model.hf_state_dict(with_duplicates=False)
        safetensors_np.save({k: v.numpy() for k, v in sd.items()}, os.path.join(path, "model.safetensors"))
    else:
        torch.save(model.hf_state_dict(with_duplicates=True), os.path.join(path, "pytorch_model.bin"))
    with open(os.path.join(path, "spiece.model"), "wb") as f:
        f.write(spm_blob)
    extra = [f"<extra_id_{i}>" for i in range(EXTRA_IDS)]
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "T5Tokenizer", "model_max_length": model_max_length, "extra_ids": EXTRA_IDS,
                   "additional_special_tokens": extra, "eos_token": "</s>", "unk_token": "<unk>",
                   "pad_token": "<pad>"}, f, indent=1)
    with open(os.path.join(path, "special_tokens_map.json"), "w") as f:
        json.dump({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "additional_special_tokens": extra}, f, indent=1)


def t5_load_hf_dir(path):
    """A T5 model from an HF-style directory (f32; no tokenizer)."""
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    m = T5(config)
    sd = load_state_dict(path)
    with torch.no_grad():
        for name, t in m.state_dict().items():
            t.copy_(sd[name].to(torch.float32).reshape(t.shape))
    return m
