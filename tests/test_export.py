#!/usr/bin/python3
"""Tests of tools/export_marian.py and tools/gguf_io.py.

Run as `/usr/bin/python3 tests/test_export.py`. Trains two tiny SentencePiece models on the
shared Tatoeba data, saves small random MarianMT models as HF directories (safetensors and
pytorch_model.bin), exports them and checks the .gguf files against weights/FORMAT.md.
"""
import contextlib
import glob
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOOLS = os.path.join(REPO, "tools")
PY = "/usr/bin/python3"
EXPORT = os.path.join(TOOLS, "export_marian.py")
ATTEND = os.environ.get("ATTEND_BIN", os.path.join(REPO, "build", "attend"))
sys.path.insert(0, TOOLS)

import data_paths as D  # noqa: E402

DATA = os.path.join(D.data_dir(), "tatoeba-deu-eng")

import gguf_io as G  # noqa: E402
import reference as R  # noqa: E402
import safetensors_np  # noqa: E402

import torch  # noqa: E402

BASE = {
    "d_model": 16, "encoder_layers": 2, "decoder_layers": 2,
    "encoder_attention_heads": 4, "decoder_attention_heads": 2,
    "encoder_ffn_dim": 24, "decoder_ffn_dim": 40, "max_position_embeddings": 64,
    "activation_function": "swish", "scale_embedding": True,
}

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


# --------------------------------------------------------------------------------------
# Fixtures

class Env:
    pass


E = Env()


def read_lines(suffix, stride=4):
    paths = sorted(glob.glob(os.path.join(DATA, f"*.{suffix}.gz")))
    if not paths:
        raise RuntimeError(f"no training text {DATA}/*.{suffix}.gz")
    out = []
    for p in paths:
        with gzip.open(p, "rt", encoding="utf-8") as f:
            out += [l.rstrip("\n") for i, l in enumerate(f) if i % stride == 0]
    return out


def train_spm(lines, prefix, vocab_size=500):
    import sentencepiece as spm
    # the trainer logs to the C-level stderr: silence it
    err = os.dup(2)
    try:
        with open(os.devnull, "w") as dn:
            os.dup2(dn.fileno(), 2)
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=vocab_size,
                character_coverage=1.0, model_type="unigram", num_threads=1)
    finally:
        os.dup2(err, 2)
        os.close(err)
    return prefix + ".model"


def setup(tmp):
    E.tmp = tmp
    E.src_spm = train_spm(read_lines("de"), os.path.join(tmp, "src"))
    E.tgt_spm = train_spm(read_lines("en"), os.path.join(tmp, "tgt"))
    with open(E.src_spm, "rb") as f:
        E.src_blob = f.read()
    with open(E.tgt_spm, "rb") as f:
        E.tgt_blob = f.read()
    E.vocab = R.build_vocab(E.src_spm, E.tgt_spm)
    pad = E.vocab["<pad>"]
    E.config = dict(BASE, vocab_size=len(E.vocab), decoder_vocab_size=len(E.vocab),
                    pad_token_id=pad, decoder_start_token_id=pad, bad_words_ids=[[pad]],
                    eos_token_id=0, forced_eos_token_id=0, max_length=37)
    E.model = R.random_model(E.config, seed=1, bias_std=0.5)
    E.st_dir = os.path.join(tmp, "st", "opus-mt-tiny")
    E.bin_dir = os.path.join(tmp, "bin", "opus-mt-tiny")
    R.save_hf_dir(E.model, E.st_dir, E.src_blob, E.tgt_blob, E.vocab, fmt="safetensors")
    R.save_hf_dir(E.model, E.bin_dir, E.src_blob, E.tgt_blob, E.vocab, fmt="bin")


