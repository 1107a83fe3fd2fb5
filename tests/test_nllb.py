#!/usr/bin/python3
"""NLLB-200: attend reproduces transformers' NllbTokenizer and the model on random NLLB-shaped
checkpoints.

transformers is not installed here: the reference is the project's own, written from HF's
rules (tools/reference_m2m100.py: the M2M100 model, NllbTok, M2MTok). Everything goes through
the user's path: an HF-style NLLB directory (config.json model_type m2m_100 with
tokenizer_class NllbTokenizer, model.safetensors or pytorch_model.bin, sentencepiece.bpe.model,
tokenizer files in the layouts transformers writes; no vocab.json) -> the exporter -> .gguf ->
attend.

- tokenizer parity on >= 200 lines (empty, whitespace, unknown characters, emoji, very long
  lines, language codes and special tokens typed in the text): ids, and text back from ids,
  identical to NllbTok; the same lines through an M2M-100 file against M2MTok;
- model parity on 4 random configurations (test_m2m100's check_parity: greedy and beams,
  every kernel set, ids and text identical, logits within 1e-3, attention within 1e-5);
- attend info and the language errors; broken NLLB directories refused by the exporter
  naming the key and value; broken tokenizer.class keys refused by attend.
"""
import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference_m2m100 as R  # noqa: E402
import test_m2m100 as M  # noqa: E402  (check_parity, calibrate, export)
from nllb_languages import FAIRSEQ_LANGUAGE_CODES as CODES  # noqa: E402

BASE = dict(M.BASE)

# name, config overrides, options: spm, languages (None: NllbTokenizer's 202), ids (None: the
# default order; "reversed": recorded ids in reverse order), tokenizer layout, pairs,
# unpieced ids after <mask>, weights format, exporter, tokenizer class, boost (as test_m2m100)
CONFIGS = [
    ("nllb-202", dict(),
     dict(spm="small", langs=None, ids=None, style="decoder", pairs=[("deu_Latn", "eng_Latn"),
                                                                     ("eng_Latn", "fra_Latn")],
          unpieced=2, fmt="safetensors", exporter="export_marian.py", cls="NllbTokenizer",
          boost=[(-1, 0.03), ("mask", 0.03)])),
    ("odd-d-fast", dict(d_model=45, encoder_layers=1, decoder_layers=2, encoder_attention_heads=5,
                        decoder_attention_heads=3, encoder_ffn_dim=90, decoder_ffn_dim=70,
                        scale_embedding=False, max_length=18),
     dict(spm="small", langs=["deu_Latn", "eng_Latn", "zho_Hans"], ids=None, style="map",
          pairs=[("deu_Latn", "eng_Latn")], unpieced=0, fmt="safetensors", exporter="export_m2m100.py",
          cls="NllbTokenizerFast", boost=[(1, 0.04)])),
    ("gelu-bin-default", dict(d_model=48, encoder_layers=3, decoder_layers=1, encoder_attention_heads=3,
                              decoder_attention_heads=6, encoder_ffn_dim=96, decoder_ffn_dim=80,
                              activation_function="gelu", max_length=16),
     dict(spm="large", langs=None, ids=None, style="default", pairs=[("eng_Latn", "deu_Latn")], unpieced=1,
          fmt="bin", exporter="export_m2m100.py", cls="NllbTokenizer")),
    ("wide-reordered", dict(d_model=96, encoder_attention_heads=8, decoder_attention_heads=12,
                            encoder_ffn_dim=192, decoder_ffn_dim=160, forced_eos_token_id=2, max_length=14),
     dict(spm="large", langs=["eng_Latn", "deu_Latn", "fra_Latn", "myv_Cyrl"], ids="reversed", style="decoder",
          pairs=[("deu_Latn", "eng_Latn"), ("eng_Latn", "myv_Cyrl")], unpieced=3, fmt="safetensors",
          exporter="export_marian.py", cls="NllbTokenizer")),
]


def build_spms(work):
    """NLLB's sentencepiece.bpe.model is a BPE model: two sizes, German and English."""
    lines = T.bilingual_lines()
    return {"small": T.train_spm(work, "nllb-small", lines, 700, model_type="bpe"),
            "large": T.train_spm(work, "nllb-large", lines, 1500, model_type="bpe")}


