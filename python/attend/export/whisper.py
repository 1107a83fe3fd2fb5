"""Convert a Hugging Face Whisper directory (model_type whisper: openai/whisper-tiny ...
large-v3, the *.en models, distil-whisper, fine-tuned copies) into attend's .gguf checkpoint.

Reads config.json, generation_config.json (the decoder prompt's tokens, suppress lists,
alignment heads), preprocessor_config.json (mel bins; a stored filter bank is kept),
model.safetensors (or pytorch_model.bin) and the byte-level BPE tokenizer (vocab.json +
merges.txt + added_tokens.json, or tokenizer.json), and writes one file in the format of
weights/FORMAT.md (architecture "whisper").

The convolutions' kernels [d, channels, 3] are stored as matrices [d, 3 * channels] (column
k * channels + c holds tap k of channel c), so the engine runs them as linear layers over
three stacked frames. k_proj has no bias in Whisper: a zero bias is stored (adding +0 leaves
every value as it was). Unsupported models are refused with a one-line message naming the
key and value, and exit code 2.
"""
import json
import os
import re
import sys

import numpy as np

from . import gguf_io as G
from . import m2m100 as M  # the family config reader
from . import marian as E  # the shared readers and checks

ARCH = "whisper"
# WhisperConfig's class defaults
DEFAULTS = dict(vocab_size=51865, num_mel_bins=80, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, d_model=384,
                max_source_positions=1500, max_target_positions=448)
TIMESTAMPS = 1501  # <|0.00|> ... <|30.00|>
TIMESTAMP = re.compile(r"^<\|\d+\.\d+\|>$")


# --------------------------------------------------------------------------------------
# Configuration

def read_config(hf_dir):
    """The WhisperConfig of hf_dir (class defaults for absent keys) as the values the format
    needs, with generation_config.json's whole object under "whisper_generation"."""
    c, src, out = M.read_family_config(hf_dir, ARCH, "gelu")
    for key, default in DEFAULTS.items():
        c.setdefault(key, default)
        out[key] = E._int(c, key, lo=1)
    M.check_dims(out, 2)
    if out["num_mel_bins"] > 512 or out["max_source_positions"] > 65536 or out["max_target_positions"] > 65536:
        raise E.Refuse("config.json: num_mel_bins, max_source_positions or max_target_positions too large")
    out["max_position_embeddings"] = out["max_target_positions"]
    out["scale_embedding"] = E._bool(c, "scale_embedding", False)
    if out["scale_embedding"]:
        raise E.Refuse("config.json: unsupported scale_embedding = true (Whisper's embeddings are unscaled)")
    out["tied"] = E._bool(c, "tie_word_embeddings", True)
    V = out["vocab_size"]
    for key, default in (("eos_token_id", 50257), ("decoder_start_token_id", 50258)):
        c.setdefault(key, default)
        out[key] = E._int(c, key, hi=V - 1)
    g = {}
    path = os.path.join(hf_dir, "generation_config.json")
    if os.path.exists(path):
        g = E._read_json(path, "generation_config.json")
        if not isinstance(g, dict):
            raise E.Refuse("generation_config.json: not a JSON object")
    out["whisper_generation"] = g
    out["forced_decoder_ids"] = g["forced_decoder_ids"] if g.get("forced_decoder_ids") is not None \
        else c.get("forced_decoder_ids")  # HF reads the generation config's, else config.json's
    ml = g.get("max_length", c.get("max_length", out["max_target_positions"]))
    if isinstance(ml, bool) or not isinstance(ml, int) or not 2 <= ml:
        raise E.Refuse(f"generation_config.json: unsupported max_length = {json.dumps(ml)}")
    out["max_length"] = min(ml, out["max_target_positions"])
    out["forced_eos"] = False
    out["generation"] = E.read_generation({k: g[k] for k in ("num_beams", "length_penalty") if k in g},
                                          {k: "generation_config.json" for k in g})
    return out


