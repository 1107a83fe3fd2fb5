#!/usr/bin/python3
"""mBART-50: attend gives the reference's tokens, text, logits and attention on random models.

Each configuration goes through the user's path: random MBart weights (tools/reference_mbart.py's
independent implementation) saved as an HF-style directory (config.json with model_type
mbart, model.safetensors or pytorch_model.bin under HF's names, sentencepiece.bpe.model,
MBart50Tokenizer's tokenizer files) -> the exporter -> .gguf -> build/attend translate
--src-lang --tgt-lang --dump-attention --dump-logits, greedy and with 3 beams, on every kernel
set this CPU has. Ids and text must be identical, logits within 1e-3 and every attention
matrix within 1e-5 (f32), the first generated token the target language's. Then the
tokenizer on 200+ tricky lines against the reference MBart50Tokenizer, attend info, forced
decoding, position limits, f16/int8 exports and broken files of the family.
"""
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference_mbart as R  # noqa: E402  (the mBART-50 reference)
import test_m2m100 as M  # noqa: E402  (the multilingual families' checks)

N_SENTENCES = 8
BEAMS = 3
EOS_RATE = 0.08  # about this share of greedy steps should choose </s> (outputs of many lengths)

BASE = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_length=18,
            max_position_embeddings=128, scale_embedding=True, decoder_start_token_id=2,
            early_stopping=True, num_beams=5)

# name, config overrides, options: spm (which SentencePiece model), the pairs translated,
# weights file format, exporter, drop (config.json keys left out: MBartConfig's defaults
# apply), model_max_length of the tokenizer
CONFIGS = [
    ("gelu-base", dict(),
     dict(spm="small", pairs=[("de_DE", "en_XX"), ("en_XX", "fr_XX")], fmt="safetensors",
          exporter="export_marian.py", drop=["forced_eos_token_id", "activation_function"])),
    ("odd-d-relu", dict(d_model=45, encoder_layers=1, decoder_layers=2, encoder_attention_heads=5,
                        decoder_attention_heads=3, encoder_ffn_dim=90, decoder_ffn_dim=70,
                        activation_function="relu", scale_embedding=False, forced_eos_token_id=None,
                        length_penalty=1.3, early_stopping=False),
     dict(spm="large", pairs=[("en_XX", "de_DE")], fmt="bin", exporter="export_mbart.py")),
    ("swish-untied", dict(d_model=48, encoder_layers=3, decoder_layers=1, encoder_attention_heads=3,
                          decoder_attention_heads=6, encoder_ffn_dim=96, decoder_ffn_dim=80,
                          activation_function="silu", tie_word_embeddings=False, max_length=14),
     dict(spm="small", pairs=[("de_DE", "sl_SI")], fmt="safetensors", exporter="export_mbart.py")),
    ("short-positions", dict(max_position_embeddings=20, max_length=40, d_model=32,
                             encoder_attention_heads=2, decoder_attention_heads=8),
     dict(spm="large", pairs=[("ar_AR", "zh_CN")], fmt="safetensors", exporter="export_marian.py",
          long=True)),
]


def build_spms(work):
    """One SentencePiece model serves every language: two sizes, German and English, BPE as
    mBART's is."""
    lines = T.bilingual_lines()
    # SentencePiece's own defaults for character_coverage and seed_sentencepiece_size
    return {name: T.train_spm(work, name, lines, size, model_type="bpe", character_coverage=0.9995,
                              seed_sentencepiece_size=1000000)
            for name, size in (("small", 700), ("large", 1500))}


def sentences(lang, long=False):
    side = "de" if lang == "de_DE" else "en"
    s = T.corpus_lines("multi30k", side, 4, skip=20000) + T.corpus_lines("tatoeba", side, 2, skip=12000)
    s += ["Xylophonquartett 😀 Zzzz 12345 !!!", "ja de_DE <mask> nein"]
    if long:  # more tokens than the position table: the source is cut
        s[0] = " ".join(T.corpus_lines("tatoeba", side, 12, skip=100))
    return s[:N_SENTENCES]


def calibrate(m, sources, forced_bos, rate):
    """Make about `rate` of greedy steps choose </s>: its final_logits_bias moves by the
    margin quantile."""
    eos = m.config["eos_token_id"]
    for _ in range(2):
        delta = M.logit_gap(m, sources, forced_bos, eos, rate)
        with torch.no_grad():
            m.final_logits_bias[0, eos] += delta


