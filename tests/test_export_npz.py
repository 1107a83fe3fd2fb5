#!/usr/bin/python3
"""Tests of tools/export_marian_npz.py: a Marian release exported directly gives the .gguf
that export_marian.py gives for the HF directory transformers' converter makes of it.

Run as `/usr/bin/python3 tests/test_export_npz.py`. Trains two small SentencePiece models on
the shared Tatoeba data, writes random models both as Marian releases (a directory or a
.zip, reference.save_marian_release) and as the HF directory the converter would write
(reference.save_hf_dir with the converter's config and tokenizer_config.json), exports both
and compares the files byte for byte; then checks refusals and the vocabularies of three
published OPUS-MT checkpoints (../shared/data/opus-mt-real-files).
"""
import json
import os
import shutil
import subprocess

import numpy as np
import torch

import testlib as T

import gguf_io as G  # noqa: E402 (testlib puts tools/ on the path)
import reference as R  # noqa: E402
import safetensors_np  # noqa: E402

NPZ_EXPORT = os.path.join(T.TOOLS, "export_marian_npz.py")
HF_EXPORT = os.path.join(T.TOOLS, "export_marian.py")


class Env:
    pass


E = Env()


def run(tool, *args):
    p = subprocess.run([T.PYTHON, tool, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def export_ok(tool, src, out, *args):
    rc, so, se = run(tool, src, out, *args)
    assert rc == 0 and se == "", (tool, src, rc, se)
    return out


def setup():
    E.tmp = T.tempdir()
    E.sspm = T.train_spm(E.tmp, "src", T.corpus_lines("tatoeba", "de", 1500), 200)
    E.tspm = T.train_spm(E.tmp, "tgt", T.corpus_lines("tatoeba", "en", 1500), 200)
    E.src_bytes = open(E.sspm, "rb").read()
    E.tgt_bytes = open(E.tspm, "rb").read()
    E.shared_vocab = R.build_vocab(E.sspm, E.tspm)
    # separate vocabularies: the converter needs them of one size (dim-vocabs)
    E.src_vocab, E.tgt_vocab = R.build_vocab(E.sspm), R.build_vocab(E.tspm)
    assert len(E.src_vocab) == len(E.tgt_vocab)


def converter_config(V, eos, shared, beam, **dims):
    """The config.json convert_marian_to_pytorch.py writes for such a release."""
    pad = V - 1
    return dict(vocab_size=V, decoder_vocab_size=V, pad_token_id=pad, decoder_start_token_id=pad,
                bad_words_ids=[[pad]], eos_token_id=eos, forced_eos_token_id=eos,
                max_position_embeddings=dims["d_model"], max_length=512, num_beams=beam,
                scale_embedding=True, share_encoder_decoder_embeddings=shared,
                tie_word_embeddings=True, **dims)


def marian_model(config, seed):
    """A random model whose <pad> row and logits bias are zero, as the converter makes them."""
    m = R.random_model(config, seed=seed, bias_std=0.5, gain=1.5)
    pad = config["pad_token_id"]
    with torch.no_grad():
        for e in (m.model.shared, m.model.encoder.embed_tokens, m.model.decoder.embed_tokens):
            e.weight[pad] = 0
        m.final_logits_bias[0, pad] = 0
    return m


def save_pair(name, m, vocab, target_vocab=None, src=None, tgt=None, **release):
    """The model as a Marian release and as the converter's HF directory; their paths."""
    src, tgt = src or E.src_bytes, tgt or E.tgt_bytes
    hf = os.path.join(E.tmp, name + "-hf")
    R.save_hf_dir(m, hf, src, tgt, vocab, target_vocab)
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:  # as the converter saves it
        json.dump({"target_lang": "en", "source_lang": "de",
                   "separate_vocabs": target_vocab is not None}, f)
    rel = os.path.join(E.tmp, name + (".zip" if release.get("as_zip") else ""))
    R.save_marian_release(m, rel, src, tgt, vocab, target_vocab, **release)
    return rel, hf


# the random configurations: (name, shared vocabulary, activation, dims, beam, release options)
CONFIGS = [
    ("shared-swish-dir", True, "swish",
     dict(d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
          decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32), 4, {}),
    ("separate-relu-zip", False, "relu",
     dict(d_model=24, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
          decoder_attention_heads=2, encoder_ffn_dim=40, decoder_ffn_dim=40), 6,
     dict(as_zip=True)),
    # tied-embeddings-src + tied-embeddings spelled out instead of -all, a decoder ffn size
    # of its own, a decoder.yml without models/vocabs (found by name, as HF's converter does)
    ("shared-ffn-unlisted-zip", True, "swish",
     dict(d_model=32, encoder_layers=3, decoder_layers=2, encoder_attention_heads=8,
          decoder_attention_heads=8, encoder_ffn_dim=48, decoder_ffn_dim=64), 1,
     dict(as_zip=True, list_files=False, model_yml={"tied-embeddings-all": False})),
    ("separate-unlisted-dir", False, "relu",
     dict(d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=1,
          decoder_attention_heads=1, encoder_ffn_dim=8, decoder_ffn_dim=8), 2,
     dict(list_files=False)),
]


def make_config(i):
    name, shared, act, dims, beam, opts = CONFIGS[i]
    vocab = E.shared_vocab if shared else E.src_vocab
    tv = None if shared else E.tgt_vocab
    cfg = converter_config(len(vocab), vocab["</s>"], shared, beam,
                           activation_function=act, **dims)
    m = marian_model(cfg, seed=10 + i)
    rel, hf = save_pair(name, m, vocab, tv, beam_size=beam, **opts)
    return name, m, rel, hf


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read(), f"{a} and {b} differ"


# --------------------------------------------------------------------------------------
# Tests

def configs_equal_hf_export():
    """Each configuration: the release's .gguf is byte for byte the HF directory's."""
    E.made = []
    for i in range(len(CONFIGS)):
        name, m, rel, hf = make_config(i)
        E.made.append((name, m, rel, hf))
        a = export_ok(NPZ_EXPORT, rel, os.path.join(E.tmp, name + ".npz.gguf"), "--name", "test")
        b = export_ok(HF_EXPORT, hf, os.path.join(E.tmp, name + ".hf.gguf"), "--name", "test")
        same_file(a, b)
        c, beam = m.config, CONFIGS[i][4]
        md = G.GGUFFile(a).metadata
        assert md["generation.num_beams"] == beam and md["marian.max_length"] == 512
        assert md["marian.max_position_embeddings"] == c["d_model"]
        assert md["marian.pad_id"] == md["marian.decoder_start_id"] == c["vocab_size"] - 1
        assert md["marian.shared_embeddings"] == CONFIGS[i][1] and md["marian.tied_output"]
        assert md["marian.activation"] == CONFIGS[i][2]
        assert md["marian.forced_eos"] and "tokenizer.model_max_length" not in md
        assert md["tokenizer.target_pieces"][-1] == "<pad>"


def dtypes_equal_hf_export():
    name, m, rel, hf = E.made[1]
    for dt in ("f16", "int8"):
        a = export_ok(NPZ_EXPORT, rel, os.path.join(E.tmp, f"dt.npz.{dt}.gguf"), "--dtype", dt,
                      "--name", "test")
        b = export_ok(HF_EXPORT, hf, os.path.join(E.tmp, f"dt.hf.{dt}.gguf"), "--dtype", dt,
                      "--name", "test")
        same_file(a, b)


def hf_half_equals_converter_output():
    """--hf-half gives the file of the converter's real output: every tensor saved f16."""
    name, m, rel, hf = E.made[0]
    half = os.path.join(E.tmp, "half-hf")
    shutil.copytree(hf, half)
    st = os.path.join(half, "model.safetensors")
    safetensors_np.save({k: v.astype(np.float16) for k, v in safetensors_np.load(st).items()}, st)
    a = export_ok(NPZ_EXPORT, rel, os.path.join(E.tmp, "half.npz.gguf"), "--hf-half",
                  "--name", "test")
    b = export_ok(HF_EXPORT, half, os.path.join(E.tmp, "half.hf.gguf"), "--name", "test")
    same_file(a, b)
    full = G.GGUFFile(os.path.join(E.tmp, name + ".npz.gguf")).tensors["enc.0.ffn.fc1.weight"]
    assert not np.array_equal(G.GGUFFile(a).tensors["enc.0.ffn.fc1.weight"], full)


def default_name_and_engine_runs():
    """Without --name the release's name (.zip dropped); attend loads and translates it."""
    name, m, rel, hf = E.made[1]
    out = export_ok(NPZ_EXPORT, rel, os.path.join(E.tmp, "named.gguf"))
    assert G.GGUFFile(out).metadata["general.name"] == name
    T.run_attend(["verify", out])
    # greedy ids and per-step logits as the reference computes them on the same model
    dump = os.path.join(E.tmp, "named.npz")
    q = T.run_attend(["translate", "-m", out, "--beam", "1", "--max-length", "6",
                      "--dump-attention", dump, "--dump-logits"], input_text="Hallo Welt!\n")
    m.tok = R.MarianTok(E.sspm, E.tspm, E.src_vocab, E.tgt_vocab, max_len=m.config["d_model"])
    ref = R.greedy(m, m.tok.encode("Hallo Welt!"), max_length=6)
    assert q.stdout.strip() == m.tok.decode(ref.ids), (q.stdout, m.tok.decode(ref.ids))
    with np.load(dump) as z:
        got = z["s0/logits"]
    assert got.shape == ref.logits.shape, (got.shape, ref.logits.shape)
    assert np.abs(got - ref.logits).max() < 1e-3


def real_vocabularies():
    """Three published OPUS-MT vocabularies and SentencePiece models as releases (their
    vocab.json without <pad> as the vocab.yml) with small random weights: the pieces, <unk>,
    </s> and <pad> ids come out as in the published config.json and vocab.json."""
    for name in ("opus-mt-en-mg", "translation-en-pt", "LamTS72-translator-en-fr"):
        d = T.data_path("opus-mt-real-files", name)
        with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        with open(os.path.join(d, "config.json")) as f:
            real = json.load(f)
        src, tgt = (open(os.path.join(d, f), "rb").read() for f in ("source.spm", "target.spm"))
        cfg = converter_config(len(vocab), vocab["</s>"], True, real["num_beams"],
                               activation_function=real["activation_function"], d_model=8,
                               encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16)
        m = marian_model(cfg, seed=3)
        rel, hf = save_pair("real-" + name, m, vocab, src=src, tgt=tgt, as_zip=True)
        a = export_ok(NPZ_EXPORT, rel, os.path.join(E.tmp, "real.npz.gguf"), "--name", name)
        b = export_ok(HF_EXPORT, hf, os.path.join(E.tmp, "real.hf.gguf"), "--name", name)
        same_file(a, b)
        md = G.GGUFFile(a).metadata
        pieces = [None] * len(vocab)
        for p, i in vocab.items():
            pieces[i] = p
        assert md["tokenizer.source_pieces"] == pieces == md["tokenizer.target_pieces"]
        assert md["marian.eos_id"] == real["eos_token_id"]
        assert md["marian.pad_id"] == real["pad_token_id"] == real["decoder_start_token_id"]
        assert md["marian.unk_id"] == vocab["<unk>"]
        assert md["marian.vocab_size"] == real["vocab_size"]
        assert md["generation.num_beams"] == real["num_beams"]
        assert md["marian.activation"] == real["activation_function"]
        T.run_attend(["translate", "-m", a, "--max-length", "4"], input_text="Hello, world.\n")
        shutil.rmtree(hf)
        os.remove(rel)


# --------------------------------------------------------------------------------------
# Refusals: exit 2, one line naming the problem, never a traceback

def refused(release, expect):
    rc, so, se = run(NPZ_EXPORT, release, os.path.join(E.tmp, "bad.gguf"))
    assert rc == 2, f"expected exit 2 for {expect}, got {rc}: {se}"
    assert "Traceback" not in se and len(se.strip().splitlines()) == 1, se
    for s in expect:
        assert s in se, f"message {se!r} lacks {s!r}"
    assert not os.path.exists(os.path.join(E.tmp, "bad.gguf"))


def bad_release(as_zip=False, config=0, **opts):
    """A configuration's model (0: shared vocabulary) as a release with save_marian_release
    options changed."""
    name, m, rel, hf = E.made[config]
    path = os.path.join(E.tmp, "bad" + (".zip" if as_zip else ""))
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    vocab = opts.pop("vocab", E.shared_vocab)
    return R.save_marian_release(m, path, E.src_bytes, E.tgt_bytes, vocab, as_zip=as_zip, **opts)


def npz_of(path):
    return [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".npz")][0]


def refusals_files():
    refused(os.path.join(E.tmp, "nowhere.zip"), ["missing release", "nowhere.zip"])
    for f, what in (("decoder.yml", "decoder.yml"), ("source.spm", "source.spm"),
                    ("target.spm", "target.spm")):
        p = bad_release()
        os.remove(os.path.join(p, f))
        refused(p, ["missing file", what])
    p = bad_release()
    os.remove(os.path.join(p, f"opus.spm{len(E.shared_vocab) - 1}.vocab.yml"))
    refused(p, ["missing file", "vocab.yml"])
    p = bad_release()
    os.rename(os.path.join(p, "source.spm"), os.path.join(p, "source.bpe"))
    refused(p, ["a BPE release"])
    p = bad_release(list_files=False)
    os.remove(npz_of(p))
    refused(p, ["0 .npz files"])
    text = os.path.join(E.tmp, "notzip.zip")
    with open(text, "w") as f:
        f.write("not a zip\n")
    refused(text, ["not a zip file"])
    z = bad_release(as_zip=True)
    blob = open(z, "rb").read()
    with open(z, "wb") as f:
        f.write(blob[: len(blob) // 2])
    refused(z, ["not a zip file"])
    p = bad_release()
    n = npz_of(p)
    blob = open(n, "rb").read()
    with open(n, "wb") as f:
        f.write(blob[: len(blob) * 2 // 3])
    refused(p, ["cannot read", os.path.basename(n)])
    p = bad_release()
    with open(os.path.join(p, "decoder.yml"), "w") as f:
        f.write("beam-size: [4\nmodels: {\n")
    refused(p, ["decoder.yml", "not valid YAML"])


def refusals_settings():
    cases = [
        ({"type": "s2s"}, ['type = "s2s"']),
        ({"transformer-preprocess": "n"}, ['transformer-preprocess = "n"', "pre-norm"]),
        ({"transformer-postprocess": "da"}, ['transformer-postprocess = "da"']),
        ({"transformer-ffn-activation": "gelu"},
         ['transformer-ffn-activation = "gelu"', "sigmoid"]),
        ({"tied-embeddings-all": False, "tied-embeddings": False}, ["tied-embeddings = false"]),
        ({"dec-depth": 3}, ["dec-depth = 3", "only 1 decoder layer"]),
        ({"enc-depth": 1}, ["enc-depth = 1", "encoder_l2_"]),
        ({"dim-vocabs": [299, 300]}, ["dim-vocabs = [299, 300]", "different sizes"]),
        ({"transformer-train-position-embeddings": True},
         ["transformer-train-position-embeddings = true"]),
        ({"transformer-decoder-autoreg": "average-attention"}, ["average-attention"]),
        ({"transformer-heads": 3}, ["transformer-heads = 3", "dim-emb = 16"]),
        ({"dim-emb": None}, ["missing required key dim-emb"]),
        ({"output-omit-bias": True}, ["output-omit-bias = true"]),
    ]
    for over, expect in cases:
        refused(bad_release(model_yml=over), expect)
    # guided alignment (transformer-align releases) is a training setting: accepted
    export_ok(NPZ_EXPORT, bad_release(model_yml={"guided-alignment": "train.align",
                                                 "transformer-guided-alignment-layer": "6"}),
              os.path.join(E.tmp, "aligned.gguf"))
    p = bad_release()
    with open(os.path.join(p, "decoder.yml")) as f:
        text = f.read()
    with open(os.path.join(p, "decoder.yml"), "w") as f:
        f.write(text.replace("beam-size: 4\n", ""))
    refused(p, ["decoder.yml: missing beam-size"])
    with open(os.path.join(p, "decoder.yml"), "w") as f:
        f.write(text.replace("models:\n", "models:\n  - second.npz\n"))
    refused(p, ["ensemble"])


def refusals_tensors():
    def change(fn):
        def edit(w):
            fn(w)
            return w
        return edit

    def wrong_shape(w):
        w["encoder_l1_ffn_W1"] = w["encoder_l1_ffn_W1"].T.copy()

    def untied_output(w):
        w["decoder_ff_logit_out_W"] = w["Wemb"].T.copy()

    def int_bias(w):
        w["decoder_l1_ffn_b2"] = np.zeros_like(w["decoder_l1_ffn_b2"], dtype=np.int32)

    def drop(key):
        return lambda w: w.pop(key)

    def nan(w):
        w["encoder_l2_self_Wq"][0, 0] = np.nan

    cases = [(wrong_shape, ["tensor encoder_l1_ffn_W1", "expected shape [16, 32], got [32, 16]"]),
             (untied_output, ["tensor decoder_ff_logit_out_W"]),
             (int_bias, ["tensor decoder_l1_ffn_b2", "non-float"]),
             (drop("decoder_l1_context_Wk"), ["missing tensor decoder_l1_context_Wk"]),
             (drop("Wemb"), ["missing tensor Wemb"]),
             (nan, ["tensor encoder_l2_self_Wq", "non-finite"])]
    for fn, expect in cases:
        refused(bad_release(tensors=change(fn)), expect)
    # model.yml missing from the npz
    p = bad_release()
    n = npz_of(p)
    with np.load(n) as z:
        w = {k: z[k] for k in z.files if k != "special:model.yml"}
    np.savez(n, **w)
    refused(p, ["special:model.yml", "not a Marian model"])


def refusals_vocabulary():
    v = dict(E.shared_vocab)
    pad = v.pop("<pad>")
    gap = {p: (i if i < 5 else i + 1) for p, i in v.items()}
    gap["<pad>"] = pad + 1
    refused(bad_release(vocab=gap), ["vocab.yml", "outside dim-vocabs"])
    extra = dict(v, **{"extra": pad, "<pad>": pad + 1})
    refused(bad_release(vocab=extra), ["vocab.yml", "outside dim-vocabs"])
    short = {p: i for p, i in v.items() if i != 7}
    short["<pad>"] = pad
    refused(bad_release(vocab=short), ["vocab.yml", "(the first: 7)"])
    no_eos = {("<eos>" if p == "</s>" else p): i for p, i in E.shared_vocab.items()}
    refused(bad_release(vocab=no_eos), ["no </s> piece"])
    tv = dict(E.tgt_vocab)
    first = next(p for p, i in tv.items() if i == 2)
    tv["</s>"], tv[first] = 2, 0
    refused(bad_release(config=3, vocab=E.src_vocab, target_vocab=tv),
            ["trg.vocab.yml", "</s> is id 2"])
    p = bad_release()
    name = os.path.join(p, f"opus.spm{pad}.vocab.yml")
    with open(name, encoding="utf-8") as f:
        text = f.read()
    with open(name, "w", encoding="utf-8") as f:
        f.write(text.replace('"<unk>": 1\n', '"<pad>": 1\n'))
    refused(p, ["already holds <pad>"])
    with open(name, "w", encoding="utf-8") as f:
        f.write(text.replace('"<unk>": 1\n', '"<unk>": one\n'))
    refused(p, ["non-integer id 'one'"])


def main():
    r = T.Runner()
    setup()
    r.check("four configurations: the release's .gguf is the HF directory's",
            configs_equal_hf_export)
    r.check("f16 and int8 exports equal the HF directory's", dtypes_equal_hf_export)
    r.check("--hf-half equals the converter's f16 output", hf_half_equals_converter_output)
    r.check("default name; attend verifies and translates it as the reference",
            default_name_and_engine_runs)
    r.check("real OPUS-MT vocabularies and spm models", real_vocabularies)
    r.check("refusals: missing, broken and truncated files", refusals_files)
    r.check("refusals: model.yml and decoder.yml settings", refusals_settings)
    r.check("refusals: tensors", refusals_tensors)
    r.check("refusals: vocabularies", refusals_vocabulary)
    shutil.rmtree(E.tmp, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
