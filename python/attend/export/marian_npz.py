"""Convert a Marian release (OPUS-MT / Tatoeba-Challenge download) into attend's .gguf.

A release is the .zip from OPUS-MT's download pages, or the directory it unpacks to: one
*.npz (Marian's weights, with its model.yml inside as `special:model.yml`), decoder.yml,
*.vocab.yml (one shared vocabulary, or *.src.vocab.yml and *.trg.vocab.yml), source.spm and
target.spm. The file written is the one export_marian.py writes for the directory
transformers' convert_marian_to_pytorch.py makes of the release (same tensors, same metadata),
except that HF's converter stores float16 (`model.half()`) where this keeps the npz's float32
values; --hf-half rounds them the same way. Unsupported releases are refused with a one-line
message and exit code 2.
"""
import io
import os
import re
import sys
import zipfile
import zlib

import numpy as np
import yaml

from . import marian as X
from .marian import Refuse

CONFIG_KEY = "special:model.yml"
BIAS_KEY = "decoder_ff_logit_out_b"
# BaseLoader keeps every scalar a string ("true", "1", "null" are pieces too), as HF reads them
LOADER = getattr(yaml, "CBaseLoader", yaml.BaseLoader)

# model.yml settings transformers' converter assumes (its check_marian_cfg_assumptions, plus
# a few it does not check but attend's post-norm transformer also needs), with the reason
# shown when a release differs. An absent setting is taken as Marian's default, the value here.
ASSUMED = {
    "type": ("transformer", "RNN and other model types are not implemented"),
    "transformer-preprocess": ("", "attend runs post-norm transformers: no pre-norm 'n'"),
    "transformer-postprocess": ("dan", "dropout, add, normalize after each sublayer"),
    "transformer-postprocess-emb": ("d", "no LayerNorm on the embeddings"),
    "transformer-postprocess-top": ("", "no final LayerNorm on the stacks"),
    "layer-normalization": (False, "not an RNN option attend has"),
    "right-left": (False, "right-to-left decoding"),
    "transformer-ffn-depth": (2, "two-layer feed-forward blocks"),
    "transformer-aan-depth": (2, "HF's converter assumes it"),
    "transformer-aan-nogate": (False, "HF's converter assumes it"),
    "transformer-no-projection": (False, "attention output projections"),
    "transformer-decoder-autoreg": ("self-attention", "average-attention decoders are not "
                                    "implemented"),
    "transformer-train-position-embeddings": (False, "sinusoidal positions only"),
    "transformer-depth-scaling": (False, "depth-scaled initialisation changes the layers"),
    "transformer-pool": (False, "pooling layers"),
    "ulr": (False, "universal lexical representations"),
    "ulr-dim-emb": (0, "universal lexical representations"),
    "dec-cell-base-depth": (2, "HF's converter assumes it"),
    "dec-cell-high-depth": (1, "HF's converter assumes it"),
    "lemma-dim-emb": (0, "factored vocabularies"),
    "output-omit-bias": (False, "an output layer with a bias, decoder_ff_logit_out_b, "
                         "which transformers' converter needs"),
}

# Marian's per-layer tensors (after "encoder_l{n}_" / "decoder_l{n}_") -> HF's names;
# matrices are [in, out] in Marian and [out, in] in HF, vectors [1, n] and [n]
ATTENTION = {"Wq": "q_proj.weight", "bq": "q_proj.bias", "Wk": "k_proj.weight",
             "bk": "k_proj.bias", "Wv": "v_proj.weight", "bv": "v_proj.bias",
             "Wo": "out_proj.weight", "bo": "out_proj.bias"}
FFN = {"ffn_W1": "fc1.weight", "ffn_b1": "fc1.bias", "ffn_W2": "fc2.weight",
       "ffn_b2": "fc2.bias", "ffn_ffn_ln_scale": "final_layer_norm.weight",
       "ffn_ffn_ln_bias": "final_layer_norm.bias"}
LAYER_KEY = re.compile(r"^(encoder|decoder)_l(\d+)_(.+)$")


# --------------------------------------------------------------------------------------
# The release: a directory or a .zip, files found by their base name

