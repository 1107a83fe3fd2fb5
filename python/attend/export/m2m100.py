"""Convert a Hugging Face M2M-100 directory (model_type m2m_100) into attend's .gguf checkpoint.

Reads config.json (+ generation_config.json, tokenizer_config.json, special_tokens_map.json,
added_tokens.json), model.safetensors (or pytorch_model.bin), sentencepiece.bpe.model and
vocab.json, and writes one file in the format of weights/FORMAT.md (architecture
"m2m_100"). export_marian.py hands m2m_100 directories to this script, so either can be run.

NLLB-200 (the same model class; tokenizer_class NllbTokenizer or NllbTokenizerFast in
tokenizer_config.json or config.json; no vocab.json) is exported with NllbTokenizer's ids:
<s> <pad> </s> <unk> = 0..3, SentencePiece piece p (p >= 3) = p + 1, the language codes
(additional_special_tokens, else NllbTokenizer's 202) at the ids added_tokens_decoder,
tokenizer.json or added_tokens.json record, else len(sentencepiece.bpe.model) + 1 + their
index, <mask> after them; the file records tokenizer.class "NllbTokenizer".

Language tokens: M2M100Tokenizer gives `__xx__` the id len(vocab.json) + its index in the
tokenizer's language list. The list is --languages when given, else the `__xx__` entries of
additional_special_tokens (tokenizer_config.json, else special_tokens_map.json) in their
order; ids that added_tokens.json or added_tokens_decoder record must agree. Unsupported
models are refused with a one-line message naming the key and value, and exit code 2.
"""
import json
import os
import re
import sys

from . import marian as E  # the shared readers and checks
from . import gguf_io as G
from .nllb_languages import FAIRSEQ_LANGUAGE_CODES as NLLB_CODES

ARCH = "m2m_100"
SPM_FILE = "sentencepiece.bpe.model"
LANG_TOKEN = re.compile(r"^__([^_\s]+(?:_[^_\s]+)*)__$")  # __de__, __zh_Hant__
# generation keys taken from generation_config.json over config.json
GEN_KEYS = ("max_length", "max_new_tokens", "min_new_tokens", "forced_eos_token_id",
            "forced_bos_token_id", "decoder_start_token_id", "bad_words_ids", "do_sample",
            *E.GENERATION_DEFAULTS, *E.UNIMPLEMENTED)


# --------------------------------------------------------------------------------------
# Configuration

def read_family_config(hf_dir, arch, activation):
    """config.json with generation_config.json's GEN_KEYS over it, checked to be arch's:
    (the config, {key: the file it came from}, {"activation": ...}). activation: the config
    class's default activation_function."""
    c = E._read_json(os.path.join(hf_dir, "config.json"), "config.json")
    if not isinstance(c, dict):
        raise E.Refuse("config.json: not a JSON object")
    src = {k: "config.json" for k in c}
    gen_path = os.path.join(hf_dir, "generation_config.json")
    if os.path.exists(gen_path):
        g = E._read_json(gen_path, "generation_config.json")
        if not isinstance(g, dict):
            raise E.Refuse("generation_config.json: not a JSON object")
        for k in GEN_KEYS:
            if k in g:
                c[k] = g[k]
                src[k] = "generation_config.json"
    if c.get("model_type") != arch:
        raise E.Refuse(f"config.json: unsupported model_type = {json.dumps(c.get('model_type'))} "
                       f"(this exporter reads \"{arch}\")")
    act = c.get("activation_function", activation)
    if act not in E.ACTIVATIONS:
        raise E.Refuse(f"config.json: unsupported activation_function = {json.dumps(act)} "
                       f"(swish, silu, relu or gelu)")
    return c, src, {"activation": E.ACTIVATIONS[act]}


def check_dims(out, min_d):
    """d_model at least min_d, divided by both head counts."""
    d = out["d_model"]
    if d < min_d:
        raise E.Refuse(f"config.json: unsupported d_model = {d} (at least {min_d})")
    for key in ("encoder_attention_heads", "decoder_attention_heads"):
        if d % out[key]:
            raise E.Refuse(f"config.json: unsupported {key} = {out[key]} "
                           f"(does not divide d_model = {d})")


