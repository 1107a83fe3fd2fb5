#!/usr/bin/python3
"""Whisper (model_type whisper): what HF transformers 4.x's WhisperForConditionalGeneration
computes, written independently for attend's tests, and random checkpoints of real shapes
in HF's own layout (config.json, generation_config.json, preprocessor_config.json,
model.safetensors, tokenizer files) for the exporter to read.

The model: log-mel features [n_mels, 3000] -> two 1-D convolutions (kernel 3, padding 1, the
second with stride 2), each followed by GELU -> 1500 frames + the stored (sinusoidal)
position table -> pre-norm encoder layers -> LayerNorm. The decoder: token embedding +
learned positions (row p for position p) -> pre-norm layers (self, cross, feed-forward) ->
LayerNorm -> logits against the token embedding (proj_out, tied). Attention: queries
scaled by head_dim^-0.5, k_proj without bias. LayerNorm eps 1e-5, exact (erf) GELU.

Generation here is the part the model needs for parity tests of the forward pass: greedy
decoding from a decoder prompt with HF's suppress_tokens and begin_suppress_tokens
processors. Timestamps, beams, long-form audio and token timestamps live in
reference_whisper_generate.py."""
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

# WhisperConfig's class defaults (a config.json without a key means these)
WHISPER_DEFAULT_CONFIG = {
    "model_type": "whisper",
    "architectures": ["WhisperForConditionalGeneration"],
    "vocab_size": 51865,
    "num_mel_bins": 80,
    "encoder_layers": 4,
    "encoder_attention_heads": 6,
    "decoder_layers": 4,
    "decoder_attention_heads": 6,
    "decoder_ffn_dim": 1536,
    "encoder_ffn_dim": 1536,
    "d_model": 384,
    "max_source_positions": 1500,
    "max_target_positions": 448,
    "activation_function": "gelu",
    "scale_embedding": False,
    "pad_token_id": 50256,
    "bos_token_id": 50256,
    "eos_token_id": 50256,
    "decoder_start_token_id": 50257,
    "begin_suppress_tokens": [220, 50256],
    "suppress_tokens": None,
    "tie_word_embeddings": True,
    "is_encoder_decoder": True,
}

# The published checkpoints' shapes (d_model, layers, heads, ffn, n_mels); "mini" is ours,
# a real vocabulary with small layers, for fast tests
SHAPES = {
    "mini": (64, 2, 4, 256, 80),
    "tiny": (384, 4, 6, 1536, 80),
    "base": (512, 6, 8, 2048, 80),
    "small": (768, 12, 12, 3072, 80),
    "large-v3": (1280, 32, 20, 5120, 128),
}

N_FRAMES = 3000  # 30 s of 10 ms frames: the encoder's fixed input length


def shape_config(shape, english_only=False):
    """A config.json of a published shape; english_only gives the *.en layout (51864 ids,
    <|endoftext|> 50256, <|startoftranscript|> 50257), else the multilingual one (51865,
    50257 and 50258; large-v3 has one more language: 51866)."""
    d, layers, heads, ffn, mels = SHAPES[shape]
    V = 51864 if english_only else (51866 if mels == 128 else 51865)
    eot = 50256 if english_only else 50257
    c = dict(WHISPER_DEFAULT_CONFIG, d_model=d, encoder_layers=layers, decoder_layers=layers,
             encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
             decoder_ffn_dim=ffn, num_mel_bins=mels, vocab_size=V, eos_token_id=eot, pad_token_id=eot,
             bos_token_id=eot, decoder_start_token_id=eot + 1, begin_suppress_tokens=[220, eot])
    return c


def sinusoids(length, channels):
    """OpenAI's encoder position table (HF initialises embed_positions with it): sin of
    position * 10000^(-i / (channels/2 - 1)) for the first half of the columns, cos after."""
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


# --------------------------------------------------------------------------------------
# The model

