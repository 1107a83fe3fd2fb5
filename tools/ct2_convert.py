#!/usr/bin/python3
"""Write a CTranslate2 model folder from attend's own files, for side-by-side benchmarks.

CTranslate2's converters read checkpoints through transformers, which this machine lacks, so
this script fills CTranslate2's model specifications (its Python package, `ctranslate2.specs`)
directly:

    ct2_convert.py marian MODEL.gguf OUT_DIR     # a Marian .gguf (e.g. models/de-en.gguf)
    ct2_convert.py whisper HF_DIR OUT_DIR        # an HF Whisper folder (tools/reference_whisper.py)

Options: --ct2 BUILD (the folder tools/build_ct2.sh built; its ct2-src/python is imported).

Weights are stored as they are in the source (f16 matrices of the shipped model stay f16);
CTranslate2 converts them to the compute type chosen at load (float32, or int8 with one scale
per output row). Marian: post-norm layers, scaled embeddings, the sinusoidal table HF uses
(sines in the first half), the tied output matrix. The decoder starts from <pad>'s embedding
(HF's decoder_start_token_id), which is kept in the vocabulary: CTranslate2's own Marian
converter drops <pad> and starts from a zero vector, which equals HF only where that row is
zero (opus-mt's); the shipped model's is not. Callers ban <pad> as HF does
(`suppress_sequences=[["<pad>"]]`)."""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def import_ct2(build=None):
    """The ctranslate2 package: from BUILD/ct2-src/python when given, else from sys.path."""
    if build:
        sys.path.insert(0, os.path.join(os.path.abspath(build), "ct2-src", "python"))
    try:
        import ctranslate2
    except ImportError as e:
        where = f" from {build}" if build else " (no --ct2 BUILD given)"
        raise SystemExit(f"cannot import ctranslate2{where}: {e}; build it with tools/build_ct2.sh") from None
    return ctranslate2


def _linear(spec, w, b=None):
    spec.weight = w
    if b is not None:
        spec.bias = b


def _norm(spec, gamma, beta):
    spec.gamma = gamma
    spec.beta = beta


def _attention(ct2, spec, t, prefix, self_attention):
    """Fill a MultiHeadAttentionSpec from prefix.{q,k,v,o}.{weight,bias}: q, k, v fused for
    self-attention; q alone and k, v fused for cross-attention (CTranslate2's layout)."""
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec
    parts = []
    for name in ("q", "k", "v"):
        lin = common_spec.LinearSpec()
        _linear(lin, t[f"{prefix}.{name}.weight"], t.get(f"{prefix}.{name}.bias"))
        parts.append(lin)
    if self_attention:
        utils.fuse_linear(spec.linear[0], parts)
    else:
        utils.fuse_linear(spec.linear[0], parts[:1])
        utils.fuse_linear(spec.linear[1], parts[1:])
    _linear(spec.linear[-1], t[f"{prefix}.o.weight"], t.get(f"{prefix}.o.bias"))


def _ffn(spec, t, prefix, norm):
    _linear(spec.linear_0, t[f"{prefix}.fc1.weight"], t[f"{prefix}.fc1.bias"])
    _linear(spec.linear_1, t[f"{prefix}.fc2.weight"], t[f"{prefix}.fc2.bias"])
    _norm(spec.layer_norm, t[f"{norm}.weight"], t[f"{norm}.bias"])