def make_model(work, name, overrides, opts, spms, seed):
    spm = spms[opts["spm"]]
    cfg = dict(BASE, **overrides)
    tok = R.MBart50Tok(spm, max_len=min(1024, cfg["max_position_embeddings"]))
    cfg["vocab_size"] = tok.size
    m = R.mbart_random_model(cfg, seed=seed)
    m.tok = tok
    src_lang, tgt_lang = opts["pairs"][0]
    srcs = [tok.encode(s, src_lang) for s in T.corpus_lines("tatoeba", "de" if src_lang == "de_DE" else "en",
                                                              12, skip=500)]
    calibrate(m, srcs, tok.lang_id[tgt_lang], EOS_RATE)
    d = os.path.join(work, name)
    saved = {k: v for k, v in m.config.items() if k not in opts.get("drop", [])}
    with open(spm, "rb") as f:
        R.mbart_save_hf_dir(m, d, f.read(), fmt=opts["fmt"], config=saved, model_max_length=1024)
    return d, m


def tricky_lines():
    """Lines for the tokenizer: corpus text and the edge cases HF's rules decide."""
    lines = T.corpus_lines("multi30k", "de", 80, skip=1000) + T.corpus_lines("tatoeba", "en", 80, skip=3000)
    lines += ["", " ", "   \t  ", "\u3000", "\u00a0x\u00a0", "Ωμέγα ½ ✓ ∑ ∞", "😀", "🤖🤖 robots 🤖",
              "emoji👍inside", "日本語のテキスト", "ünïcödé çàfé", "Straße ﬁ ﬀ ①", "a\tb\tc",
              "de_DE", "en_XX Hello", "Hallo en_XX Welt", "xen_XXy", "en_XXen_XX", "EN_xx en_X en_XXX",
              "ar_AR sl_SI.", "<s>Hallo</s>", "a <mask> b", "a\u3000<mask>", "  <mask>", "<mask>   x",
              "x<mask>y", "<unk> <pad><pad>", "<mas k> <Mask>", "__de__ >>fr<<", "de_DE<mask>en_XX",
              "</s></s>", "Zahl 12345.678,90", "  leading and trailing  ", "multiple   spaces   here",
              "ponctuation !?;: « guillemets »", "it's don't we're I'm", "a . b , c ! d ?"]
    lines.append(" ".join(T.corpus_lines("tatoeba", "de", 150, skip=5000)))  # longer than the limit
    lines.append("x" * 3000)
    lines.append("de_DE " * 40)
    return lines


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
        gguf = M.export(hf, os.path.join(work, name + ".gguf"), opts["exporter"])
        models[name] = (hf, gguf, m, opts)
        M.check_parity(work, name, gguf, m, opts["pairs"], lambda lang: sentences(lang, opts.get("long", False)),
                       isas, stats, beams_list=(1, BEAMS), dump=R.mbart_dump,
                       max_src=m.config["max_position_embeddings"])

    for seed, (name, overrides, opts) in enumerate(CONFIGS):
        run.check(f"mbart parity {name}", one, name, overrides, opts, seed + 21)

    run.check("outputs end by </s> and by length", M.endings, stats)

    def tokenizer_parity():
        """attend's tokenizer and detokenizer against the reference MBart50Tokenizer: 200+
        lines (source ids, </s> last, cut to the limit), and decoding id lists that hold
        special tokens, language codes and <mask>."""
        sys.path.insert(0, os.path.join(T.REPO, "python"))
        import attend
        hf, gguf, m, opts = models["gelu-base"]
        tok = m.tok
        limit = min(1024, m.config["max_position_embeddings"])
        am = attend.Model(gguf, threads=1)
        lines = tricky_lines()
        assert len(lines) >= 200, len(lines)
        for line in lines:
            want = tok.tokens(line)[: limit - 1] + [tok.eos]
            got = am.tokenize(line).tolist()
            assert got == want, (line[:80], got[:40], want[:40])
        rng = np.random.default_rng(5)
        specials = [0, 1, 2, 3, tok.mask_id] + list(tok.lang_id.values())
        for k in range(300):
            ids = rng.integers(4, tok.size - 53, size=int(rng.integers(0, 25))).tolist()
            for _ in range(int(rng.integers(0, 4))):
                ids.insert(int(rng.integers(0, len(ids) + 1)), int(rng.choice(specials)))
            assert am.detokenize(ids) == tok.decode(ids), (ids, am.detokenize(ids), tok.decode(ids))
        # a line's own ids decode back the way HF's decode does
        for line in lines[:60]:
            ids = tok.tokens(line)
            assert am.detokenize(ids) == tok.decode(ids), line

    run.check("tokenizer: 200+ tricky lines and decoding as MBart50Tokenizer", tokenizer_parity)

    def info_and_errors():
        hf, gguf, m, opts = models["gelu-base"]
        out = T.run_attend(["info", gguf]).stdout
        assert "architecture        mbart" in out, out
        assert "languages           52: ar_AR cs_CZ de_DE" in out and "sl_SI" in out, out
        M.language_errors(gguf, ((["--tgt-lang", "en_XX"], "give --src-lang, one of: ar_AR"),
                                 (["--src-lang", "de_DE"], "give --tgt-lang, one of: ar_AR"),
                                 (["--src-lang", "de_DE", "--tgt-lang", "en"], "--tgt-lang 'en' is not a language")))

    run.check("attend info lists the 52 codes; language errors list them", info_and_errors)

    def forced_decoding():
        """attend align --target: [tgt_lang] pieces </s>, attention as the reference's
        teacher-forced attention."""
        hf, gguf, m, opts = models["gelu-base"]
        M.check_forced(work, gguf, m, "de_DE", "en_XX", "Ein Hund läuft.", "A dog runs <mask> fast.", dec_self=True)

    run.check("forced decoding (align --target) starts with the target language", forced_decoding)

    def words_skip_language_tokens():
        """Alignments and word views leave out the language tokens and </s> on both sides."""
        sys.path.insert(0, os.path.join(T.REPO, "python"))
        import attend
        hf, gguf, m, opts = models["gelu-base"]
        am = attend.Model(gguf, threads=1)
        r = am.score("Ein Hund läuft", "A dog runs", src_lang="de_DE", tgt_lang="en_XX")
        assert r.src_tokens[0] == "de_DE" and r.tgt_tokens[0] == "en_XX", (r.src_tokens, r.tgt_tokens)
        assert r.src_words == ["Ein", "Hund", "läuft"], r.src_words
        assert r.tgt_words == ["A", "dog", "runs"], r.tgt_words
        assert r.src_word_of[0] == -1 and r.src_word_of[-1] == -1 and r.tgt_word_of[0] == -1
        links = r.alignment()
        assert links and all(0 <= i < 3 and 0 <= j < 3 for i, j in links), links

    run.check("word views and alignments skip language tokens and </s>", words_skip_language_tokens)

    def position_limits():
        """A 20-position table: sources cut to 20 tokens, outputs at most 20 decoder
        positions (max_length 40 and --max-length 1000 are capped), a forced target longer
        than the table cut to 20 tokens ([tgt_lang] pieces </s>)."""
        hf, gguf, m, opts = models["short-positions"]
        npz = os.path.join(work, "long.npz")
        long = " ".join(T.corpus_lines("tatoeba", "en", 30, skip=200))
        T.run_attend(["translate", "-m", gguf, "--src-lang", "en_XX", "--tgt-lang", "de_DE", "--dump-attention",
                      npz, "--max-length", "1000", "--split", "none", long])
        eng = np.load(npz)
        assert len(eng["s0/src_ids"]) == 20 and eng["s0/src_ids"][-1] == 2, eng["s0/src_ids"]
        assert len(eng["s0/tgt_ids"]) <= 20, len(eng["s0/tgt_ids"])
        T.run_attend(["align", "-m", gguf, "--src-lang", "en_XX", "--tgt-lang", "de_DE", "--dump-attention", npz,
                      "Hallo", "--target", long])
        tgt = np.load(npz)["s0/tgt_ids"].tolist()
        assert len(tgt) == 20 and tgt[0] == m.tok.lang_id["de_DE"] and tgt[-1] == 2, tgt

    run.check("positions beyond the table: sources cut, generation capped", position_limits)

    def other_dtypes():
        """f16 and int8 exports of the same directory load, verify and translate; the f16
        file's greedy output matches the f32 file's on most sentences."""
        hf, gguf, m, opts = models["gelu-base"]
        lines = sentences("de_DE")
        outs = {}
        for dtype in ("f32", "f16", "int8"):
            path = gguf if dtype == "f32" else M.export(hf, os.path.join(work, f"gelu-{dtype}.gguf"),
                                                      "export_mbart.py", dtype)
            info = T.run_attend(["info", path]).stdout
            assert "mbart" in info and dtype in info, info
            T.run_attend(["verify", path])
            outs[dtype] = T.run_attend(["translate", "-m", path, "--src-lang", "de_DE", "--tgt-lang", "en_XX",
                                        "--beam", "1"], "\n".join(lines) + "\n").stdout.splitlines()
            assert len(outs[dtype]) == len(lines)
        same = sum(a == b for a, b in zip(outs["f32"], outs["f16"]))
        assert same >= len(lines) // 2, (same, outs)

    run.check("f16 and int8 exports load, verify and translate", other_dtypes)

    def broken_files():
        hf, gguf, m, opts = models["gelu-base"]
        import gguf_io as G
        f = G.GGUFFile(gguf)
        cases = []

        def rewrite(tag, **edit):
            cases.append((tag, M.broken_copy(f, os.path.join(work, f"broken-{tag}.gguf"), **edit)))

        want = {"no-positions": "tensor dec.embed_positions.weight: missing",
                "short-positions": "tensor enc.embed_positions.weight: shape",
                "no-embed-norm": "tensor enc.embed_norm.bias: missing",
                "no-final-norm": "tensor dec.final_norm.weight: missing",
                "no-bias": "tensor final_logits_bias: missing",
                "no-mask-key": "mbart.mask_id",
                "mask-outside": "mbart.mask_id",
                "no-languages": "tokenizer.languages",
                "architecture": "mbart50"}
        rewrite("no-positions", drop_tensor="dec.embed_positions.weight")
        rewrite("short-positions", reshape="enc.embed_positions.weight")
        rewrite("no-embed-norm", drop_tensor="enc.embed_norm.bias")
        rewrite("no-final-norm", drop_tensor="dec.final_norm.weight")
        rewrite("no-bias", drop_tensor="final_logits_bias")
        rewrite("no-mask-key", drop_key="mbart.mask_id")
        rewrite("mask-outside", set_key=("mbart.mask_id", m.config["vocab_size"]))
        rewrite("no-languages", drop_key="tokenizer.languages")
        rewrite("architecture", set_key=("general.architecture", "mbart50"))
        for tag, path in cases:
            p = T.run_attend(["info", path], check=False)
            assert p.returncode == 3 and want[tag] in p.stderr, (tag, p.returncode, p.stderr)
        rewrite("same")  # the untouched rewrite loads: the failures above are the edits'
        T.run_attend(["info", os.path.join(work, "broken-same.gguf")])

    run.check("broken mbart files are refused, naming the key or tensor", broken_files)

    def exporter_refusals():
        hf, gguf, m, opts = models["gelu-base"]
        bad = os.path.join(work, "bad-hf")
        for kw, want in ((dict(edit_config={"activation_function": "tanh"}), 'activation_function = "tanh"'),
                         (dict(edit_config={"encoder_attention_heads": 5}), "encoder_attention_heads = 5"),
                         (dict(edit_config={"vocab_size": m.config["vocab_size"] - 1}), "vocab_size"),
                         (dict(edit_config={"forced_eos_token_id": 7}), "forced_eos_token_id = 7"),
                         (dict(edit_config={"pad_token_id": 5}), "pad_token_id = 5"),
                         (dict(edit_tok={"tokenizer_class": "MBartTokenizer"}), 'tokenizer_class = "MBartTokenizer"'),
                         (dict(edit_tok={"additional_special_tokens": ["en_XX", "xx_YY"]}), '"xx_YY"'),
                         (dict(remove="sentencepiece.bpe.model"), "sentencepiece.bpe.model")):
            p = M.export_edited(hf, bad, **kw)
            assert p.returncode == 2 and want in p.stderr, (kw, p.returncode, p.stderr)

    run.check("the exporter refuses what it cannot run, naming key and value", exporter_refusals)
    shutil.rmtree(work, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
