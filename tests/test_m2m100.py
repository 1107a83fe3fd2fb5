#!/usr/bin/python3
"""M2M-100: attend gives the reference's tokens, text, logits and attention on random models.

Each configuration goes through the user's path: random M2M100 weights (tools/reference_m2m100.py's
independent implementation) saved as an HF-style directory (config.json with model_type
m2m_100, model.safetensors or pytorch_model.bin under HF's names, sentencepiece.bpe.model,
vocab.json, tokenizer files listing the __xx__ language tokens) -> the exporter -> .gguf ->
build/attend translate --src-lang --tgt-lang --dump-attention --dump-logits, greedy and with
4 beams, on every kernel set this CPU has. Ids and text must be identical, logits within
1e-3 and every attention matrix within 1e-5 (f32), the first generated token the target
language's. Then attend info, the language errors, forced decoding (attend align --target)
and broken files of the new family.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference_m2m100 as R  # noqa: E402  (the M2M-100 reference)
import test_parity as P  # noqa: E402

N_SENTENCES = 12
BEAMS = 4
EOS_RATE = 0.08  # about this share of greedy steps should choose </s> (outputs of many lengths)

BASE = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_length=20,
            max_position_embeddings=128)

# name, config overrides, options: spm (which SentencePiece model), languages, the pairs
# translated, unpieced (ids after the language tokens without a piece: fairseq's madeupwords),
# weights file format, exporter, boost: (token, share of greedy steps) made likely (negative
# tokens count from the end of the vocabulary)
CONFIGS = [
    ("relu-base", dict(),
     dict(spm="small", langs=["de", "en", "fr"], pairs=[("de", "en"), ("en", "fr")], unpieced=4,
          fmt="safetensors", exporter="export_marian.py", boost=[(1, 0.04)])),
    ("gelu-3-heads", dict(d_model=48, encoder_layers=3, decoder_layers=1, encoder_attention_heads=3,
                          decoder_attention_heads=6, encoder_ffn_dim=96, decoder_ffn_dim=80,
                          activation_function="gelu", max_length=16),
     dict(spm="large", langs=["af", "de", "en", "es", "zh"], pairs=[("en", "de")], unpieced=0,
          fmt="bin", exporter="export_m2m100.py")),
    ("odd-d-unscaled", dict(d_model=45, encoder_layers=1, decoder_layers=2, encoder_attention_heads=5,
                            decoder_attention_heads=3, encoder_ffn_dim=90, decoder_ffn_dim=70,
                            scale_embedding=False, max_length=18),
     dict(spm="small", langs=["en", "de"], pairs=[("de", "en")], unpieced=8, fmt="safetensors",
          exporter="export_m2m100.py", boost=[(-3, 0.04)])),
    ("wide-forced-eos", dict(d_model=96, encoder_attention_heads=8, decoder_attention_heads=12,
                             encoder_ffn_dim=192, decoder_ffn_dim=160, forced_eos_token_id=2,
                             max_length=14),
     dict(spm="large", langs=["de", "en"], pairs=[("de", "en"), ("en", "de")], unpieced=2,
          fmt="safetensors", exporter="export_marian.py")),
]


def build_spms(work):
    """One SentencePiece model serves every language in M2M-100: two sizes, trained on German
    and English together."""
    lines = T.bilingual_lines()
    return {"small": T.train_spm(work, "m2m-small", lines, 800),
            "large": T.train_spm(work, "m2m-large", lines, 1600)}


def sentences(lang):
    side = "de" if lang == "de" else "en"
    s = T.corpus_lines("multi30k", side, 5, skip=20000) + T.corpus_lines("tatoeba", side, 5, skip=12000)
    s += ["Xylophonquartett Zzzz 12345 !!!", "ja"]
    return s[:N_SENTENCES]


def logit_gap(m, sources, forced_bos, token, rate):
    """How much `token`'s logit must gain for about `rate` of the greedy steps on sources
    (after the forced first one) to choose it: the rate quantile of the margins, + 1e-3."""
    margins = []
    for src in sources:
        r = R.m2m_greedy(m, src, forced_bos)
        lg = r.logits[1:].copy()  # the forced first step says nothing
        if not len(lg):
            continue
        e = lg[:, token].copy()
        lg[:, token] = -np.inf
        margins.extend(lg.max(1) - e)
    return float(np.quantile(margins, rate)) + 1e-3


def calibrate(m, sources, forced_bos, token, rate, rounds=2):
    """Make about `rate` of greedy steps choose `token`: M2M-100 has no logits bias, so the
    decoder's final LayerNorm bias moves along the token's embedding (its logit gains delta,
    the others a little by their correlation with it). A second round settles </s>; a token
    that repeats once chosen (<pad>) would swing back, so it gets one."""
    for _ in range(rounds):
        delta = logit_gap(m, sources, forced_bos, token, rate)
        with torch.no_grad():
            E = m.model.shared.weight[token]
            m.model.decoder.layer_norm.bias += delta * E / float(E @ E)


def make_model(work, name, overrides, opts, spms, seed):
    spm = spms[opts["spm"]]
    vocab = R.m2m_build_vocab(spm)
    langs = opts["langs"]
    cfg = dict(BASE, **overrides)
    cfg["vocab_size"] = len(vocab) + len(langs) + opts["unpieced"]
    m = R.m2m_random_model(cfg, seed=seed)
    m.tok = R.M2MTok(spm, vocab, langs, max_len=1024)
    src_lang, tgt_lang = opts["pairs"][0]
    srcs = [m.tok.encode(s, src_lang) for s in T.corpus_lines("tatoeba", "de" if src_lang == "de" else "en",
                                                                16, skip=500)]
    # tokens HF treats specially, made likely enough to be generated: <pad> (never banned
    # here; as an input it takes position pad_id), <s> and an id without a piece
    for token, rate in opts.get("boost", []):
        calibrate(m, srcs, m.tok.lang_id[tgt_lang], token if token >= 0 else cfg["vocab_size"] + token, rate,
                  rounds=1)
    calibrate(m, srcs, m.tok.lang_id[tgt_lang], m.config["eos_token_id"], EOS_RATE)
    d = os.path.join(work, name)
    with open(spm, "rb") as f:
        R.m2m_save_hf_dir(m, d, f.read(), vocab, langs, fmt=opts["fmt"])
    return d, m


def export(hf, out, exporter, dtype="f32"):
    return T.export(hf, out, dtype, exporter)


def check_parity(work, name, gguf, m, pairs, sentences_of, isas, stats, beams_list=(1, BEAMS), dump=R.m2m_dump,
                 max_src=None):
    """attend translate against the reference m (m.tok its tokenizer) for each language pair,
    greedy and with beams, on every kernel set: ids and text identical, logits within 1e-3,
    every attention matrix within 1e-5, beam scores within 1e-4, the source starting with
    its language token and the output with the target's. stats collects test_parity's
    per-sentence figures (first kernel set). dump: the reference's dump (reference_mbart's
    for mBART); max_src: the most source tokens the reference may keep."""
    for src_lang, tgt_lang in pairs:
        lines = sentences_of(src_lang)
        for beams in beams_list:
            tag = f"{name}/{src_lang}-{tgt_lang}/b{beams}"
            ref_npz = os.path.join(work, tag.replace("/", "_") + "-ref.npz")
            dump(m, lines, src_lang, tgt_lang, ref_npz, num_beams=beams)
            ref = np.load(ref_npz)
            bos = m.tok.lang_id[tgt_lang]
            for i in range(len(lines)):
                assert ref[f"s{i}/tgt_ids"][0] == bos, f"{tag} s{i}: reference did not force {tgt_lang}"
                assert ref[f"s{i}/src_ids"][0] == m.tok.lang_id[src_lang]
                assert max_src is None or len(ref[f"s{i}/src_ids"]) <= max_src
            P.check_engine(tag, work, gguf, ref_npz, "\n".join(lines) + "\n", len(lines), isas, stats,
                           ["--src-lang", src_lang, "--tgt-lang", tgt_lang, "--beam", str(beams)],
                           beams=beams > 1)


def endings(stats, eos=2):
    """The outputs end both by </s> (id eos) and by length, and use 40+ distinct target ids."""
    by_eos = [s for s in stats if s[2] == eos]
    by_len = [s for s in stats if s[2] != eos]
    distinct = set().union(*(s[3] for s in stats)) if stats else set()
    print(f"   endings: {len(by_eos)} by </s>, {len(by_len)} by max_length (of {len(stats)}); "
          f"{len(distinct)} distinct target ids")
    assert by_eos and by_len, "random models did not end both ways"
    assert len(distinct) >= 40, "outputs too repetitive to exercise the vocabulary"


def language_errors(gguf, cases):
    """attend translate with each case's language options: exit 2, the message in stderr."""
    for args, want in cases:
        p = T.run_attend(["translate", "-m", gguf] + args + ["Hallo"], check=False)
        assert p.returncode == 2 and want in p.stderr, (args, p.returncode, p.stderr)