def read_generation_limits(c, src, out, family, forced_eos=None):
    """pad_token_id other than eos_token_id; max_length (max_new_tokens + 1 when given),
    forced_eos (forced_eos_token_id, default forced_eos: the config class's; only null or
    eos), no bad_words_ids (family: who bans nothing), forced_bos_token_id dropped with a
    warning, the generation defaults: into out."""
    if out["pad_token_id"] == out["eos_token_id"]:
        raise E.Refuse(f"config.json: unsupported pad_token_id = {out['pad_token_id']} "
                       f"(equals eos_token_id)")
    ml = c.get("max_length", 20)
    ml = 20 if ml is None else ml
    if isinstance(ml, bool) or not isinstance(ml, int) or not 0 <= ml <= E.U32_MAX:
        raise E.Refuse(f"{src.get('max_length')}: unsupported max_length = {json.dumps(ml)}")
    out["max_length"] = ml or 20
    mn = c.get("max_new_tokens")
    if mn is not None:
        if isinstance(mn, bool) or not isinstance(mn, int) or not 1 <= mn <= E.U32_MAX - 1:
            raise E.Refuse(f"{src['max_new_tokens']}: unsupported max_new_tokens = {json.dumps(mn)} "
                           f"(null or an integer in 1..{E.U32_MAX - 1})")
        out["max_length"] = mn + 1
    fe = c.get("forced_eos_token_id", forced_eos)
    if fe is not None and (isinstance(fe, bool) or not isinstance(fe, int) or fe != out["eos_token_id"]):
        raise E.Refuse(f"{src.get('forced_eos_token_id', 'config.json')}: unsupported forced_eos_token_id = "
                       f"{json.dumps(fe)} (only null or eos_token_id = {out['eos_token_id']})")
    out["forced_eos"] = fe is not None
    bw = c.get("bad_words_ids")
    if bw not in (None, []):
        raise E.Refuse(f"{src.get('bad_words_ids')}: unsupported bad_words_ids = {json.dumps(bw)} "
                       f"({family} bans nothing)")
    fb = c.pop("forced_bos_token_id", None)
    if fb is not None:
        E.warn(f"{src['forced_bos_token_id']}: forced_bos_token_id = {json.dumps(fb)} is not recorded: "
               f"attend forces the language given by --tgt-lang")
    out["generation"] = E.read_generation(c, src)
    return out


def read_config(hf_dir):
    """The M2M100Config of hf_dir as the values the format needs."""
    c, src, out = read_family_config(hf_dir, ARCH, "relu")  # M2M100Config's default activation
    for key in ("vocab_size", "d_model", "encoder_layers", "decoder_layers",
                "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim",
                "decoder_ffn_dim", "max_position_embeddings"):
        out[key] = E._int(c, key, lo=1)
    check_dims(out, 4)  # fairseq positions divide by d/2 - 1
    out["scale_embedding"] = E._bool(c, "scale_embedding", True)  # M2M100Config's default
    out["tied"] = E._bool(c, "tie_word_embeddings", True)
    V = out["vocab_size"]
    # M2M100Config's defaults: pad 1, bos 0, eos 2, decoder start 2
    for key, default in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2),
                         ("decoder_start_token_id", 2)):
        c.setdefault(key, default)
        out[key] = E._int(c, key, hi=V - 1)
    # PretrainedConfig's default forced_eos_token_id is None
    return read_generation_limits(c, src, out, "M2M-100")


# --------------------------------------------------------------------------------------
# Language tokens

def _token_text(t):
    """A special-token entry: a string, or HF's AddedToken dict."""
    return t.get("content") if isinstance(t, dict) else t


def given_languages(given):
    """The codes of --languages (comma-separated)."""
    codes = [x.strip() for x in given.split(",") if x.strip()]
    if not codes:
        raise E.Refuse("--languages: no codes given")
    return codes


