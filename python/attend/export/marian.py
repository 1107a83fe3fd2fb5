"""Convert a Hugging Face MarianMT (OPUS-MT) directory into attend's .gguf checkpoint.

Reads config.json (+ generation_config.json, tokenizer_config.json), model.safetensors (or
pytorch_model.bin), source.spm, target.spm, vocab.json (+ target_vocab.json for separate
target vocabularies) and writes one file in the format of weights/FORMAT.md, the generation
defaults (beam size, length penalty, ...) included. Unsupported models are refused with a
one-line message and exit code 2.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

from . import gguf_io as G
from . import safetensors_np

FORMAT_VERSION = 1
ALIGNMENT = 64
LAYER_NORM_EPS = 1e-5
ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
U32_MAX = 2 ** 32 - 1
# HF's tokenizers say "no limit" with a huge model_max_length (VERY_LARGE_INTEGER = int(1e30))
NO_LIMIT = 10 ** 12
# the first line of a Git LFS pointer file (hawser: the pre-release name of Git LFS)
LFS_PREFIXES = (b"version https://git-lfs.github.com/spec/",
                b"version https://hawser.github.com/spec/")
# HF's class defaults (PretrainedConfig / GenerationConfig) of the recorded generation keys
GENERATION_DEFAULTS = {"num_beams": 1, "length_penalty": 1.0, "early_stopping": False,
                       "min_length": 0, "no_repeat_ngram_size": 0, "repetition_penalty": 1.0,
                       "renormalize_logits": False}
EARLY_STOPPING = {False: 0, True: 1, "never": 2}
# generation settings HF reads from config.json and generation_config.json that attend does not
# implement: a non-default value is reported (a warning) and not recorded
UNIMPLEMENTED = {"num_beam_groups": (None, 1), "diversity_penalty": (None, 0, 0.0),
                 "penalty_alpha": (None,), "encoder_no_repeat_ngram_size": (None, 0),
                 "forced_bos_token_id": (None,), "exponential_decay_length_penalty": (None,),
                 "suppress_tokens": (None, []), "begin_suppress_tokens": (None, []),
                 "sequence_bias": (None, {}), "force_words_ids": (None, []),
                 "constraints": (None, []), "epsilon_cutoff": (None, 0, 0.0),
                 "eta_cutoff": (None, 0, 0.0)}


class Refuse(Exception):
    """An unsupported or broken input: reported in one line, exit code 2."""


# --------------------------------------------------------------------------------------
# Configuration

def _read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise Refuse(f"missing file {path} ({what})") from None
    except (OSError, ValueError) as e:
        raise Refuse(f"cannot read {path}: {e}") from None


def warn(msg):
    print(f"export_marian: warning: {msg}", file=sys.stderr)


def check_lfs(path, what, hf_dir):
    """Refuse a Git LFS pointer (a small text file) standing where a real file should be."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return
    if head.startswith(LFS_PREFIXES):
        raise Refuse(f"{os.path.basename(path)} is a Git LFS pointer, not the {what}: "
                     f"run `git lfs pull` in {hf_dir}")