class Release:
    def __init__(self, path):
        self.path = path
        self.zip = None
        self.files = {}  # base name -> path in the directory, or zip member name
        if os.path.isdir(path):
            for f in sorted(os.listdir(path)):
                if os.path.isfile(os.path.join(path, f)):
                    self.files[f] = os.path.join(path, f)
        elif os.path.isfile(path):
            try:
                self.zip = zipfile.ZipFile(path)
            except (zipfile.BadZipFile, OSError) as e:
                raise Refuse(f"{path}: not a zip file nor a directory ({e})") from None
            for m in self.zip.infolist():
                if m.is_dir():
                    continue
                base = m.filename.rsplit("/", 1)[-1]
                if base in self.files:
                    raise Refuse(f"{path}: holds two files named {base} ({self.files[base]}, "
                                 f"{m.filename})")
                self.files[base] = m.filename
        else:
            raise Refuse(f"missing release {path} (the .zip of a Marian model or its directory)")

    def glob(self, suffix):
        return [f for f in self.files if f.endswith(suffix)]

    def read(self, name, what):
        """The bytes of the file `name` (a base name)."""
        if name not in self.files:
            raise Refuse(f"{self.path}: missing file {name} ({what})")
        try:
            if self.zip is None:
                with open(self.files[name], "rb") as f:
                    return f.read()
            return self.zip.read(self.files[name])
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise Refuse(f"cannot read {name} in {self.path}: {e}") from None


def load_yaml(text, where):
    """A YAML map with every scalar a string, as transformers' converter reads it."""
    try:
        data = yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as e:
        raise Refuse(f"{where}: not valid YAML ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise Refuse(f"{where}: not a YAML map")
    return data


def cast(v):
    """HF's _cast_yaml_str: "true"/"false" to bool, integers to int, the rest unchanged."""
    if not isinstance(v, str):
        return v
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        return v


# --------------------------------------------------------------------------------------
# Configuration: model.yml (inside the npz) and decoder.yml

def _show(v):
    return f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


def _int(m, key, lo=1, default=None):
    v = m.get(key, default)
    if v is None:
        raise Refuse(f"{CONFIG_KEY}: missing required key {key}")
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= X.U32_MAX:
        raise Refuse(f"{CONFIG_KEY}: unsupported {key} = {_show(v)} "
                     f"(an integer >= {lo} is required)")
    return v


def _bool(m, key):
    v = m.get(key, False)
    if not isinstance(v, bool):
        raise Refuse(f"{CONFIG_KEY}: {key} = {_show(v)} is not true/false")
    return v


def check_model_yml(m):
    """The architecture values of Marian's model.yml m (cast), or Refuse."""
    for key, (want, why) in ASSUMED.items():
        if key in m and m[key] != want:
            raise Refuse(f"{CONFIG_KEY}: unsupported {key} = {_show(m[key])} "
                         f"(only {_show(want)}: {why})")
    tied_layers = m.get("transformer-tied-layers", [])
    if tied_layers not in ([], "", None):
        raise Refuse(f"{CONFIG_KEY}: unsupported transformer-tied-layers = {tied_layers} "
                     f"(only none: every layer has its own weights)")
    act = m.get("transformer-ffn-activation", "swish")
    if act not in ("swish", "relu"):
        # Marian's gelu is x * sigmoid(1.702 x), attend's (and HF's) the exact erf form
        raise Refuse(f"{CONFIG_KEY}: unsupported transformer-ffn-activation = {_show(act)} "
                     f"(only swish or relu: Marian's gelu is x * sigmoid(1.702 x), attend's "
                     f"the erf form)")
    dv = m.get("dim-vocabs")
    if not isinstance(dv, list) or len(dv) != 2:
        raise Refuse(f"{CONFIG_KEY}: unsupported dim-vocabs = {dv} (one source and one "
                     f"target vocabulary size)")
    sizes = [cast(x) for x in dv]
    dv = "[" + ", ".join(str(x) for x in dv) + "]"
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in sizes):
        raise Refuse(f"{CONFIG_KEY}: dim-vocabs = {dv} are not sizes")
    if sizes[0] != sizes[1]:
        raise Refuse(f"{CONFIG_KEY}: unsupported dim-vocabs = {dv} (vocabularies of different "
                     f"sizes; transformers' converter refuses them too)")

    tied_all = _bool(m, "tied-embeddings-all")
    out = {"vocab": sizes[0], "activation": act,
           "shared": tied_all or _bool(m, "tied-embeddings-src"),
           "tied": tied_all or _bool(m, "tied-embeddings")}
    if not out["tied"]:
        raise Refuse(f"{CONFIG_KEY}: unsupported tied-embeddings = false with "
                     f"tied-embeddings-all = false (an output layer of its own, "
                     f"decoder_ff_logit_out_W, which transformers' converter cannot convert)")
    d = out["d"] = _int(m, "dim-emb")
    out["enc_layers"] = _int(m, "enc-depth")
    out["dec_layers"] = _int(m, "dec-depth")
    heads = out["heads"] = _int(m, "transformer-heads")
    out["ffn"] = _int(m, "transformer-dim-ffn")
    # newer Marian: a decoder ffn size (and depth) of its own, 0 meaning the encoder's
    out["dec_ffn"] = _int(m, "transformer-decoder-dim-ffn", lo=0, default=0) or out["ffn"]
    dd = _int(m, "transformer-decoder-ffn-depth", lo=0, default=0)
    if dd not in (0, 2):
        raise Refuse(f"{CONFIG_KEY}: unsupported transformer-decoder-ffn-depth = {dd} "
                     f"(only 2: two-layer feed-forward blocks)")
    if d % 2:
        raise Refuse(f"{CONFIG_KEY}: unsupported dim-emb = {d} (must be even)")
    if d % heads:
        raise Refuse(f"{CONFIG_KEY}: unsupported transformer-heads = {heads} "
                     f"(does not divide dim-emb = {d})")
    return out