class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x, kv, causal=False):
        """x [T, d] attends over kv [S, d]: (output [T, d], probabilities [H, T, S])."""
        T, S, H, hd = x.shape[0], kv.shape[0], self.heads, self.hd
        q = (self.q_proj(x) * hd ** -0.5).view(T, H, hd).transpose(0, 1)
        k = self.k_proj(kv).view(S, H, hd).transpose(0, 1)
        v = self.v_proj(kv).view(S, H, hd).transpose(0, 1)
        scores = q @ k.transpose(1, 2)
        if causal:
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1 + S - T), float("-inf"))
        p = torch.softmax(scores, dim=-1)
        return self.out_proj((p @ v).transpose(0, 1).reshape(T, H * hd)), p


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.self_attn = Attention(d, c["encoder_attention_heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.fc1 = nn.Linear(d, c["encoder_ffn_dim"])
        self.fc2 = nn.Linear(c["encoder_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=1e-5)

    def forward(self, x):
        h = self.self_attn_layer_norm(x)
        a, p = self.self_attn(h, h)
        x = x + a
        x = x + self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(x))))
        return x, p


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.self_attn = Attention(d, c["decoder_attention_heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.encoder_attn = Attention(d, c["decoder_attention_heads"])
        self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=1e-5)
        self.fc1 = nn.Linear(d, c["decoder_ffn_dim"])
        self.fc2 = nn.Linear(c["decoder_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=1e-5)

    def forward(self, y, memory):
        h = self.self_attn_layer_norm(y)
        a, ps = self.self_attn(h, h, causal=True)
        y = y + a
        a, pc = self.encoder_attn(self.encoder_attn_layer_norm(y), memory)
        y = y + a
        y = y + self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(y))))
        return y, ps, pc


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.conv1 = nn.Conv1d(c["num_mel_bins"], d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(c["max_source_positions"], d)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c["encoder_layers"]))
        self.layer_norm = nn.LayerNorm(d, eps=1e-5)


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], d)
        self.embed_positions = nn.Embedding(c["max_target_positions"], d)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c["decoder_layers"]))
        self.layer_norm = nn.LayerNorm(d, eps=1e-5)


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)


class Whisper(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = c = dict(WHISPER_DEFAULT_CONFIG, **config)
        self.model = Inner(c)

    def encode(self, features, want_attention=False):
        """features [n_mels, 3000] -> encoder states [1500, d] (and [L, H, 1500, 1500])."""
        e = self.model.encoder
        x = torch.as_tensor(features, dtype=torch.float32)[None]
        if x.shape[-1] != 2 * e.embed_positions.weight.shape[0]:
            raise ValueError(f"features of {x.shape[-1]} frames; the encoder takes {2 * e.embed_positions.weight.shape[0]}")
        x = nn.functional.gelu(e.conv1(x))
        x = nn.functional.gelu(e.conv2(x))[0].transpose(0, 1)
        x = x + e.embed_positions.weight[: x.shape[0]]
        probs = []
        for layer in e.layers:
            x, p = layer(x)
            probs.append(p)
        x = e.layer_norm(x)
        return (x, torch.stack(probs)) if want_attention else x

    def decode(self, memory, ids, states=False):
        """Logits [T, V] of every position of ids given encoder states memory, with the
        self [L, H, T, T] and cross [L, H, T, S] attention probabilities (states: the final
        states [T, d] instead of the logits)."""
        dec = self.model.decoder
        ids = torch.as_tensor(ids, dtype=torch.long)
        y = dec.embed_tokens(ids) + dec.embed_positions.weight[: len(ids)]
        ps, pc = [], []
        for layer in dec.layers:
            y, s, c = layer(y, memory)
            ps.append(s)
            pc.append(c)
        y = dec.layer_norm(y)
        return y if states else y @ dec.embed_tokens.weight.T, torch.stack(ps), torch.stack(pc)

    def hf_state_dict(self):
        """HF's names (proj_out.weight left out: tied to the token embedding)."""
        return {k: v.detach().numpy() for k, v in self.state_dict().items()}


def random_model(config, seed=0, gain=3.0):
    """A Whisper model with random weights (matrices std gain/sqrt(fan_in), LayerNorm gains in
    0.5..1.5, vectors std 0.1, embeddings unit variance) and HF's sinusoidal encoder
    positions."""
    torch.manual_seed(seed)
    m = Whisper(config)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() >= 2:
                fan_in = p.shape[1] * (p.shape[2] if p.dim() == 3 else 1)
                p.normal_(0.0, gain / math.sqrt(fan_in))
            elif "norm" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.1)
        m.model.decoder.embed_tokens.weight.normal_(0.0, 1.0)
        m.model.decoder.embed_positions.weight.normal_(0.0, 0.5)
        e = m.model.encoder.embed_positions.weight
        e.copy_(sinusoids(e.shape[0], e.shape[1]))
    return m.eval()


# --------------------------------------------------------------------------------------
# Checkpoint folders in HF's layout

LANGUAGES = ("en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no "
             "th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq "
             "sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my "
             "bo tl mg as tt haw ln ha ba jw su yue").split()


def special_ids(c):
    """The ids of Whisper's special tokens for config c: eot, sot, the languages (99, or 100
    with large-v3's yue), translate, transcribe, startoflm, startofprev, nospeech,
    notimestamps and the first timestamp <|0.00|>."""
    eot = c["eos_token_id"]
    n_lang = 100 if c["vocab_size"] == 51866 else 99
    lang = {code: eot + 2 + i for i, code in enumerate(LANGUAGES[:n_lang])}
    k = eot + 2 + n_lang
    names = ("translate", "transcribe", "startoflm", "startofprev", "nospeech", "notimestamps")
    ids = {"eot": eot, "sot": eot + 1, "lang": lang}
    ids.update({n: k + i for i, n in enumerate(names)})
    ids["timestamp_begin"] = k + len(names)
    return ids