def export(hf_dir, out, *args):
    p = subprocess.run([PY, EXPORT, hf_dir, out, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def export_ok(hf_dir, name, *args):
    out = os.path.join(E.tmp, name)
    rc, so, se = export(hf_dir, out, *args)
    assert rc == 0, f"export of {hf_dir} failed ({rc}): {se}"
    return out


def file_bytes(p):
    with open(p, "rb") as f:
        return f.read()


def hf_tensors(model):
    return {k: v.numpy() for k, v in model.hf_state_dict(with_duplicates=False).items()}


def expected_map(cfg, hf):
    """attend name -> HF array, built independently of the exporter's mapping."""
    m = {}
    if cfg["share_encoder_decoder_embeddings"]:
        m["enc.embed.weight"] = hf["model.shared.weight"]
    else:
        m["enc.embed.weight"] = hf["model.encoder.embed_tokens.weight"]
        m["dec.embed.weight"] = hf["model.decoder.embed_tokens.weight"]
    if not cfg["tie_word_embeddings"]:
        m["lm_head.weight"] = hf["lm_head.weight"]
    m["final_logits_bias"] = hf["final_logits_bias"][0]
    proj = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}
    for side, n, parts in (("enc", cfg["encoder_layers"], [("self_attn", "self_attn")]),
                           ("dec", cfg["decoder_layers"], [("self_attn", "self_attn"),
                                                           ("cross_attn", "encoder_attn")])):
        full = "encoder" if side == "enc" else "decoder"
        for i in range(n):
            hp = f"model.{full}.layers.{i}"
            for a, ha in parts:
                for p, q in proj.items():
                    for s in ("weight", "bias"):
                        m[f"{side}.{i}.{a}.{p}.{s}"] = hf[f"{hp}.{ha}.{q}.{s}"]
                for s in ("weight", "bias"):
                    m[f"{side}.{i}.{a}_norm.{s}"] = hf[f"{hp}.{ha}_layer_norm.{s}"]
            for s in ("weight", "bias"):
                m[f"{side}.{i}.ffn.fc1.{s}"] = hf[f"{hp}.fc1.{s}"]
                m[f"{side}.{i}.ffn.fc2.{s}"] = hf[f"{hp}.fc2.{s}"]
                m[f"{side}.{i}.ffn_norm.{s}"] = hf[f"{hp}.final_layer_norm.{s}"]
    return m


def check_tensors(path, cfg, hf, dtype):
    f = G.GGUFFile(path)
    want = expected_map(cfg, hf)
    got_names = [t["name"] for t in f.tensor_infos]
    assert sorted(got_names) == sorted(want), (sorted(set(got_names) ^ set(want)))
    for t in f.tensor_infos:
        n = t["name"]
        arr = f.tensors[n]
        w = want[n].astype(np.float32)
        assert arr.shape == w.shape, (n, arr.shape, w.shape)
        assert t["ne"] == list(reversed(w.shape)), (n, t["ne"])
        assert t["offset"] % 64 == 0, (n, t["offset"])
        if dtype == "f16" and w.ndim == 2:
            assert t["ggml_type"] == G.GGML_F16, n
            assert arr.dtype == np.float16
            assert np.array_equal(arr.view(np.uint16), w.astype(np.float16).view(np.uint16)), n
        else:
            assert t["ggml_type"] == G.GGML_F32, n
            assert np.array_equal(arr, w), n
    assert f.crc_mismatches() == []
    crcs = f.metadata[G.CRC_KEY]
    for t, c in zip(f.tensor_infos, crcs):
        assert zlib.crc32(f.tensors[t["name"]].tobytes()) == int(c)
    assert (f.data_start % 64) == 0
    return f


def pieces_of(vocab, size):
    out = [""] * size
    for p, i in vocab.items():
        out[i] = p
    return out


# --------------------------------------------------------------------------------------
# gguf_io

@test
def gguf_roundtrip_and_determinism():
    rng = np.random.default_rng(0)
    meta = [("general.architecture", G.STRING, "x"), ("general.alignment", G.UINT32, 64),
            ("a.u8", G.UINT8, 255), ("a.i8", G.INT8, -128), ("a.u16", G.UINT16, 65535),
            ("a.i16", G.INT16, -3), ("a.i32", G.INT32, -7), ("a.u64", G.UINT64, 2 ** 63),
            ("a.i64", G.INT64, -2 ** 40), ("a.f32", G.FLOAT32, 0.5), ("a.f64", G.FLOAT64, 1e-300),
            ("a.b", G.BOOL, True), ("a.s", G.STRING, "Grüße"),
            ("a.strs", G.ARRAY, (G.STRING, ["", "▁x", "ä"])),
            ("a.bytes", G.ARRAY, (G.UINT8, b"\x00\x01\xff")),
            ("a.f32s", G.ARRAY, (G.FLOAT32, [1.5, -2.0])),
            ("a.bools", G.ARRAY, (G.BOOL, [True, False]))]
    tensors = [("m", rng.standard_normal((3, 5)).astype(np.float32), G.GGML_F32),
               ("h", rng.standard_normal((7, 2)), G.GGML_F16),
               ("v", rng.standard_normal(9).astype(np.float32), G.GGML_F32)]
    p1, p2 = os.path.join(E.tmp, "g1.gguf"), os.path.join(E.tmp, "g2.gguf")
    G.write(p1, meta, tensors)
    G.write(p2, meta, tensors)
    assert file_bytes(p1) == file_bytes(p2)
    assert len(file_bytes(p1)) % 64 == 0
    f = G.GGUFFile(p1)
    md = f.metadata
    assert md["a.u8"] == 255 and md["a.i8"] == -128 and md["a.u64"] == 2 ** 63
    assert md["a.i64"] == -2 ** 40 and md["a.f32"] == 0.5 and md["a.f64"] == 1e-300
    assert md["a.b"] is True and md["a.s"] == "Grüße"
    assert md["a.strs"] == ["", "▁x", "ä"] and md["a.bytes"].tobytes() == b"\x00\x01\xff"
    assert md["a.f32s"].tolist() == [1.5, -2.0] and md["a.bools"].tolist() == [True, False]
    assert f.types["a.strs"] == (G.ARRAY, G.STRING) and f.types["a.i16"] == G.INT16
    assert list(md)[-2:] == [G.CRC_KEY, G.META_CRC_KEY] and len(md[G.CRC_KEY]) == 3
    assert f.metadata_crc_ok() is True
    # the metadata CRC covers every byte before it: one changed byte of a value is caught
    raw = bytearray(file_bytes(p1))
    at = raw.index("Grüße".encode())
    raw[at] ^= 1
    with open(p2, "wb") as out:
        out.write(raw)
    assert G.GGUFFile(p2).metadata_crc_ok() is False
    assert np.array_equal(f.tensors["m"], tensors[0][1])
    assert np.array_equal(f.tensors["h"], tensors[1][1].astype(np.float16))
    assert f.tensor_infos[1]["ne"] == [2, 7]
    assert all(t["offset"] % 64 == 0 for t in f.tensor_infos)
    assert f.crc_mismatches() == []
    # header layout: magic, version, counts
    raw = file_bytes(p1)
    assert raw[:4] == b"GGUF" and raw[4:8] == (3).to_bytes(4, "little")
    assert raw[8:16] == (3).to_bytes(8, "little") and raw[16:24] == (19).to_bytes(8, "little")


@test
def gguf_rejects_bad_files():
    p = os.path.join(E.tmp, "g3.gguf")
    G.write(p, [("general.alignment", G.UINT32, 64)],
            [("t", np.ones((4, 4), np.float32), G.GGML_F32)])
    raw = bytearray(file_bytes(p))
    f = G.GGUFFile(p)
    # the tensor info: name "t", n_dims, ne[2], type, then the offset
    off_pos = raw.find((1).to_bytes(8, "little") + b"t") + 9 + 4 + 16 + 4
    assert raw[off_pos:off_pos + 8] == bytes(8)
    bad = os.path.join(E.tmp, "corrupt.gguf")
    for mutate, msg in ((lambda b: b.__setitem__(slice(off_pos, off_pos + 8),
                                                (8).to_bytes(8, "little")), "alignment"),
                        (lambda b: b.__setitem__(slice(off_pos, off_pos + 8),
                                                (64 * 100).to_bytes(8, "little")), "beyond"),
                        (lambda b: b.__setitem__(slice(0, 4), b"GGUX"), "magic"),
                        (lambda b: b.__setitem__(slice(4, 8), (4).to_bytes(4, "little")),
                         "version"),
                        (lambda b: b.__delitem__(slice(40, None)), "truncated")):
        b = bytearray(raw)
        mutate(b)
        with open(bad, "wb") as fh:
            fh.write(b)
        try:
            G.GGUFFile(bad)
        except G.GGUFError as e:
            assert msg in str(e), (msg, str(e))
        else:
            raise AssertionError(f"corruption '{msg}' not detected")
    # a flipped data byte is caught by the CRC check
    b = bytearray(raw)
    b[f.data_start + 5] ^= 1
    with open(bad, "wb") as fh:
        fh.write(b)
    assert G.GGUFFile(bad).crc_mismatches() == ["t"]
    # writer refuses out-of-range values and duplicate names
    for meta, tensors in (([("k", G.UINT32, -1)], []), ([("k", G.UINT8, 256)], []),
                          ([("k", G.UINT32, 1), ("k", G.UINT32, 2)], []),
                          ([], [("t", np.ones(2), 0), ("t", np.ones(2), 0)])):
        try:
            G.write(bad, meta, tensors)
        except G.GGUFError:
            pass
        else:
            raise AssertionError(f"writer accepted {meta} {tensors}")


# --------------------------------------------------------------------------------------
# Exporter

@test
def help_works():
    p = subprocess.run([PY, EXPORT, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--dtype" in p.stdout and "HF_DIR" in p.stdout


@test
def safetensors_and_bin_identical():
    for dt in ("f32", "f16"):
        a = export_ok(E.st_dir, f"st_{dt}.gguf", "--dtype", dt)
        b = export_ok(E.bin_dir, f"bin_{dt}.gguf", "--dtype", dt)
        assert file_bytes(a) == file_bytes(b), f"{dt}: safetensors and bin exports differ"
        c = export_ok(E.st_dir, f"st2_{dt}.gguf", "--dtype", dt)
        assert file_bytes(a) == file_bytes(c), "export is not deterministic"
    assert len(file_bytes(os.path.join(E.tmp, "st_f16.gguf"))) < \
        len(file_bytes(os.path.join(E.tmp, "st_f32.gguf")))


@test
def f32_tensors_and_metadata():
    path = export_ok(E.st_dir, "shared_f32.gguf")
    cfg = E.model.config
    f = check_tensors(path, cfg, hf_tensors(E.model), "f32")
    md, ty = f.metadata, f.types
    V = len(E.vocab)
    want = {
        "general.architecture": "marian", "general.alignment": 64,
        "general.name": "opus-mt-tiny", "attend.format_version": 1,
        "marian.vocab_size": V, "marian.decoder_vocab_size": V, "marian.d_model": 16,
        "marian.encoder_layers": 2, "marian.decoder_layers": 2, "marian.encoder_heads": 4,
        "marian.decoder_heads": 2, "marian.encoder_ffn_dim": 24, "marian.decoder_ffn_dim": 40,
        "marian.max_position_embeddings": 64, "marian.activation": "swish",
        "marian.scale_embedding": True, "marian.shared_embeddings": True,
        "marian.tied_output": True, "marian.pad_id": V - 1, "marian.eos_id": 0,
        "marian.unk_id": 1, "marian.decoder_start_id": V - 1, "marian.max_length": 37,
        "marian.forced_eos": True,
    }
    for k, v in want.items():
        assert md[k] == v, (k, md[k], v)
        assert (v is True or v is False) == (ty[k] == G.BOOL), k
        if isinstance(v, int) and not isinstance(v, bool):
            assert ty[k] == G.UINT32, (k, ty[k])
    assert ty["marian.layer_norm_eps"] == G.FLOAT32
    assert abs(md["marian.layer_norm_eps"] - 1e-5) < 1e-12
    assert ty["tokenizer.source_spm"] == (G.ARRAY, G.UINT8)
    assert md["tokenizer.source_spm"].tobytes() == E.src_blob
    assert md["tokenizer.target_spm"].tobytes() == E.tgt_blob
    assert md["tokenizer.source_pieces"] == pieces_of(E.vocab, V)
    assert md["tokenizer.target_pieces"] == pieces_of(E.vocab, V)
    assert ty[G.CRC_KEY] == (G.ARRAY, G.UINT32)
    assert ty[G.META_CRC_KEY] == G.UINT32 and f.metadata_crc_ok() is True
    # metadata in FORMAT.md order (the metadata CRC last), tensors in table order
    keys = list(md)
    assert keys[-1] == G.META_CRC_KEY
    assert keys[:5] == ["general.architecture", "general.alignment", "general.name",
                        "attend.format_version", G.CRC_KEY], keys[:5]
    names = [t["name"] for t in f.tensor_infos]
    assert names[:2] == ["enc.embed.weight", "final_logits_bias"]
    assert names.index("enc.1.ffn_norm.bias") < names.index("dec.0.self_attn.q.weight")
    # every tensor the loader needs, nothing else
    assert len(names) == 2 + 2 * 16 + 2 * 26


@test
def f16_tensors():
    path = export_ok(E.bin_dir, "shared_f16.gguf", "--dtype", "f16")
    f = check_tensors(path, E.model.config, hf_tensors(E.model), "f16")
    assert f.tensor_infos[1]["name"] == "final_logits_bias"
    assert f.tensor_infos[1]["ggml_type"] == G.GGML_F32


@test
def untied_separate_vocab():
    # target vocabulary from the target spm alone: a different size than the source one
    tvocab = R.build_vocab(E.tgt_spm)
    tpad = tvocab["<pad>"]
    cfg = dict(E.config, share_encoder_decoder_embeddings=False, tie_word_embeddings=False,
               decoder_vocab_size=len(tvocab), pad_token_id=tpad, decoder_start_token_id=tpad,
               bad_words_ids=[[tpad]], activation_function="silu")
    assert len(tvocab) != len(E.vocab)
    m = R.random_model(cfg, seed=2)
    hf = hf_tensors(m)
    assert "lm_head.weight" in hf and "model.shared.weight" not in hf
    for fmt in ("safetensors", "bin"):
        d = os.path.join(E.tmp, f"untied_{fmt}")
        R.save_hf_dir(m, d, E.src_blob, E.tgt_blob, E.vocab, target_vocab=tvocab, fmt=fmt)
        out = export_ok(d, f"untied_{fmt}.gguf", "--name", "u")
    a, b = (file_bytes(os.path.join(E.tmp, f"untied_{x}.gguf")) for x in ("safetensors", "bin"))
    assert a == b
    f = check_tensors(out, m.config, hf, "f32")
    md = f.metadata
    assert md["marian.shared_embeddings"] is False and md["marian.tied_output"] is False
    assert md["marian.vocab_size"] == len(E.vocab)
    assert md["marian.decoder_vocab_size"] == len(tvocab)
    assert f.tensors["dec.embed.weight"].shape == (len(tvocab), 16)
    assert f.tensors["lm_head.weight"].shape == (len(tvocab), 16)
    assert md["tokenizer.source_pieces"] == pieces_of(E.vocab, len(E.vocab))
    assert md["tokenizer.target_pieces"] == pieces_of(tvocab, len(tvocab))
    assert md["marian.activation"] == "swish"          # silu is written as swish
    assert md["marian.pad_id"] == tpad and md["general.name"] == "u"
    names = [t["name"] for t in f.tensor_infos]
    assert names[:4] == ["enc.embed.weight", "dec.embed.weight", "lm_head.weight",
                         "final_logits_bias"]

    # unshared but tied: decoder embedding stored, lm_head not
    cfg2 = dict(cfg, tie_word_embeddings=True)
    m2 = R.random_model(cfg2, seed=3)
    d = os.path.join(E.tmp, "unshared_tied")
    R.save_hf_dir(m2, d, E.src_blob, E.tgt_blob, E.vocab, target_vocab=tvocab, fmt="bin")
    f = check_tensors(export_ok(d, "unshared_tied.gguf"), m2.config, hf_tensors(m2), "f32")
    assert "lm_head.weight" not in f.tensors and "dec.embed.weight" in f.tensors
    assert f.metadata["marian.tied_output"] is True


GEN_KEYS = {  # key: (gguf type, HF's class default as recorded)
    "generation.num_beams": (G.UINT32, 1), "generation.length_penalty": (G.FLOAT32, 1.0),
    "generation.early_stopping": (G.UINT32, 0), "generation.min_length": (G.UINT32, 0),
    "generation.no_repeat_ngram_size": (G.UINT32, 0),
    "generation.repetition_penalty": (G.FLOAT32, 1.0),
    "generation.renormalize_logits": (G.BOOL, False)}
# generation settings of config.json (as MarianConfig's to_dict writes them, and as
# reference.py's configs may have them): removed to see the class defaults
HF_GEN = ("num_beams", "length_penalty", "early_stopping", "min_length", "no_repeat_ngram_size",
          "repetition_penalty", "renormalize_logits", "do_sample", "max_new_tokens",
          "min_new_tokens")
DROP = object()


def hf_copy(name, config=None, gen=None, tok=None, src=None):
    """A copy of the tiny safetensors model (or src) as E.tmp/name, its config.json updated
    with config (a DROP value removes the key); gen: the generation_config.json to write;
    tok: the tokenizer_config.json to write (DROP: remove the file)."""
    d = os.path.join(E.tmp, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src or E.st_dir, d)
    cp = os.path.join(d, "config.json")
    with open(cp) as fh:
        c = json.load(fh)
    for k, v in (config or {}).items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    with open(cp, "w") as fh:
        json.dump(c, fh)
    if gen is not None:
        with open(os.path.join(d, "generation_config.json"), "w") as fh:
            json.dump(gen, fh)
    if tok is DROP:
        os.remove(os.path.join(d, "tokenizer_config.json"))
    elif tok is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
            json.dump(tok, fh)
    return d


def export_md(d):
    """Export d; (metadata, value types, stderr) of the written file."""
    out = os.path.join(E.tmp, os.path.basename(d) + ".gguf")
    rc, so, se = export(d, out)
    assert rc == 0, f"export of {d} failed ({rc}): {se}"
    f = G.GGUFFile(out)
    return f.metadata, f.types, se


def no_gen(**more):
    """config.json updates that remove every generation setting, then apply more."""
    return dict({k: DROP for k in HF_GEN}, **more)


@test
def generation_keys_class_defaults():
    # no generation setting in config.json, no generation_config.json: HF's class defaults,
    # every generation.* key written, with its type, after marian.forced_eos
    md, ty, se = export_md(hf_copy("gen_defaults", no_gen()))
    assert se == "", se
    for k, (t, v) in GEN_KEYS.items():
        assert ty[k] == t, (k, ty[k], t)
        assert md[k] == v and type(md[k]) is type(v), (k, md[k], v)
    keys = list(md)
    at = keys.index("marian.forced_eos")
    assert keys[at + 1:at + 1 + len(GEN_KEYS)] == list(GEN_KEYS), keys[at:at + 9]
    # the tiny model's tokenizer_config.json (save_hf_dir) says 512
    assert md["tokenizer.model_max_length"] == 512
    assert ty["tokenizer.model_max_length"] == G.UINT32
    assert keys.index("tokenizer.model_max_length") < keys.index("tokenizer.source_spm")
    assert md["marian.max_length"] == 37 and md["marian.forced_eos"] is True


@test
def generation_config_overrides():
    d = hf_copy("gen", {"num_beams": 1}, gen={
        "max_length": 99, "forced_eos_token_id": None, "decoder_start_token_id": 5,
        "bad_words_ids": [[E.vocab["<pad>"]]], "num_beams": 4})
    md, _, _ = export_md(d)
    assert md["marian.max_length"] == 99
    assert md["marian.forced_eos"] is False
    assert md["marian.decoder_start_id"] == 5
    assert md["general.name"] == "gen"
    assert md["generation.num_beams"] == 4
    # max_length absent from both configs: HF's default 20; forced_eos_token_id absent from
    # both: MarianConfig's default 0, which is eos_token_id here: forced
    d = hf_copy("gen2", {"max_length": DROP, "forced_eos_token_id": DROP})
    md, _, _ = export_md(d)
    assert md["marian.max_length"] == 20
    assert md["marian.forced_eos"] is True
    assert md["marian.decoder_start_id"] == E.vocab["<pad>"]
    # each generation key: config.json's value unless generation_config.json has the key
    cfg = {"num_beams": 2, "length_penalty": 0.6, "early_stopping": True, "min_length": 3,
           "no_repeat_ngram_size": 2, "repetition_penalty": 1.5, "renormalize_logits": True}
    md, ty, _ = export_md(hf_copy("gen3", no_gen(**cfg)))
    assert [md["generation." + k] for k in cfg] == [2, np.float32(0.6), 1, 3, 2, 1.5, True]
    gen = {"num_beams": 6, "length_penalty": -0.5, "early_stopping": "never",
           "no_repeat_ngram_size": 0, "renormalize_logits": False}
    md, _, _ = export_md(hf_copy("gen4", no_gen(**cfg), gen=gen))
    assert [md["generation." + k] for k in cfg] == [6, -0.5, 2, 3, 0, 1.5, False]
    # generation_config.json alone (config.json without generation settings)
    md, _, _ = export_md(hf_copy("gen5", no_gen(), gen={"num_beams": 5, "min_length": 2}))
    assert md["generation.num_beams"] == 5 and md["generation.min_length"] == 2
    assert md["generation.length_penalty"] == 1.0 and md["generation.early_stopping"] == 0


@test
def early_stopping_values():
    for v, code in ((False, 0), (True, 1), ("never", 2)):
        md, _, _ = export_md(hf_copy("es", no_gen(), gen={"early_stopping": v}))
        assert md["generation.early_stopping"] == code, (v, md["generation.early_stopping"])
        md, _, _ = export_md(hf_copy("es", no_gen(early_stopping=v)))
        assert md["generation.early_stopping"] == code, (v, md["generation.early_stopping"])


@test
def forced_eos_rules():
    eos5 = {"eos_token_id": 5, "forced_eos_token_id": DROP}
    # absent from both files, eos_token_id 0: MarianConfig's default 0 is eos: forced
    md, _, _ = export_md(hf_copy("fe", {"forced_eos_token_id": DROP}))
    assert md["marian.forced_eos"] is True and md["marian.eos_id"] == 0
    # absent from both with a generation_config.json present: the same
    md, _, _ = export_md(hf_copy("fe", {"forced_eos_token_id": DROP}, gen={"num_beams": 2}))
    assert md["marian.forced_eos"] is True
    # an explicit null: no forced EOS, from either file
    md, _, _ = export_md(hf_copy("fe", {"forced_eos_token_id": None}))
    assert md["marian.forced_eos"] is False
    md, _, _ = export_md(hf_copy("fe", {}, gen={"forced_eos_token_id": None}))
    assert md["marian.forced_eos"] is False
    # eos_token_id 5: explicit 5 is forced, null is not, absent (= 0) is refused naming both
    md, _, _ = export_md(hf_copy("fe", dict(eos5, forced_eos_token_id=5)))
    assert md["marian.forced_eos"] is True and md["marian.eos_id"] == 5
    md, _, _ = export_md(hf_copy("fe", eos5, gen={"forced_eos_token_id": 5}))
    assert md["marian.forced_eos"] is True
    md, _, _ = export_md(hf_copy("fe", dict(eos5, forced_eos_token_id=None)))
    assert md["marian.forced_eos"] is False
    refused(lambda d, c: c.update(eos_token_id=5) or c.pop("forced_eos_token_id"),
            ["forced_eos_token_id", "absent", "default 0", "eos_token_id = 5"])
    refused(lambda d, c: c.update(eos_token_id=5, forced_eos_token_id=0),
            ["forced_eos_token_id = 0", "eos_token_id = 5"])
    refused(lambda d, c: write_json(d, "generation_config.json", {"forced_eos_token_id": 3}),
            ["generation_config.json", "forced_eos_token_id = 3"])
    refused(setkey("forced_eos_token_id", True), ["forced_eos_token_id = true"])


def write_json(d, name, obj):
    with open(os.path.join(d, name), "w") as fh:
        json.dump(obj, fh)


@test
def model_max_length_recorded():
    for tok, want in (({"model_max_length": 512}, 512), ({"model_max_length": 7}, 7),
                      ({"model_max_length": 1000000000000000019884624838656}, None),
                      ({"model_max_length": 10 ** 12}, None),
                      ({"model_max_length": 10 ** 12 - 1}, None),  # beyond u32: no limit
                      ({"model_max_length": 2 ** 32 - 1}, 2 ** 32 - 1),
                      ({"model_max_length": None}, None), ({"source_lang": "de"}, None),
                      (DROP, None)):
        md, ty, _ = export_md(hf_copy("mml", tok=tok))
        assert md.get("tokenizer.model_max_length") == want, (tok, want)
    for v in (0, -1, 512.5, "512", True, [512]):
        refused(lambda d, c: write_json(d, "tokenizer_config.json", {"model_max_length": v}),
                ["tokenizer_config.json", "model_max_length", json.dumps(v)])
    refused(lambda d, c: write_json(d, "tokenizer_config.json", [1]),
            ["tokenizer_config.json", "not a JSON object"])


LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:5d7c2bd1ef2fae1c6e4a2a0dd6c7a0b8c4fdb3a9e1f2c3d4e5f60718293a4b5c\n"
               "size 298705768\n")


@test
def lfs_pointer_refused():
    def pointer(name):
        def mutate(d, c):
            with open(os.path.join(d, name), "w") as fh:
                fh.write(LFS_POINTER)
        return mutate
    refused(pointer("model.safetensors"),
            ["model.safetensors is a Git LFS pointer, not the weights", "git lfs pull",
             os.path.join(E.tmp, "bad_model")])
    assert not os.path.exists(os.path.join(E.bin_dir, "model.safetensors"))
    refused(pointer("pytorch_model.bin"),
            ["pytorch_model.bin is a Git LFS pointer, not the weights", "git lfs pull",
             os.path.join(E.tmp, "bad_model")], src=E.bin_dir)
    refused(pointer("source.spm"), ["source.spm is a Git LFS pointer", "git lfs pull"])
    refused(pointer("vocab.json"), ["vocab.json is a Git LFS pointer", "git lfs pull"])


@test
def max_and_min_new_tokens():
    md, _, _ = export_md(hf_copy("mnt", gen={"max_new_tokens": 50}))
    assert md["marian.max_length"] == 51
    md, _, _ = export_md(hf_copy("mnt", {"max_new_tokens": 8}, gen={"max_length": 200}))
    assert md["marian.max_length"] == 9          # max_new_tokens wins over max_length
    md, _, _ = export_md(hf_copy("mnt", {"max_new_tokens": 8}, gen={"max_new_tokens": None}))
    assert md["marian.max_length"] == 37         # null: unset, max_length stands
    md, _, _ = export_md(hf_copy("mnt", no_gen(min_length=3), gen={"min_new_tokens": 5}))
    assert md["generation.min_length"] == 6
    md, _, _ = export_md(hf_copy("mnt", no_gen(min_length=10), gen={"min_new_tokens": 4}))
    assert md["generation.min_length"] == 10
    md, _, _ = export_md(hf_copy("mnt", no_gen(min_new_tokens=0)))
    assert md["generation.min_length"] == 1
    md, _, _ = export_md(hf_copy("mnt", no_gen(min_new_tokens=None)))
    assert md["generation.min_length"] == 0


@test
def generation_refusals_and_warnings():
    def gen(k, v):
        return lambda d, c: write_json(d, "generation_config.json", {k: v})
    for k, v in (("num_beams", 0), ("num_beams", -1), ("num_beams", 2.5), ("num_beams", True),
                 ("num_beams", None), ("num_beams", "4"), ("num_beams", 2 ** 32),
                 ("length_penalty", "x"), ("length_penalty", None), ("length_penalty", 1e39),
                 ("length_penalty", float("inf")), ("length_penalty", True),
                 ("repetition_penalty", 0), ("repetition_penalty", -1.0),
                 ("repetition_penalty", 1e-50), ("early_stopping", "always"),
                 ("early_stopping", 1), ("early_stopping", None),
                 ("min_length", -1), ("min_length", 1.0), ("no_repeat_ngram_size", 1.5),
                 ("no_repeat_ngram_size", -2), ("renormalize_logits", "yes"),
                 ("renormalize_logits", 0), ("max_new_tokens", 0), ("max_new_tokens", -5),
                 ("max_new_tokens", 3.0), ("min_new_tokens", -1), ("do_sample", "no")):
        shown = json.dumps(v)
        refused(gen(k, v), ["generation_config.json", f"{k} = {shown}"])
        refused(setkey(k, v), ["config.json", f"{k} = {shown}"])
    # do_sample: a warning, not a refusal; nothing about sampling is recorded
    md, _, se = export_md(hf_copy("sample", gen={"do_sample": True, "num_beams": 3}))
    assert "warning" in se and "do_sample" in se and len(se.strip().splitlines()) == 1, se
    assert md["generation.num_beams"] == 3
    # settings attend does not implement: warned about; their defaults are silent
    md, _, se = export_md(hf_copy("groups", {"num_beam_groups": 2, "diversity_penalty": 0.0,
                                             "forced_bos_token_id": None}))
    assert "num_beam_groups = 2" in se and len(se.strip().splitlines()) == 1, se
    md, _, se = export_md(hf_copy("groups", {"num_beam_groups": 1, "suppress_tokens": None}))
    assert se == "", se


@test
def real_opus_mt_files():
    """The config and tokenizer files of three published OPUS-MT checkpoints, with random
    weights of the shapes their config.json gives (f16, to keep the files small)."""
    want = {  # directory: (num_beams, eos, forced EOS, model_max_length, renormalize, V, d)
        "translation-en-pt": (4, 44670, True, 512, True, 54776, 1024),
        "LamTS72-translator-en-fr": (4, 0, True, 512, True, 59514, 512),
        "opus-mt-en-mg": (4, 0, True, None, False, 54688, 512),
    }
    rng = np.random.default_rng(7)
    pool = (rng.standard_normal(1 << 20, dtype=np.float32) * 0.05).astype(np.float16)
    for name, (beams, eos, forced, mml, renorm, V, dm) in want.items():
        # config and tokenizer files of three published OPUS-MT checkpoints, without weights
        src = D.corpus("opus-mt-real-files", name)
        d = os.path.join(E.tmp, "real", name)
        os.makedirs(d)
        for f in os.listdir(src):   # a temporary copy: the weights are added beside
            shutil.copyfile(os.path.join(src, f), os.path.join(d, f))
        with open(os.path.join(d, "config.json")) as fh:
            c = json.load(fh)
        sd = {}
        for k, shape in real_hf_shapes(c).items():
            n = int(np.prod(shape))
            sd[k] = np.resize(np.roll(pool, int(rng.integers(pool.size))), n).reshape(shape)
        safetensors_np.save(sd, os.path.join(d, "model.safetensors"))
        del sd
        out = os.path.join(E.tmp, "real", name + ".gguf")
        rc, so, se = export(d, out, "--dtype", "f16")
        assert rc == 0 and se == "", (name, rc, se)
        os.remove(os.path.join(d, "model.safetensors"))
        f = G.GGUFFile(out)
        md = f.metadata
        got = (md["generation.num_beams"], md["marian.eos_id"], md["marian.forced_eos"],
               md.get("tokenizer.model_max_length"), md["generation.renormalize_logits"],
               md["marian.vocab_size"], md["marian.d_model"])
        assert got == (beams, eos, forced, mml, renorm, V, dm), (name, got)
        assert md["generation.length_penalty"] == 1.0 and md["generation.early_stopping"] == 0
        assert md["marian.max_length"] == 512 and md["general.name"] == name
        assert f.metadata_crc_ok() is True
        v = subprocess.run([ATTEND, "verify", out], capture_output=True, text=True)
        assert v.returncode == 0, (name, v.stdout + v.stderr)
        t = subprocess.run([ATTEND, "translate", "-m", out, "--max-length", "4"],
                           input="Hello, how are you?\n", capture_output=True, text=True)
        assert t.returncode == 0 and len(t.stdout.splitlines()) == 1, (name, t.stdout, t.stderr)
        os.remove(out)


def real_hf_shapes(c):
    """{HF tensor name: shape} of a MarianMTModel with shared, tied embeddings, as HF saves
    it (sinusoidal position tables included: the exporter ignores them)."""
    d, V, P = c["d_model"], c["vocab_size"], c["max_position_embeddings"]
    s = {"model.shared.weight": (V, d), "final_logits_bias": (1, V),
         "model.encoder.embed_positions.weight": (P, d),
         "model.decoder.embed_positions.weight": (P, d)}
    for side, parts in (("encoder", ["self_attn"]), ("decoder", ["self_attn", "encoder_attn"])):
        f = c[f"{side}_ffn_dim"]
        for i in range(c[f"{side}_layers"]):
            p = f"model.{side}.layers.{i}"
            for a in parts:
                for q in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    s[f"{p}.{a}.{q}.weight"], s[f"{p}.{a}.{q}.bias"] = (d, d), (d,)
                s[f"{p}.{a}_layer_norm.weight"] = s[f"{p}.{a}_layer_norm.bias"] = (d,)
            s[f"{p}.fc1.weight"], s[f"{p}.fc1.bias"] = (f, d), (f,)
            s[f"{p}.fc2.weight"], s[f"{p}.fc2.bias"] = (d, f), (d,)
            s[f"{p}.final_layer_norm.weight"] = s[f"{p}.final_layer_norm.bias"] = (d,)
    return s


@test
def low_precision_inputs():
    # an f16 checkpoint exports to f32 exactly as the upcast values, and the same bytes
    # from .bin with bf16 tensors as from safetensors upcast from bf16
    hf = hf_tensors(E.model)
    d = os.path.join(E.tmp, "halfin")
    shutil.copytree(E.st_dir, d)
    safetensors_np.save({k: v.astype(np.float16) for k, v in hf.items()},
                        os.path.join(d, "model.safetensors"))
    f = check_tensors(export_ok(d, "halfin.gguf"), E.model.config,
                      {k: v.astype(np.float16).astype(np.float32) for k, v in hf.items()}, "f32")
    d2 = os.path.join(E.tmp, "bf16bin")
    shutil.copytree(E.bin_dir, d2)
    sd = torch.load(os.path.join(d2, "pytorch_model.bin"))
    torch.save({k: v.to(torch.bfloat16) for k, v in sd.items()},
               os.path.join(d2, "pytorch_model.bin"))
    bf = {k: v.to(torch.bfloat16).to(torch.float32).numpy()
          for k, v in E.model.hf_state_dict(with_duplicates=False).items()}
    check_tensors(export_ok(d2, "bf16bin.gguf"), E.model.config, bf, "f32")
    del f


def refused(mutate, expect, src=None, files=None):
    """Copy the safetensors model, let mutate(dir, config) change it, and check the export
    exits with 2 and a one-line message containing every string of expect."""
    d = os.path.join(E.tmp, "bad_model")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src or E.st_dir, d)
    with open(os.path.join(d, "config.json")) as fh:
        cfg = json.load(fh)
    mutate(d, cfg)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    out = os.path.join(E.tmp, "bad.gguf")
    rc, so, se = export(d, out)
    assert rc == 2, f"expected exit 2 for {expect}, got {rc}: {se}"
    assert len(se.strip().splitlines()) == 1, se
    for s in expect:
        assert s in se, f"message {se!r} lacks {s!r}"
    assert not os.path.exists(out) and not os.path.exists(out + ".tmp")


def setkey(k, v):
    return lambda d, c: c.__setitem__(k, v)


@test
def refusals_config():
    refused(setkey("model_type", "bart"), ["model_type", "bart"])
    refused(setkey("activation_function", "gelu_new"), ["activation_function", "gelu_new"])
    refused(setkey("normalize_before", True), ["normalize_before", "true"])
    refused(setkey("add_final_layer_norm", True), ["add_final_layer_norm", "true"])
    refused(setkey("normalize_embedding", True), ["normalize_embedding", "true"])
    refused(setkey("static_position_embeddings", False), ["static_position_embeddings", "false"])
    refused(setkey("encoder_attention_heads", 3), ["encoder_attention_heads", "3"])
    refused(setkey("d_model", 15), ["d_model", "15"])
    refused(setkey("forced_eos_token_id", 7), ["forced_eos_token_id", "7"])
    refused(lambda d, c: c.pop("vocab_size"), ["vocab_size", "missing"])
    refused(setkey("eos_token_id", len(E.vocab)), ["eos_token_id", str(len(E.vocab))])


@test
def refusals_files_and_tensors():
    refused(lambda d, c: os.remove(os.path.join(d, "target.spm")), ["missing", "target.spm"])
    refused(lambda d, c: os.remove(os.path.join(d, "vocab.json")), ["missing", "vocab.json"])
    refused(lambda d, c: os.remove(os.path.join(d, "model.safetensors")),
            ["missing", "model.safetensors"])

    def edit_weights(fn):
        def mutate(d, c):
            p = os.path.join(d, "model.safetensors")
            sd = safetensors_np.load(p)
            fn(sd)
            safetensors_np.save(sd, p)
        return mutate

    def wrong_shape(sd):
        k = "model.encoder.layers.1.fc2.weight"
        sd[k] = sd[k][:, :-1].copy()
    refused(edit_weights(wrong_shape), ["model.encoder.layers.1.fc2.weight", "[16, 24]",
                                        "[16, 23]"])
    refused(edit_weights(lambda sd: sd.pop("model.decoder.layers.0.encoder_attn.k_proj.bias")),
            ["missing", "model.decoder.layers.0.encoder_attn.k_proj.bias"])
    refused(edit_weights(lambda sd: sd.pop("final_logits_bias")),
            ["missing", "final_logits_bias"])
    # a vocabulary bigger than the embedding
    refused(lambda d, c: c.__setitem__("vocab_size", len(E.vocab) - 1)
            or c.__setitem__("decoder_vocab_size", len(E.vocab) - 1)
            or c.__setitem__("pad_token_id", 5) or c.__setitem__("decoder_start_token_id", 5)
            or c.__setitem__("bad_words_ids", [[5]]),
            ["vocab.json", "vocab_size"])


@test
def quantize_equals_int8_export():
    """attend quantize of the f32 export writes the very bytes export --dtype int8 writes
    (format version 2, metadata CRC recomputed as the last key), and both verify."""
    f32 = export_ok(E.st_dir, "q-f32.gguf", "--dtype", "f32")
    int8 = export_ok(E.st_dir, "q-int8.gguf", "--dtype", "int8")
    out = os.path.join(E.tmp, "q-attend.gguf")
    p = subprocess.run([ATTEND, "quantize", f32, out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert file_bytes(out) == file_bytes(int8), "attend quantize differs from export --dtype int8"
    f = G.GGUFFile(out)
    assert f.metadata["attend.format_version"] == 2 and f.metadata_crc_ok() is True
    assert f.crc_mismatches() == []
    v = subprocess.run([ATTEND, "verify", out], capture_output=True, text=True)
    assert v.returncode == 0 and "metadata CRC-32 checked" in v.stdout, v.stdout + v.stderr


@test
def gguf_dump_tool():
    path = os.path.join(E.tmp, "st_f16.gguf")
    p = subprocess.run([PY, os.path.join(TOOLS, "gguf_io.py"), "dump", path],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "marian.d_model (u32) = 16" in out
    assert "tokenizer.source_pieces (array[string]) = <" in out  # big array summarised
    assert "tensor enc.0.self_attn.q.weight F16 [16, 16]" in out
    assert "tensor final_logits_bias F32 [" in out
    assert "marian.layer_norm_eps (f32) = 1e-05" in out   # the f32's shortest form
    assert "generation.num_beams (u32) = " in out
    assert "generation.length_penalty (f32) = 1.0" in out
    assert "generation.early_stopping (u32) = 0 (false)" in out
    assert "generation.renormalize_logits (bool) = " in out
    assert "tokenizer.model_max_length (u32) = 512" in out
    assert "all tensors match" in out
    assert out.count("\n  tensor ") == len(G.GGUFFile(path).tensor_infos)


# --------------------------------------------------------------------------------------

def main():
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="attend_export_") as tmp:
        if not os.path.isdir(DATA):
            # one failure with the reason, not a traceback per test
            print(f"FAIL setup: {D.missing(DATA)} (the tests train SentencePiece models on it)")
            print("0 passed, 1 failed")
            return 1
        try:
            setup(tmp)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            print(f"0 passed, {len(TESTS)} failed")
            return 1
        for fn in TESTS:
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    fn()
            except (Exception, D.MissingData):  # noqa: BLE001
                failed += 1
                print(f"FAIL {fn.__name__}")
                sys.stdout.write(buf.getvalue())
                traceback.print_exc(file=sys.stdout)
            else:
                passed += 1
                print(f"ok   {fn.__name__}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