def read_decoder_yml(rel):
    """(beam size, npz name or None, [source vocab, target vocab] or None) of decoder.yml."""
    dec = {k: cast(v) for k, v in load_yaml(rel.read("decoder.yml", "Marian's decoding "
                                                     "settings"), "decoder.yml").items()}
    beam = dec.get("beam-size")
    if beam is None:
        raise Refuse("decoder.yml: missing beam-size (transformers' converter records it as "
                     "num_beams)")
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= X.U32_MAX:
        raise Refuse(f"decoder.yml: unsupported beam-size = {_show(beam)} (an integer >= 1)")
    model = None
    models = dec.get("models")
    if models is not None:
        if isinstance(models, str):
            models = [models]
        if not isinstance(models, list) or not all(isinstance(x, str) for x in models):
            raise Refuse(f"decoder.yml: models = {models} is not a list of files")
        if len(models) != 1:
            raise Refuse(f"decoder.yml: unsupported models = {models} (an ensemble of "
                         f"{len(models)}; attend runs one model)")
        model = os.path.basename(models[0])
    vocabs = dec.get("vocabs")
    if vocabs is not None:
        if not isinstance(vocabs, list) or not all(isinstance(x, str) for x in vocabs):
            raise Refuse(f"decoder.yml: vocabs = {vocabs} is not a list of files")
        if len(vocabs) != 2:
            raise Refuse(f"decoder.yml: unsupported vocabs = {vocabs} (one source and one "
                         f"target vocabulary)")
        vocabs = [os.path.basename(v) for v in vocabs]
        for v in vocabs:
            if not v.endswith(".yml"):
                raise Refuse(f"decoder.yml: unsupported vocabs entry {v} (only .yml "
                             f"vocabularies, as OPUS-MT releases have)")
    return beam, model, vocabs


# --------------------------------------------------------------------------------------
# Vocabularies: a YAML map piece -> id; transformers' converter adds <pad> after the last id

