#!/usr/bin/python3
"""Batched translation gives exactly what one-by-one translation gives: attend translate
with --batch-size 1 (and a process per line), 3 and 64, and --batch-tokens (sorted chunks, finished sentences leaving the batch, outputs
back in input order, blank lines kept), on every kernel set this CPU has, for f32, f16 and
int8 exports of a small random model (int8 on AMX CPUs also with ATTEND_AMX=0). Also: the
f32 output equals the PyTorch reference. Each line is one sequence here (--split none), as
the reference translates it; tests/test_paragraphs.py batches split lines."""
import os
import shutil
import subprocess

import testlib as T
import reference as R


def build(work):
    src = T.train_spm(work, "src", T.corpus_lines("tatoeba", "de", 3000), 1000)
    tgt = T.train_spm(work, "tgt", T.corpus_lines("tatoeba", "en", 3000), 1000)
    vocab = R.build_vocab(src, tgt)
    pad = vocab["<pad>"]
    cfg = {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
           "max_length": 30, "vocab_size": len(vocab), "decoder_vocab_size": len(vocab),
           "pad_token_id": pad, "decoder_start_token_id": pad, "bad_words_ids": [[pad]]}
    m = R.random_model(cfg, seed=3, bias_std=1.0)
    m.tok = R.MarianTok(src, tgt, vocab)
    # outputs of many lengths: some end at once, some run to max_length
    R.calibrate_eos(m, [m.tok.encode(s) for s in T.corpus_lines("tatoeba", "de", 20)], 0.08)
    hf = os.path.join(work, "hf")
    R.save_hf_dir(m, hf, open(src, "rb").read(), open(tgt, "rb").read(), vocab)
    models = {dt: T.export(hf, os.path.join(work, f"m-{dt}.gguf"), dt) for dt in ("f32", "f16", "int8")}
    return m, models


def check_batch_log(stderr, opts, n_sentences):
    """The -v lines: every sentence in exactly one batch, each batch within the
    --batch-tokens budget (a sentence longer than it goes alone) and the -b limit, the
    batches of one chunk in order of length, each filled as far as the budget allows."""
    budget = int(opts[opts.index("--batch-tokens") + 1])
    limit = int(opts[opts.index("-b") + 1]) if "-b" in opts else None
    chunks = []  # per chunk of lines read: its batches (sentences, tokens, shortest, longest)
    for line in stderr.splitlines():
        w = line.replace(",", "").split()
        if " to translate" in line:
            chunks.append([])
        elif line.startswith("attend: batch of "):
            n, tokens = int(w[3]), int(w[5])
            shortest, longest = map(int, w[-1].split("-"))
            assert n == 1 or tokens <= budget, f"over budget {budget}: {line}"
            assert limit is None or n <= limit, f"over -b {limit}: {line}"
            assert shortest <= longest and longest + shortest * (n - 1) <= tokens <= longest * n, line
            chunks[-1].append((n, tokens, shortest, longest))
    assert sum(b[0] for batches in chunks for b in batches) == n_sentences, \
        f"{chunks} for {n_sentences} sentences"
    assert sum(len(b) for b in chunks) > len(chunks), "the budget should split this input"
    for batches in chunks:
        for a, b in zip(batches, batches[1:]):
            assert a[3] <= b[2], f"batches not sorted by length: {batches}"
            if limit is None:  # greedy: a batch stopped only because the next sentence did not fit
                assert a[1] + b[2] > budget, f"batch {a} could have taken the next sentence ({b[2]} tokens)"


def main():
    r = T.Runner()
    work = T.tempdir()
    try:
        m, models = build(work)
        lines = T.corpus_lines("tatoeba", "de", 50, skip=100)
        # blank lines and a repeated sentence in the middle: both must stay in place
        lines[5] = ""
        lines[40] = "   "
        lines[41] = lines[7]
        text = "\n".join(lines) + "\n"
        ref = [m.tok.decode(R.greedy(m, m.tok.encode(s)).ids) if s.strip() else "" for s in lines]

        def one_by_one(model, isa):
            """A process per line for the first kernel set; --batch-size 1 (each sentence alone
            in its batch, one process) for the others, which is checked against it too."""
            if isa != isas[0]:
                p = T.run_attend(["translate", "--split", "none", "-m", model, "-b", "1", "-t", "1"], text, env={"ATTEND_ISA": isa})
                return p.stdout.split("\n")[:-1]
            outs = []
            for s in lines:
                p = T.run_attend(["translate", "--split", "none", "-m", model, "-t", "1"], s + "\n", env={"ATTEND_ISA": isa})
                outs.append(p.stdout.rstrip("\n"))
            return outs

        isas = T.available_isas()
        for isa in isas:
            for dt, model in models.items():
                base = {}

                def check_single(dt=dt, model=model, isa=isa, base=base):
                    base["out"] = one_by_one(model, isa)
                    assert len(base["out"]) == len(lines)
                    if dt == "f32":
                        bad = [i for i, (a, b) in enumerate(zip(base["out"], ref)) if a != b]
                        assert not bad, f"lines {bad[:5]} differ from the reference"
                r.check(f"{isa} {dt}: one by one" + (" = reference" if dt == "f32" else ""), check_single)
                for bs in (3, 64):
                    def check_batch(bs=bs, model=model, isa=isa, base=base):
                        p = T.run_attend(["translate", "--split", "none", "-m", model, "-b", str(bs), "-t", "2"], text,
                                         env={"ATTEND_ISA": isa})
                        got = p.stdout.split("\n")[:-1]
                        assert len(got) == len(lines), f"{len(got)} lines out for {len(lines)} in"
                        bad = [i for i, (a, b) in enumerate(zip(got, base["out"])) if a != b]
                        assert not bad, f"batch {bs}: lines {bad[:5]} differ from one-by-one"
                    r.check(f"{isa} {dt}: --batch-size {bs} = one by one", check_batch)
                for opts in (["--batch-tokens", "60"], ["--batch-tokens", "200", "-b", "4"]):
                    def check_tokens(opts=opts, model=model, isa=isa, base=base):
                        p = T.run_attend(["translate", "--split", "none", "-m", model, "-v", "-t", "2"] + opts, text,
                                         env={"ATTEND_ISA": isa})
                        got = p.stdout.split("\n")[:-1]
                        assert got == base["out"], "output differs from one-by-one"
                        check_batch_log(p.stderr, opts, sum(1 for s in lines if s.strip()))
                    r.check(f"{isa} {dt}: {' '.join(opts)} = one by one, limits kept", check_tokens)
                amx = "int8: amx" in T.run_attend(["isa"], "", env={"ATTEND_ISA": isa}).stdout
                if dt == "int8" and amx:
                    def check_no_amx(model=model, isa=isa, base=base):
                        p = T.run_attend(["translate", "--split", "none", "-m", model, "-b", "64", "-t", "2"], text,
                                         env={"ATTEND_ISA": isa, "ATTEND_AMX": "0"})
                        assert p.stdout.split("\n")[:-1] == base["out"], "without AMX the output differs"
                    r.check(f"{isa} int8: ATTEND_AMX=0 (the VNNI GEMM at batch 64) = one by one with AMX",
                            check_no_amx)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
