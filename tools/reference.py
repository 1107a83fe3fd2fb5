#!/usr/bin/python3
"""Independent PyTorch reference for MarianMT inference, written for attend's tests.

It is not Hugging Face's code: it re-implements what transformers' MarianMTModel computes
(post-LayerNorm transformer, sinusoidal positions with sines in the first half, scaled
embeddings, final_logits_bias, greedy generate with pad banned and forced EOS, beam search
with HF's logits processors and BeamHypotheses rules) so the C engine can be checked against
it on the same HF-style checkpoint directories users have.

Library use:
    m = load_hf_dir("opus-mt-de-en")            # config.json + weights + spm + vocab.json
    r = greedy(m, m.tok.encode("Hallo Welt"))   # ids, per-step logits, every attention
    print(m.tok.decode(r.ids))

    b = beam_search(m, m.tok.encode("Hallo Welt"), num_beams=4, num_return_sequences=2)
    print(b[0].score, m.tok.decode(b[0].ids))    # HF's sequence score, best first

Command line: see `reference.py --help`, e.g.
    reference.py translate DIR --beam 4 --n-best 2 "Hallo Welt"    # 'i ||| text ||| score'
"""
import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

# --------------------------------------------------------------------------------------
# Configuration: the config.json keys of a MarianConfig, with opus-mt's values as defaults

DEFAULT_CONFIG = {
    "model_type": "marian",
    "architectures": ["MarianMTModel"],
    "vocab_size": 58101,
    "decoder_vocab_size": 58101,
    "d_model": 512,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "encoder_attention_heads": 8,
    "decoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048,
    "activation_function": "swish",
    "scale_embedding": True,
    "max_position_embeddings": 512,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "decoder_start_token_id": 58100,
    "forced_eos_token_id": 0,
    "bad_words_ids": [[58100]],
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
    "max_length": 512,
    "num_beams": 1,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "init_std": 0.02,
    "is_encoder_decoder": True,
}

ACTIVATIONS = {
    "swish": nn.functional.silu,
    "silu": nn.functional.silu,
    "relu": nn.functional.relu,
    "gelu": nn.functional.gelu,  # exact erf form, as HF's "gelu"
}