def marian_spec(ct2, gguf_path):
    """A TransformerSpec holding the Marian .gguf's weights and vocabulary."""
    import gguf_io
    import reference as R
    from ctranslate2.specs import common_spec, transformer_spec
    g = gguf_io.GGUFFile(gguf_path)
    m, t = g.metadata, {k: np.asarray(v) for k, v in g.tensors.items()}
    if m.get("general.architecture") != "marian":
        raise SystemExit(f"{gguf_path}: not a Marian model")
    if not m["marian.shared_embeddings"] or not m["marian.tied_output"]:
        raise SystemExit(f"{gguf_path}: only shared, tied embeddings are handled")
    acts = {"swish": common_spec.Activation.SWISH, "silu": common_spec.Activation.SWISH,
            "relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU}
    spec = transformer_spec.TransformerSpec.from_config(
        (m["marian.encoder_layers"], m["marian.decoder_layers"]), m["marian.encoder_heads"],
        pre_norm=False, activation=acts[m["marian.activation"]])
    d = m["marian.d_model"]
    emb = t["enc.embed.weight"]
    positions = R.sinusoidal_positions(m["marian.max_position_embeddings"], d).numpy()
    scale = float(np.sqrt(d)) if m["marian.scale_embedding"] else 1.0
    for side, stack in (("enc", spec.encoder), ("dec", spec.decoder)):
        stack.scale_embeddings = scale
        stack.position_encodings.encodings = positions
        (stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings).weight = emb
        for i, layer in enumerate(stack.layer):
            p = f"{side}.{i}"
            _attention(ct2, layer.self_attention, t, f"{p}.self_attn", True)
            _norm(layer.self_attention.layer_norm, t[f"{p}.self_attn_norm.weight"], t[f"{p}.self_attn_norm.bias"])
            if side == "dec":
                _attention(ct2, layer.attention, t, f"{p}.cross_attn", False)
                _norm(layer.attention.layer_norm, t[f"{p}.cross_attn_norm.weight"], t[f"{p}.cross_attn_norm.bias"])
            _ffn(layer.ffn, t, f"{p}.ffn", f"{p}.ffn_norm")
    spec.decoder.projection.weight = emb
    bias = t.get("final_logits_bias")
    if bias is not None and np.any(bias):
        spec.decoder.projection.bias = bias.reshape(-1)
    src, tgt = list(m["tokenizer.source_pieces"]), list(m["tokenizer.target_pieces"])
    spec.register_source_vocabulary(src)
    spec.register_target_vocabulary(tgt)
    c = spec.config
    c.eos_token, c.unk_token = tgt[m["marian.eos_id"]], tgt[m["marian.unk_id"]]
    c.decoder_start_token = tgt[m["marian.decoder_start_id"]]
    c.layer_norm_epsilon = float(m["marian.layer_norm_eps"])
    return spec


def whisper_vocabulary(hf_dir, size):
    """Tokens by id: vocab.json, added_tokens.json, then timestamp tokens up to size."""
    tokens = {}
    for name in ("vocab.json", "added_tokens.json"):
        path = os.path.join(hf_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                tokens.update({i: tok for tok, i in json.load(f).items()})
    out = [tokens.get(i, f"<|unused{i}|>") for i in range(size)]
    return out


def whisper_spec(ct2, hf_dir):
    """A WhisperSpec holding an HF Whisper folder's weights, vocabulary and suppress lists."""
    import reference_whisper as RW
    from ctranslate2.specs import whisper_spec as ws
    model = RW.load_checkpoint(hf_dir)
    c = model.config
    sd = model.hf_state_dict()
    t = {}
    for k, v in sd.items():  # HF names -> the q/k/v/o names _attention reads
        k = k.replace("model.", "", 1).replace("_proj.", ".").replace(".out.", ".o.")
        t[k] = v
    spec = ws.WhisperSpec(c["encoder_layers"], c["encoder_attention_heads"],
                          c["decoder_layers"], c["decoder_attention_heads"])
    enc, dec = spec.encoder, spec.decoder
    for conv in ("conv1", "conv2"):
        _linear(getattr(enc, conv), t[f"encoder.{conv}.weight"], t[f"encoder.{conv}.bias"])
    enc.position_encodings.encodings = t["encoder.embed_positions.weight"]
    dec.position_encodings.encodings = t["decoder.embed_positions.weight"]
    dec.embeddings.weight = t["decoder.embed_tokens.weight"]
    dec.projection.weight = t["decoder.embed_tokens.weight"]
    for side, stack in (("encoder", enc), ("decoder", dec)):
        _norm(stack.layer_norm, t[f"{side}.layer_norm.weight"], t[f"{side}.layer_norm.bias"])
        for i, layer in enumerate(stack.layer):
            p = f"{side}.layers.{i}"
            _attention(ct2, layer.self_attention, t, f"{p}.self_attn", True)
            _norm(layer.self_attention.layer_norm, t[f"{p}.self_attn_layer_norm.weight"],
                  t[f"{p}.self_attn_layer_norm.bias"])
            if side == "decoder":
                _attention(ct2, layer.attention, t, f"{p}.encoder_attn", False)
                _norm(layer.attention.layer_norm, t[f"{p}.encoder_attn_layer_norm.weight"],
                      t[f"{p}.encoder_attn_layer_norm.bias"])
            _linear(layer.ffn.linear_0, t[f"{p}.fc1.weight"], t[f"{p}.fc1.bias"])
            _linear(layer.ffn.linear_1, t[f"{p}.fc2.weight"], t[f"{p}.fc2.bias"])
            _norm(layer.ffn.layer_norm, t[f"{p}.final_layer_norm.weight"], t[f"{p}.final_layer_norm.bias"])
    with open(os.path.join(hf_dir, "generation_config.json")) as f:
        g = json.load(f)
    s = RW.special_ids(c)
    cfg = spec.config
    cfg.suppress_ids = list(g.get("suppress_tokens") or [])
    cfg.suppress_ids_begin = list(g.get("begin_suppress_tokens") or [])
    cfg.lang_ids = sorted(s["lang"].values())
    cfg.alignment_heads = [list(h) for h in g.get("alignment_heads", [])]
    spec.register_vocabulary(whisper_vocabulary(hf_dir, c["vocab_size"]))
    return spec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=("marian", "whisper"))
    p.add_argument("source", help="Marian: a .gguf file; Whisper: an HF folder")
    p.add_argument("out", help="the CTranslate2 model folder to write")
    p.add_argument("--ct2", help="tools/build_ct2.sh's build folder (else ctranslate2 from sys.path)")
    a = p.parse_args(argv)
    if not os.path.exists(a.source):
        p.error(f"{a.source}: no such file or folder")
    ct2 = import_ct2(a.ct2)
    spec = marian_spec(ct2, a.source) if a.kind == "marian" else whisper_spec(ct2, a.source)
    spec.validate()
    spec.optimize(quantization=None)
    os.makedirs(a.out, exist_ok=True)
    spec.save(a.out)
    print(f"{a.out}: CTranslate2 {ct2.__version__} {spec.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
