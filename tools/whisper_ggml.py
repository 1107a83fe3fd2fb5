#!/usr/bin/python3
"""An HF Whisper folder as whisper.cpp's ggml model file (f32), for tools/bench_whisper.py.

whisper.cpp's own converter (models/convert-h5-to-ggml.py) needs transformers, which this
machine lacks, and the OpenAI repository's mel_filters.npz; it also rounds every weight to
f16 before writing f32. This writes the same layout from the documented format (written
here from that script's description, not copied): int32 magic 0x67676d6c; int32 hparams
n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state,
n_text_head, n_text_layer, n_mels, ftype (0: f32); the mel filter bank (int32 n_mels,
int32 n_fft_bins, float32 values); the vocabulary (int32 count, then per token int32 length
and its bytes); then each tensor: int32 n_dims, int32 name length, int32 type (0: f32),
n_dims int32 sizes innermost first, the name, the float32 data. Names are OpenAI's
(encoder.blocks.N.attn.query.weight ...); the convolution biases are [d, 1]. Weights are
written exactly as stored (f32). whisper.cpp's `quantize` tool turns the file into q8_0.

    tools/whisper_ggml.py HF_DIR OUT.bin
"""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

# HF's sublayer names -> OpenAI's (whisper.cpp's) inside a block
BLOCK = {"self_attn.q_proj": "attn.query", "self_attn.k_proj": "attn.key", "self_attn.v_proj": "attn.value",
         "self_attn.out_proj": "attn.out", "self_attn_layer_norm": "attn_ln", "encoder_attn.q_proj": "cross_attn.query",
         "encoder_attn.k_proj": "cross_attn.key", "encoder_attn.v_proj": "cross_attn.value",
         "encoder_attn.out_proj": "cross_attn.out", "encoder_attn_layer_norm": "cross_attn_ln", "fc1": "mlp.0",
         "fc2": "mlp.2", "final_layer_norm": "mlp_ln"}
TOP = {"encoder.layer_norm.weight": "encoder.ln_post.weight", "encoder.layer_norm.bias": "encoder.ln_post.bias",
       "encoder.embed_positions.weight": "encoder.positional_embedding",
       "decoder.layer_norm.weight": "decoder.ln.weight", "decoder.layer_norm.bias": "decoder.ln.bias",
       "decoder.embed_positions.weight": "decoder.positional_embedding",
       "decoder.embed_tokens.weight": "decoder.token_embedding.weight"}


def openai_name(hf):
    """model.encoder.layers.3.fc1.weight -> encoder.blocks.3.mlp.0.weight (None: not written)."""
    if hf == "proj_out.weight":
        return None  # tied to the token embedding
    parts = hf.split(".")[1:]
    if parts[1] == "layers":
        return f"{parts[0]}.blocks.{parts[2]}.{BLOCK['.'.join(parts[3:-1])]}.{parts[-1]}"
    return TOP.get(".".join(parts), ".".join(parts))


def mel_filters(n_mels, sr=16000, n_fft=400):
    """Slaney-style triangular mel filters [n_mels, n_fft/2 + 1] (what Whisper's feature
    extractor uses); whisper.cpp reads them to compute its own log-mel features."""
    def mel(f):
        f = np.asarray(f, dtype=np.float64)
        return np.where(f < 1000, 3 * f / 200, 15 + 27 * np.log(np.maximum(f, 1e-9) / 1000) / math.log(6.4))

    def hz(m):
        return np.where(m < 15, 200 * m / 3, 1000 * np.exp((m - 15) * math.log(6.4) / 27))

    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    edges = hz(np.linspace(mel(0), mel(sr / 2), n_mels + 2))
    out = np.zeros((n_mels, len(freqs)))
    for i in range(n_mels):
        lo, mid, hi = edges[i], edges[i + 1], edges[i + 2]
        up, down = (freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)
        out[i] = np.maximum(0, np.minimum(up, down)) * 2 / (hi - lo)
    return out.astype(np.float32)


def byte_decoder():
    """GPT-2's byte-level alphabet, character -> byte."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, k = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + k)] = b
            k += 1
    return chars


def write(hf_dir, out):
    c = json.load(open(os.path.join(hf_dir, "config.json")))
    vocab = json.load(open(os.path.join(hf_dir, "vocab.json"), encoding="utf8"))
    weights = safetensors_np.load(os.path.join(hf_dir, "model.safetensors"))
    dec = byte_decoder()
    with open(out, "wb") as f:
        f.write(struct.pack("i", 0x67676d6c))
        for v in (c["vocab_size"], c["max_source_positions"], c["d_model"], c["encoder_attention_heads"],
                  c["encoder_layers"], c["max_target_positions"], c["d_model"], c["decoder_attention_heads"],
                  c["decoder_layers"], c["num_mel_bins"], 0):
            f.write(struct.pack("i", v))
        filters = mel_filters(c["num_mel_bins"])
        f.write(struct.pack("ii", *filters.shape))
        f.write(filters.tobytes())
        f.write(struct.pack("i", len(vocab)))
        for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            raw = bytes(dec[ch] for ch in token) if all(ch in dec for ch in token) else token.encode()
            f.write(struct.pack("i", len(raw)) + raw)
        for hf, array in weights.items():
            name = openai_name(hf)
            if name is None:
                continue
            data = np.ascontiguousarray(array, dtype=np.float32)
            if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
                data = data.reshape(-1, 1)
            key = name.encode()
            f.write(struct.pack("iii", data.ndim, len(key), 0))
            f.write(struct.pack(f"{data.ndim}i", *reversed(data.shape)))
            f.write(key)
            f.write(data.tobytes())


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    write(argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