def check_forced(work, gguf, m, src_lang, tgt_lang, src_text, tgt_text, dec_self=False):
    """attend align --target: the target ids are m.tok's (its language token first), and
    the cross attention (with dec_self, the decoder's self attention too) equals the
    reference's teacher-forced attention within 1e-5."""
    src = m.tok.encode(src_text, src_lang)
    tgt = m.tok.encode_target(tgt_text, tgt_lang)
    with torch.no_grad():
        memory, enc_p = m.encode(torch.tensor([src]))
        logits, self_p, cross_p = m.decode(torch.tensor([[2] + tgt[:-1]]), memory)
    npz = os.path.join(work, "forced.npz")
    T.run_attend(["align", "-m", gguf, "--src-lang", src_lang, "--tgt-lang", tgt_lang, "--dump-attention", npz,
                  src_text, "--target", tgt_text])
    eng = np.load(npz)
    assert eng["s0/tgt_ids"].tolist() == tgt, (eng["s0/tgt_ids"].tolist(), tgt)
    for l, p in enumerate(cross_p):
        diff = np.abs(eng[f"s0/cross/l{l}"] - p[0].numpy()).max()
        assert diff <= 1e-5, f"cross layer {l} differs by {diff:.2e}"
    for l, p in enumerate(self_p if dec_self else []):
        diff = np.abs(eng[f"s0/dec_self/l{l}"] - p[0].numpy()).max()
        assert diff <= 1e-5, f"decoder self layer {l} differs by {diff:.2e}"