def sinusoidal_positions(n_pos, dim):
    """[n_pos, dim]: angle pos / 10000^(2*(j//2)/dim); sines of even j in the first half,
    cosines of odd j in the second half (not interleaved). Computed in float64 like HF."""
    j = np.arange(dim)
    angle = np.arange(n_pos)[:, None] / np.power(10000, 2 * (j // 2) / dim)[None, :]
    out = np.zeros((n_pos, dim), dtype=np.float32)
    half = dim // 2 + dim % 2
    out[:, :half] = np.sin(angle[:, 0::2])
    out[:, half:] = np.cos(angle[:, 1::2])
    return torch.from_numpy(out)


# --------------------------------------------------------------------------------------
# Model: module names follow HF so state_dict() keys are those of real checkpoints

class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x, kv, causal=False, key_mask=None):
        """x [B,T,d] queries, kv [B,S,d] keys/values; key_mask [B,S] True = keep.
        Returns output [B,T,d] and probabilities [B,H,T,S]."""
        B, T, d = x.shape
        S = kv.shape[1]
        split = lambda t, n: t.view(B, n, self.heads, self.head_dim).transpose(1, 2)
        q = split(self.q_proj(x) * self.head_dim ** -0.5, T)
        k, v = split(self.k_proj(kv), S), split(self.v_proj(kv), S)
        scores = q @ k.transpose(-1, -2)
        if causal:
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool, device=scores.device).triu(1),
                                           float("-inf"))
        if key_mask is not None:
            scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        probs = scores.softmax(-1)
        out = (probs @ v).transpose(1, 2).reshape(B, T, d)
        return self.out_proj(out), probs


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.self_attn = Attention(d, c["encoder_attention_heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.fc1, self.fc2 = nn.Linear(d, c["encoder_ffn_dim"]), nn.Linear(c["encoder_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.act = ACTIVATIONS[c["activation_function"]]
        self.drop = c.get("dropout", 0.0)

    def forward(self, x, key_mask):
        drop = lambda t: nn.functional.dropout(t, self.drop, self.training)
        a, probs = self.self_attn(x, x, key_mask=key_mask)
        x = self.self_attn_layer_norm(x + drop(a))
        x = self.final_layer_norm(x + drop(self.fc2(self.act(self.fc1(x)))))
        return x, probs


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.self_attn = Attention(d, c["decoder_attention_heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.encoder_attn = Attention(d, c["decoder_attention_heads"])
        self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.fc1, self.fc2 = nn.Linear(d, c["decoder_ffn_dim"]), nn.Linear(c["decoder_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.act = ACTIVATIONS[c["activation_function"]]
        self.drop = c.get("dropout", 0.0)

    def forward(self, y, memory, src_mask, tgt_mask=None):
        drop = lambda t: nn.functional.dropout(t, self.drop, self.training)
        a, self_probs = self.self_attn(y, y, causal=True, key_mask=tgt_mask)
        y = self.self_attn_layer_norm(y + drop(a))
        a, cross_probs = self.encoder_attn(y, memory, key_mask=src_mask)
        y = self.encoder_attn_layer_norm(y + drop(a))
        y = self.final_layer_norm(y + drop(self.fc2(self.act(self.fc1(y)))))
        return y, self_probs, cross_probs


class Stack(nn.Module):
    """HF's model.encoder / model.decoder: embed_tokens plus layers."""

    def __init__(self, layers, embed):
        super().__init__()
        self.embed_tokens = embed
        self.layers = nn.ModuleList(layers)


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.shared = nn.Embedding(c["vocab_size"], d)
        if c["share_encoder_decoder_embeddings"]:
            enc_embed = dec_embed = self.shared
        else:
            enc_embed = nn.Embedding(c["vocab_size"], d)
            dec_embed = nn.Embedding(c["decoder_vocab_size"], d)
        self.encoder = Stack([EncoderLayer(c) for _ in range(c["encoder_layers"])], enc_embed)
        self.decoder = Stack([DecoderLayer(c) for _ in range(c["decoder_layers"])], dec_embed)


class Marian(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = dict(DEFAULT_CONFIG, **config)
        if not c["share_encoder_decoder_embeddings"] and "decoder_vocab_size" not in config:
            c["decoder_vocab_size"] = c["vocab_size"]
        if c["share_encoder_decoder_embeddings"]:
            c["decoder_vocab_size"] = c["vocab_size"]
        self.config = c
        self.model = Inner(c)
        vt = c["decoder_vocab_size"]
        self.lm_head = nn.Linear(c["d_model"], vt, bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.decoder.embed_tokens.weight
        self.register_buffer("final_logits_bias", torch.zeros(1, vt))
        self.embed_scale = math.sqrt(c["d_model"]) if c["scale_embedding"] else 1.0
        self.positions = sinusoidal_positions(c["max_position_embeddings"], c["d_model"])
        self.tok = None

    def encode(self, src, src_mask=None):
        """src [B,S] ids -> memory [B,S,d], per-layer self-attention probs [B,H,S,S]."""
        x = self.model.encoder.embed_tokens(src) * self.embed_scale
        x = x + self.positions[: src.shape[1]]
        x = nn.functional.dropout(x, self.config.get("dropout", 0.0), self.training)
        probs = []
        for layer in self.model.encoder.layers:
            x, p = layer(x, src_mask)
            probs.append(p)
        return x, probs

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        """tgt [B,T] decoder inputs -> logits [B,T,V], self probs, cross probs per layer."""
        y = self.model.decoder.embed_tokens(tgt) * self.embed_scale
        y = y + self.positions[: tgt.shape[1]]
        y = nn.functional.dropout(y, self.config.get("dropout", 0.0), self.training)
        self_p, cross_p = [], []
        for layer in self.model.decoder.layers:
            y, sp, cp = layer(y, memory, src_mask, tgt_mask)
            self_p.append(sp)
            cross_p.append(cp)
        logits = self.lm_head(y) + self.final_logits_bias
        return logits, self_p, cross_p

    def hf_state_dict(self, with_duplicates):
        """Tensors under HF's names. Without duplicates it is what model.safetensors holds
        (tied copies and positions left out); with them, what old pytorch_model.bin held."""
        c = self.config
        sd = {k: v.detach().clone() for k, v in self.state_dict().items()}
        if with_duplicates:
            pos = self.positions.clone()
            sd["model.encoder.embed_positions.weight"] = pos
            sd["model.decoder.embed_positions.weight"] = pos.clone()
            return sd
        drop = []
        if c["share_encoder_decoder_embeddings"]:
            drop += ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
        else:
            drop += ["model.shared.weight"]
        if c["tie_word_embeddings"]:
            drop += ["lm_head.weight"]
        return {k: v for k, v in sd.items() if k not in drop}


# --------------------------------------------------------------------------------------
# Tokenizer: SentencePiece pieces mapped through vocab.json, as MarianTokenizer does

class MarianTok:
    CLEANUPS = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]

    def __init__(self, source_spm, target_spm, vocab, target_vocab=None, max_len=None):
        import sentencepiece as spm
        self.src_sp = spm.SentencePieceProcessor(model_file=source_spm)
        self.tgt_sp = spm.SentencePieceProcessor(model_file=target_spm)
        self.src_vocab = vocab
        self.tgt_vocab = target_vocab if target_vocab is not None else vocab
        self.tgt_pieces = {i: p for p, i in self.tgt_vocab.items()}
        self.unk = vocab.get("<unk>", 1)
        self.eos = vocab.get("</s>", 0)
        self.pad = self.tgt_vocab.get("<pad>", len(self.tgt_vocab) - 1)  # decoding specials
        self.max_len = max_len

    LANGUAGE_CODE = re.compile(">>.+<<")

    def pieces(self, text):
        """Source pieces. Like MarianTokenizer, every >>.+<< match is removed from the text
        and a match at the very start is kept whole as the first piece."""
        match = self.LANGUAGE_CODE.match(text)
        code = [match.group(0)] if match else []
        return code + self.src_sp.encode(self.LANGUAGE_CODE.sub("", text), out_type=str)

    def encode(self, text, max_len=None):
        """Source ids with </s> appended; unknown pieces become <unk>. With max_len, keep
        the first max_len - 1 pieces and the </s> (HF's truncation=True)."""
        ids = [self.src_vocab.get(p, self.unk) for p in self.pieces(text)]
        max_len = max_len if max_len is not None else self.max_len
        if max_len is not None:
            ids = ids[: max_len - 1]
        return ids + [self.eos]

    def decode(self, ids):
        """As HF decode(skip_special_tokens=True): specials dropped, ids without a piece
        read as <unk> (a special token, kept verbatim), pieces joined by the target model,
        leftover ▁ made spaces, stripped, then clean_up_tokenization."""
        specials = {self.eos, self.pad, self.unk}
        out, cur = "", []
        for i in ids:
            if i in specials:
                continue
            p = self.tgt_pieces.get(i, "")
            if p == "":
                out += self.tgt_sp.decode_pieces(cur) + "<unk>" + " "
                cur = []
            else:
                cur.append(p)
        out += self.tgt_sp.decode_pieces(cur)
        text = out.replace("\u2581", " ").strip()
        for a, b in self.CLEANUPS:
            text = text.replace(a, b)
        return text


# --------------------------------------------------------------------------------------
# Greedy decoding, as HF generate(num_beams=1) applies it

@dataclass
class Result:
    ids: list                                  # generated ids, without the start token
    logits: np.ndarray                         # [T, V] raw logits at each step
    enc_self: list = field(default_factory=list)   # per layer [H, S, S]
    dec_self: list = field(default_factory=list)   # per layer [H, T, T]
    cross: list = field(default_factory=list)      # per layer [H, T, S]


def generation_limits(c, max_length=None):
    """max_length counts the start token; positions stop at max_position_embeddings - 1."""
    ml = max_length if max_length is not None else c.get("max_length", 20) or 20
    return min(ml, c["max_position_embeddings"] + 1)


@torch.no_grad()
def greedy(model, src_ids, max_length=None, prefix=()):
    """Greedy-decode one source. Recomputes the whole decoder each step (no cache) so it
    shares no state-handling shortcuts with the engine it checks. prefix: target ids the
    decoder input starts with after the start token (HF's decoder_input_ids = [start,
    *prefix]); decoding continues after them and the result's ids begin with them (logits
    only for the generated steps)."""
    c = model.config
    model.eval()
    ml = generation_limits(c, max_length)
    if len(src_ids) > c["max_position_embeddings"]:
        raise ValueError("source longer than max_position_embeddings: encode with max_len")
    src = torch.tensor([src_ids])
    memory, enc_p = model.encode(src)
    tgt = [c["decoder_start_token_id"]] + list(prefix)
    if len(tgt) >= ml:
        raise ValueError("the prefix leaves no room for a token within max_length")
    step_logits = []
    forced = c.get("forced_eos_token_id") is not None
    eos = c["eos_token_id"]
    while True:
        logits, _, _ = model.decode(torch.tensor([tgt]), memory)
        raw = logits[0, -1]
        step_logits.append(raw.numpy().copy())
        scores = raw.clone()
        scores[c["pad_token_id"]] = float("-inf")
        if forced and len(tgt) == ml - 1:
            keep = scores[eos].clone()
            scores[:] = float("-inf")
            scores[eos] = keep
        nxt = int(torch.argmax(scores))
        tgt.append(nxt)
        if nxt == eos or len(tgt) >= ml:
            break
    _, self_p, cross_p = model.decode(torch.tensor([tgt[:-1]]), memory)
    return Result(ids=tgt[1:], logits=np.stack(step_logits),
                  enc_self=[p[0].numpy() for p in enc_p],
                  dec_self=[p[0].numpy() for p in self_p],
                  cross=[p[0].numpy() for p in cross_p])


@torch.no_grad()
def force_decode(model, src_ids, tgt_ids):
    """Teacher-force tgt_ids (ending in </s>): per-token log-probabilities and attention."""
    c = model.config
    model.eval()
    memory, enc_p = model.encode(torch.tensor([src_ids]))
    inp = [c["decoder_start_token_id"]] + list(tgt_ids[:-1])
    logits, self_p, cross_p = model.decode(torch.tensor([inp]), memory)
    logp = logits[0].log_softmax(-1)
    return [float(logp[t, i]) for t, i in enumerate(tgt_ids)], cross_p


# --------------------------------------------------------------------------------------
# Beam search, as HF generate(num_beams=B) (transformers 4.36-4.44: BeamSearchScorer,
# BeamHypotheses with decoder_prompt_len 1) computes it for MarianMTModel

# generation keys read from config.json, then generation_config.json (see load_hf_dir)
GENERATION_KEYS = ("num_beams", "length_penalty", "early_stopping", "min_length", "min_new_tokens",
                   "no_repeat_ngram_size", "repetition_penalty", "renormalize_logits")


def parse_early_stopping(v):
    """True, False or "never", from a bool or a string (command lines, JSON)."""
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        if low == "never":
            return "never"
        raise ValueError(f"early_stopping must be true, false or never, not {v!r}")
    if v is None:
        return False
    return bool(v)


def generation_defaults(config):
    """Beam-search settings of a config dict (config.json merged with generation_config.json
    by load_hf_dir), with HF GenerationConfig's class defaults for keys it lacks. The keys are
    beam_search's parameter names."""
    def get(k, default):
        v = config.get(k)
        return default if v is None else v

    min_length = int(get("min_length", 0))
    min_new = config.get("min_new_tokens")
    if min_new is not None and int(min_new) + 1 > min_length:
        min_length = int(min_new) + 1
    return dict(num_beams=int(get("num_beams", 1)),
                length_penalty=float(get("length_penalty", 1.0)),
                early_stopping=parse_early_stopping(get("early_stopping", False)),
                min_length=min_length,
                no_repeat_ngram_size=int(get("no_repeat_ngram_size", 0)),
                repetition_penalty=float(get("repetition_penalty", 1.0)),
                renormalize_logits=bool(get("renormalize_logits", False)))


class NearTies:
    """Smallest gap seen between two floats whose order decided something. A result whose
    gap is tiny may legitimately differ in an engine with other float32 rounding."""

    def __init__(self):
        self.gap = math.inf
        self.where = None

    def see(self, a, b, what):
        if not (math.isfinite(a) and math.isfinite(b)) or min(a, b) <= -1e8:
            return  # -inf, and the -1e9 start scores of beams 1.. (ties by rule, same anywhere)
        g = abs(a - b)
        if g < self.gap:
            self.gap, self.where = g, what


class BeamHypotheses:
    """Finished hypotheses of one sentence: at most num_beams, the worst evicted (HF's rules)."""

    def __init__(self, num_beams, length_penalty, early_stopping, max_length, ties=None, prompt_len=1):
        self.num_beams = num_beams
        self.prompt_len = prompt_len  # HF's decoder_prompt_len: the start token and any prefix
        self.length_penalty = length_penalty
        self.early_stopping = early_stopping
        self.max_length = max_length
        self.beams = []          # (score, ids, beam_indices, sum_logprobs), in order added
        self.worst_score = 1e9
        self.ties = ties or NearTies()

    def __len__(self):
        return len(self.beams)

    def add(self, ids, sum_logprobs, generated_len, beam_indices=None):
        score = sum_logprobs / (generated_len ** self.length_penalty)
        full = len(self.beams) >= self.num_beams
        if full:
            self.ties.see(score, self.worst_score, "add vs worst")
        if not full or score > self.worst_score:
            self.beams.append((score, ids, beam_indices, sum_logprobs))
            if len(self.beams) > self.num_beams:
                # lowest score goes; among equal scores the earliest added (tuple order)
                ranked = sorted((s, i) for i, (s, _, _, _) in enumerate(self.beams))
                self.ties.see(ranked[0][0], ranked[1][0], "evict")
                del self.beams[ranked[0][1]]
                self.worst_score = ranked[1][0]
            else:
                self.worst_score = min(score, self.worst_score)

    def is_done(self, best_sum_logprobs, hf_cur_len):
        """hf_cur_len = length of input_ids (start token included) + 1, as HF passes it."""
        if len(self.beams) < self.num_beams:
            return False
        if self.early_stopping is True:
            return True
        lp = self.length_penalty
        if self.early_stopping is False or lp <= 0:
            best = best_sum_logprobs / (hf_cur_len - self.prompt_len) ** lp
        else:  # "never" with a positive penalty: the longest the output could grow
            best = best_sum_logprobs / (self.max_length - self.prompt_len) ** lp
        if best != self.worst_score:  # equal when the best candidate is the </s> just added
            self.ties.see(self.worst_score, best, "is_done")  # as the worst: same arithmetic
        return self.worst_score >= best

    def best(self, k):
        """The k best, best first: sorted ascending (stable) then popped from the end, so
        among equal scores the hypothesis added later comes first."""
        ranked = sorted(self.beams, key=lambda h: h[0])
        for a, b in zip(ranked, ranked[1:]):
            self.ties.see(a[0], b[0], "final order")
        return [ranked.pop() for _ in range(min(k, len(ranked)))]


@dataclass
class BeamResult:
    ids: list              # generated ids without the start token; ends in eos if it ended so
    score: float           # HF's sequence score: sum_logprobs / generated_len ** length_penalty
    sum_logprobs: float    # float32 running score (a Python float)
    beam_indices: list     # beam (0..B-1) each token was appended to, per step


class BeamResults(list):
    """BeamResult list, best first, with .near_tie (smallest deciding gap) and .where."""
    near_tie = math.inf
    where = None
    steps = 0


def _process_logits(logp, beams, cur_len, c, ml, forced, min_length, no_repeat_ngram_size,
                    repetition_penalty, renormalize_logits):
    """HF's logits processors on the log-probabilities [B, V] of each beam, in HF's order."""
    eos, pad = c["eos_token_id"], c["pad_token_id"]
    ninf = float("-inf")
    for b, ids in enumerate(beams):
        row = logp[b]
        if repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(ids)), dtype=torch.long)
            s = row[seen]
            row[seen] = torch.where(s < 0, s * repetition_penalty, s / repetition_penalty)
        n = no_repeat_ngram_size
        if n > 0 and cur_len + 1 >= n:
            prev = tuple(ids[cur_len + 1 - n:])
            banned = {ids[i + n - 1] for i in range(cur_len - n + 1) if tuple(ids[i:i + n - 1]) == prev}
            for t in banned:
                row[t] = ninf
    logp[:, pad] = ninf          # bad_words_ids [[pad]] (already -inf: HF adds its -inf bias)
    if min_length > 0 and cur_len < min_length:
        logp[:, eos] = ninf
    if forced and cur_len == ml - 1:
        logp[:] = ninf
        logp[:, eos] = 0.0
    if renormalize_logits:
        logp = logp.log_softmax(-1)
    return logp


def beam_step(logp, scores, beams, eos, hyps, ties, where, history=None):
    """One step of HF's beam search on the processed log-probabilities logp [B, V] of the
    beams (running float32 scores [B]): the 2*B best of the flat beam*V + token sums
    (float32 adds; ties to the lower index), near ties told to ties (`where` the step's
    name); </s> among the first B closes a hypothesis in hyps, the B best others go on.
    history: the beam indices of each beam (None: not kept). Returns (beams, history,
    scores, done)."""
    B, V = logp.shape
    cur_len = len(beams[0])
    cand = (logp + scores[:, None]).reshape(-1).numpy()   # float32 adds, flat beam*V+token
    ranked = np.argsort(-cand, kind="stable")               # descending; ties: lower index
    order = ranked[: 2 * B]
    top = cand[ranked[: 2 * B + 1]]
    for a, b in zip(top, top[1:]):
        ties.see(float(a), float(b), where)
    new = []
    for rank, fi in enumerate(order):
        b, tok = divmod(int(fi), V)
        s = float(cand[fi])
        if tok == eos:
            if rank >= B:
                continue
            hyps.add(beams[b][1:] + [eos], s, generated_len=cur_len + 1 - hyps.prompt_len,
                     beam_indices=None if history is None else history[b] + [b])
        else:
            new.append((s, tok, b))
        if len(new) == B:
            break
    assert len(new) == B, "fewer live candidates than beams"
    done = hyps.is_done(float(cand[order[0]]), cur_len + 1)
    beams = [beams[b] + [tok] for _, tok, b in new]
    if history is not None:
        history = [history[b] + [b] for _, _, b in new]
    scores = torch.tensor([s for s, _, _ in new], dtype=torch.float32)
    return beams, history, scores, done


@torch.no_grad()
def beam_search(model, src_ids, num_beams, length_penalty=1.0, early_stopping=False,
                num_return_sequences=1, max_length=None, min_length=0, no_repeat_ngram_size=0,
                repetition_penalty=1.0, renormalize_logits=False, prefix=()):
    """Beam-search one source as HF generate(num_beams=...) does for MarianMTModel: pad
    banned before log_softmax, logits processors, 2*B candidates per step, BeamHypotheses
    with HF's tie rules, float32 running scores. Recomputes the whole decoder over every
    prefix each step (no cache). Returns BeamResults, best first (num_return_sequences).
    prefix: target ids every beam starts with after the start token, as HF's
    generate(decoder_input_ids=[start, *prefix]): the prompt (decoder_prompt_len = 1 +
    len(prefix)) scores nothing, and lengths in the penalty count only what follows it;
    the results' ids begin with the prefix."""
    c = model.config
    model.eval()
    B = int(num_beams)
    if B < 1:
        raise ValueError("num_beams must be >= 1")
    if not 1 <= num_return_sequences <= B:
        raise ValueError("num_return_sequences must be in 1..num_beams")
    early_stopping = parse_early_stopping(early_stopping)
    ml = generation_limits(c, max_length)
    if len(src_ids) > c["max_position_embeddings"]:
        raise ValueError("source longer than max_position_embeddings: encode with max_len")
    eos, pad = c["eos_token_id"], c["pad_token_id"]
    forced = c.get("forced_eos_token_id") is not None
    memory, _ = model.encode(torch.tensor([src_ids]))
    memory = memory.expand(B, -1, -1)
    ties = NearTies()
    prompt = 1 + len(prefix)
    if prompt >= ml:
        raise ValueError("the prefix leaves no room for a token within max_length")
    hyps = BeamHypotheses(B, length_penalty, early_stopping, ml, ties, prompt)
    beams = [[c["decoder_start_token_id"]] + list(prefix) for _ in range(B)]   # HF's input_ids rows
    history = [[] for _ in range(B)]                              # beam indices per step
    scores = torch.full((B,), -1e9, dtype=torch.float32)
    scores[0] = 0.0
    done = False
    steps = 0
    while True:
        steps += 1
        cur_len = len(beams[0])
        logits, _, _ = model.decode(torch.tensor(beams), memory)
        raw = logits[:, -1, :].clone()
        raw[:, pad] = float("-inf")                        # adjust_logits_during_generation
        logp = raw.log_softmax(-1)
        logp = _process_logits(logp, beams, cur_len, c, ml, forced, min_length,
                               no_repeat_ngram_size, repetition_penalty, renormalize_logits)
        beams, history, scores, done = beam_step(logp, scores, beams, eos, hyps, ties, f"top-k at step {steps}",
                                                 history)
        if done or len(beams[0]) >= ml:
            break
    if not done:
        for b in range(B):
            hyps.add(beams[b][1:], float(scores[b]), generated_len=len(beams[b]) - prompt,
                     beam_indices=history[b])
    out = BeamResults(BeamResult(ids=list(ids), score=score, sum_logprobs=sl, beam_indices=bi)
                      for score, ids, bi, sl in hyps.best(num_return_sequences))
    out.near_tie, out.where, out.steps = ties.gap, ties.where, steps
    return out


@torch.no_grad()
def greedy_loop(model, src_ids, start, process, ml):
    """Greedy generate() of the M2M-100/mBART and T5 references: the decoder input starts as
    start ([decoder start, *prompt]); each step the whole decoder is recomputed (no cache),
    process(raw logits [1, V], [input ids]) gives the scores whose argmax is appended, until
    </s> or ml tokens. Returns the generated ids (the prompt included), every step's raw
    logits and the attention of the final sequence."""
    model.eval()
    eos = model.config["eos_token_id"]
    memory, enc_p = model.encode(torch.tensor([src_ids]))
    tgt = list(start)
    step_logits = []
    while True:
        logits, _, _ = model.decode(torch.tensor([tgt]), memory)
        raw = logits[0, -1]
        step_logits.append(raw.numpy().copy())
        nxt = int(torch.argmax(process(raw.clone().unsqueeze(0), [tgt])[0]))
        tgt.append(nxt)
        if nxt == eos or len(tgt) >= ml:
            break
    _, self_p, cross_p = model.decode(torch.tensor([tgt[:-1]]), memory)
    return Result(ids=tgt[1:], logits=np.stack(step_logits), enc_self=[p[0].numpy() for p in enc_p],
                  dec_self=[p[0].numpy() for p in self_p], cross=[p[0].numpy() for p in cross_p])


@torch.no_grad()
def beam_loop(model, src_ids, start, process, num_beams, length_penalty, early_stopping, num_return_sequences,
              ml):
    """Beam generate() of the M2M-100/mBART and T5 references: every beam starts as start
    (HF's decoder_prompt_len = len(start)), beams 1.. at -1e9; each step the log_softmax of
    each beam's raw logits goes through process(logp [B, V], beams), then beam_step (2*B
    candidates, BeamHypotheses); the whole decoder recomputed per beam (no cache). Returns
    BeamResults, best first."""
    model.eval()
    B = int(num_beams)
    eos = model.config["eos_token_id"]
    memory, _ = model.encode(torch.tensor([src_ids]))
    ties = NearTies()
    hyps = BeamHypotheses(B, length_penalty, parse_early_stopping(early_stopping), ml, ties, len(start))
    beams = [list(start) for _ in range(B)]
    scores = torch.full((B,), -1e9, dtype=torch.float32)
    scores[0] = 0.0
    done = False
    while True:
        cur_len = len(beams[0])
        rows = [model.decode(torch.tensor([b]), memory)[0][0, -1] for b in beams]
        logp = process(torch.stack(rows).log_softmax(-1), beams)
        beams, _, scores, done = beam_step(logp, scores, beams, eos, hyps, ties, f"top-k at length {cur_len}")
        if done or len(beams[0]) >= ml:
            break
    if not done:
        for b in range(B):
            hyps.add(beams[b][1:], float(scores[b]), generated_len=len(beams[b]) - len(start))
    out = BeamResults(BeamResult(ids=list(ids), score=score, sum_logprobs=sl, beam_indices=bi)
                      for score, ids, bi, sl in hyps.best(num_return_sequences))
    out.near_tie, out.where = ties.gap, ties.where
    return out


@torch.no_grad()
def attention_of(model, src_ids, tgt_ids):
    """Teacher-forced attention for an output tgt_ids (without the start token, ending in eos
    or cut by length), as attend's --dump-attention lays it out: per layer enc_self [H,S,S],
    dec_self [H,T,T], cross [H,T,S], where row t is the step that predicted tgt_ids[t]."""
    c = model.config
    model.eval()
    memory, enc_p = model.encode(torch.tensor([src_ids]))
    inp = [c["decoder_start_token_id"]] + list(tgt_ids[:-1])
    logits, self_p, cross_p = model.decode(torch.tensor([inp]), memory)
    return dict(enc_self=[p[0].numpy() for p in enc_p], dec_self=[p[0].numpy() for p in self_p],
                cross=[p[0].numpy() for p in cross_p], logits=logits[0].numpy())


# --------------------------------------------------------------------------------------
# HF-style directories: what users download, and what random test models are saved as

def load_state_dict(path):
    """The tensors of an HF-style directory: model.safetensors, else pytorch_model.bin."""
    st = os.path.join(path, "model.safetensors")
    if os.path.exists(st):
        return {k: torch.from_numpy(v) for k, v in safetensors_np.load(st).items()}
    return torch.load(os.path.join(path, "pytorch_model.bin"), map_location="cpu")


def load_hf_dir(path):
    """Load config.json, model.safetensors (or pytorch_model.bin), spm models and vocab."""
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    gen = os.path.join(path, "generation_config.json")
    if os.path.exists(gen):
        with open(gen) as f:
            g = json.load(f)
        for k in ("max_length", "forced_eos_token_id", "decoder_start_token_id", "bad_words_ids",
                  "max_new_tokens") + GENERATION_KEYS:
            if k in g:
                config[k] = g[k]
    if config.get("max_new_tokens") is not None:  # HF: max_length = prompt (1) + N
        config["max_length"] = int(config["max_new_tokens"]) + 1
    if "max_length" not in config:
        config["max_length"] = 20
    if "forced_eos_token_id" not in config:
        config["forced_eos_token_id"] = None
    model = Marian(config)
    sd = load_state_dict(path)
    own = model.state_dict()
    c = model.config
    for name in own:
        src = name
        if name not in sd:
            if name.endswith("embed_tokens.weight") and c["share_encoder_decoder_embeddings"]:
                src = "model.shared.weight"
            elif name == "lm_head.weight" and c["tie_word_embeddings"]:
                src = ("model.shared.weight" if c["share_encoder_decoder_embeddings"]
                       else "model.decoder.embed_tokens.weight")
            elif name == "model.shared.weight" and not c["share_encoder_decoder_embeddings"]:
                continue
        own[name].copy_(sd[src].to(torch.float32).reshape(own[name].shape))
    with open(os.path.join(path, "vocab.json")) as f:
        vocab = json.load(f)
    tv = os.path.join(path, "target_vocab.json")
    target_vocab = None
    if os.path.exists(tv):
        with open(tv) as f:
            target_vocab = json.load(f)
    model.tok = MarianTok(os.path.join(path, "source.spm"), os.path.join(path, "target.spm"),
                          vocab, target_vocab, max_len=c["max_position_embeddings"])
    return model


def save_hf_dir(model, path, source_spm, target_spm, vocab, target_vocab=None, fmt="safetensors"):
    """Write an HF-style MarianMT directory: config.json, weights, spm models, vocab.json."""
    os.makedirs(path, exist_ok=True)
    c = dict(model.config)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if fmt == "safetensors":
        sd = model.hf_state_dict(with_duplicates=False)
        safetensors_np.save({k: v.numpy() for k, v in sd.items()},
                            os.path.join(path, "model.safetensors"))
    else:
        torch.save(model.hf_state_dict(with_duplicates=True), os.path.join(path, "pytorch_model.bin"))
    for name, blob in (("source.spm", source_spm), ("target.spm", target_spm)):
        with open(os.path.join(path, name), "wb") as f:
            f.write(blob)
    with open(os.path.join(path, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=0)
    if target_vocab is not None:
        with open(os.path.join(path, "target_vocab.json"), "w") as f:
            json.dump(target_vocab, f, ensure_ascii=False, indent=0)
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"separate_vocabs": target_vocab is not None, "model_max_length": 512}, f)


def build_vocab(*spm_files):
    """opus-mt's joint vocabulary: </s>=0, <unk>=1, then every piece of the given
    SentencePiece models in order of first appearance, <pad> last."""
    import sentencepiece as spm
    vocab = {"</s>": 0, "<unk>": 1}
    for path in spm_files:
        sp = spm.SentencePieceProcessor(model_file=path)
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            if sp.is_control(i) or sp.is_unknown(i) or p in vocab:
                continue
            vocab[p] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


@torch.no_grad()
def random_parameters(m, gain):
    """Every parameter of m drawn in named_parameters order: matrices std gain/sqrt(fan_in),
    LayerNorm gains uniform in 0.5..1.5, other vectors std 0.1."""
    for name, p in m.named_parameters():
        if p.dim() == 2:
            p.normal_(0.0, gain / math.sqrt(p.shape[1]))
        elif "norm" in name and name.endswith("weight"):
            p.uniform_(0.5, 1.5)
        else:
            p.normal_(0.0, 0.1)


def random_model(config, seed=0, gain=3.0, eos_bias=0.0, bias_std=0.0):
    """A Marian model with random weights, std gain/sqrt(fan_in): a gain near 3 keeps the
    greedy output from collapsing onto one repeated token. eos_bias shifts
    final_logits_bias[eos] so outputs end early or late."""
    torch.manual_seed(seed)
    m = Marian(config)
    c = m.config
    with torch.no_grad():
        random_parameters(m, gain)
        if not c["scale_embedding"]:
            # without the sqrt(d) scale, give embeddings unit variance so tokens still matter
            for e in {id(x): x for x in (m.model.shared, m.model.encoder.embed_tokens,
                                          m.model.decoder.embed_tokens)}.values():
                e.weight.normal_(0.0, gain)
        m.final_logits_bias.normal_(0.0, bias_std)
        m.final_logits_bias[0, c["eos_token_id"]] += eos_bias
    return m


def calibrate_eos(model, sources, rate):
    """Raise final_logits_bias[eos] so that about `rate` of greedy steps end the sentence:
    the bias becomes that quantile of (best other logit - eos logit) over the sources.
    Random models then give outputs of many lengths, some ending at once."""
    c = model.config
    margins = []
    for src in sources:
        r = greedy(model, src)
        lg = r.logits.copy()
        lg[:, c["pad_token_id"]] = -np.inf
        eos = lg[:, c["eos_token_id"]].copy()
        lg[:, c["eos_token_id"]] = -np.inf
        margins.extend(lg.max(1) - eos)
    with torch.no_grad():
        model.final_logits_bias[0, c["eos_token_id"]] += float(np.quantile(margins, rate)) + 1e-3


# --------------------------------------------------------------------------------------
# Command line

def _beam_settings(a, m):
    """beam_search keyword arguments from the command line: the model's generation defaults
    with --model-defaults (HF class defaults otherwise), then each option given."""
    st = generation_defaults(m.config) if a.model_defaults else generation_defaults({})
    for opt, key in (("beam", "num_beams"), ("length_penalty", "length_penalty"),
                     ("early_stopping", "early_stopping"), ("min_length", "min_length"),
                     ("no_repeat_ngram_size", "no_repeat_ngram_size"),
                     ("repetition_penalty", "repetition_penalty")):
        v = getattr(a, opt)
        if v is not None:
            st[key] = parse_early_stopping(v) if key == "early_stopping" else v
    if a.renormalize_logits:
        st["renormalize_logits"] = True
    st["num_return_sequences"] = a.n_best or 1
    plain_greedy = st["num_beams"] == 1 and st["num_return_sequences"] == 1
    processors = (st["min_length"] > 0 or st["no_repeat_ngram_size"] > 0
                  or st["repetition_penalty"] != 1.0 or st["renormalize_logits"])
    if plain_greedy and processors:
        raise SystemExit("reference.py: logits processors need --beam 2 or more")
    return st, plain_greedy


def _cmd_translate(a):
    m = load_hf_dir(a.model_dir)
    st, plain_greedy = _beam_settings(a, m)
    lines = a.text if a.text else [l.rstrip("\n") for l in sys.stdin]
    for i, line in enumerate(lines):
        if plain_greedy:
            r = greedy(m, m.tok.encode(line), a.max_length)
            hyps = [(r.ids, None)]
        else:
            res = beam_search(m, m.tok.encode(line), max_length=a.max_length, **st)
            hyps = [(h.ids, h.score) for h in res]
        if a.n_best:
            for ids, score in hyps:
                sc = "" if score is None else f"{score:.6f}"
                print(f"{i} ||| {m.tok.decode(ids)} ||| {sc}", flush=True)
        else:
            print(m.tok.decode(hyps[0][0]), flush=True)


def write_dump(out_path, model, sources, greedy_of, best_of=None):
    """The .npz of `reference.py dump` (the tests read it; every family's reference writes
    it): for source i (ids), s{i}/src_ids, tgt_ids, logits, text and each layer's enc_self,
    dec_self and cross attention of greedy_of(src) -> Result; with best_of(src) -> the best
    beam hypothesis instead, that hypothesis teacher-forced, s{i}/score (its float32 sum of
    log-probabilities) and s{i}/normalized_score (HF's sequence score)."""
    out = {}
    for i, src in enumerate(sources):
        if best_of is None:
            r = greedy_of(src)
        else:
            best = best_of(src)
            att = attention_of(model, src, best.ids)
            r = Result(ids=best.ids, logits=att["logits"], enc_self=att["enc_self"],
                       dec_self=att["dec_self"], cross=att["cross"])
            out[f"s{i}/score"] = np.array([best.sum_logprobs], dtype=np.float32)
            out[f"s{i}/normalized_score"] = np.array([best.score], dtype=np.float32)
        out[f"s{i}/src_ids"] = np.array(src, dtype=np.int32)
        out[f"s{i}/tgt_ids"] = np.array(r.ids, dtype=np.int32)
        out[f"s{i}/logits"] = r.logits.astype(np.float32)
        out[f"s{i}/text"] = np.array(model.tok.decode(r.ids))
        for kind in ("enc_self", "dec_self", "cross"):
            for l, p in enumerate(getattr(r, kind)):
                out[f"s{i}/{kind}/l{l}"] = p
    np.savez(out_path, **out)


def _cmd_dump(a):
    """Write ids, logits and every attention matrix per sentence to an .npz for the tests.
    With --beam N (N >= 2) the best hypothesis, its teacher-forced logits and attention,
    s{i}/score and s{i}/normalized_score."""
    m = load_hf_dir(a.model_dir)
    st, plain_greedy = _beam_settings(a, m)
    with open(a.input, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    beam = None if plain_greedy else lambda src: beam_search(m, src, max_length=a.max_length, **st)[0]
    write_dump(a.out, m, [m.tok.encode(line) for line in lines], lambda src: greedy(m, src, a.max_length), beam)


def _cmd_random(a):
    """Save a random model over the given SentencePiece models as an HF-style directory."""
    with open(a.source_spm, "rb") as f:
        ssp = f.read()
    with open(a.target_spm, "rb") as f:
        tsp = f.read()
    vocab = build_vocab(a.source_spm, a.target_spm)
    pad = vocab["<pad>"]
    config = json.loads(a.config) if a.config else {}
    config.update(vocab_size=len(vocab), decoder_vocab_size=len(vocab), pad_token_id=pad,
                  decoder_start_token_id=pad, bad_words_ids=[[pad]])
    m = random_model(config, seed=a.seed, gain=a.gain, eos_bias=a.eos_bias, bias_std=a.bias_std)
    if a.calibrate_eos:
        m.tok = MarianTok(a.source_spm, a.target_spm, vocab)
        with open(a.calibrate_eos, encoding="utf-8") as f:
            sources = [m.tok.encode(l.rstrip("\n")) for l in f]
        calibrate_eos(m, sources, a.eos_rate)
    save_hf_dir(m, a.out_dir, ssp, tsp, vocab, fmt=a.format)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("translate", help="translate arguments or stdin lines (greedy unless "
                                         "--beam N or --model-defaults)")
    t.add_argument("model_dir")
    t.add_argument("text", nargs="*")
    t.add_argument("--max-length", type=int)
    t.add_argument("--n-best", type=int, metavar="K",
                   help="K lines 'i ||| text ||| score' per input line (score: HF's sequence score)")
    t.set_defaults(fn=_cmd_translate)
    d = sub.add_parser("dump", help="ids, logits and attention of each input line to .npz")
    d.add_argument("model_dir")
    d.add_argument("--input", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--max-length", type=int)
    d.set_defaults(fn=_cmd_dump, n_best=None)
    for q in (t, d):
        q.add_argument("--beam", type=int, metavar="N", help="beam search with N beams (1: greedy)")
        q.add_argument("--model-defaults", action="store_true",
                       help="start from the model's generation settings (num_beams, ...)")
        q.add_argument("--length-penalty", type=float)
        q.add_argument("--early-stopping", choices=["true", "false", "never"])
        q.add_argument("--min-length", type=int)
        q.add_argument("--no-repeat-ngram-size", type=int)
        q.add_argument("--repetition-penalty", type=float)
        q.add_argument("--renormalize-logits", action="store_true")
    r = sub.add_parser("random", help="save a random model as an HF-style directory")
    r.add_argument("out_dir")
    r.add_argument("--source-spm", required=True)
    r.add_argument("--target-spm", required=True)
    r.add_argument("--config", help="JSON object of config.json overrides")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--eos-bias", type=float, default=0.0)
    r.add_argument("--bias-std", type=float, default=0.0)
    r.add_argument("--gain", type=float, default=3.0, help="weight std times sqrt(fan_in)")
    r.add_argument("--calibrate-eos", metavar="FILE",
                   help="source lines on which to set the EOS bias (see --eos-rate)")
    r.add_argument("--eos-rate", type=float, default=0.08,
                   help="fraction of greedy steps that should pick </s> (default 0.08)")
    r.add_argument("--format", choices=["safetensors", "bin"], default="safetensors")
    r.set_defaults(fn=_cmd_random)
    a, rest = p.parse_known_args(argv)
    if rest and a.cmd == "translate" and not any(x.startswith("-") for x in rest):
        a.text += rest  # TEXT arguments after options
    elif rest:
        p.error("unrecognized arguments: " + " ".join(rest))
    a.fn(a)


# --------------------------------------------------------------------------------------
# Marian releases: the npz layout OPUS-MT publishes, written for the npz exporter's tests

# HF name inside a layer -> Marian's (after "encoder_l{n}_" / "decoder_l{n}_", n from 1)
MARIAN_LAYER_NAMES = {
    "fc1.weight": "ffn_W1", "fc1.bias": "ffn_b1", "fc2.weight": "ffn_W2", "fc2.bias": "ffn_b2",
    "final_layer_norm.weight": "ffn_ffn_ln_scale", "final_layer_norm.bias": "ffn_ffn_ln_bias",
}
for _hf, _m in (("self_attn", "self"), ("encoder_attn", "context")):
    for _p, _x in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "o")):
        MARIAN_LAYER_NAMES[f"{_hf}.{_p}.weight"] = f"{_m}_W{_x}"
        MARIAN_LAYER_NAMES[f"{_hf}.{_p}.bias"] = f"{_m}_b{_x}"
    MARIAN_LAYER_NAMES[f"{_hf}_layer_norm.weight"] = f"{_m}_Wo_ln_scale"
    MARIAN_LAYER_NAMES[f"{_hf}_layer_norm.bias"] = f"{_m}_Wo_ln_bias"


def marian_model_yml(config, **overrides):
    """Marian's model.yml settings of a post-norm transformer with this config (the keys a
    Marian training run writes that matter here); overrides replace or add settings, None
    drops one."""
    c = config
    shared = c["share_encoder_decoder_embeddings"]
    v = c["vocab_size"] - 1  # <pad>, the last id, is HF's addition
    s = {"type": "transformer", "dim-vocabs": [v, v], "dim-emb": c["d_model"],
         "enc-depth": c["encoder_layers"], "dec-depth": c["decoder_layers"],
         "transformer-heads": c["encoder_attention_heads"],
         "transformer-dim-ffn": c["encoder_ffn_dim"],
         "transformer-decoder-dim-ffn": (0 if c["decoder_ffn_dim"] == c["encoder_ffn_dim"]
                                         else c["decoder_ffn_dim"]),
         "transformer-ffn-depth": 2, "transformer-decoder-ffn-depth": 0,
         "transformer-ffn-activation": {"silu": "swish"}.get(c["activation_function"],
                                                             c["activation_function"]),
         "tied-embeddings": True, "tied-embeddings-src": shared, "tied-embeddings-all": shared,
         "transformer-preprocess": "", "transformer-postprocess": "dan",
         "transformer-postprocess-emb": "d", "transformer-postprocess-top": "",
         "transformer-train-position-embeddings": False, "transformer-decoder-autoreg":
         "self-attention", "transformer-tied-layers": [], "transformer-guided-alignment-layer":
         "last", "transformer-aan-depth": 2, "transformer-aan-nogate": False,
         "transformer-no-projection": False, "layer-normalization": False, "right-left": False,
         "dec-cell-base-depth": 2, "dec-cell-high-depth": 1, "ulr-dim-emb": 0,
         "version": "v1.7.6 1d4ba73 2019-05-11 17:16:31 +0100"}
    s.update(overrides)
    return {k: x for k, x in s.items() if x is not None}


def _yaml_scalar(x):
    """x as YAML text: plain where that reads back as the same string, else double-quoted."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if re.fullmatch(r"[\w\u2581][\w\u2581.+ -]*[\w\u2581]|[\w\u2581]", x):
        return x
    out = []
    for ch in x:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and ch not in "\u2028\u2029\ufeff":
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def yaml_text(d):
    """A flat YAML map (values scalars or lists of scalars), block style as Marian writes."""
    lines = []
    for k, x in d.items():
        if isinstance(x, list):
            lines.append(f"{_yaml_scalar(k)}:" + ("" if x else " []"))
            lines += [f"  - {_yaml_scalar(e)}" for e in x]
        else:
            lines.append(f"{_yaml_scalar(k)}: {_yaml_scalar(x)}")
    return "\n".join(lines) + "\n"


def marian_tensors(model):
    """Marian's {npz name: float32 array} of model: matrices [in, out], vectors [1, n],
    layers from 1, the embedding rows without <pad> (which must be the last id; the
    converter gives it a zero row and a zero logits bias back)."""
    c = model.config
    sd = {k: v.detach().numpy().astype(np.float32)
          for k, v in model.hf_state_dict(with_duplicates=False).items()}
    if c["pad_token_id"] != c["vocab_size"] - 1 or c["decoder_vocab_size"] != c["vocab_size"]:
        raise ValueError("a Marian release needs one vocabulary size and <pad> as its last id")
    if not c["tie_word_embeddings"]:
        raise ValueError("Marian's OPUS-MT models tie the output to the decoder embedding")
    out = {}
    if c["share_encoder_decoder_embeddings"]:
        out["Wemb"] = sd.pop("model.shared.weight")[:-1]
    else:
        out["encoder_Wemb"] = sd.pop("model.encoder.embed_tokens.weight")[:-1]
        out["decoder_Wemb"] = sd.pop("model.decoder.embed_tokens.weight")[:-1]
    out["decoder_ff_logit_out_b"] = sd.pop("final_logits_bias")[:, :-1]
    for k, v in sd.items():
        m = re.fullmatch(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.+)", k)
        name = f"{m.group(1)}_l{int(m.group(2)) + 1}_{MARIAN_LAYER_NAMES[m.group(3)]}"
        out[name] = np.ascontiguousarray(v.T) if v.ndim == 2 else v.reshape(1, -1)
    return out


def save_marian_release(model, path, source_spm, target_spm, vocab, target_vocab=None,
                        beam_size=4, as_zip=False, list_files=True, model_yml=None,
                        tensors=None):
    """Write model as a Marian release like OPUS-MT's downloads: decoder.yml, the .npz (with
    model.yml as `special:model.yml`, bytes and a NUL), *.vocab.yml (or *.src.vocab.yml and
    *.trg.vocab.yml), source.spm, target.spm; a directory, or with as_zip the .zip `path`.
    vocab/target_vocab: {piece: id} with <pad> last (left out of the yml, as Marian has no
    <pad>). list_files: decoder.yml names the model and vocabularies (releases do). model_yml:
    overrides for marian_model_yml; tensors: a function changing the {name: array} to save."""
    import io
    import zipfile
    c = model.config
    w = marian_tensors(model)
    if tensors is not None:
        w = tensors(w)
    yml = yaml_text(marian_model_yml(c, **(model_yml or {})))
    w["special:model.yml"] = np.frombuffer(yml.encode("utf-8") + b"\0", dtype=np.int8)
    buf = io.BytesIO()
    np.savez(buf, **w)
    stem = f"opus.spm{len(vocab) - 1}"
    npz = f"{stem}.transformer-align.model1.npz.best-perplexity.npz"
    if target_vocab is None:
        vocabs = {f"{stem}.vocab.yml": vocab}
        names = [f"{stem}.vocab.yml"] * 2
    else:
        vocabs = {f"{stem}.src.vocab.yml": vocab, f"{stem}.trg.vocab.yml": target_vocab}
        names = list(vocabs)
    files = {npz: buf.getvalue(), "source.spm": source_spm, "target.spm": target_spm,
             "README.md": b"# a random model for attend's tests\n"}
    for name, v in vocabs.items():
        body = {p: i for p, i in sorted(v.items(), key=lambda e: e[1]) if p != "<pad>"}
        files[name] = yaml_text(body).encode("utf-8")
    dec = {"models": [npz], "vocabs": names} if list_files else {}
    dec.update({"beam-size": beam_size, "normalize": "0.6", "word-penalty": 0,
                "mini-batch": 16, "maxi-batch": 100, "maxi-batch-sort": "src",
                "relative-paths": True})
    files["decoder.yml"] = yaml_text(dec).encode("utf-8")
    if as_zip:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, blob in files.items():
                z.writestr(name, blob)
    else:
        os.makedirs(path, exist_ok=True)
        for name, blob in files.items():
            with open(os.path.join(path, name), "wb") as f:
                f.write(blob)
    return path


if __name__ == "__main__":
    main()
