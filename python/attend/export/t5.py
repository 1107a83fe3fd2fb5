#!/usr/bin/python3
"""Convert a Hugging Face T5 directory (model_type t5 or mt5: t5-small/base, flan-t5, mT5,
MADLAD-400) into attend's .gguf checkpoint.

Reads config.json (+ generation_config.json, tokenizer_config.json), model.safetensors (or
pytorch_model.bin) and spiece.model, and writes one file in the format of weights/FORMAT.md
(architecture "t5"). `python -m attend.export` (and export_marian.py) hands t5 and mt5
directories to this module.

T5Tokenizer's ids: SentencePiece's own (<pad> 0, </s> 1, <unk> 2), then the 100 <extra_id_N>
tokens (extra_ids in tokenizer_config.json), <extra_id_0> last; config.json's vocab_size may
add rows without a piece. The config's task_specific_params prefixes are recorded for
`attend translate --task NAME`. Unsupported models are refused with a one-line message
naming the key and value, and exit code 2.
"""
import json
import os
import re
import sys

from . import m2m100 as M  # the family config reader, SentencePiece pieces
from . import marian as E  # the shared readers and checks
from . import gguf_io as G

ARCH = "t5"
SPM_FILE = "spiece.model"
# T5Config's and MT5Config's defaults where they differ
DEFAULTS = {
    "t5": dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
               feed_forward_proj="relu", tie_word_embeddings=True),
    "mt5": dict(vocab_size=250112, d_model=512, d_kv=64, d_ff=1024, num_layers=8, num_heads=6,
                feed_forward_proj="gated-gelu", tie_word_embeddings=False),
}
COMMON = dict(relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=1e-6,
              pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, n_positions=512)
# feed_forward_proj's activations (HF's ACT2FN names) as FORMAT.md's t5.activation
FFN_ACTS = {"relu": "relu", "gelu": "gelu", "silu": "swish", "gelu_new": "gelu_tanh"}
MADLAD_CODE = re.compile(r"^<2([^<>\s]+)>$")  # MADLAD-400's target-language pieces: <2de>
MAX_TASKS = 256