def read_vocab(rel, name, size):
    """(pieces by id with <pad> appended as id `size`, {piece: id}) of the vocabulary `name`."""
    raw = rel.read(name, "vocabulary")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refuse(f"{name}: not UTF-8 text") from None
    pieces = [None] * size
    vocab = {}
    for p, i in load_yaml(text, name).items():
        if not isinstance(p, str) or not isinstance(i, str):
            raise Refuse(f"{name}: entry {p!r}: {i!r} is not piece: id")
        try:
            i = int(i)
        except ValueError:
            raise Refuse(f"{name}: piece {p!r} has non-integer id {i!r}") from None
        if p == "<pad>":
            raise Refuse(f"{name}: already holds <pad> (transformers' converter adds it as id "
                         f"{size}, after the model's {size} rows)")
        if not 0 <= i < size:
            raise Refuse(f"{name}: piece {p!r} has id {i}, outside dim-vocabs = {size}")
        if pieces[i] is not None:
            raise Refuse(f"{name}: id {i} is given to both {pieces[i]!r} and {p!r}")
        pieces[i] = p
        vocab[p] = i
    if len(vocab) != size:
        missing = pieces.index(None)
        raise Refuse(f"{name}: {size - len(vocab)} of the ids 0..{size - 1} have no piece "
                     f"(the first: {missing}); dim-vocabs = {size}")
    for need in ("</s>", "<unk>"):
        if need not in vocab:
            raise Refuse(f"{name}: no {need} piece")
    vocab["<pad>"] = size
    return pieces + ["<pad>"], vocab


def choose_vocabs(rel, listed, shared):
    """(source vocabulary file, target vocabulary file): decoder.yml's vocabs, else the
    names transformers' converter looks for (*vocab.yml; *src.vocab.yml and *trg.vocab.yml)."""
    if listed is not None:
        return listed
    if shared:
        found = sorted(rel.glob("vocab.yml"))
        if len(found) != 1:
            raise Refuse(f"{rel.path}: {len(found)} *vocab.yml files and no vocabs in "
                         f"decoder.yml (need one shared vocabulary)")
        return found[0], found[0]
    out = []
    for side in ("src", "trg"):
        found = sorted(rel.glob(f"{side}.vocab.yml"))
        if len(found) != 1:
            raise Refuse(f"{rel.path}: {len(found)} *{side}.vocab.yml files and no vocabs in "
                         f"decoder.yml (tied-embeddings-src = false: separate vocabularies)")
        out.append(found[0])
    return tuple(out)


# --------------------------------------------------------------------------------------
# Weights

def read_npz(rel, name):
    """{key: array} of the npz `name`, every array read (so a broken file fails here)."""
    raw = rel.read(name, "Marian's weights")
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise Refuse(f"cannot read {name}: {' '.join(str(e).split()) or type(e).__name__}") \
            from None


def choose_npz(rel, listed):
    if listed is not None and listed in rel.files:
        return listed
    found = rel.glob(".npz")
    if len(found) != 1:
        raise Refuse(f"{rel.path}: {len(found)} .npz files"
                     + (f" and decoder.yml's model {listed} is not there" if listed else "")
                     + " (need the one model's weights)")
    return found[0]


def model_yml(w):
    """model.yml stored in the npz: bytes of the text and a trailing NUL."""
    if CONFIG_KEY not in w:
        raise Refuse(f"the npz has no {CONFIG_KEY} (not a Marian model file)")
    a = w.pop(CONFIG_KEY)
    if a.dtype.kind not in "iu" or a.itemsize != 1 or a.ndim != 1:
        raise Refuse(f"{CONFIG_KEY}: a {a.dtype} array of shape {list(a.shape)}, not bytes")
    try:
        text = a.astype(np.uint8).tobytes().rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        raise Refuse(f"{CONFIG_KEY}: not UTF-8 text") from None
    return {k: cast(v) for k, v in load_yaml(text, CONFIG_KEY).items()}


def _tensor(w, key, shape):
    """w[key] as float32 of the Marian shape, a [1, n] vector also accepted as [n]."""
    if key not in w:
        raise Refuse(f"missing tensor {key}")
    a = w.pop(key)
    ok = tuple(a.shape) == shape or (len(shape) == 2 and shape[0] == 1 and a.shape == shape[1:])
    if not ok:
        raise Refuse(f"tensor {key}: expected shape {list(shape)}, got {list(a.shape)}")
    if a.dtype.kind != "f":
        raise Refuse(f"tensor {key}: non-float dtype {a.dtype}")
    a = np.asarray(a, dtype=np.float32).reshape(shape)
    if not np.isfinite(a).all():
        raise Refuse(f"tensor {key}: holds non-finite values")
    return a