def _int(c, key, lo=0, hi=U32_MAX):
    if key not in c:
        raise Refuse(f"config.json: missing required key {key}")
    v = c[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise Refuse(f"config.json: unsupported {key} = {json.dumps(v)} "
                     f"(an integer in {lo}..{hi} is required)")
    return v


def _bool(c, key, default):
    v = c.get(key, default)
    if not isinstance(v, bool):
        raise Refuse(f"config.json: {key} = {json.dumps(v)} is not true/false")
    return v


def read_config(hf_dir):
    """The MarianConfig of hf_dir as the dict of values the format needs."""
    c = _read_json(os.path.join(hf_dir, "config.json"), "config.json")
    if not isinstance(c, dict):
        raise Refuse("config.json: not a JSON object")
    # generation settings: config.json, then generation_config.json overriding key by key;
    # src names the file each value came from (for messages)
    src = {k: "config.json" for k in c}
    gen_path = os.path.join(hf_dir, "generation_config.json")
    if os.path.exists(gen_path):
        g = _read_json(gen_path, "generation_config.json")
        if not isinstance(g, dict):
            raise Refuse("generation_config.json: not a JSON object")
        for k in ("max_length", "forced_eos_token_id", "decoder_start_token_id", "bad_words_ids",
                  "max_new_tokens", "min_new_tokens", "do_sample", *GENERATION_DEFAULTS,
                  *UNIMPLEMENTED):
            if k in g:
                c[k] = g[k]
                src[k] = "generation_config.json"
    return config_values(c, src)


def config_values(c, src):
    """The values the format needs from a merged MarianConfig dict c (config.json keys);
    src names the file each key came from, for messages. export_marian_npz.py builds c the
    way transformers' converter would and checks it here too."""
    if c.get("model_type") != "marian":
        raise Refuse(f"config.json: unsupported model_type = {json.dumps(c.get('model_type'))} "
                     f"(only \"marian\")")
    for key, bad in (("normalize_before", True), ("add_final_layer_norm", True),
                     ("normalize_embedding", True), ("static_position_embeddings", False)):
        if key in c and c[key] == bad:
            raise Refuse(f"config.json: unsupported {key} = {json.dumps(bad)}")
    act = c.get("activation_function")
    if act not in ACTIVATIONS:
        raise Refuse(f"config.json: unsupported activation_function = {json.dumps(act)} "
                     f"(swish, silu, relu or gelu)")

    out = {"activation": ACTIVATIONS[act]}
    for key in ("vocab_size", "d_model", "encoder_layers", "decoder_layers",
                "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
                "decoder_ffn_dim", "max_position_embeddings"):
        out[key] = _int(c, key, lo=1)
    d = out["d_model"]
    if d % 2:
        raise Refuse(f"config.json: unsupported d_model = {d} (must be even)")
    for key in ("encoder_attention_heads", "decoder_attention_heads"):
        if d % out[key]:
            raise Refuse(f"config.json: unsupported {key} = {out[key]} "
                         f"(does not divide d_model = {d})")
    if "scale_embedding" not in c:
        raise Refuse("config.json: missing required key scale_embedding")
    out["scale_embedding"] = _bool(c, "scale_embedding", None)

    # embedding sharing exactly as reference.py's Marian: shared embeddings force one
    # vocabulary; unshared without decoder_vocab_size uses vocab_size for both
    out["shared"] = _bool(c, "share_encoder_decoder_embeddings", True)
    out["tied"] = _bool(c, "tie_word_embeddings", True)
    if out["shared"] or c.get("decoder_vocab_size") is None:
        out["decoder_vocab_size"] = out["vocab_size"]
    else:
        out["decoder_vocab_size"] = _int(c, "decoder_vocab_size", lo=1)
    V, Vt = out["vocab_size"], out["decoder_vocab_size"]

    out["pad_id"] = _int(c, "pad_token_id", hi=Vt - 1)
    out["eos_id"] = _int(c, "eos_token_id", hi=min(V, Vt) - 1)
    out["decoder_start_id"] = _int(c, "decoder_start_token_id", hi=Vt - 1)

    ml = c.get("max_length", 20)
    if ml is None:
        ml = 20
    if isinstance(ml, bool) or not isinstance(ml, int) or not 0 <= ml <= U32_MAX:
        raise Refuse(f"{src.get('max_length')}: unsupported max_length = {json.dumps(ml)}")
    out["max_length"] = ml or 20  # as reference.py: 0 means the HF default
    mn = c.get("max_new_tokens")
    if mn is not None:
        # HF: max_length = max_new_tokens + the decoder prompt (the start token)
        if isinstance(mn, bool) or not isinstance(mn, int) or not 1 <= mn <= U32_MAX - 1:
            raise Refuse(f"{src['max_new_tokens']}: unsupported max_new_tokens = "
                         f"{json.dumps(mn)} (null or an integer in 1..{U32_MAX - 1})")
        out["max_length"] = mn + 1

    # forced_eos_token_id absent from both files: MarianConfig's class default 0
    if "forced_eos_token_id" not in c:
        if out["eos_id"] != 0:
            raise Refuse(f"config.json: forced_eos_token_id is absent, so MarianConfig's default "
                         f"0, but eos_token_id = {out['eos_id']} (attend forces only "
                         f"eos_token_id at the length limit: add \"forced_eos_token_id\": "
                         f"{out['eos_id']}, or null for none, to config.json)")
        fe = 0
    else:
        fe = c["forced_eos_token_id"]
        if fe is not None and (isinstance(fe, bool) or not isinstance(fe, int)
                               or fe != out["eos_id"]):
            raise Refuse(f"{src['forced_eos_token_id']}: unsupported forced_eos_token_id = "
                         f"{json.dumps(fe)} (only null or eos_token_id = {out['eos_id']})")
    out["forced_eos"] = fe is not None

    bw = c.get("bad_words_ids")
    if bw not in (None, [], [[out["pad_id"]]]):
        raise Refuse(f"{src.get('bad_words_ids')}: unsupported bad_words_ids = {json.dumps(bw)} "
                     f"(only [[pad_token_id]]: the engine bans <pad> and nothing else)")
    out["generation"] = read_generation(c, src)
    return out


def read_generation(c, src):
    """The generation.* values (FORMAT.md) from the merged configuration c."""
    def value(key):
        return c.get(key, GENERATION_DEFAULTS[key])

    def bad(key, v, need):
        return Refuse(f"{src.get(key, 'config.json')}: unsupported {key} = {json.dumps(v)} "
                      f"({need})")

    def u32(key, lo):
        v = value(key)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= U32_MAX:
            raise bad(key, v, f"an integer in {lo}..{U32_MAX} is required")
        return v

    def f32(key, positive):
        v = value(key)
        need = "a number > 0 is required" if positive else "a finite number is required"
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise bad(key, v, need)
        try:
            x = float(v)
        except OverflowError:
            raise bad(key, v, need) from None
        # the value must survive the f32 it is stored as
        if not math.isfinite(x) or abs(x) > 3.4028234663852886e38 or \
                (positive and not np.float32(x) > 0):
            raise bad(key, v, need)
        return x

    g = {"num_beams": u32("num_beams", 1),
         "length_penalty": f32("length_penalty", False),
         "min_length": u32("min_length", 0),
         "no_repeat_ngram_size": u32("no_repeat_ngram_size", 0),
         "repetition_penalty": f32("repetition_penalty", True)}
    es = value("early_stopping")
    if not (es is True or es is False or es == "never"):
        raise bad("early_stopping", es, 'true, false or "never"')
    g["early_stopping"] = EARLY_STOPPING[es]
    rn = value("renormalize_logits")
    if not isinstance(rn, bool):
        raise bad("renormalize_logits", rn, "true or false")
    g["renormalize_logits"] = rn

    mnt = c.get("min_new_tokens")
    if mnt is not None:
        # HF: min_length counts the decoder start token; min_new_tokens m means m + 1
        if isinstance(mnt, bool) or not isinstance(mnt, int) or not 0 <= mnt <= U32_MAX - 1:
            raise bad("min_new_tokens", mnt, f"null or an integer in 0..{U32_MAX - 1}")
        g["min_length"] = max(g["min_length"], mnt + 1)

    ds = c.get("do_sample", False)
    if not isinstance(ds, bool):
        raise bad("do_sample", ds, "true or false")
    if ds:
        warn(f"{src['do_sample']}: do_sample = true is not recorded: attend decodes "
             f"deterministically (beam search or greedy) unless `attend translate --sample` "
             f"is given")
    for k, defaults in UNIMPLEMENTED.items():
        if k in c and not any(c[k] == d and type(c[k]) is type(d) for d in defaults):
            warn(f"{src[k]}: {k} = {json.dumps(c[k])} is not implemented by attend "
                 f"(not recorded; HF's output may differ)")
    return g


def read_model_max_length(hf_dir):
    """tokenizer_config.json model_max_length as an int, or None for no (usable) limit."""
    path = os.path.join(hf_dir, "tokenizer_config.json")
    if not os.path.exists(path):
        return None
    t = _read_json(path, "tokenizer_config.json")
    if not isinstance(t, dict):
        raise Refuse("tokenizer_config.json: not a JSON object")
    v = t.get("model_max_length")
    if v is None:
        return None  # HF: VERY_LARGE_INTEGER, no limit
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise Refuse(f"tokenizer_config.json: unsupported model_max_length = {json.dumps(v)} "
                     f"(a positive integer is required)")
    if v >= NO_LIMIT or v > U32_MAX:
        return None  # HF's "no limit" sentinel: the position table is the only limit
    return v


# --------------------------------------------------------------------------------------
# Vocabularies

def read_pieces(path, size, size_key, what):
    """vocab.json-style {piece: id} -> list of pieces indexed by id, "" where absent."""
    v = _read_json(path, what)
    if not isinstance(v, dict):
        raise Refuse(f"{what}: not a JSON object")
    name = os.path.basename(path)
    pieces = [None] * size
    for p, i in v.items():
        if isinstance(i, bool) or not isinstance(i, int):
            raise Refuse(f"{name}: piece {json.dumps(p)} has non-integer id {json.dumps(i)}")
        if not 0 <= i < size:
            raise Refuse(f"{name}: piece {json.dumps(p)} has id {i}, outside the "
                         f"{size_key} = {size}")
        if pieces[i] is not None:
            raise Refuse(f"{name}: id {i} is given to both {json.dumps(pieces[i])} and "
                         f"{json.dumps(p)}")
        pieces[i] = p
    return [p if p is not None else "" for p in pieces], v


# --------------------------------------------------------------------------------------
# Weights

def read_weights(hf_dir):
    """{HF name: float32 numpy array} from model.safetensors, else pytorch_model.bin."""
    st = os.path.join(hf_dir, "model.safetensors")
    if os.path.exists(st):
        check_lfs(st, "weights", hf_dir)
        try:
            raw = safetensors_np.load(st)
        except (OSError, ValueError, KeyError) as e:
            raise Refuse(f"cannot read {st}: {e}") from None
        return {k: np.asarray(v) for k, v in raw.items()}
    pt = os.path.join(hf_dir, "pytorch_model.bin")
    if not os.path.exists(pt):
        raise Refuse(f"missing file {st} (or pytorch_model.bin)")
    check_lfs(pt, "weights", hf_dir)
    import torch  # only this path needs torch
    try:
        sd = torch.load(pt, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any unpickling failure is a bad input
        raise Refuse(f"cannot read {pt}: {e}") from None
    if not isinstance(sd, dict):
        raise Refuse(f"{pt}: not a state dict")
    out = {}
    for k, t in sd.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            out[k] = t.detach().to(torch.float32).contiguous().numpy()
    return out


def _get(sd, names, shape, allow_shapes=()):
    """The first of names present in sd, as float32 of the given shape."""
    for n in names:
        if n in sd:
            a = sd[n]
            if a.dtype.kind != "f":
                raise Refuse(f"tensor {n}: non-float dtype {a.dtype}")
            if tuple(a.shape) != tuple(shape) and tuple(a.shape) not in allow_shapes:
                raise Refuse(f"tensor {n}: expected shape {list(shape)}, got {list(a.shape)}")
            a = np.asarray(a, dtype=np.float32).reshape(shape)
            if not np.isfinite(a).all():
                raise Refuse(f"tensor {n}: holds non-finite values")
            return a
    raise Refuse(f"missing tensor {names[0]}"
                 + (f" (or {', '.join(names[1:])})" if len(names) > 1 else ""))


def map_layers(cfg, sd, out, final_norms=False):
    """Append the encoder's and the decoder's layers to out, [(attend name, float32 array)] in
    FORMAT.md order; final_norms: enc/dec.final_norm after each stack (pre-norm families)."""
    d = cfg["d_model"]

    def linear(name, hf, rows, cols):
        out.append((f"{name}.weight", _get(sd, [f"{hf}.weight"], (rows, cols))))
        out.append((f"{name}.bias", _get(sd, [f"{hf}.bias"], (rows,))))

    def attn(prefix, hf):
        for p, hp in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
            linear(f"{prefix}.{p}", f"{hf}.{hp}", d, d)

    def norm(name, hf):
        for s in ("weight", "bias"):
            out.append((f"{name}.{s}", _get(sd, [f"{hf}.{s}"], (d,))))

    def ffn(prefix, hf, f):
        linear(f"{prefix}.ffn.fc1", f"{hf}.fc1", f, d)
        linear(f"{prefix}.ffn.fc2", f"{hf}.fc2", d, f)

    for i in range(cfg["encoder_layers"]):
        p, hf = f"enc.{i}", f"model.encoder.layers.{i}"
        attn(f"{p}.self_attn", f"{hf}.self_attn")
        norm(f"{p}.self_attn_norm", f"{hf}.self_attn_layer_norm")
        ffn(p, hf, cfg["encoder_ffn_dim"])
        norm(f"{p}.ffn_norm", f"{hf}.final_layer_norm")
    if final_norms:
        norm("enc.final_norm", "model.encoder.layer_norm")
    for i in range(cfg["decoder_layers"]):
        p, hf = f"dec.{i}", f"model.decoder.layers.{i}"
        attn(f"{p}.self_attn", f"{hf}.self_attn")
        norm(f"{p}.self_attn_norm", f"{hf}.self_attn_layer_norm")
        attn(f"{p}.cross_attn", f"{hf}.encoder_attn")
        norm(f"{p}.cross_attn_norm", f"{hf}.encoder_attn_layer_norm")
        ffn(p, hf, cfg["decoder_ffn_dim"])
        norm(f"{p}.ffn_norm", f"{hf}.final_layer_norm")
    if final_norms:
        norm("dec.final_norm", "model.decoder.layer_norm")


def map_tensors(cfg, sd):
    """[(attend name, float32 array)] in FORMAT.md order."""
    d, V, Vt = cfg["d_model"], cfg["vocab_size"], cfg["decoder_vocab_size"]
    out = []
    if cfg["shared"]:
        enc = ["model.shared.weight", "model.encoder.embed_tokens.weight",
               "model.decoder.embed_tokens.weight"]
        if cfg["tied"]:
            enc.append("lm_head.weight")
        out.append(("enc.embed.weight", _get(sd, enc, (V, d))))
    else:
        out.append(("enc.embed.weight", _get(sd, ["model.encoder.embed_tokens.weight"], (V, d))))
        dec = ["model.decoder.embed_tokens.weight"]
        if cfg["tied"]:
            dec.append("lm_head.weight")
        out.append(("dec.embed.weight", _get(sd, dec, (Vt, d))))
    if not cfg["tied"]:
        out.append(("lm_head.weight", _get(sd, ["lm_head.weight"], (Vt, d))))
    out.append(("final_logits_bias", _get(sd, ["final_logits_bias"], (Vt,), [(1, Vt)])))

    map_layers(cfg, sd, out)
    return out


# --------------------------------------------------------------------------------------
# Export

def quantize_rows(w):
    """Per-row symmetric int8: scale = max|row| / 127 (f32), q = rint(row / scale), the
    same arithmetic as `attend quantize` so both give identical files."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.abs(w).max(axis=1).astype(np.float32)
    scale = (amax / np.float32(127)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1)).astype(np.float32)
    q = np.rint(w / safe[:, None]).clip(-127, 127).astype(np.int8)
    return q, scale


def export(hf_dir, out_path, dtype="f32", name=None):
    cfg = read_config(hf_dir)
    model_max_length = read_model_max_length(hf_dir)
    for f in ("vocab.json", "target_vocab.json"):
        check_lfs(os.path.join(hf_dir, f), "vocabulary", hf_dir)
    spm = {}
    for f in ("source.spm", "target.spm"):
        path = os.path.join(hf_dir, f)
        check_lfs(path, "SentencePiece model", hf_dir)
        try:
            with open(path, "rb") as fh:
                spm[f] = fh.read()
        except FileNotFoundError:
            raise Refuse(f"missing file {path}") from None
    V, Vt = cfg["vocab_size"], cfg["decoder_vocab_size"]
    src_pieces, vocab = read_pieces(os.path.join(hf_dir, "vocab.json"), V, "vocab_size",
                                    "vocab.json")
    if "<unk>" not in vocab:
        raise Refuse("vocab.json: no <unk> piece")
    unk = vocab["<unk>"]
    tv = os.path.join(hf_dir, "target_vocab.json")
    if os.path.exists(tv):
        tgt_pieces, _ = read_pieces(tv, Vt, "decoder_vocab_size", "target_vocab.json")
    else:
        tgt_pieces, _ = read_pieces(os.path.join(hf_dir, "vocab.json"), Vt,
                                    "decoder_vocab_size", "vocab.json")

    tensors = write_gguf(out_path, cfg, read_weights(hf_dir), spm, src_pieces, tgt_pieces, unk,
                         model_max_length, dtype, name)
    return cfg, tensors


def generation_metadata(gen):
    """The generation.* keys of the generation defaults gen (optional keys in the format;
    every exporter writes them all)."""
    return [
        ("generation.num_beams", G.UINT32, gen["num_beams"]),
        ("generation.length_penalty", G.FLOAT32, gen["length_penalty"]),
        ("generation.early_stopping", G.UINT32, gen["early_stopping"]),
        ("generation.min_length", G.UINT32, gen["min_length"]),
        ("generation.no_repeat_ngram_size", G.UINT32, gen["no_repeat_ngram_size"]),
        ("generation.repetition_penalty", G.FLOAT32, gen["repetition_penalty"]),
        ("generation.renormalize_logits", G.BOOL, gen["renormalize_logits"]),
    ]


# the hyperparameters every family's file records under its architecture's prefix, in file
# order: (key, type). A family's further ids (m2m_100's bos_id, mbart's mask_id) go between
# the two parts.
HYPERPARAMETERS = [
    ("vocab_size", G.UINT32), ("decoder_vocab_size", G.UINT32), ("d_model", G.UINT32),
    ("encoder_layers", G.UINT32), ("decoder_layers", G.UINT32),
    ("encoder_heads", G.UINT32), ("decoder_heads", G.UINT32),
    ("encoder_ffn_dim", G.UINT32), ("decoder_ffn_dim", G.UINT32),
    ("max_position_embeddings", G.UINT32), ("activation", G.STRING),
    ("scale_embedding", G.BOOL), ("layer_norm_eps", G.FLOAT32),
    ("shared_embeddings", G.BOOL), ("tied_output", G.BOOL),
    ("pad_id", G.UINT32), ("eos_id", G.UINT32), ("unk_id", G.UINT32),
]
HYPERPARAMETERS_AFTER_IDS = [("decoder_start_id", G.UINT32), ("max_length", G.UINT32), ("forced_eos", G.BOOL)]


def file_meta(arch, dtype, name, hp, more_ids=()):
    """The metadata every exported file starts with: architecture, alignment, name (when
    given), format version, the CRC placeholder, then hp {key: value}, one value for each
    key of HYPERPARAMETERS and HYPERPARAMETERS_AFTER_IDS, as arch's keys; more_ids: (key,
    id) pairs of the family's further ids, written after unk_id."""
    keys = HYPERPARAMETERS + [(k, G.UINT32) for k, _ in more_ids] + HYPERPARAMETERS_AFTER_IDS
    values = dict(hp, **dict(more_ids))
    if set(values) != {k for k, _ in keys}:
        raise ValueError(f"file_meta: hyperparameters {sorted(set(values) ^ {k for k, _ in keys})} "
                         "missing or unknown")
    meta = [("general.architecture", G.STRING, arch),
            ("general.alignment", G.UINT32, ALIGNMENT)]
    if name:
        meta.append(("general.name", G.STRING, name))
    meta += [
        # the lowest version that describes the file: int8 tensors need 2
        ("attend.format_version", G.UINT32, 2 if dtype == "int8" else FORMAT_VERSION),
        (G.CRC_KEY, G.ARRAY, None),  # filled in by the writer
    ]
    return meta + [(f"{arch}.{k}", t, values[k]) for k, t in keys]


def bart_hyperparameters(cfg, **rest):
    """file_meta's hyperparameters that the BART-shaped families' configs (marian, m2m_100,
    mbart) name alike; rest: the others (vocabulary sizes, special ids, shared_embeddings)."""
    return dict(
        d_model=cfg["d_model"], encoder_layers=cfg["encoder_layers"], decoder_layers=cfg["decoder_layers"],
        encoder_heads=cfg["encoder_attention_heads"], decoder_heads=cfg["decoder_attention_heads"],
        encoder_ffn_dim=cfg["encoder_ffn_dim"], decoder_ffn_dim=cfg["decoder_ffn_dim"],
        max_position_embeddings=cfg["max_position_embeddings"], activation=cfg["activation"],
        scale_embedding=cfg["scale_embedding"], layer_norm_eps=LAYER_NORM_EPS, tied_output=cfg["tied"],
        max_length=cfg["max_length"], forced_eos=cfg["forced_eos"], **rest)


def tokenizer_metadata(model_max_length, source_spm, target_spm, source_pieces, target_pieces):
    """The tokenizer.* keys every family writes: model_max_length (None: none), each side's
    SentencePiece model (bytes) and the pieces of its ids."""
    meta = []
    if model_max_length is not None:
        meta.append(("tokenizer.model_max_length", G.UINT32, model_max_length))
    return meta + [
        ("tokenizer.source_spm", G.ARRAY, (G.UINT8, source_spm)),
        ("tokenizer.target_spm", G.ARRAY, (G.UINT8, target_spm)),
        ("tokenizer.source_pieces", G.ARRAY, (G.STRING, source_pieces)),
        ("tokenizer.target_pieces", G.ARRAY, (G.STRING, target_pieces)),
    ]


def write_gguf(out_path, cfg, sd, spm, src_pieces, tgt_pieces, unk, model_max_length,
               dtype="f32", name=None):
    """Write the .gguf of a model: cfg from config_values(), sd {HF tensor name: array},
    spm {"source.spm": bytes, "target.spm": bytes}, the pieces of each id, the <unk> id and
    the tokenizer's model_max_length (None: none). Returns the [(name, array, type)] written."""
    V, Vt = cfg["vocab_size"], cfg["decoder_vocab_size"]
    tensors = stored(map_tensors(cfg, sd), dtype)

    meta = file_meta("marian", dtype, name, bart_hyperparameters(
        cfg, vocab_size=V, decoder_vocab_size=Vt, shared_embeddings=cfg["shared"], pad_id=cfg["pad_id"],
        eos_id=cfg["eos_id"], unk_id=unk, decoder_start_id=cfg["decoder_start_id"]))
    meta += generation_metadata(cfg["generation"])
    meta += tokenizer_metadata(model_max_length, spm["source.spm"], spm["target.spm"], src_pieces, tgt_pieces)
    write_file(out_path, meta, tensors)
    return tensors


def stored(tensors, dtype):
    """(name, array, ggml type) as --dtype asks: matrices f16 / int8 + scales, vectors f32."""
    out = []
    for tname, arr in tensors:
        if dtype == "int8" and arr.ndim == 2:
            q, scale = quantize_rows(arr)
            out += [(tname, q, G.GGML_I8), (tname + ".scale", scale, G.GGML_F32)]
        elif dtype == "f16" and arr.ndim == 2:
            h = arr.astype(np.float16)
            if not np.isfinite(h).all():
                raise Refuse(f"tensor {tname}: values beyond the f16 range; use --dtype f32")
            out.append((tname, h, G.GGML_F16))
        else:
            out.append((tname, arr, G.GGML_F32))
    return out


def write_file(out_path, meta, tensors):
    """gguf_io.write to out_path + ".tmp", then renamed to out_path: a failed export leaves
    no partial file."""
    tmp = out_path + ".tmp"
    try:
        G.write(tmp, meta, tensors)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


DTYPE_HELP = "storage type of weight matrices (vectors are always f32); default f32"


def arg_parser(prog, doc, source_help, dtype_help=DTYPE_HELP,
               name_help="general.name to record (default: the HF_DIR's name)", source=("hf_dir", "HF_DIR")):
    """The exporters' command line: SOURCE OUT.gguf --dtype --name (a caller adds its own)."""
    p = argparse.ArgumentParser(
        prog=prog, description=doc.split("\n\n")[0],
        epilog="Exit codes: 0 written, 2 refused (unsupported or broken input; one-line "
               "message on stderr), 1 other errors.")
    p.add_argument(source[0], metavar=source[1], help=source_help)
    p.add_argument("out", metavar="OUT.gguf", help="output file")
    p.add_argument("--dtype", choices=["f32", "f16", "int8"], default="f32", help=dtype_help)
    p.add_argument("--name", help=name_help)
    return p


def default_name(path):
    """general.name when --name is not given: the source's name."""
    return os.path.basename(os.path.normpath(os.path.abspath(path)))


def run_export(prog, a, export, *args, hf_dir=None, two_vocabs=False):
    """The exporters' main() after parsing: export(*args) -> (cfg, tensors written), then the
    one-line summary and 0; a Refuse is `prog: error: ...` on stderr and 2. hf_dir: a
    directory that must exist. two_vocabs: the summary gives vocab_size/decoder_vocab_size."""
    try:
        if hf_dir is not None and not os.path.isdir(hf_dir):
            raise Refuse(f"missing directory {hf_dir}")
        cfg, tensors = export(*args)
    except Refuse as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    vocab = f"{cfg['vocab_size']}/{cfg['decoder_vocab_size']}" if two_vocabs else cfg["vocab_size"]
    print(f"wrote {a.out}: {len(tensors)} tensors, vocab {vocab}, d_model {cfg['d_model']}, {a.dtype}")
    return 0


def other_family(argv):
    """The exporter of HF_DIR's family when it is not Marian (config.json's model_type), else
    None: `export_marian.py M2M_DIR OUT` runs export_m2m100.py (mbart: export_mbart.py; t5 and
    mt5: export_t5.py) with
    the same arguments."""
    dirs = [x for x in argv if not x.startswith("-") and os.path.isfile(os.path.join(x, "config.json"))]
    try:
        with open(os.path.join(dirs[0], "config.json"), encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    except (IndexError, OSError, ValueError, AttributeError):
        return None
    if model_type == "marian":
        return None
    from .families import exporter_module
    module = exporter_module(model_type)
    return module.main if module is not None else None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    routed = other_family(argv)
    if routed:
        return routed(argv)
    p = arg_parser("export_marian.py", __doc__, "Hugging Face MarianMT model directory",
                   dtype_help="storage type of weight matrices (vectors are always f32); int8 stores "
                              "per-row scales beside each matrix (format version 2); default f32")
    a = p.parse_args(argv)
    name = a.name if a.name is not None else default_name(a.hf_dir)
    return run_export("export_marian", a, export, a.hf_dir, a.out, a.dtype, name, hf_dir=a.hf_dir,
                      two_vocabs=True)


if __name__ == "__main__":
    sys.exit(main())