def special_token_lists(hf_dir, skip):
    """(file, its additional_special_tokens list) of tokenizer_config.json, then
    special_tokens_map.json, as they are asked for; a file without one, or whose value
    skip(value) passes over, gives none."""
    for f in ("tokenizer_config.json", "special_tokens_map.json"):
        path = os.path.join(hf_dir, f)
        if not os.path.exists(path):
            continue
        t = E._read_json(path, f)
        toks = t.get("additional_special_tokens") if isinstance(t, dict) else None
        if skip(toks):
            continue
        if not isinstance(toks, list):
            raise E.Refuse(f"{f}: additional_special_tokens = {json.dumps(toks)[:60]} is not a list")
        yield f, toks


def read_languages(hf_dir, given):
    """[code] in the tokenizer's order: --languages, else additional_special_tokens."""
    if given:
        return given_languages(given)
    for f, toks in special_token_lists(hf_dir, lambda toks: not toks):
        codes = []
        for tok in toks:
            m = LANG_TOKEN.match(_token_text(tok) or "")
            if not m:
                raise E.Refuse(f"{f}: additional_special_tokens entry {json.dumps(tok)[:60]} is not a "
                               f"language token __xx__ (give --languages)")
            codes.append(m.group(1))
        return codes
    raise E.Refuse("no language list: neither tokenizer_config.json nor special_tokens_map.json has "
                   "additional_special_tokens (give --languages with the tokenizer's codes in order)")


def check_recorded_ids(hf_dir, lang_ids):
    """Ids that added_tokens.json / tokenizer_config.json added_tokens_decoder give a
    language token must be the ones the list order gives."""
    want = {f"__{code}__": i for code, i in lang_ids.items()}
    recorded = {}
    path = os.path.join(hf_dir, "added_tokens.json")
    if os.path.exists(path):
        a = E._read_json(path, "added_tokens.json")
        if isinstance(a, dict):
            recorded.update({k: (v, "added_tokens.json") for k, v in a.items()})
    path = os.path.join(hf_dir, "tokenizer_config.json")
    if os.path.exists(path):
        t = E._read_json(path, "tokenizer_config.json")
        dec = t.get("added_tokens_decoder") if isinstance(t, dict) else None
        if isinstance(dec, dict):
            for k, v in dec.items():
                if str(k).isdigit():
                    recorded[_token_text(v)] = (int(k), "tokenizer_config.json added_tokens_decoder")
    for tok, (i, where) in recorded.items():
        if tok in want and want[tok] != i:
            raise E.Refuse(f"{where}: {tok} has id {i}, but the language list puts it at {want[tok]} "
                           f"(give --languages in the tokenizer's order)")


# --------------------------------------------------------------------------------------
# NLLB-200's tokenizer (NllbTokenizer)