def broken_copy(f, path, drop_key=None, drop_tensor=None, reshape=None, set_key=None):
    """Write the GGUFFile f again at path (f32 tensors, checksums renewed) with one edit: a
    key or tensor left out, a tensor one row short, or a key (name, value) set."""
    import gguf_io as G
    meta = [(k, f.types[k][0] if isinstance(f.types[k], tuple) else f.types[k],
             (f.types[k][1], v) if isinstance(f.types[k], tuple) else v)
            for k, v in f.metadata.items() if k not in (drop_key, G.CRC_KEY, G.META_CRC_KEY)]
    if set_key:
        meta = [(k, t, set_key[1] if k == set_key[0] else v) for k, t, v in meta]
    tensors = []
    for name, arr in f.tensors.items():
        if name == drop_tensor:
            continue
        if name == reshape:
            arr = arr[:-1]
        tensors.append((name, arr, G.GGML_F32))
    G.write(path, meta, tensors)
    return path


def export_edited(hf, bad, edit_config=None, edit_tok=None, remove=None, exporter="export_marian.py"):
    """A copy of hf at bad with config.json / tokenizer_config.json updated by the dicts
    given and the file `remove` removed, through the exporter: the CompletedProcess."""
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(hf, bad)
    for fname, edit in (("config.json", edit_config), ("tokenizer_config.json", edit_tok)):
        if edit:
            with open(os.path.join(bad, fname)) as fh:
                c = json.load(fh)
            c.update(edit)
            with open(os.path.join(bad, fname), "w") as fh:
                json.dump(c, fh)
    if remove:
        os.remove(os.path.join(bad, remove))
    return subprocess.run([T.PYTHON, os.path.join(T.TOOLS, exporter), bad, bad + ".gguf"],
                          capture_output=True, text=True)