def layer_shapes(d, f, cross):
    """{Marian per-layer suffix: (Marian shape, HF suffix)} of one layer."""
    s = {}
    for part, hf in (("self", "self_attn"),) + ((("context", "encoder_attn"),) if cross else ()):
        for m, h in ATTENTION.items():
            s[f"{part}_{m}"] = ((d, d) if m[0] == "W" else (1, d), f"{hf}.{h}")
        s[f"{part}_Wo_ln_scale"] = ((1, d), f"{hf}_layer_norm.weight")
        s[f"{part}_Wo_ln_bias"] = ((1, d), f"{hf}_layer_norm.bias")
    s.update({"ffn_W1": ((d, f), FFN["ffn_W1"]), "ffn_b1": ((1, f), FFN["ffn_b1"]),
              "ffn_W2": ((f, d), FFN["ffn_W2"]), "ffn_b2": ((1, d), FFN["ffn_b2"]),
              "ffn_ffn_ln_scale": ((1, d), FFN["ffn_ffn_ln_scale"]),
              "ffn_ffn_ln_bias": ((1, d), FFN["ffn_ffn_ln_bias"])})
    return s


def hf_state_dict(w, a):
    """HF's tensors {name: float32} from Marian's w (consumed), as the converter maps them:
    a zero embedding row and a zero logits bias for the added <pad>, matrices transposed."""
    d, V = a["d"], a["vocab"]
    # the layers in the file are those the depths in model.yml say
    top = {"encoder": 0, "decoder": 0}
    for k in w:
        m = LAYER_KEY.match(k)
        if m:
            side, n = m.group(1), int(m.group(2))
            depth = a["enc_layers" if side == "encoder" else "dec_layers"]
            if not 1 <= n <= depth:
                key = "enc-depth" if side == "encoder" else "dec-depth"
                raise Refuse(f"{CONFIG_KEY}: {key} = {depth} but the npz holds {k}")
            top[side] = max(top[side], n)
    for side, key, depth in (("encoder", "enc-depth", a["enc_layers"]),
                             ("decoder", "dec-depth", a["dec_layers"])):
        if top[side] < depth:
            raise Refuse(f"{CONFIG_KEY}: {key} = {depth} but the npz holds only "
                         f"{top[side]} {side} layer{'s' if top[side] != 1 else ''}")
    if "Wpos" in w:
        raise Refuse("tensor Wpos: trained position embeddings (attend computes sinusoidal ones)")

    def pad_row(e):
        return np.concatenate([e, np.zeros((1, d), np.float32)])

    sd = {}
    if a["shared"]:
        sd["model.shared.weight"] = pad_row(_tensor(w, "Wemb", (V, d)))
    else:
        sd["model.encoder.embed_tokens.weight"] = pad_row(_tensor(w, "encoder_Wemb", (V, d)))
        sd["model.decoder.embed_tokens.weight"] = pad_row(_tensor(w, "decoder_Wemb", (V, d)))
    bias = _tensor(w, BIAS_KEY, (1, V))
    sd["final_logits_bias"] = np.concatenate([bias, np.zeros((1, 1), np.float32)], axis=1)
    for side, cross, depth, f in (("encoder", False, a["enc_layers"], a["ffn"]),
                                  ("decoder", True, a["dec_layers"], a["dec_ffn"])):
        for i in range(depth):
            for suffix, (shape, hf) in layer_shapes(d, f, cross).items():
                t = _tensor(w, f"{side}_l{i + 1}_{suffix}", shape)
                sd[f"model.{side}.layers.{i}.{hf}"] = t.T.reshape(-1) if shape[0] == 1 \
                    else np.ascontiguousarray(t.T)
    if w:
        k = sorted(w)[0]
        raise Refuse(f"tensor {k}: not part of a post-norm transformer with tied embeddings "
                     f"({len(w)} such tensor{'s' if len(w) > 1 else ''}; transformers' "
                     f"converter cannot convert them either)")
    return sd