NLLB_CLASSES = ("NllbTokenizer", "NllbTokenizerFast")
NLLB_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0..3 (fairseq's dictionary)
MASK = "<mask>"
SPM_UNKNOWN, SPM_CONTROL = 2, 3  # SentencePiece piece types


def tokenizer_class(hf_dir):
    """(tokenizer_class, the file naming it): tokenizer_config.json's, else config.json's
    (as AutoTokenizer looks), else (None, None)."""
    for f in ("tokenizer_config.json", "config.json"):
        path = os.path.join(hf_dir, f)
        if os.path.exists(path):
            t = E._read_json(path, f)
            if isinstance(t, dict) and t.get("tokenizer_class") is not None:
                return t["tokenizer_class"], f
    return None, None


def _varint(b, i):
    x = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        x |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return x, i


def _fields(b):
    """(field, wire type, value) of one protobuf message."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        wt = key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = b[i:i + n], i + n
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wt}")
        if i > len(b):
            raise ValueError("truncated field")
        yield key >> 3, wt, v


def iter_spm_pieces(blob):
    """(piece or None, type) of each piece of a serialized SentencePiece ModelProto, as it is
    read: its field 1, each piece's field 1 (text, decoded as UTF-8) and field 3 (type; 1
    normal when absent). Broken protobuf raises ValueError (UnicodeDecodeError for text)."""
    for f, wt, v in _fields(blob):
        if f == 1 and wt == 2:
            piece, kind = None, 1
            for g, wt2, w in _fields(v):
                if g == 1 and wt2 == 2:
                    piece = w.decode("utf-8")
                elif g == 3 and wt2 == 0:
                    kind = w
            yield piece, kind


def spm_pieces(blob):
    """[(piece, type)] of a serialized SentencePiece ModelProto (iter_spm_pieces)."""
    out = []
    for piece, kind in iter_spm_pieces(blob):
        if piece is None:
            raise ValueError("a piece without text")
        out.append((piece, kind))
    return out


def read_spm(hf_dir):
    """The bytes of hf_dir's sentencepiece.bpe.model."""
    spm_path = os.path.join(hf_dir, SPM_FILE)
    E.check_lfs(spm_path, "SentencePiece model", hf_dir)
    try:
        with open(spm_path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise E.Refuse(f"missing file {spm_path}") from None


def _recorded_tokens(hf_dir):
    """{content: (id, flags dict, where)} for the added tokens a directory records:
    tokenizer_config.json's added_tokens_decoder, tokenizer.json's added_tokens,
    added_tokens.json. Two records of one token must give it one id."""
    rec = {}

    def put(content, i, flags, where):
        if not isinstance(content, str) or isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise E.Refuse(f"{where}: entry {json.dumps(content)[:40]} = {json.dumps(i)[:40]} is not a token and an id")
        if content in rec and rec[content][0] != i:
            raise E.Refuse(f"{where}: {content} has id {i}, but {rec[content][2]} gives it {rec[content][0]}")
        rec.setdefault(content, (i, flags, where))

    path = os.path.join(hf_dir, "tokenizer_config.json")
    if os.path.exists(path):
        t = E._read_json(path, "tokenizer_config.json")
        dec = t.get("added_tokens_decoder") if isinstance(t, dict) else None
        if dec is not None:
            if not isinstance(dec, dict):
                raise E.Refuse("tokenizer_config.json: added_tokens_decoder is not an object")
            for k, v in dec.items():
                if not str(k).isdigit():
                    raise E.Refuse(f"tokenizer_config.json: added_tokens_decoder key {json.dumps(k)[:40]} is not an id")
                put(_token_text(v), int(k), v if isinstance(v, dict) else {},
                    "tokenizer_config.json added_tokens_decoder")
    path = os.path.join(hf_dir, "tokenizer.json")
    if os.path.exists(path):
        E.check_lfs(path, "tokenizer.json", hf_dir)
        t = E._read_json(path, "tokenizer.json")
        for v in (t.get("added_tokens") or []) if isinstance(t, dict) else []:
            if not isinstance(v, dict):
                raise E.Refuse(f"tokenizer.json: added_tokens entry {json.dumps(v)[:40]} is not an object")
            put(v.get("content"), v.get("id"), v, "tokenizer.json added_tokens")
    path = os.path.join(hf_dir, "added_tokens.json")
    if os.path.exists(path):
        a = E._read_json(path, "added_tokens.json")
        if not isinstance(a, dict):
            raise E.Refuse("added_tokens.json: not a JSON object")
        for k, v in a.items():
            put(k, v, {}, "added_tokens.json")
    return rec


def read_nllb_languages(hf_dir, given):
    """NllbTokenizer's language codes: --languages, else additional_special_tokens
    (tokenizer_config.json, else special_tokens_map.json), else its 202 codes."""
    if given:
        return given_languages(given), "--languages"
    for f, toks in special_token_lists(hf_dir, lambda toks: toks is None):
        codes = []
        for tok in toks:
            code = _token_text(tok)
            if not isinstance(code, str) or not code or len(code.encode()) > 64 or "\0" in code \
                    or code != code.strip():
                raise E.Refuse(f"{f}: additional_special_tokens entry {json.dumps(tok)[:60]} is not a language code")
            if code in NLLB_SPECIALS or code == MASK:
                raise E.Refuse(f"{f}: additional_special_tokens entry {json.dumps(code)} is a special token, "
                               f"not a language code")
            if isinstance(tok, dict) and any(tok.get(k) for k in ("lstrip", "rstrip", "single_word")):
                raise E.Refuse(f"{f}: additional_special_tokens entry {json.dumps(tok)[:80]}: lstrip, rstrip and "
                               f"single_word are not supported")
            codes.append(code)
        if codes:
            return codes, f
    return list(NLLB_CODES), "NllbTokenizer's default list"


def read_nllb_tokenizer(hf_dir, V, languages=None):
    """(spm bytes, pieces [V], codes, {code: id}) as NllbTokenizer numbers them."""
    path = os.path.join(hf_dir, "tokenizer_config.json")
    tc = E._read_json(path, "tokenizer_config.json") if os.path.exists(path) else {}
    if not isinstance(tc, dict):
        raise E.Refuse("tokenizer_config.json: not a JSON object")
    if tc.get("legacy_behaviour"):
        raise E.Refuse(f"tokenizer_config.json: unsupported legacy_behaviour = {json.dumps(tc['legacy_behaviour'])} "
                       f"(attend puts the language code first: [src_lang] pieces </s>)")
    if tc.get("sp_model_kwargs"):
        raise E.Refuse(f"tokenizer_config.json: unsupported sp_model_kwargs = "
                       f"{json.dumps(tc['sp_model_kwargs'])[:80]} (SentencePiece's defaults only)")
    if tc.get("clean_up_tokenization_spaces") is False:
        E.warn("tokenizer_config.json: clean_up_tokenization_spaces = false, but attend always cleans up "
               "decoded text (\" .\" -> \".\", ...) as transformers 4.x does by default")
    spm = read_spm(hf_dir)
    try:
        sp = spm_pieces(spm)
    except (ValueError, UnicodeDecodeError) as e:
        raise E.Refuse(f"{SPM_FILE}: not a SentencePiece model ({e})") from None
    n = len(sp)
    if n < 4:
        raise E.Refuse(f"{SPM_FILE}: {n} pieces (NllbTokenizer needs <unk> <s> </s> and pieces)")
    if sp[0][1] != SPM_UNKNOWN:
        raise E.Refuse(f"{SPM_FILE}: piece 0 {json.dumps(sp[0][0])} is not the unknown piece "
                       f"(NllbTokenizer reads SentencePiece's id 0 as <unk>)")
    for i in (1, 2):
        if sp[i][1] != SPM_CONTROL:
            raise E.Refuse(f"{SPM_FILE}: piece {i} {json.dumps(sp[i][0])} is not a control piece (NllbTokenizer's "
                           f"</s> and <unk> take its id + 1)")
    if V < n + 1:
        raise E.Refuse(f"config.json: vocab_size = {V} holds fewer than the {n + 1} ids of {SPM_FILE} "
                       f"(its {n} pieces + 1, fairseq's offset)")
    codes, where = read_nllb_languages(hf_dir, languages)
    if len(set(codes)) != len(codes):
        raise E.Refuse(f"{where}: a language code appears twice ({', '.join(codes)[:80]})")
    spm_ids = {p: i for i, (p, _) in enumerate(sp)}
    for code in codes:
        if code in spm_ids:
            raise E.Refuse(f"{where}: language code {code} is also SentencePiece piece {spm_ids[code]}")

    rec = _recorded_tokens(hf_dir)
    for i, tok in enumerate(NLLB_SPECIALS):
        if tok in rec and rec[tok][0] != i:
            raise E.Refuse(f"{rec[tok][2]}: {tok} has id {rec[tok][0]}, not {i}")
    for tok, (i, flags, w) in rec.items():
        if tok not in NLLB_SPECIALS and tok != MASK and tok not in codes:
            raise E.Refuse(f"{w}: added token {json.dumps(tok)} (id {i}) is neither a language code of {where}, "
                           f"<mask> nor <s> <pad> </s> <unk> (not supported)")
        if tok == MASK:
            if flags.get("rstrip") or flags.get("single_word") or flags.get("lstrip") is False:
                raise E.Refuse(f"{w}: <mask> = {json.dumps(flags)[:120]} (NllbTokenizer's <mask> strips the "
                               f"whitespace on its left: lstrip true, rstrip and single_word false)")
        elif any(flags.get(k) for k in ("lstrip", "rstrip", "single_word")) or flags.get("special") is False:
            raise E.Refuse(f"{w}: {tok} = {json.dumps(flags)[:120]} (language and special tokens are special, "
                           f"without lstrip, rstrip or single_word)")
    recorded = [c for c in codes if c in rec]
    if recorded and len(recorded) != len(codes):
        missing = [c for c in codes if c not in rec]
        raise E.Refuse(f"{rec[recorded[0]][2]}: records ids for {len(recorded)} of the {len(codes)} language codes "
                       f"of {where}, not for {', '.join(missing)[:60]}")
    lang_ids = {c: rec[c][0] if recorded else n + 1 + i for i, c in enumerate(codes)}
    mask_id = rec[MASK][0] if MASK in rec else n + 1 + len(codes)
    taken = {}
    for tok, i in list(lang_ids.items()) + [(MASK, mask_id)]:
        if i <= n and (tok != MASK or MASK in rec):
            raise E.Refuse(f"{rec[tok][2] if tok in rec else where}: {tok} has id {i}, the id of SentencePiece "
                           f"piece {json.dumps(sp[i - 1][0]) if i else '<s>'}")
        if i >= V and tok != MASK:
            raise E.Refuse(f"config.json: vocab_size = {V}, but language code {tok} has id {i}")
        if i in taken:
            raise E.Refuse(f"{where}: {tok} and {taken[i]} have the same id {i}")
        taken[i] = tok
    pieces = [""] * V
    pieces[:4] = NLLB_SPECIALS
    for i in range(3, n):
        pieces[i + 1] = sp[i][0]
    for code, i in lang_ids.items():
        pieces[i] = code
    if mask_id < V:
        pieces[mask_id] = MASK
    return spm, pieces, codes, lang_ids


# --------------------------------------------------------------------------------------
# Tensors

def map_tensors(cfg, sd):
    """[(attend name, float32 array)] in FORMAT.md order (m2m_100)."""
    d, V = cfg["d_model"], cfg["vocab_size"]
    get = E._get
    embed = ["model.shared.weight", "model.encoder.embed_tokens.weight",
             "model.decoder.embed_tokens.weight"] + (["lm_head.weight"] if cfg["tied"] else [])
    out = [("enc.embed.weight", get(sd, embed, (V, d)))]
    if not cfg["tied"]:
        out.append(("lm_head.weight", get(sd, ["lm_head.weight"], (V, d))))

    E.map_layers(cfg, sd, out, final_norms=True)
    return out


# --------------------------------------------------------------------------------------
# Export

def export(hf_dir, out_path, dtype="f32", name=None, languages=None):
    cfg = read_config(hf_dir)
    model_max_length = E.read_model_max_length(hf_dir)
    V = cfg["vocab_size"]
    cls, cls_file = tokenizer_class(hf_dir)
    if cls in NLLB_CLASSES:
        spm, pieces, codes, lang_ids = read_nllb_tokenizer(hf_dir, V, languages)
        unk = 3
        tok_class = [("tokenizer.class", G.STRING, "NllbTokenizer")]
    elif cls in (None, "M2M100Tokenizer"):
        spm, pieces, codes, lang_ids, unk = read_m2m_tokenizer(hf_dir, V, languages)
        tok_class = []
    else:
        raise E.Refuse(f"{cls_file}: unsupported tokenizer_class = {json.dumps(cls)} "
                       f"(M2M100Tokenizer, NllbTokenizer or NllbTokenizerFast)")
    return write(out_path, cfg, dtype, name, model_max_length, spm, pieces, codes, lang_ids, unk, tok_class,
                 map_tensors(cfg, E.read_weights(hf_dir)))


def read_m2m_tokenizer(hf_dir, V, languages):
    """(spm bytes, pieces [V], codes, {code: id}, unk id) as M2M100Tokenizer numbers them."""
    vpath = os.path.join(hf_dir, "vocab.json")
    if not os.path.exists(vpath) and os.path.exists(os.path.join(hf_dir, SPM_FILE)):
        raise E.Refuse(f"missing file {vpath} (an NLLB-200 directory names tokenizer_class NllbTokenizer in "
                       f"tokenizer_config.json)")
    E.check_lfs(vpath, "vocabulary", hf_dir)
    vocab = E._read_json(vpath, "vocab.json")
    if not isinstance(vocab, dict):
        raise E.Refuse("vocab.json: not a JSON object")
    if "<unk>" not in vocab:
        raise E.Refuse("vocab.json: no <unk> piece")
    codes = read_languages(hf_dir, languages)
    if len(set(codes)) != len(codes):
        raise E.Refuse(f"language list: a code appears twice ({', '.join(codes)[:80]})")
    # M2M100Tokenizer: __xx__ = len(vocab.json) + its index in the list
    lang_ids = {code: len(vocab) + i for i, code in enumerate(codes)}
    if len(vocab) + len(codes) > V:
        raise E.Refuse(f"config.json: vocab_size = {V} holds fewer than the {len(vocab)} pieces of "
                       f"vocab.json and {len(codes)} language tokens")
    check_recorded_ids(hf_dir, lang_ids)
    pieces, _ = E.read_pieces(vpath, V, "vocab_size", "vocab.json")
    for code, i in lang_ids.items():
        if pieces[i]:
            raise E.Refuse(f"vocab.json: id {i} of __{code}__ is taken by {json.dumps(pieces[i])}")
        pieces[i] = f"__{code}__"
    spm = read_spm(hf_dir)
    return spm, pieces, codes, lang_ids, vocab["<unk>"]


def write(out_path, cfg, dtype, name, model_max_length, spm, pieces, codes, lang_ids, unk, tok_class, tensors,
          arch=ARCH, after_bos=()):
    """Write the .gguf of a multilingual-family model (m2m_100, and mbart through
    export_mbart.py): one SentencePiece model and one vocabulary for both sides, the
    language codes and their ids. tensors: [(attend name, float32 array)] in FORMAT.md order;
    after_bos: (key, id) pairs of the family's further ids, written after bos_id (mbart's
    mask_id); tok_class: metadata written last. Returns (cfg, the tensors written)."""
    V = cfg["vocab_size"]
    tensors = E.stored(tensors, dtype)
    meta = E.file_meta(arch, dtype, name, E.bart_hyperparameters(
        cfg, vocab_size=V, decoder_vocab_size=V, shared_embeddings=True, pad_id=cfg["pad_token_id"],
        eos_id=cfg["eos_token_id"], unk_id=unk, decoder_start_id=cfg["decoder_start_token_id"]),
        more_ids=[("bos_id", cfg["bos_token_id"]), *after_bos])
    meta += E.generation_metadata(cfg["generation"])
    # one SentencePiece model and one vocabulary serve both sides
    meta += E.tokenizer_metadata(model_max_length, spm, spm, pieces, pieces) + [
        ("tokenizer.languages", G.ARRAY, (G.STRING, codes)),
        ("tokenizer.language_ids", G.ARRAY, (G.UINT32, [lang_ids[c] for c in codes])),
    ] + tok_class
    E.write_file(out_path, meta, tensors)
    return cfg, tensors


def main(argv=None):
    p = E.arg_parser("export_m2m100.py", __doc__, "Hugging Face M2M-100 or NLLB-200 model directory")
    p.add_argument("--languages", metavar="CODES",
                   help="comma-separated language codes in the tokenizer's order (e.g. af,am,ar,...): "
                        "__xx__ gets id len(vocab.json) + index (default: additional_special_tokens; for "
                        "NLLB, else NllbTokenizer's 202 codes, ace_Arab,...,zul_Latn)")
    a = p.parse_args(argv)
    name = a.name if a.name is not None else E.default_name(a.hf_dir)
    return E.run_export("export_m2m100", a, export, a.hf_dir, a.out, a.dtype, name, a.languages, hf_dir=a.hf_dir)


if __name__ == "__main__":
    sys.exit(main())