def generation_config(c, suppress=None, alignment_heads=None):
    """generation_config.json as HF writes Whisper's (the keys generate() reads)."""
    s = special_ids(c)
    multilingual = c["eos_token_id"] != 50256  # *.en models: <|endoftext|> at 50256
    g = {
        "decoder_start_token_id": s["sot"],
        "eos_token_id": s["eot"], "pad_token_id": s["eot"], "bos_token_id": s["eot"],
        "begin_suppress_tokens": [220, s["eot"]],
        "suppress_tokens": list(suppress or []),
        "no_timestamps_token_id": s["notimestamps"],
        "max_initial_timestamp_index": 50,
        "max_length": c["max_target_positions"],
        "is_multilingual": multilingual,
        "alignment_heads": alignment_heads or [[c["decoder_layers"] - 1, 0]],
        "return_timestamps": False,
    }
    if multilingual:
        g["lang_to_id"] = {f"<|{k}|>": v for k, v in s["lang"].items()}
        g["task_to_id"] = {"transcribe": s["transcribe"], "translate": s["translate"]}
    return g


def save_checkpoint(model, path, tokenizer_dir, suppress=None, alignment_heads=None, fmt="safetensors"):
    """Write model as an HF Whisper folder: config.json, generation_config.json,
    preprocessor_config.json, the weights and the tokenizer files copied from tokenizer_dir."""
    os.makedirs(path, exist_ok=True)
    c = model.config
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump(generation_config(c, suppress, alignment_heads), f, indent=1)
    pre = {"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": c["num_mel_bins"],
           "sampling_rate": 16000, "hop_length": 160, "n_fft": 400, "chunk_length": 30,
           "n_samples": 480000, "nb_max_frames": 3000, "padding_value": 0.0}
    with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=1)
    sd = model.hf_state_dict()
    if fmt == "safetensors":
        safetensors_np.save(sd, os.path.join(path, "model.safetensors"))
    else:
        torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, os.path.join(path, "pytorch_model.bin"))
    for name in os.listdir(tokenizer_dir):
        shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(path, name))


def load_checkpoint(path):
    """A Whisper model from an HF folder (config.json + model.safetensors)."""
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    m = Whisper(c)
    sd = {k: torch.from_numpy(v) for k, v in safetensors_np.load(os.path.join(path, "model.safetensors")).items()}
    sd.pop("proj_out.weight", None)
    m.load_state_dict(sd)
    return m.eval()


# --------------------------------------------------------------------------------------
# Greedy decoding (HF's generate with return_timestamps=False)

def suppress_row(scores, ids, begin_index, suppress, begin_suppress):
    """HF's processors in Whisper's order: SuppressTokensAtBegin (only when the input holds
    begin_index ids), then SuppressTokens."""
    scores = scores.clone()
    if len(ids) == begin_index and begin_suppress:
        scores[list(begin_suppress)] = float("-inf")
    if suppress:
        scores[list(suppress)] = float("-inf")
    return scores


def greedy(model, features, prompt, suppress=(), begin_suppress=(), max_length=448):
    """Greedy tokens after the decoder prompt (e.g. [sot, <|en|>, <|transcribe|>,
    <|notimestamps|>]), ending with <|endoftext|> unless cut at max_length ids (prompt
    included); with each step's raw logits."""
    eot = model.config["eos_token_id"]
    memory = model.encode(features)
    ids, out, raw = list(prompt), [], []
    while len(ids) < max_length:
        logits = model.decode(memory, ids)[0][-1]
        raw.append(logits)
        tok = int(torch.argmax(suppress_row(logits, ids, len(prompt), suppress, begin_suppress)))
        ids.append(tok)
        out.append(tok)
        if tok == eot:
            break
    return out, torch.stack(raw) if raw else torch.zeros(0)


def random_features(n_mels, seed=0):
    """Log-mel-like features [n_mels, 3000]: values in Whisper's range (-1.5 .. 1.5 after its
    scaling), smooth in time so frames differ but not wildly."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, 0.6, size=(n_mels, N_FRAMES // 50 + 1))
    x = np.repeat(base, 50, axis=1)[:, :N_FRAMES] + rng.normal(0.0, 0.2, size=(n_mels, N_FRAMES))
    return np.clip(x, -1.5, 1.5).astype(np.float32)


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description="Random Whisper checkpoints in HF's layout, and their greedy output.")
    p.add_argument("out", help="folder to write")
    p.add_argument("--tokenizer", required=True, help="folder with vocab.json, merges.txt, added_tokens.json ...")
    p.add_argument("--shape", default="mini", choices=sorted(SHAPES))
    p.add_argument("--english-only", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    m = random_model(shape_config(a.shape, a.english_only), seed=a.seed)
    save_checkpoint(m, a.out, a.tokenizer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