# --------------------------------------------------------------------------------------
# Export

def hf_config(a, beam, eos):
    """The config.json transformers' converter writes (its OpusState.hf_config)."""
    pad = a["vocab"]  # <pad> comes after the last row
    return {"model_type": "marian", "vocab_size": pad + 1, "decoder_vocab_size": pad + 1,
            "d_model": a["d"], "encoder_layers": a["enc_layers"],
            "decoder_layers": a["dec_layers"], "encoder_attention_heads": a["heads"],
            "decoder_attention_heads": a["heads"], "encoder_ffn_dim": a["ffn"],
            "decoder_ffn_dim": a["dec_ffn"], "activation_function": a["activation"],
            # HF's converter sets the position table to dim-emb rows (512 for base models)
            "max_position_embeddings": a["d"], "scale_embedding": True,
            "share_encoder_decoder_embeddings": a["shared"], "tie_word_embeddings": True,
            "pad_token_id": pad, "eos_token_id": eos, "forced_eos_token_id": eos,
            "decoder_start_token_id": pad, "bad_words_ids": [[pad]], "max_length": 512,
            "num_beams": beam}


def export(release, out_path, dtype="f32", name=None, hf_half=False):
    rel = Release(release)
    beam, listed_model, listed_vocabs = read_decoder_yml(rel)
    w = read_npz(rel, choose_npz(rel, listed_model))
    a = check_model_yml(model_yml(w))
    if "source.spm" not in rel.files and "source.bpe" in rel.files:
        raise Refuse(f"{rel.path}: a BPE release (source.bpe, no source.spm); attend reads "
                     f"SentencePiece releases, as transformers' converter does")
    spm = {f: rel.read(f, "SentencePiece model") for f in ("source.spm", "target.spm")}
    src_name, tgt_name = choose_vocabs(rel, listed_vocabs, a["shared"])
    src_pieces, vocab = read_vocab(rel, src_name, a["vocab"])
    tgt_pieces, tgt_vocab = (src_pieces, vocab) if tgt_name == src_name else \
        read_vocab(rel, tgt_name, a["vocab"])
    if tgt_vocab["</s>"] != vocab["</s>"]:
        # the format has one eos_id: it ends sources and outputs alike
        raise Refuse(f"{tgt_name}: </s> is id {tgt_vocab['</s>']}, but {vocab['</s>']} in "
                     f"{src_name} (attend needs one </s> id for both sides)")
    if a["shared"] and tgt_pieces != src_pieces:
        raise Refuse(f"decoder.yml: vocabs {src_name} and {tgt_name} differ, but "
                     f"tied-embeddings-src = true needs one vocabulary")
    c = hf_config(a, beam, vocab["</s>"])
    cfg = X.config_values(c, {k: CONFIG_KEY for k in c})
    sd = hf_state_dict(w, a)
    if hf_half:
        sd = {k: v.astype(np.float16).astype(np.float32) for k, v in sd.items()}
    # HF's saved tokenizer has no model_max_length of its own (its "no limit")
    tensors = X.write_gguf(out_path, cfg, sd, spm, src_pieces, tgt_pieces, vocab["<unk>"], None,
                           dtype, name)
    return cfg, tensors


def main(argv=None):
    p = X.arg_parser("export_marian_npz.py", __doc__,
                     "a Marian release: the .zip from OPUS-MT's download pages or its directory",
                     dtype_help="storage type of weight matrices, as export_marian.py; default f32",
                     name_help="general.name to record (default: the release's name without .zip)",
                     source=("release", "RELEASE"))
    p.add_argument("--hf-half", action="store_true",
                   help="round every tensor through float16 first, as transformers' converter "
                        "does: the file then equals export_marian.py's of that conversion")
    a = p.parse_args(argv)
    name = a.name
    if name is None:
        name = X.default_name(a.release)
        name = name[:-4] if name.endswith(".zip") else name
    return X.run_export("export_marian_npz", a, export, a.release, a.out, a.dtype, name, a.hf_half, two_vocabs=True)


if __name__ == "__main__":
    sys.exit(main())