def read_mel_bins(hf_dir, cfg):
    """preprocessor_config.json: the mel bins must be the model's; its stored filter bank
    (older exports keep mel_filters [201, n_mels]) as [n_mels, 201], else None."""
    path = os.path.join(hf_dir, "preprocessor_config.json")
    if not os.path.exists(path):
        return None
    p = E._read_json(path, "preprocessor_config.json")
    if not isinstance(p, dict):
        raise E.Refuse("preprocessor_config.json: not a JSON object")
    want = {"feature_size": cfg["num_mel_bins"], "sampling_rate": 16000, "hop_length": 160, "n_fft": 400}
    for key, value in want.items():
        if key in p and p[key] != value:
            raise E.Refuse(f"preprocessor_config.json: unsupported {key} = {json.dumps(p[key])} (attend reads {value})")
    if "mel_filters" not in p:
        return None
    f = np.asarray(p["mel_filters"], dtype=np.float32)
    if f.shape != (201, cfg["num_mel_bins"]) or not np.isfinite(f).all():
        raise E.Refuse(f"preprocessor_config.json: mel_filters of shape {list(f.shape)}, expected [201, {cfg['num_mel_bins']}]")
    return np.ascontiguousarray(f.T)


# --------------------------------------------------------------------------------------
# Tokenizer: byte-level BPE

def read_bpe(hf_dir, V):
    """(tokens [V] in id order, "" where no token; merges ["a b", ...]; the added tokens' ids)
    from vocab.json + merges.txt + added_tokens.json, else tokenizer.json."""
    vocab_path, merges_path = os.path.join(hf_dir, "vocab.json"), os.path.join(hf_dir, "merges.txt")
    added = {}
    if os.path.exists(vocab_path) and os.path.exists(merges_path):
        vocab = E._read_json(vocab_path, "vocab.json")
        with open(merges_path, encoding="utf-8") as f:
            merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
        path = os.path.join(hf_dir, "added_tokens.json")
        if os.path.exists(path):
            added = E._read_json(path, "added_tokens.json")
    else:
        path = os.path.join(hf_dir, "tokenizer.json")
        if not os.path.exists(path):
            raise E.Refuse(f"missing file {vocab_path} and merges.txt (or tokenizer.json)")
        t = E._read_json(path, "tokenizer.json")
        model = t.get("model", {}) if isinstance(t, dict) else {}
        if model.get("type") != "BPE":
            raise E.Refuse(f"tokenizer.json: unsupported model type {json.dumps(model.get('type'))} (BPE)")
        vocab = model.get("vocab")
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        added = {a.get("content"): a.get("id") for a in t.get("added_tokens", []) if isinstance(a, dict)}
    if not isinstance(vocab, dict) or not isinstance(added, dict):
        raise E.Refuse("vocab.json / added_tokens.json: not a JSON object")
    tokens = [""] * V
    special, added_only = set(), set()
    for table, is_added in ((vocab, False), (added, True)):
        for tok, i in table.items():
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < V:
                raise E.Refuse(f"tokenizer: token {json.dumps(tok)[:40]} has id {json.dumps(i)}, outside the vocab_size = {V}")
            if tokens[i] and tokens[i] != tok:
                raise E.Refuse(f"tokenizer: id {i} is given to both {json.dumps(tokens[i])} and {json.dumps(tok)}")
            tokens[i] = tok
            if TIMESTAMP.match(tok):  # added, but not special in HF's files: kept by skip_special
                added_only.add(i)
            elif is_added or (tok.startswith("<|") and tok.endswith("|>")):
                special.add(i)
    for m in merges:
        if len(m.split(" ")) != 2:
            raise E.Refuse(f"merges.txt: line {json.dumps(m)[:40]} is not two tokens")
    return tokens, merges, sorted(special), sorted(added_only)


def special_tokens(cfg, tokens):
    """Whisper's special ids, found by name in the vocabulary: {name: id} and the language
    codes with their ids (in id order)."""
    ids = {t: i for i, t in enumerate(tokens) if t.startswith("<|") and t.endswith("|>")}
    need = {"sot": "<|startoftranscript|>", "eot": "<|endoftext|>", "transcribe": "<|transcribe|>",
            "translate": "<|translate|>", "notimestamps": "<|notimestamps|>", "startofprev": "<|startofprev|>"}
    out = {}
    for name, tok in need.items():
        if tok not in ids:
            raise E.Refuse(f"tokenizer: no {tok} token (not a Whisper tokenizer)")
        out[name] = ids[tok]
    out["nospeech"] = ids.get("<|nospeech|>", ids.get("<|nocaptions|>", -1))
    if out["sot"] != cfg["decoder_start_token_id"] or out["eot"] != cfg["eos_token_id"]:
        raise E.Refuse(f"config.json: decoder_start_token_id {cfg['decoder_start_token_id']} / eos_token_id "
                       f"{cfg['eos_token_id']} are not the tokenizer's {need['sot']} {out['sot']} / {need['eot']} {out['eot']}")
    out["timestamp_begin"] = out["notimestamps"] + 1
    if out["timestamp_begin"] + TIMESTAMPS > cfg["vocab_size"]:
        raise E.Refuse(f"config.json: vocab_size = {cfg['vocab_size']} leaves no room for the {TIMESTAMPS} timestamp tokens")
    langs = [(i, t[2:-2]) for t, i in ids.items() if out["sot"] < i < out["translate"]]
    langs.sort()
    return out, [code for _, code in langs], [i for i, _ in langs]