def sentences(lang):
    side = "de" if lang == "deu_Latn" else "en"
    s = T.corpus_lines("multi30k", side, 5, skip=20000) + T.corpus_lines("tatoeba", side, 4, skip=12000)
    s += ["Hallo eng_Latn Welt <mask> und <s> zurück", "Xylophonquartett 😀 Zzzz 12345 !!!", "ja"]
    return s


def make_tok(spm, langs, ids, unpieced_after=0):
    """NllbTok for the config; with ids "reversed", the codes' ids run backwards."""
    import sentencepiece
    n = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    codes = list(CODES) if langs is None else list(langs)
    lang_ids = None
    if ids == "reversed":
        lang_ids = {c: n + len(codes) - i for i, c in enumerate(codes)}
    tok = R.NllbTok(spm, codes, lang_ids=lang_ids, max_len=1024)
    V = n + 1 + len(codes) + 1 + unpieced_after
    return tok, V


def make_model(work, name, overrides, opts, spms, seed):
    spm = spms[opts["spm"]]
    tok, V = make_tok(spm, opts["langs"], opts["ids"], opts["unpieced"])
    cfg = dict(BASE, **overrides)
    cfg["vocab_size"] = V
    m = R.m2m_random_model(cfg, seed=seed)
    m.tok = tok
    src_lang, tgt_lang = opts["pairs"][0]
    srcs = [tok.encode(s, src_lang) for s in T.corpus_lines("tatoeba", "de" if src_lang == "deu_Latn" else "en",
                                                             16, skip=500)]
    for token, rate in opts.get("boost", []):
        token = tok.mask_id if token == "mask" else token if token >= 0 else V + token
        M.calibrate(m, srcs, tok.lang_id[tgt_lang], token, rate, rounds=1)
    M.calibrate(m, srcs, tok.lang_id[tgt_lang], m.config["eos_token_id"], M.EOS_RATE)
    d = os.path.join(work, name)
    with open(spm, "rb") as f:
        R.nllb_save_hf_dir(m, d, f.read(), tok, style=opts["style"], fmt=opts["fmt"], tokenizer_class=opts["cls"])
    return d, m


def tokenizer_lines():
    """>= 200 lines: corpus sentences and the tricky ones."""
    corpus = T.corpus_lines("tatoeba", "de", 60, skip=12500) + T.corpus_lines("tatoeba", "en", 60, skip=12500) + \
        T.corpus_lines("multi30k", "de", 20, skip=20500) + T.corpus_lines("multi30k", "en", 20, skip=20500)
    tricky = [
        "", " ", "  ", "\t", " \t \u3000 ", "\u00a0", "\u3000x\u3000", "a\tb\nc", "a\u2028b",
        "Ωμέγα ψ", "中文字符和日本語", "ʕ•ᴥ•ʔ", "\x07bell\x1b", "Ü ä ß ẞ ﬁ ｆｕｌｌ", "\u200b\u200d", "ü\u0308",
        "😀", "I ❤️ NY 🗽", "👩‍👩‍👧‍👦 family", "🇩🇪🇬🇧", "emoji😀inside", "🙂🙃" * 20,
        "deu_Latn", "deu_Latn Hallo", "Hallo deu_Latn", "Hallo deu_Latn Welt", "deu_Latndeu_Latn",
        "xdeu_Latny", "DEU_LATN deu_latn", "eng_Latn. zul_Latn!", "ace_Arab zho_Hant yue_Hant", "  eng_Latn  ",
        "<s>", "</s>", "<pad>", "<unk>", "<mask>", "a <mask> b", "a   <mask>", "a\u3000<mask>b", "  <mask>  ",
        "<mask><mask> <mask>", "deu_Latn<mask>", "x </s> y", "<s>Hallo</s>", "<pad><unk><s></s>",
        "< s>", "<s >", "<<s>>", "</s", "<mask", "mask>", "__de__", "Hallo __en__ Welt", "__fr__x", "__de",
        ">>de<< Hallo", "myv_Cyrl", "Ein Haus ▁ mit ▁▁ Strichen", "▁", "▁▁▁",
        "Hello , world . What ' s up ?", "can 't won 't I 'm", " leading", "trailing ", "  both  ",
        "1234567890", "!!!???...,,,", "a" * 300, "x " * 200,
    ]
    long_de = " ".join(T.corpus_lines("multi30k", "de", 400, skip=21000))
    long_lines = [long_de[:3000], long_de[:20000], "Ein Haus. " * 600, "a" * 6000, "deu_Latn " * 500,
                  "😀" * 3000, ("Wort " * 50 + "<mask> ") * 30, " " * 5000 + "x"]
    lines = corpus + tricky + long_lines
    assert len(lines) >= 200, len(lines)
    return lines


