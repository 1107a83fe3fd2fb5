#!/usr/bin/python3
"""--tgt-lang for Marian checkpoints with several target languages (opus-mt-en-mul, ...).

Such a model reads its target language as a `>>xx<<` code at the start of the source;
`--tgt-lang xx` (and the library's attend_params.tgt_lang) writes it there. A random
MarianMT whose vocabulary holds `>>deu<<` and `>>fra<<` (exported like any checkpoint):
`--tgt-lang fra` gives exactly what the same lines with `>>fra<< ` typed first give (a
blank line stays blank); an
unknown code is refused, naming the codes the model has; a model without codes says it
translates into one language; `--src-lang` stays refused for Marian.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "tools"))


def build(d):
    import reference as R
    sspm = T.train_spm(d, "src", T.corpus_lines("tatoeba", "de", 1000), 400)
    tspm = T.train_spm(d, "tgt", T.corpus_lines("tatoeba", "en", 1000), 400)
    vocab = R.build_vocab(sspm, tspm)
    pad = vocab.pop("<pad>")
    vocab[">>deu<<"], vocab[">>fra<<"] = pad, pad + 1
    vocab["<pad>"] = pad = len(vocab)
    cfg = dict(vocab_size=len(vocab), decoder_vocab_size=len(vocab), pad_token_id=pad, decoder_start_token_id=pad,
               bad_words_ids=[[pad]], d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=12)
    m = R.random_model(cfg, seed=5, bias_std=0.5, gain=1.5)
    hf = os.path.join(d, "mul")
    R.save_hf_dir(m, hf, open(sspm, "rb").read(), open(tspm, "rb").read(), vocab)
    return T.export(hf, hf + ".gguf")


def main():
    r = T.Runner()
    d = T.tempdir()
    model = build(d)
    lines = T.corpus_lines("tatoeba", "de", 12, skip=5000) + ["", "  Hallo  "]
    text = "\n".join(lines) + "\n"

    def same_as_typed():
        for code in ("fra", "deu"):
            got = T.run_attend(["translate", "-m", model, "-t", "1", "--tgt-lang", code], text).stdout
            # a blank line stays blank (one line in, one line out): only the others get the code
            typed = "\n".join(f">>{code}<< {s}" if s.strip() else s for s in lines) + "\n"
            want = T.run_attend(["translate", "-m", model, "-t", "1"], typed).stdout
            assert got == want, (code, got, want)
            assert got.split("\n")[lines.index("")] == "", got
        fra = T.run_attend(["translate", "-m", model, "-t", "1", "--tgt-lang", "fra"], text).stdout
        plain = T.run_attend(["translate", "-m", model, "-t", "1"], text).stdout
        assert fra != plain, "the code changed nothing: is it read at all?"
    r.check("--tgt-lang xx = the same lines with >>xx<< typed first", same_as_typed)

    def unknown_code():
        p = T.run_attend(["translate", "-m", model, "--tgt-lang", "spa"], "Hallo\n", check=False)
        assert p.returncode != 0 and ">>spa<<" in p.stderr and "deu, fra" in p.stderr, (p.returncode, p.stderr)
        p = T.run_attend(["translate", "-m", os.path.join(T.REPO, "tests", "data", "tiny-v1.gguf"),
                          "--tgt-lang", "fra"], "Hallo\n", check=False)
        assert p.returncode != 0 and "one language" in p.stderr, (p.returncode, p.stderr)
        p = T.run_attend(["translate", "-m", model, "--src-lang", "deu", "--tgt-lang", "fra"], "Hallo\n",
                         check=False)
        assert p.returncode == 2 and "--src-lang" in p.stderr, (p.returncode, p.stderr)
    r.check("unknown codes and --src-lang are refused, naming the codes the model has", unknown_code)
    shutil.rmtree(d, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