def main():
    run = T.Runner()
    work = T.tempdir()
    spms = build_spms(work)
    isas = T.available_isas()
    print(f"kernel sets: {' '.join(isas)}; {len(CONFIGS)} configurations, greedy and {BEAMS} beams")
    stats = []
    models = {}

    def one(name, overrides, opts, seed):
        hf, m = make_model(work, name, overrides, opts, spms, seed)
        gguf = export(hf, os.path.join(work, name + ".gguf"), opts["exporter"])
        models[name] = (hf, gguf, m, opts)
        check_parity(work, name, gguf, m, opts["pairs"], sentences, isas, stats)

    for seed, (name, overrides, opts) in enumerate(CONFIGS):
        run.check(f"m2m_100 parity {name}", one, name, overrides, opts, seed + 11)

    run.check("outputs end by </s> and by length", endings, stats)

    def specials_generated():
        """Generated outputs hold <pad> (then read back at position pad_id) or ids without a
        piece (decoded as "<unk>"); the forced ids below check both for certain."""
        pads = unpieced = 0
        for name, _, ids, _ in [(s[0], s[1], s[3], None) for s in stats]:
            V, k = models[name][2].config["vocab_size"], dict((c[0], c[2]) for c in CONFIGS)[name]["unpieced"]
            pads += 1 in ids
            unpieced += any(i >= V - k for i in ids)
        print(f"   outputs holding <pad>: {pads}, ids without a piece: {unpieced}")
        assert pads + unpieced, "no output holds <pad> or an id without a piece"

    run.check("outputs hold <pad> or ids without a piece", specials_generated)

    def forced_ids_with_specials():
        """attend_translate_ids with <pad> inside the source (positions skip it: HF's cumsum)
        and <pad>, <s> and an id without a piece as decoder inputs (position pad_id for
        <pad>): logits and every attention matrix as the reference; text skips them."""
        sys.path.insert(0, os.path.join(T.REPO, "python"))
        from attend import _capi as C
        hf, gguf, m, opts = models["relu-base"]
        V, lang = m.config["vocab_size"], m.tok.lang_id
        src = [lang["de"], 40, 1, 41, 1, 1, 42, 2]
        tgt = [lang["en"], 50, 1, 0, V - 1, 51, 1, 52, 2]
        lib = C.lib()
        f = lib.attend_translate_ids
        ip, ipp = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.POINTER(ctypes.c_int))
        f.argtypes = [ctypes.c_void_p, ipp, ip, ctypes.c_int, ipp, ip, ctypes.POINTER(C.attend_params),
                      ctypes.POINTER(C.attend_result), ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        err = C.err_buffer()
        h = lib.attend_load(gguf.encode(), err, C.ERR_LEN)
        assert h, err.value
        s_arr, t_arr = (ctypes.c_int * len(src))(*src), (ctypes.c_int * len(tgt))(*tgt)
        s_ptr, t_ptr = (ip * 1)(ctypes.cast(s_arr, ip)), (ip * 1)(ctypes.cast(t_arr, ip))
        p = lib.attend_default_params()
        p.want_attention = p.want_logits = 1
        p.tgt_lang = b"en"
        r = C.attend_result()
        try:
            assert f(h, s_ptr, (ctypes.c_int * 1)(len(src)), 1, t_ptr, (ctypes.c_int * 1)(len(tgt)), p, r,
                     err, C.ERR_LEN) == 0, err.value
            assert r.status == 0, r.message
            S, Tn = len(src), len(tgt)
            with torch.no_grad():
                memory, enc_p = m.encode(torch.tensor([src]))
                logits, self_p, cross_p = m.decode(torch.tensor([[2] + tgt[:-1]]), memory)
            got = np.ctypeslib.as_array(r.logits, shape=(Tn * V,)).reshape(Tn, V)
            assert np.abs(got - logits[0].numpy()).max() <= 1e-3
            L, H = m.config["decoder_layers"], m.config["decoder_attention_heads"]
            He = m.config["encoder_attention_heads"]
            for name, ptr, ref, shape in (("cross", r.cross, cross_p, (H, Tn, S)),
                                          ("dec_self", r.dec_self, self_p, (H, Tn, Tn)),
                                          ("enc_self", r.enc_self, enc_p, (He, S, S))):
                arr = np.ctypeslib.as_array(ptr, shape=(len(ref) * int(np.prod(shape)),)).reshape(len(ref), *shape)
                for l, pr in enumerate(ref):
                    d = np.abs(arr[l] - pr[0].numpy()).max()
                    assert d <= 1e-5, f"{name} layer {l} differs by {d:.2e}"
            assert C.decode(r.text) == m.tok.decode(tgt), (C.decode(r.text), m.tok.decode(tgt))
            assert "<unk>" in C.decode(r.text)
        finally:
            lib.attend_result_free(r)
            lib.attend_free(h)

    run.check("forced ids with <pad>, <s> and an id without a piece", forced_ids_with_specials)

    def info_and_errors():
        hf, gguf, m, opts = models["relu-base"]
        out = T.run_attend(["info", gguf]).stdout
        assert "architecture        m2m_100" in out, out
        assert "languages           3: de en fr" in out, out
        language_errors(gguf, ((["--tgt-lang", "en"], "give --src-lang, one of: de en fr"),
                               (["--src-lang", "de"], "give --tgt-lang, one of: de en fr"),
                               (["--src-lang", "de", "--tgt-lang", "xx"], "--tgt-lang 'xx' is not a language")))
        # a Marian model takes no languages; its --tgt-lang is a >>xx<< code (test_marian_codes)
        os.makedirs(os.path.join(work, "marian"), exist_ok=True)
        marian = T.random_gguf(os.path.join(work, "marian"))
        p = T.run_attend(["translate", "-m", marian, "--src-lang", "de", "Hallo"], check=False)
        assert p.returncode == 2 and "no languages" in p.stderr, p.stderr
        p = T.run_attend(["translate", "-m", marian, "--tgt-lang", "en"], "Hallo\n", check=False)
        assert p.returncode == 1 and "no >>en<< code" in p.stderr, p.stderr
        assert "architecture        marian" in T.run_attend(["info", marian]).stdout

    run.check("attend info lists the languages; language errors list the codes", info_and_errors)

    def forced_decoding():
        """attend align --target: the target starts with its language token, and the
        attention equals the reference's teacher-forced attention."""
        hf, gguf, m, opts = models["relu-base"]
        check_forced(work, gguf, m, "de", "en", "Ein Hund läuft.", "A dog runs.")

    run.check("forced decoding (align --target) starts with the target language", forced_decoding)

    def broken_files():
        hf, gguf, m, opts = models["relu-base"]
        import gguf_io as G
        f = G.GGUFFile(gguf)
        cases = []

        def rewrite(tag, **edit):
            cases.append((tag, broken_copy(f, os.path.join(work, f"broken-{tag}.gguf"), **edit)))

        rewrite("no-final-norm", drop_tensor="dec.final_norm.bias")
        rewrite("short-final-norm", reshape="enc.final_norm.weight")
        rewrite("no-bos-key", drop_key="m2m_100.bos_id")
        rewrite("no-languages", drop_key="tokenizer.languages")
        rewrite("no-language-ids", drop_key="tokenizer.language_ids")
        rewrite("architecture", set_key=("general.architecture", "m2m_200"))
        want = {"no-final-norm": "tensor dec.final_norm.bias: missing",
                "short-final-norm": "tensor enc.final_norm.weight: shape",
                "no-bos-key": "m2m_100.bos_id", "no-languages": "tokenizer.languages",
                "no-language-ids": "tokenizer.language_ids", "architecture": "m2m_200"}
        for tag, path in cases:
            p = T.run_attend(["info", path], check=False)
            assert p.returncode == 3 and want[tag] in p.stderr, (tag, p.returncode, p.stderr)
        # the untouched rewrite loads: the failures above are the edits'
        rewrite("same")
        T.run_attend(["info", os.path.join(work, "broken-same.gguf")])

    run.check("broken m2m_100 files are refused, naming the key or tensor", broken_files)

    def exporter_refusals():
        hf, gguf, m, opts = models["relu-base"]
        bad = os.path.join(work, "bad-hf")
        for tag, edit, want in (
                ("activation", {"activation_function": "tanh"}, "activation_function = \"tanh\""),
                ("bad words", {"bad_words_ids": [[1]]}, "bad_words_ids"),
                ("heads", {"encoder_attention_heads": 5}, "encoder_attention_heads = 5")):
            p = export_edited(hf, bad, edit_config=edit)
            assert p.returncode == 2 and want in p.stderr, (tag, p.returncode, p.stderr)
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(hf, bad)
        for fname in ("tokenizer_config.json", "special_tokens_map.json"):
            os.remove(os.path.join(bad, fname))
        p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "export_m2m100.py"), bad, bad + ".gguf"],
                           capture_output=True, text=True)
        assert p.returncode == 2 and "--languages" in p.stderr, p.stderr
        # --languages gives the same file as the tokenizer's list
        p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "export_m2m100.py"), bad, bad + ".gguf", "--name",
                            "test", "--languages", ",".join(opts["langs"])], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        a, b = G_read_tensors(bad + ".gguf"), G_read_tensors(gguf)
        assert a == b
        # and from Python: attend.export(languages=...) writes the same bytes
        sys.path.insert(0, os.path.join(T.REPO, "python"))
        import attend
        for langs in (opts["langs"], ",".join(opts["langs"])):
            attend.export(bad, bad + "-py.gguf", dtype="f32", name="test", languages=langs)
            with open(bad + ".gguf", "rb") as f1, open(bad + "-py.gguf", "rb") as f2:
                assert f1.read() == f2.read()
        try:
            attend.export(bad, bad + "-py.gguf", name="test")
            raise AssertionError("attend.export without languages took a directory without them")
        except attend.AttendError as e:
            assert "--languages" in str(e), e

    run.check("the exporter refuses what it cannot run, naming key and value", exporter_refusals)

    def count_tokens_includes_language():
        sys.path.insert(0, os.path.join(T.REPO, "python"))
        import attend
        m = attend.Model(os.path.join(T.REPO, "tests", "data", "tiny-m2m.gguf"), threads=1)
        for line in ("Hallo Welt", "x", "ein etwas längerer Satz mit mehr Wörtern"):
            r = m.translate(line, src_lang="de", tgt_lang="en")
            n = m.count_tokens(line)
            assert n == len(r.src_ids), (line, n, r.src_tokens)

    run.check("count_tokens counts the source-language token", count_tokens_includes_language)
    shutil.rmtree(work, ignore_errors=True)
    run.finish()


def G_read_tensors(path):
    """The file's language keys and tensor bytes (what --languages must reproduce)."""
    import gguf_io as G
    f = G.GGUFFile(path)
    return (list(f.metadata["tokenizer.languages"]), list(map(int, f.metadata["tokenizer.language_ids"])),
            {k: v.tobytes() for k, v in f.tensors.items()})


if __name__ == "__main__":
    main()