def read_ffn(c):
    """feed_forward_proj as T5Config parses it -> (t5.activation, gated)."""
    proj = c["feed_forward_proj"]
    parts = proj.split("-") if isinstance(proj, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    if not parts or len(parts) > 2 or (len(parts) == 2 and not gated) or parts[-1] not in FFN_ACTS:
        raise E.Refuse(f"config.json: unsupported feed_forward_proj = {json.dumps(proj)} "
                       f"(relu, gelu, silu, gelu_new, or gated- with one of them)")
    act = "gelu_new" if proj == "gated-gelu" else parts[-1]
    return FFN_ACTS[act], gated


def read_config(hf_dir):
    """The T5Config (or MT5Config) of hf_dir as the values the format needs."""
    c = E._read_json(os.path.join(hf_dir, "config.json"), "config.json")
    mt = c.get("model_type") if isinstance(c, dict) else None
    if mt not in DEFAULTS:
        mt = "t5"  # read_family_config names the bad model_type
    c, src, out = M.read_family_config(hf_dir, mt, "relu")
    for k, v in dict(COMMON, **DEFAULTS[mt]).items():
        c.setdefault(k, v)
    if c.get("num_decoder_layers") is None:
        c["num_decoder_layers"] = c["num_layers"]
    for key in ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
                "relative_attention_num_buckets", "relative_attention_max_distance", "n_positions"):
        out[key] = E._int(c, key, lo=1)
    if out["relative_attention_num_buckets"] < 4 or \
            out["relative_attention_max_distance"] <= out["relative_attention_num_buckets"] // 2:
        raise E.Refuse(f"config.json: unsupported relative_attention_max_distance = "
                       f"{out['relative_attention_max_distance']} with relative_attention_num_buckets = "
                       f"{out['relative_attention_num_buckets']} (at least 4 buckets, a distance above buckets / 2)")
    eps = c["layer_norm_epsilon"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise E.Refuse(f"config.json: unsupported layer_norm_epsilon = {json.dumps(eps)} (in (0, 1))")
    out["eps"] = float(eps)
    out["activation"], out["gated"] = read_ffn(c)
    out["tied"] = E._bool(c, "tie_word_embeddings", DEFAULTS[mt]["tie_word_embeddings"])
    if c.get("is_encoder_decoder", True) is not True:
        raise E.Refuse("config.json: unsupported is_encoder_decoder = false (T5ForConditionalGeneration)")
    V = out["vocab_size"]
    for key in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
        out[key] = E._int(c, key, hi=V - 1)
    out["tasks"] = read_tasks(c)
    return M.read_generation_limits(c, src, out, "T5")


def read_tasks(c):
    """[(name, prefix)] of task_specific_params, the entries with a string prefix (T5's
    translation_en_to_de: "translate English to German: "), in the file's order."""
    tsp = c.get("task_specific_params")
    if tsp is None:
        return []
    if not isinstance(tsp, dict):
        raise E.Refuse("config.json: task_specific_params is not a JSON object")
    out = []
    for name, params in tsp.items():
        if not isinstance(params, dict) or not isinstance(params.get("prefix"), str):
            continue
        if not name or len(name) > 64 or any(ch.isspace() or ord(ch) < 32 for ch in name):
            raise E.Refuse(f"config.json: task_specific_params name {json.dumps(name)[:70]} "
                           f"(1..64 characters, no spaces or control characters)")
        if len(params["prefix"].encode("utf-8")) > 1024 or "\x00" in params["prefix"]:
            raise E.Refuse(f"config.json: task_specific_params.{name}.prefix is over 1024 bytes or holds a NUL")
        out.append((name, params["prefix"]))
    if len(out) > MAX_TASKS:
        raise E.Refuse(f"config.json: task_specific_params has {len(out)} prefixes (at most {MAX_TASKS})")
    return out


# --------------------------------------------------------------------------------------
# Tokenizer

def read_extra_ids(hf_dir):
    """tokenizer_config.json's extra_ids (T5Tokenizer's default 100)."""
    path = os.path.join(hf_dir, "tokenizer_config.json")
    t = E._read_json(path, "tokenizer_config.json") if os.path.exists(path) else {}
    if not isinstance(t, dict):
        raise E.Refuse("tokenizer_config.json: not a JSON object")
    cls = t.get("tokenizer_class", "T5Tokenizer")
    if cls not in ("T5Tokenizer", "T5TokenizerFast"):
        raise E.Refuse(f"tokenizer_config.json: unsupported tokenizer_class = {json.dumps(cls)} "
                       f"(T5Tokenizer or T5TokenizerFast)")
    n = t.get("extra_ids", 100)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 100000:
        raise E.Refuse(f"tokenizer_config.json: unsupported extra_ids = {json.dumps(n)}")
    return n


def read_tokenizer(hf_dir, V):
    """(spm bytes, pieces [V], MADLAD codes): SentencePiece's pieces at their ids, the extra
    ids after them (<extra_id_0> last), "" for rows without a piece."""
    path = os.path.join(hf_dir, SPM_FILE)
    E.check_lfs(path, "SentencePiece model", hf_dir)
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except FileNotFoundError:
        raise E.Refuse(f"missing file {path}") from None
    try:
        sp = M.spm_pieces(blob)
    except ValueError as e:
        raise E.Refuse(f"{SPM_FILE}: not a SentencePiece model ({e})") from None
    extra = read_extra_ids(hf_dir)
    if len(sp) < 3 or [p for p, _ in sp[:3]] != ["<pad>", "</s>", "<unk>"]:
        raise E.Refuse(f"{SPM_FILE}: the first pieces are {[p for p, _ in sp[:3]]}, not T5's <pad> </s> <unk>")
    if len(sp) + extra > V:
        raise E.Refuse(f"config.json: vocab_size = {V} holds fewer than the {len(sp)} pieces of {SPM_FILE} "
                       f"and {extra} extra ids")
    pieces = [p for p, _ in sp] + [f"<extra_id_{extra - 1 - i}>" for i in range(extra)]
    pieces += [""] * (V - len(pieces))
    codes = [m.group(1) for m in (MADLAD_CODE.match(p) for p, _ in sp) if m]
    return blob, pieces, codes


# --------------------------------------------------------------------------------------
# Tensors

def map_tensors(cfg, sd):
    """[(attend name, float32 array)] in FORMAT.md order (t5)."""
    d, V, H, nb = cfg["d_model"], cfg["vocab_size"], cfg["num_heads"], cfg["relative_attention_num_buckets"]
    inner, f = cfg["num_heads"] * cfg["d_kv"], cfg["d_ff"]
    get = E._get
    embed = ["shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"]
    out = [("enc.embed.weight", get(sd, embed, (V, d)))]
    if not cfg["tied"]:
        out.append(("lm_head.weight", get(sd, ["lm_head.weight"], (V, d))))
    for side, hf in (("enc", "encoder"), ("dec", "decoder")):
        w = get(sd, [f"{hf}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], (nb, H))
        out.append((f"{side}.relative_bias", w.reshape(-1)))

    def attn(prefix, hf):
        for p in "qkv":
            out.append((f"{prefix}.{p}.weight", get(sd, [f"{hf}.{p}.weight"], (inner, d))))
        out.append((f"{prefix}.o.weight", get(sd, [f"{hf}.o.weight"], (d, inner))))

    def norm(name, hf):
        out.append((f"{name}.weight", get(sd, [f"{hf}.weight"], (d,))))

    def ffn(prefix, hf):
        if cfg["gated"]:
            out.append((f"{prefix}.ffn.fc1.weight", get(sd, [f"{hf}.wi_0.weight"], (f, d))))
            out.append((f"{prefix}.ffn.gate.weight", get(sd, [f"{hf}.wi_1.weight"], (f, d))))
        else:
            out.append((f"{prefix}.ffn.fc1.weight", get(sd, [f"{hf}.wi.weight"], (f, d))))
        out.append((f"{prefix}.ffn.fc2.weight", get(sd, [f"{hf}.wo.weight"], (d, f))))

    for i in range(cfg["num_layers"]):
        p, hf = f"enc.{i}", f"encoder.block.{i}.layer"
        attn(f"{p}.self_attn", f"{hf}.0.SelfAttention")
        norm(f"{p}.self_attn_norm", f"{hf}.0.layer_norm")
        ffn(p, f"{hf}.1.DenseReluDense")
        norm(f"{p}.ffn_norm", f"{hf}.1.layer_norm")
    for i in range(cfg["num_decoder_layers"]):
        p, hf = f"dec.{i}", f"decoder.block.{i}.layer"
        attn(f"{p}.self_attn", f"{hf}.0.SelfAttention")
        norm(f"{p}.self_attn_norm", f"{hf}.0.layer_norm")
        attn(f"{p}.cross_attn", f"{hf}.1.EncDecAttention")
        norm(f"{p}.cross_attn_norm", f"{hf}.1.layer_norm")
        ffn(p, f"{hf}.2.DenseReluDense")
        norm(f"{p}.ffn_norm", f"{hf}.2.layer_norm")
    norm("enc.final_norm", "encoder.final_layer_norm")
    norm("dec.final_norm", "decoder.final_layer_norm")
    return out


# --------------------------------------------------------------------------------------
# Export

def export(hf_dir, out_path, dtype="f32", name=None):
    cfg = read_config(hf_dir)
    model_max_length = E.read_model_max_length(hf_dir)
    spm, pieces, codes = read_tokenizer(hf_dir, cfg["vocab_size"])
    tensors = map_tensors(cfg, E.read_weights(hf_dir))
    return write(out_path, cfg, dtype, name, model_max_length, spm, pieces, codes, tensors)


def write(out_path, cfg, dtype, name, model_max_length, spm, pieces, codes, tensors):
    V = cfg["vocab_size"]
    tensors = E.stored(tensors, dtype)
    k = lambda s: f"{ARCH}.{s}"  # noqa: E731  the family's keys
    # T5 has no position table: the longest source or output attend takes is what the
    # tokenizer and the generation settings allow (n_positions, T5's nominal 512, at least)
    positions = min(max(cfg["n_positions"], model_max_length or 0, cfg["max_length"]), 65536)
    meta = E.file_meta(ARCH, dtype, name, dict(
        vocab_size=V, decoder_vocab_size=V, d_model=cfg["d_model"],
        encoder_layers=cfg["num_layers"], decoder_layers=cfg["num_decoder_layers"],
        encoder_heads=cfg["num_heads"], decoder_heads=cfg["num_heads"],
        encoder_ffn_dim=cfg["d_ff"], decoder_ffn_dim=cfg["d_ff"], max_position_embeddings=positions,
        activation=cfg["activation"], scale_embedding=False, layer_norm_eps=cfg["eps"],
        shared_embeddings=True, tied_output=cfg["tied"], pad_id=cfg["pad_token_id"],
        eos_id=cfg["eos_token_id"], unk_id=2, decoder_start_id=cfg["decoder_start_token_id"],
        max_length=cfg["max_length"], forced_eos=cfg["forced_eos"]))
    meta += [
        (k("d_kv"), G.UINT32, cfg["d_kv"]),
        (k("relative_buckets"), G.UINT32, cfg["relative_attention_num_buckets"]),
        (k("relative_max_distance"), G.UINT32, cfg["relative_attention_max_distance"]),
        (k("gated_ffn"), G.BOOL, cfg["gated"]),
        (k("scale_output"), G.BOOL, cfg["tied"]),  # HF scales by d_model^-0.5 only when tied
    ] + E.generation_metadata(cfg["generation"])
    if cfg["tasks"]:
        meta += [(k("tasks"), G.ARRAY, (G.STRING, [n for n, _ in cfg["tasks"]])),
                 (k("task_prefixes"), G.ARRAY, (G.STRING, [p for _, p in cfg["tasks"]]))]
    meta += E.tokenizer_metadata(model_max_length, spm, spm, pieces, pieces)
    E.write_file(out_path, meta, tensors)
    cfg = dict(cfg, decoder_vocab_size=V)
    return cfg, tensors


def main(argv=None):
    p = E.arg_parser("export_t5.py", __doc__, "Hugging Face T5 / mT5 model directory")
    a = p.parse_args(argv)
    name = a.name if a.name is not None else E.default_name(a.hf_dir)
    return E.run_export("export_t5", a, export, a.hf_dir, a.out, a.dtype, name, hf_dir=a.hf_dir)


if __name__ == "__main__":
    sys.exit(main())
