"""Convert a Hugging Face mBART-50 directory (model_type mbart, MBart50Tokenizer) into attend's
.gguf checkpoint.

Reads config.json (+ generation_config.json), tokenizer_config.json / special_tokens_map.json
(+ added_tokens.json), model.safetensors (or pytorch_model.bin) and sentencepiece.bpe.model,
and writes one file in the format of weights/FORMAT.md (architecture "mbart").
export_marian.py hands mbart directories to this script, so either can be run.

The vocabulary is MBart50Tokenizer's: <s> 0, <pad> 1, </s> 2, <unk> 3, SentencePiece piece p
(p >= 3) at p + 1, the 52 language codes (ar_AR ... sl_SI, the tokenizer's fixed order) at
pieces + 1 + i, <mask> after them. The tensors are shared with export_m2m100.py's mapping
plus the position tables and embedding LayerNorms. Unsupported models are refused with a
one-line message naming the key and value, and exit code 2.
"""
import json
import os
import sys

from . import m2m100 as M  # config, SentencePiece reader, tensors and writer of the pre-norm families
from . import marian as E  # the shared readers and checks

ARCH = "mbart"
# MBart50Tokenizer's language codes, in the order that gives their ids (FAIRSEQ_LANGUAGE_CODES)
LANGUAGE_CODES = (
    "ar_AR cs_CZ de_DE en_XX es_XX et_EE fi_FI fr_XX gu_IN hi_IN it_IT ja_XX kk_KZ ko_KR lt_LT "
    "lv_LV my_MM ne_NP nl_XX ro_RO ru_RU si_LK tr_TR vi_VN zh_CN af_ZA az_AZ bn_IN fa_IR he_IL "
    "hr_HR id_ID ka_GE km_KH mk_MK ml_IN mn_MN mr_IN pl_PL ps_AF pt_XX sv_SE sw_KE ta_IN te_IN "
    "th_TH tl_XX uk_UA ur_PK xh_ZA gl_ES sl_SI").split()
SPM_FILE = "sentencepiece.bpe.model"
TOKENIZERS = ("MBart50Tokenizer", "MBart50TokenizerFast")


# --------------------------------------------------------------------------------------
# Configuration

def read_config(hf_dir):
    """The MBartConfig of hf_dir (MBartConfig's class defaults for absent keys) as the
    values the format needs."""
    c, src, out = M.read_family_config(hf_dir, ARCH, "gelu")  # MBartConfig's default activation
    defaults = {"vocab_size": 50265, "d_model": 1024, "encoder_layers": 12, "decoder_layers": 12,
                "encoder_attention_heads": 16, "decoder_attention_heads": 16, "encoder_ffn_dim": 4096,
                "decoder_ffn_dim": 4096, "max_position_embeddings": 1024}
    for key, default in defaults.items():
        c.setdefault(key, default)
        out[key] = E._int(c, key, lo=1)
    M.check_dims(out, 2)
    if out["max_position_embeddings"] > 65536:
        raise E.Refuse(f"config.json: unsupported max_position_embeddings = {out['max_position_embeddings']} "
                       f"(at most 65536)")
    out["scale_embedding"] = E._bool(c, "scale_embedding", False)  # MBartConfig's default
    out["tied"] = E._bool(c, "tie_word_embeddings", True)
    V = out["vocab_size"]
    for key, default in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2)):
        c.setdefault(key, default)
        out[key] = E._int(c, key, hi=V - 1)
    # generate() starts from decoder_start_token_id, else bos_token_id
    if c.get("decoder_start_token_id") is None:
        c["decoder_start_token_id"] = out["bos_token_id"]
    out["decoder_start_token_id"] = E._int(c, "decoder_start_token_id", hi=V - 1)
    # MBartConfig's default forced_eos_token_id is 2 (absent: 2; null: none)
    return M.read_generation_limits(c, src, out, "mBART", forced_eos=2)


# --------------------------------------------------------------------------------------
# Tokenizer

def spm_pieces(blob, path):
    """The piece strings of a serialized SentencePiece ModelProto, in id order
    (export_m2m100.iter_spm_pieces), at least 4."""
    pieces = []
    try:
        for piece, _ in M.iter_spm_pieces(blob):
            if piece is None:
                raise E.Refuse(f"{path}: piece {len(pieces)} has no text")
            pieces.append(piece)
    except UnicodeDecodeError:
        raise E.Refuse(f"{path}: piece {len(pieces)} is not UTF-8") from None
    except ValueError as e:  # the protobuf reader's words, as this exporter has said them
        why = "truncated" if str(e) == "truncated field" else e
        raise E.Refuse(f"{path}: not a SentencePiece model ({why})") from None
    if len(pieces) < 4:
        raise E.Refuse(f"{path}: not a SentencePiece model ({len(pieces)} pieces)")
    return pieces


def read_tokenizer(hf_dir):
    """Check the tokenizer files: MBart50Tokenizer (when named), additional_special_tokens
    only language codes of its list, no added token at another id than the list gives."""
    for f in ("tokenizer_config.json", "special_tokens_map.json"):
        path = os.path.join(hf_dir, f)
        if not os.path.exists(path):
            continue
        t = E._read_json(path, f)
        if not isinstance(t, dict):
            raise E.Refuse(f"{f}: not a JSON object")
        cls = t.get("tokenizer_class")
        if cls is not None and cls not in TOKENIZERS:
            raise E.Refuse(f"{f}: unsupported tokenizer_class = {json.dumps(cls)} "
                           f"(MBart50Tokenizer; mBART-25's MBartTokenizer orders its tokens otherwise)")
        toks = t.get("additional_special_tokens")
        if toks is None:
            continue
        if not isinstance(toks, list):
            raise E.Refuse(f"{f}: additional_special_tokens = {json.dumps(toks)[:60]} is not a list")
        for tok in toks:
            if M._token_text(tok) not in LANGUAGE_CODES:
                raise E.Refuse(f"{f}: unsupported additional_special_tokens entry {json.dumps(tok)[:60]} "
                               f"(only MBart50Tokenizer's language codes)")