def id_list(g, key, V):
    """generation_config.json's list of token ids under key ([] when absent or null)."""
    v = g.get(key) or []
    if not isinstance(v, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < V for i in v):
        raise E.Refuse(f"generation_config.json: unsupported {key} = {json.dumps(v)[:60]} (token ids)")
    return v


def alignment_heads(g, cfg):
    """[(layer, head)] of generation_config.json (default: every head of the upper half of the
    decoder, as HF does without the key), flattened."""
    L, H = cfg["decoder_layers"], cfg["decoder_attention_heads"]
    heads = g.get("alignment_heads")
    if heads is None:
        heads = [[layer, h] for layer in range(L // 2, L) for h in range(H)]
    ok = isinstance(heads, list) and heads and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
        and 0 <= p[0] < L and 0 <= p[1] < H for p in heads)
    if not ok:
        raise E.Refuse(f"generation_config.json: unsupported alignment_heads = {json.dumps(heads)[:60]}")
    return [x for p in heads for x in p]


def forced_prompt(cfg):
    """The prompt tokens after <|startoftranscript|> that forced_decoder_ids fix, as HF's
    _retrieve_init_tokens reads them: the ids of positions 1, 2, ... in a run (None: not
    fixed); [] when the first pair is not position 1 (HF then ignores them all). Pairs after
    a gap are left out (HF's generate() refuses them)."""
    forced = cfg.get("forced_decoder_ids") or []
    ok = isinstance(forced, list) and all(
        isinstance(p, list) and len(p) == 2 and all(x is None or (isinstance(x, int) and not isinstance(x, bool))
                                                   for x in p) and p[0] is not None for p in forced)
    if not ok:
        raise E.Refuse(f"forced_decoder_ids: unsupported {json.dumps(forced)[:60]}")
    if not forced or forced[0][0] != 1:
        return []
    tokens = []
    while forced and forced[0][0] == len(tokens) + 1:
        tokens.append(forced[0][1])
        forced = forced[1:]
    return tokens


def forced_task(cfg, sp, V):
    """The task token HF's generate() puts in the prompt when given neither language nor task:
    the one forced_decoder_ids place after the language (<|transcribe|> or <|translate|>), else
    V (none: HF then writes no task token)."""
    for tok in forced_prompt(cfg):
        if tok in (sp["transcribe"], sp["translate"]):
            return tok
    return V


def forced_language(cfg, lang_ids, V):
    """The language token forced_decoder_ids fix at position 1 (HF's generate() then writes
    it, given neither language nor task, instead of detecting one), else V (none: detected;
    English-only models take no language token)."""
    tokens = forced_prompt(cfg)
    return tokens[0] if tokens and tokens[0] in lang_ids else V


def whisper_metadata(cfg, sp, codes, lang_ids, V):
    g = cfg["whisper_generation"]
    mit = g.get("max_initial_timestamp_index", 50)
    if mit is None:
        mit = TIMESTAMPS - 1
    if isinstance(mit, bool) or not isinstance(mit, int) or not 0 <= mit < TIMESTAMPS:
        raise E.Refuse(f"generation_config.json: unsupported max_initial_timestamp_index = {json.dumps(mit)}")
    u32 = G.UINT32
    return [
        (f"{ARCH}.num_mel_bins", u32, cfg["num_mel_bins"]),
        (f"{ARCH}.max_source_positions", u32, cfg["max_source_positions"]),
        (f"{ARCH}.no_timestamps_id", u32, sp["notimestamps"]),
        (f"{ARCH}.timestamp_begin_id", u32, sp["timestamp_begin"]),
        (f"{ARCH}.transcribe_id", u32, sp["transcribe"]),
        (f"{ARCH}.translate_id", u32, sp["translate"]),
        (f"{ARCH}.forced_task_id", u32, forced_task(cfg, sp, V)),
        (f"{ARCH}.forced_language_id", u32, forced_language(cfg, lang_ids, V)),
        (f"{ARCH}.prev_id", u32, sp["startofprev"]),
        (f"{ARCH}.no_speech_id", u32, sp["nospeech"] if sp["nospeech"] >= 0 else V),
        (f"{ARCH}.max_initial_timestamp_index", u32, mit),
        # English-only models (*.en) take no language and task tokens in their prompt
        (f"{ARCH}.is_multilingual", G.BOOL, bool(g.get("is_multilingual", V >= 51865))),
        (f"{ARCH}.suppress_tokens", G.ARRAY, (u32, id_list(g, "suppress_tokens", V))),
        (f"{ARCH}.begin_suppress_tokens", G.ARRAY, (u32, id_list(g, "begin_suppress_tokens", V))),
        (f"{ARCH}.alignment_heads", G.ARRAY, (u32, alignment_heads(g, cfg))),
    ]


# --------------------------------------------------------------------------------------
# Tensors

def map_tensors(cfg, sd, mel_filters):
    """[(attend name, float32 array)] in FORMAT.md order (whisper)."""
    d, V, C = cfg["d_model"], cfg["vocab_size"], cfg["num_mel_bins"]
    out = [("dec.embed.weight", E._get(sd, ["model.decoder.embed_tokens.weight"], (V, d)))]
    if not cfg["tied"]:
        out.append(("lm_head.weight", E._get(sd, ["proj_out.weight"], (V, d))))
    out.append(("dec.embed_positions.weight",
                E._get(sd, ["model.decoder.embed_positions.weight"], (cfg["max_target_positions"], d))))
    for name, channels in (("conv1", C), ("conv2", d)):
        w = E._get(sd, [f"model.encoder.{name}.weight"], (d, channels, 3))
        out.append((f"enc.{name}.weight", np.ascontiguousarray(w.transpose(0, 2, 1).reshape(d, 3 * channels))))
        out.append((f"enc.{name}.bias", E._get(sd, [f"model.encoder.{name}.bias"], (d,))))
    out.append(("enc.embed_positions.weight",
                E._get(sd, ["model.encoder.embed_positions.weight"], (cfg["max_source_positions"], d))))
    if mel_filters is not None:
        out.append(("enc.mel_filters", mel_filters.reshape(-1)))
    zero = np.zeros(d, dtype=np.float32)
    sd = dict(sd)
    for side, n in (("encoder", cfg["encoder_layers"]), ("decoder", cfg["decoder_layers"])):
        for i in range(n):
            for att in ("self_attn", "encoder_attn") if side == "decoder" else ("self_attn",):
                sd.setdefault(f"model.{side}.layers.{i}.{att}.k_proj.bias", zero)
    E.map_layers(cfg, sd, out, final_norms=True)
    return out


# --------------------------------------------------------------------------------------
# Export

def export(hf_dir, out_path, dtype="f32", name=None):
    cfg = read_config(hf_dir)
    V = cfg["vocab_size"]
    tokens, merges, special, added_only = read_bpe(hf_dir, V)
    sp, codes, lang_ids = special_tokens(cfg, tokens)
    mel_filters = read_mel_bins(hf_dir, cfg)
    tensors = E.stored(map_tensors(cfg, E.read_weights(hf_dir), mel_filters), dtype)
    eot = sp["eot"]
    meta = E.file_meta(ARCH, dtype, name, E.bart_hyperparameters(
        cfg, vocab_size=V, decoder_vocab_size=V, shared_embeddings=False, pad_id=eot, eos_id=eot, unk_id=eot,
        decoder_start_id=sp["sot"]), more_ids=[("bos_id", eot)])
    meta += E.generation_metadata(cfg["generation"])
    meta += whisper_metadata(cfg, sp, codes, lang_ids, V)
    meta += [("tokenizer.languages", G.ARRAY, (G.STRING, codes)),
             ("tokenizer.language_ids", G.ARRAY, (G.UINT32, lang_ids)),
             ("tokenizer.bpe_tokens", G.ARRAY, (G.STRING, tokens)),
             ("tokenizer.bpe_merges", G.ARRAY, (G.STRING, merges)),
             ("tokenizer.bpe_special_ids", G.ARRAY, (G.UINT32, special)),
             ("tokenizer.bpe_added_ids", G.ARRAY, (G.UINT32, added_only))]
    E.write_file(out_path, meta, tensors)
    return cfg, tensors


def main(argv=None):
    p = E.arg_parser("export_whisper.py", __doc__, "Hugging Face Whisper model directory")
    a = p.parse_args(argv)
    name = a.name if a.name is not None else E.default_name(a.hf_dir)
    return E.run_export("export_whisper", a, export, a.hf_dir, a.out, a.dtype, name, hf_dir=a.hf_dir)


if __name__ == "__main__":
    sys.exit(main())