def main():
    run = T.Runner()
    work = T.tempdir()
    spms = build_spms(work)
    isas = T.available_isas()
    sys.path.insert(0, os.path.join(T.REPO, "python"))
    import attend
    lines = tokenizer_lines()
    print(f"kernel sets: {' '.join(isas)}; {len(CONFIGS)} configurations; {len(lines)} tokenizer lines")
    models = {}

    def tokenizer_parity(kind):
        """ids of every line (attend's tokenize, then the source-language token through
        translate) and the text back from ids (those ids, and random id sequences holding
        every kind of special id) as the reference."""
        if kind == "nllb":
            tok, V = make_tok(spms["small"], None, None, unpieced_after=2)
            hf = os.path.join(work, "tok-nllb")
            cfg = dict(BASE, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, vocab_size=V,
                       max_position_embeddings=400, max_length=3)
            m = R.m2m_random_model(cfg, seed=5)
            with open(spms["small"], "rb") as f:
                R.nllb_save_hf_dir(m, hf, f.read(), tok)
            langs = ("deu_Latn", "eng_Latn")
        else:
            vocab = R.m2m_build_vocab(spms["small"])
            codes = ["de", "en", "fr"]
            V = len(vocab) + len(codes) + 3
            cfg = dict(BASE, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, vocab_size=V,
                       max_position_embeddings=400, max_length=3)
            m = R.m2m_random_model(cfg, seed=6)
            tok = R.M2MTok(spms["small"], vocab, codes)
            hf = os.path.join(work, "tok-m2m")
            with open(spms["small"], "rb") as f:
                R.m2m_save_hf_dir(m, hf, f.read(), vocab, codes, model_max_length=1024)
            langs = ("de", "en")
        gguf = M.export(hf, hf + ".gguf", "export_m2m100.py")
        limit = 400  # min(model_max_length 1024, max_position_embeddings)
        tok.max_len = limit
        am = attend.Model(gguf, threads=1)
        texts_checked = 0
        for line in lines:
            # attend_tokenize: the pieces and </s>, cut to model_max_length, no language token
            want = tok.tokens(line)[:limit - 1] + [tok.eos]
            got = am.tokenize(line).tolist()
            assert got == want, (line[:60], len(got), len(want), got[:20], want[:20])
            want = tok.encode(line, langs[0])
            t_got, t_want = am.detokenize(want), tok.decode(want)
            assert t_got == t_want, (line[:60], t_got[:80], t_want[:80])
            texts_checked += 1
        # the source-language token first, through translate (what the model sees)
        for line in [s for s in lines if s.strip()][:40] + lines[-8:]:
            r = am.translate(line, src_lang=langs[0], tgt_lang=langs[1], split=False)
            assert list(r.src_ids) == tok.encode(line, langs[0]), line
        rng = random.Random(7)
        special = sorted(tok.specials) + list(range(V - 3, V))
        for k in range(300):
            ids = [rng.choice(special) if rng.random() < 0.3 else rng.randrange(V) for _ in range(rng.randrange(0, 30))]
            t_got, t_want = am.detokenize(ids), tok.decode(ids)
            assert t_got == t_want, (ids, t_got, t_want)
        print(f"   {kind}: {len(lines)} lines, {texts_checked} texts and 300 random id sequences identical")

    run.check("NllbTokenizer parity: ids and text, >= 200 tricky lines", tokenizer_parity, "nllb")
    run.check("M2M100Tokenizer parity on the same lines", tokenizer_parity, "m2m")

    stats = []

    def one(name, overrides, opts, seed):
        hf, m = make_model(work, name, overrides, opts, spms, seed)
        gguf = M.export(hf, os.path.join(work, name + ".gguf"), opts["exporter"])
        models[name] = (hf, gguf, m, opts)
        M.check_parity(work, name, gguf, m, opts["pairs"], sentences, isas, stats)

    for seed, (name, overrides, opts) in enumerate(CONFIGS):
        run.check(f"nllb parity {name}", one, name, overrides, opts, seed + 31)

    def outputs():
        by_eos = sum(s[2] == 2 for s in stats)
        special = 0
        for name, _, _, ids in stats:
            m = models[name][2]
            special += any(i == m.tok.mask_id or i >= m.tok.mask_id + 1 or i == 1 for i in ids)
        print(f"   {len(stats)} outputs: {by_eos} end by </s>; {special} hold <pad>, <mask> or an id without a piece")
        assert 0 < by_eos < len(stats) and special

    run.check("outputs end both ways and hold <pad>, <mask> or unpieced ids", outputs)

    def info_and_errors():
        hf, gguf, m, opts = models["nllb-202"]
        out = T.run_attend(["info", gguf]).stdout
        assert "architecture        m2m_100" in out, out
        assert "languages           202: ace_Arab ace_Latn" in out and " zul_Latn\n" in out, out
        p = T.run_attend(["translate", "-m", gguf, "--src-lang", "deu_Latn", "--tgt-lang", "de", "Hallo"],
                         check=False)
        assert p.returncode == 2 and "--tgt-lang 'de' is not a language" in p.stderr and "deu_Latn" in p.stderr, \
            p.stderr
        from gguf_io import GGUFFile
        f = GGUFFile(gguf)
        assert f.metadata["tokenizer.class"] == "NllbTokenizer"
        assert list(map(int, f.metadata["tokenizer.language_ids"])) == [m.tok.lang_id[c] for c in CODES]
        hf, gguf, m, opts = models["wide-reordered"]
        f = GGUFFile(gguf)
        assert list(f.metadata["tokenizer.languages"]) == opts["langs"]
        assert list(map(int, f.metadata["tokenizer.language_ids"])) == [m.tok.lang_id[c] for c in opts["langs"]]

    run.check("attend info lists the NLLB codes; the file records NllbTokenizer's ids", info_and_errors)

    def exporter_refusals():
        hf = models["odd-d-fast"][0]
        bad = os.path.join(work, "bad-nllb")
        n_spm = models["odd-d-fast"][2].tok.n_spm

        def case(tag, edit, want):
            shutil.rmtree(bad, ignore_errors=True)
            shutil.copytree(hf, bad)
            for e in edit if isinstance(edit, list) else [edit]:
                e(bad)
            p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "export_marian.py"), bad, bad + ".gguf"],
                               capture_output=True, text=True)
            assert p.returncode == 2 and want in p.stderr and p.stderr.count("\n") == 1, \
                (tag, p.returncode, p.stderr)

        def js(fname, fn):
            def edit(d):
                path = os.path.join(d, fname)
                with open(path) as fh:
                    c = json.load(fh)
                fn(c)
                with open(path, "w") as fh:
                    json.dump(c, fh)
            return edit

        def write(fname, data):
            def edit(d):
                with open(os.path.join(d, fname), "wb") as fh:
                    fh.write(data)
            return edit

        def decoder(extra, ids=None):
            """added_tokens_decoder: the codes at their ids (or ids), then extra."""
            ids = ids or [n_spm + 1, n_spm + 2, n_spm + 3]
            dec = {str(i): {"content": x, "special": True} for i, x in zip(ids, ["deu_Latn", "eng_Latn", "zho_Hans"])}
            return js("tokenizer_config.json", lambda c: c.update(added_tokens_decoder={**dec, **extra}))
        case("no spm", lambda d: os.remove(os.path.join(d, "sentencepiece.bpe.model")),
             "missing file")
        case("garbage spm", write("sentencepiece.bpe.model", b"\x0a\xff\xff\xff"), "not a SentencePiece model")
        case("tokenizer class", js("tokenizer_config.json", lambda c: c.update(tokenizer_class="BertTokenizer")),
             'tokenizer_class = "BertTokenizer"')
        case("legacy", js("tokenizer_config.json", lambda c: c.update(legacy_behaviour=True)),
             "legacy_behaviour = true")
        case("sp kwargs", js("tokenizer_config.json", lambda c: c.update(sp_model_kwargs={"enable_sampling": True})),
             "sp_model_kwargs")
        case("vocab", js("config.json", lambda c: c.update(vocab_size=n_spm)), f"vocab_size = {n_spm}")
        case("twice", js("special_tokens_map.json", lambda c: c.update(
            additional_special_tokens=["deu_Latn", "eng_Latn", "deu_Latn"])), "appears twice")
        case("mask listed", js("special_tokens_map.json", lambda c: c.update(
            additional_special_tokens=["deu_Latn", "<mask>"])), '"<mask>" is a special token')
        case("id out of range", js("config.json", lambda c: c.update(vocab_size=n_spm + 2)),
             f"vocab_size = {n_spm + 2}, but language code eng_Latn has id {n_spm + 2}")
        case("id on a piece", decoder({}, ids=[n_spm + 1, 7, n_spm + 3]),
             "the id of SentencePiece piece")
        case("special moved", decoder({"5": {"content": "<s>", "special": True}}), "<s> has id 5, not 0")
        case("foreign token", decoder({str(n_spm + 9): {"content": "<special>", "special": True}}),
             '"<special>" (id')
        case("same id", write("tokenizer.json", json.dumps({"added_tokens": [
            {"id": n_spm + 1, "content": c} for c in ("deu_Latn", "eng_Latn", "zho_Hans")]}).encode()),
            "have the same id")
        case("partly recorded", js("tokenizer_config.json", lambda c: c.update(
            added_tokens_decoder={str(n_spm + 1): {"content": "deu_Latn", "special": True}})),
            "records ids for 1 of the 3 language codes")
        case("mask no lstrip", decoder({str(n_spm + 4): {"content": "<mask>", "lstrip": False, "special": True}}),
             "<mask>")
        case("not special", decoder({str(n_spm + 2): {"content": "eng_Latn", "special": False}}),
             "eng_Latn")
        case("decoder not an object", js("tokenizer_config.json", lambda c: c.update(added_tokens_decoder=[1])),
             "added_tokens_decoder is not an object")
        case("lstrip code", js("special_tokens_map.json", lambda c: c.update(
            additional_special_tokens=[{"content": "deu_Latn", "lstrip": True}])), "lstrip")
        case("disagreeing records", [decoder({}), write("added_tokens.json", json.dumps({"deu_Latn": 3}).encode())],
             "deu_Latn has id 3, but tokenizer_config.json added_tokens_decoder gives it")
        # --languages replaces the directory's list
        p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "export_m2m100.py"), hf, bad + ".gguf",
                            "--languages", "deu_Latn,eng_Latn"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        out = T.run_attend(["info", bad + ".gguf"]).stdout
        assert "languages           2: deu_Latn eng_Latn" in out, out

    run.check("broken NLLB directories are refused, naming the key and value", exporter_refusals)

    def broken_files():
        import gguf_io as G
        hf, gguf, m, opts = models["odd-d-fast"]
        f = G.GGUFFile(gguf)

        def rewrite(tag, key, typ, value, src=f):
            meta = [(k, src.types[k][0] if isinstance(src.types[k], tuple) else src.types[k],
                     (src.types[k][1], v) if isinstance(src.types[k], tuple) else v)
                    for k, v in src.metadata.items() if k not in (key, G.CRC_KEY, G.META_CRC_KEY)]
            if typ is not None:
                meta.append((key, typ, value))
            path = os.path.join(work, f"broken-{tag}.gguf")
            G.write(path, meta, [(n, a, G.GGML_F32) for n, a in src.tensors.items()])
            return path

        for tag, typ, value, want in (("class", G.STRING, "T5Tokenizer", "key tokenizer.class: 'T5Tokenizer'"),
                                      ("class-type", G.UINT32, 3, "key tokenizer.class: expected string")):
            p = T.run_attend(["info", rewrite(tag, "tokenizer.class", typ, value)], check=False)
            assert p.returncode == 3 and want in p.stderr, (tag, p.returncode, p.stderr)
        # without the key the file is read as M2M100Tokenizer's: it loads
        T.run_attend(["info", rewrite("no-class", "tokenizer.class", None, None)])
        os.makedirs(os.path.join(work, "marian"), exist_ok=True)
        mf = G.GGUFFile(T.random_gguf(os.path.join(work, "marian")))
        p = T.run_attend(["info", rewrite("marian-nllb", "tokenizer.class", G.STRING, "NllbTokenizer", src=mf)],
                         check=False)
        assert p.returncode == 3 and "for marian (MarianTokenizer)" in p.stderr, p.stderr

    run.check("broken tokenizer.class keys are refused", broken_files)
    shutil.rmtree(work, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