def check_added_ids(hf_dir, ids):
    """Ids that added_tokens.json / added_tokens_decoder give a special token must be ours."""
    recorded = []
    path = os.path.join(hf_dir, "added_tokens.json")
    if os.path.exists(path):
        a = E._read_json(path, "added_tokens.json")
        if isinstance(a, dict):
            recorded += [(k, v, "added_tokens.json") for k, v in a.items()]
    path = os.path.join(hf_dir, "tokenizer_config.json")
    if os.path.exists(path):
        t = E._read_json(path, "tokenizer_config.json")
        dec = t.get("added_tokens_decoder") if isinstance(t, dict) else None
        if isinstance(dec, dict):
            recorded += [(M._token_text(v), int(k), "tokenizer_config.json added_tokens_decoder")
                         for k, v in dec.items() if str(k).isdigit()]
    for tok, i, where in recorded:
        if tok not in ids:
            raise E.Refuse(f"{where}: unsupported added token {json.dumps(tok)[:60]} (id {i})")
        if ids[tok] != i:
            raise E.Refuse(f"{where}: {tok} has id {i}, but MBart50Tokenizer gives it {ids[tok]}")


# --------------------------------------------------------------------------------------
# Tensors

def map_tensors(cfg, sd):
    """[(attend name, float32 array)] in FORMAT.md order (mbart): the m2m_100 mapping, the
    position tables and embedding LayerNorms after the embeddings, final_logits_bias."""
    d, V, P = cfg["d_model"], cfg["vocab_size"], cfg["max_position_embeddings"] + 2
    base = M.map_tensors(cfg, sd)
    n_embed = 1 if cfg["tied"] else 2
    out = base[:n_embed]
    out.append(("final_logits_bias", E._get(sd, ["final_logits_bias"], (V,), allow_shapes=((1, V),))))
    for side, hf in (("enc", "model.encoder"), ("dec", "model.decoder")):
        out.append((f"{side}.embed_positions.weight", E._get(sd, [f"{hf}.embed_positions.weight"], (P, d))))
    for side, hf in (("enc", "model.encoder"), ("dec", "model.decoder")):
        for s in ("weight", "bias"):
            out.append((f"{side}.embed_norm.{s}", E._get(sd, [f"{hf}.layernorm_embedding.{s}"], (d,))))
    return out + base[n_embed:]


# --------------------------------------------------------------------------------------
# Export

def export(hf_dir, out_path, dtype="f32", name=None):
    cfg = read_config(hf_dir)
    model_max_length = E.read_model_max_length(hf_dir)
    V = cfg["vocab_size"]
    read_tokenizer(hf_dir)
    spm = M.read_spm(hf_dir)
    sp = spm_pieces(spm, SPM_FILE)
    n = len(sp)
    # HF maps SentencePiece id p >= 1 to p + 1: ids 1 and 2 must be the control pieces the
    # fixed <s> and </s> stand for, or text pieces would land on them
    for i, want in enumerate(("<unk>", "<s>", "</s>")):
        if sp[i] != want:
            raise E.Refuse(f"{SPM_FILE}: unsupported piece {i} = {json.dumps(sp[i])} (fairseq's layout has {want})")
    fixed = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces = fixed + sp[3:] + list(LANGUAGE_CODES) + ["<mask>"]
    ids = {p: i for i, p in enumerate(fixed)}
    ids.update({code: n + 1 + i for i, code in enumerate(LANGUAGE_CODES)})
    ids["<mask>"] = mask_id = n + 1 + len(LANGUAGE_CODES)
    assert len(pieces) == mask_id + 1
    if V < len(pieces):
        raise E.Refuse(f"config.json: vocab_size = {V} holds fewer than the {len(pieces)} ids of "
                       f"MBart50Tokenizer ({n} SentencePiece pieces, {len(LANGUAGE_CODES)} language codes, <mask>)")
    check_added_ids(hf_dir, ids)
    special = {"pad_token_id": ("<pad>", 1), "bos_token_id": ("<s>", 0), "eos_token_id": ("</s>", 2)}
    for key, (tok, want) in special.items():
        if cfg[key] != want:
            raise E.Refuse(f"config.json: unsupported {key} = {cfg[key]} (MBart50Tokenizer's {tok} is {want})")
    pieces += [""] * (V - len(pieces))  # ids no tokenizer gives (decoded as <unk>)
    seen = {}
    for i, p in enumerate(pieces):
        if p and seen.setdefault(p, i) != i:
            raise E.Refuse(f"{SPM_FILE}: piece {json.dumps(p)} appears at ids {seen[p]} and {i}")

    return M.write(out_path, cfg, dtype, name, model_max_length, spm, pieces, list(LANGUAGE_CODES), ids, 3, [],
                   map_tensors(cfg, E.read_weights(hf_dir)), arch=ARCH, after_bos=[("mask_id", mask_id)])


def main(argv=None):
    p = E.arg_parser("export_mbart.py", __doc__, "Hugging Face mBART-50 model directory")
    a = p.parse_args(argv)
    name = a.name if a.name is not None else E.default_name(a.hf_dir)
    return E.run_export("export_mbart", a, export, a.hf_dir, a.out, a.dtype, name, hf_dir=a.hf_dir)


if __name__ == "__main__":
    sys.exit(main())
