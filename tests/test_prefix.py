#!/usr/bin/python3
"""Prefix-constrained decoding and n-best hypotheses with their own attention.

Random Marian models (tests/test_beam.py's shapes: forced EOS on and off, a separate target
vocabulary) exported to .gguf and translated through the Python package
(Model.translate(target_prefix=...)) against tools/reference.py's greedy and beam search
given the same prefix (HF's generate(decoder_input_ids=[start, *prefix]): the prefix is
prompt, scores and length penalties count only what follows):

- greedy and beams (2-4 beams, length penalties 0.6 / 1.0 / 1.4, early stopping true /
  false / never, min_length, no_repeat_ngram_size, n-best 1-3): identical ids for every
  n-best entry, scores within 1e-4; prefixes of one piece, of several, the reference's own
  whole translation (a prefix after which </s> is the likely next token), and one per line;
- an empty prefix (and None entries) gives the same Result, bit for bit, as no prefix;
- a prefix too long for max_length fails its line only (Result.error); samples start with
  the prefix and their scores leave its log-probabilities out;
- n-best 3 with attention: each hypothesis's per-token log-probabilities and every
  attention matrix equal forced decoding of its ids by the reference (log-probs 1e-4,
  attention 1e-5, the parity tolerances), and the engine's own forced decoding
  (Model.score, where its text re-tokenizes into the same ids) within 1e-5 / 1e-6: the
  beam's log-probability is the raw logit minus the step's log-sum-exp, forced decoding's a
  log-softmax of the same floats, so they may differ in the last bits;
- attend translate --prefix / --prefix-file equal the Python results; the refusals;
  --n-best with --alignment and --dump-attention give each hypothesis's own;
- M2M-100: the target-language token stays forced first, the prefix after it (HF's
  decoder_input_ids = [start, lang, *prefix], tools/reference_m2m100.py), greedy and beams;
  attend_translate_ids with target_prefix_ids gives the same.

Run: /usr/bin/python3 tests/test_prefix.py"""
import ctypes
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402
import test_parity as P  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402

SCORE_TOL = 1e-4   # sequence scores and reference log-probs (as tests/test_beam.py)
ATT_TOL = 1e-5     # attention against the reference (as tests/test_parity.py)
SELF_ATT_TOL = 1e-6
SELF_LP_TOL = 1e-5
TIE_GAP = 1e-4     # a reference decision this close may go the other way in float32
N_SENT = 8

BASE = dict(P.BASE, max_length=16)
MODELS = [  # name, config overrides, extra </s> bias, seed, make_model options
    ("forced", dict(), 0.0, 11, {}),
    ("no-forced-eos", dict(d_model=48, encoder_attention_heads=3, decoder_attention_heads=2,
                           forced_eos_token_id=None, max_length=12), 1.0, 12, {}),
    ("separate-vocab", dict(d_model=32, encoder_layers=1, decoder_layers=3, decoder_attention_heads=2,
                            activation_function="relu", share_encoder_decoder_embeddings=False,
                            tie_word_embeddings=False, max_length=14), 0.5, 14, dict(separate_vocab=True)),
]
# beams, length_penalty, early_stopping, n_best, reference kwargs (and translate's)
BEAMS = [
    (2, 1.0, False, 1, {}),
    (3, 0.6, True, 2, {}),
    (4, 1.4, "never", 3, {}),
    (3, 1.0, False, 2, {"min_length": 7}),
    (3, 1.0, False, 2, {"no_repeat_ngram_size": 2}),
]
FIXED_PREFIXES = ["A", "A man", "Two men are", "The dog is running through"]


def make_models(work, src_spm, tgt_spm):
    out = {}
    ssp, tsp = open(src_spm, "rb").read(), open(tgt_spm, "rb").read()
    for name, over, eos_extra, seed, opts in MODELS:
        hf = P.make_model(work, name, dict(BASE, **over), dict(opts, fmt="safetensors", bias_std=1.0),
                          src_spm, tgt_spm, seed)
        m = R.load_hf_dir(hf)
        with torch.no_grad():
            m.final_logits_bias[0, m.config["eos_token_id"]] += eos_extra
        separate = os.path.exists(os.path.join(hf, "target_vocab.json"))
        R.save_hf_dir(m, hf, ssp, tsp, m.tok.src_vocab, m.tok.tgt_vocab if separate else None)
        out[name] = (T.export(hf, os.path.join(work, name + ".gguf")), R.load_hf_dir(hf))
    return out


def target_ids(m, text):
    """The prefix's ids as the target tokenizer gives them (MarianTokenizer's text_target,
    without the </s>): the target SentencePiece model's pieces through the target vocabulary."""
    tok = m.tok
    return [tok.tgt_vocab.get(p, tok.unk) for p in tok.tgt_sp.encode(text, out_type=str)]


def prefixes_for(m, line, free_text):
    """(label, text) prefixes for one line: the fixed ones and the free translation."""
    out = [(f"'{p}'", p) for p in FIXED_PREFIXES]
    if free_text:
        out.append(("its own translation", free_text))
    return out


def check_greedy(name, gguf, m, lines, tally):
    model = attend.Model(gguf, threads=1)
    ml = m.config["max_length"]
    free = model.translate(lines, greedy=True)
    for line, fr in zip(lines, free):
        src = m.tok.encode(line)
        for label, text in prefixes_for(m, line, fr.text):
            pre = target_ids(m, text)
            if len(pre) + 1 >= ml:
                continue
            ref = R.greedy(m, src, prefix=pre)
            if T.smallest_top2_gap(ref.logits) < TIE_GAP:
                tally["ties"] += 1
                continue
            got = model.translate(line, greedy=True, target_prefix=text)
            assert got.tgt_ids.tolist() == ref.ids, \
                f"{name} {line!r} prefix {label}: {got.tgt_ids.tolist()} != reference {ref.ids}"
            assert got.tgt_ids.tolist()[:len(pre)] == pre
            assert len(got.logprob) == len(ref.ids)
            tally["greedy"] += 1
            tally["lengths"].add(min(len(pre), 3))
            if label == "its own translation" and ref.ids[len(pre):] == [m.config["eos_token_id"]]:
                tally["ends at once"] += 1
    model.close()


def check_beams(name, gguf, m, lines, tally):
    model = attend.Model(gguf, threads=1)
    ml = m.config["max_length"]
    free = model.translate(lines, greedy=True)
    for n, (B, lp, es, k, extra) in enumerate(BEAMS):
        for j, line in enumerate(lines):
            src = m.tok.encode(line)
            cases = prefixes_for(m, line, free[j].text)
            label, text = cases[(n + j) % len(cases)]
            pre = target_ids(m, text)
            if len(pre) + 1 >= ml:
                continue
            ref = R.beam_search(m, src, B, length_penalty=lp, early_stopping=es, num_return_sequences=k,
                                prefix=pre, **extra)
            if ref.near_tie < TIE_GAP:
                tally["ties"] += 1
                continue
            got = model.translate(line, beam=B, length_penalty=lp, early_stopping=es, n_best=k,
                                  target_prefix=text, **extra)
            what = f"{name} beam {B} lp {lp} early {es} {extra} {line!r} prefix {label}"
            assert len(got.nbest) == len(ref), f"{what}: {len(got.nbest)} hypotheses, want {len(ref)}"
            T.check_nbest(what, got.nbest, ref, SCORE_TOL)
            tally["beam"] += 1
    model.close()


def check_empty_prefix(gguf, lines):
    """"" and None entries are no prefix: every field equal, bit for bit."""
    model = attend.Model(gguf, threads=1)
    for kw in (dict(greedy=True), dict(beam=3, n_best=2), dict(sample=True, seed=3, n_best=2)):
        a = model.translate(lines, attention=True, **kw)
        for pre in ("", [None] * len(lines), [""] * len(lines), " "):
            b = model.translate(lines, attention=True, target_prefix=pre, **kw)
            for x, y in zip(a, b):
                assert x.text == y.text and x.score == y.score, (kw, pre, x.text, y.text)
                for f in ("tgt_ids", "logprob", "enc_self", "dec_self", "cross"):
                    assert np.array_equal(getattr(x, f), getattr(y, f)), (kw, pre, f)
    model.close()


def check_per_line_and_refusals(gguf, m, lines):
    model = attend.Model(gguf, threads=1)
    ml = m.config["max_length"]
    pres = [FIXED_PREFIXES[i % 3] if i % 2 else None for i in range(len(lines))]
    both = model.translate(lines, beam=3, target_prefix=pres)
    for line, pre, r in zip(lines, pres, both):
        one = model.translate(line, beam=3, target_prefix=pre or "")
        assert r.text == one.text and r.score == one.score, (line, pre)
        if pre:
            assert r.tgt_ids.tolist()[:len(target_ids(m, pre))] == target_ids(m, pre)
    # sampling continues the prefix too: every sample starts with it, reproducibly
    pre = target_ids(m, "Two men are")
    a = model.translate(lines, sample=True, seed=5, n_best=3, target_prefix="Two men are")
    b = model.translate(lines, sample=True, seed=5, n_best=3, target_prefix="Two men are")
    for x, y in zip(a, b):
        assert [h.ids.tolist() for h in x.nbest] == [h.ids.tolist() for h in y.nbest]
        assert all(h.ids.tolist()[:len(pre)] == pre for h in x.nbest), x.nbest
        for h in x.nbest:  # the score: the sampled tokens' log-probabilities, not the prefix's
            assert abs(h.score - float(h.logprob[len(pre):].sum())) < 1e-4, (h.score, h.logprob)
    # too long for max_length: that line fails, the others are translated
    long = " ".join(["dog"] * ml)
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rs = model.translate(lines[:2], target_prefix=[long, None])
    assert rs[0].error and "max_length" in rs[0].error and rs[0].text == "", rs[0].error
    assert not rs[1].error and rs[1].text, rs[1]
    assert any("max_length" in str(x.message) for x in w)
    for bad, exc in ((["A"], ValueError), (3, TypeError), ([3] * len(lines), TypeError)):
        try:
            model.translate(lines, target_prefix=bad)
        except exc:
            pass
        else:
            raise AssertionError(f"target_prefix={bad!r}: no {exc.__name__}")
    try:
        model.translate("Hallo", target_prefix=["A"])
    except TypeError:
        pass
    else:
        raise AssertionError("a list prefix for one line: no TypeError")
    model.close()


def check_nbest_attention(name, gguf, m, lines, tally):
    """n-best 3, attention=True: each hypothesis's logprob and attention equal forced
    decoding of its ids (the reference's; the engine's own where its text re-tokenizes)."""
    model = attend.Model(gguf, threads=1)
    L, H = m.config["decoder_layers"], m.config["decoder_attention_heads"]
    for j, line in enumerate(lines):
        src = m.tok.encode(line)
        pre = FIXED_PREFIXES[j % 3] if j % 2 else None
        r = model.translate(line, beam=4, n_best=3, attention=True, target_prefix=pre)
        assert len(r.nbest) == 3
        for k, h in enumerate(r.nbest):
            n, S = len(h.ids), len(src)
            assert h.logprob.shape == (n,) and h.cross.shape == (L, H, n, S) and h.dec_self.shape == (L, H, n, n)
            assert h.tokens and len(h.tokens) == n
            lp, _ = R.force_decode(m, src, h.ids.tolist())
            assert np.abs(h.logprob - np.array(lp)).max() <= SCORE_TOL, f"{name} {line!r} hyp {k}: logprob"
            want = R.attention_of(m, src, h.ids.tolist())
            for kind in ("dec_self", "cross"):
                got = getattr(h, kind)
                for layer in range(L):
                    d = np.abs(got[layer] - want[kind][layer]).max()
                    assert d <= ATT_TOL, f"{name} {line!r} hyp {k} {kind}/l{layer}: {d:.1e} from the reference"
            hr = r.hypothesis(k)
            assert hr.text == h.text and hr.cross is h.cross and hr.tgt_tokens == h.tokens
            hr.alignment()  # a view of its own attention
            if k == 0:
                assert np.array_equal(h.cross, r.cross) and np.array_equal(h.logprob, r.logprob)
            s = model.score(line, h.text)
            if s.tgt_ids.tolist() != h.ids.tolist():
                continue  # its text re-tokenizes into other pieces
            assert np.abs(s.logprob - h.logprob).max() <= SELF_LP_TOL
            for kind in ("dec_self", "cross"):
                assert np.abs(getattr(s, kind) - getattr(h, kind)).max() <= SELF_ATT_TOL, kind
            tally["forced"] += 1
        tally["nbest"] += 1
    model.close()


def check_cli(gguf, m, lines, work):
    model = attend.Model(gguf, threads=1)
    text = "".join(s + "\n" for s in lines)
    want = model.translate(lines, beam=3, target_prefix="Two men are")
    p = T.run_attend(["translate", "-m", gguf, "--beam", "3", "--prefix", "Two men are", "-t", "1"], text)
    assert p.stdout.split("\n")[:-1] == [r.text for r in want], p.stdout
    pres = [FIXED_PREFIXES[i % 3] if i % 2 else "" for i in range(len(lines))]
    f = os.path.join(work, "prefixes.txt")
    with open(f, "w") as fh:
        fh.write("".join(x + "\n" for x in pres))
    want = model.translate(lines, beam=3, n_best=2, target_prefix=pres)
    p = T.run_attend(["translate", "-m", gguf, "--beam", "3", "--n-best", "2", "--prefix-file", f], text)
    got = [ln.split(" ||| ")[1] for ln in p.stdout.split("\n")[:-1]]
    assert got == [h.text for r in want for h in r.nbest], p.stdout
    # a blank input line takes its prefix line too (the files stay in step)
    p = T.run_attend(["translate", "-m", gguf, "--prefix-file", f], "\n".join(lines[:1] + [""] + lines[2:]) + "\n")
    assert p.stdout.split("\n")[1] == "" and p.stdout.split("\n")[2] == want_text(model, lines[2], pres[2])
    # refusals: too few prefix lines, both options, a missing file
    p = T.run_attend(["translate", "-m", gguf, "--prefix-file", f], text + "Noch eine Zeile.\n", check=False)
    assert p.returncode != 0 and "prefix" in p.stderr, (p.returncode, p.stderr)
    p = T.run_attend(["translate", "-m", gguf, "--prefix", "A", "--prefix-file", f], text, check=False)
    assert p.returncode == 2 and "prefix" in p.stderr, (p.returncode, p.stderr)
    p = T.run_attend(["translate", "-m", gguf, "--prefix-file", os.path.join(work, "none.txt")], text, check=False)
    assert p.returncode != 0 and "none.txt" in p.stderr, (p.returncode, p.stderr)
    model.close()


def check_cli_nbest(gguf, m, lines, work):
    """--n-best with --alignment: each line's alignment is its own hypothesis's (Python's
    hypothesis(k).pharaoh()); --dump-attention adds s{i}/nbest{k}/ equal to Python's arrays."""
    model = attend.Model(gguf, threads=1)
    text = "".join(s + "\n" for s in lines)
    want = model.translate(lines, beam=4, n_best=3, attention=True, target_prefix="A")
    npz = os.path.join(work, "nbest.npz")
    p = T.run_attend(["translate", "-m", gguf, "--beam", "4", "--n-best", "3", "--prefix", "A",
                      "--alignment=penultimate:avg", "--dump-attention", npz], text)
    got = [ln.split(" ||| ") for ln in p.stdout.split("\n")[:-1]]
    assert len(got) == 3 * len(lines), p.stdout
    differ = 0
    z = np.load(npz)
    for i, r in enumerate(want):
        for k in range(3):
            row = got[3 * i + k]
            h = r.hypothesis(k)
            assert row[0] == str(i) and row[1] == h.text, (row, h.text)
            assert row[3] == h.pharaoh("penultimate:avg"), (row, h.pharaoh("penultimate:avg"))
            differ += k > 0 and row[3] != got[3 * i][3]
            key = f"s{i}/" + (f"nbest{k}/" if k else "")
            assert z[key + "tgt_ids"].tolist() == h.tgt_ids.tolist()
            assert list(z[key + "tgt_pieces"]) == h.tgt_tokens
            assert abs(float(z[key + "score"][0]) - h.score) == 0
            assert np.array_equal(z[key + "logprob"], h.logprob)
            for layer in range(h.cross.shape[0]):
                assert np.array_equal(z[f"{key}cross/l{layer}"], h.cross[layer])
                assert np.array_equal(z[f"{key}dec_self/l{layer}"], h.dec_self[layer])
        assert f"s{i}/nbest3/text" not in z.files
    assert differ > 0, "every hypothesis had the best one's alignment: not their own?"
    model.close()


def translate_ids_prefix(gguf, src, prefix, **params):
    """attend_translate_ids with attend_params.target_prefix_ids (through ctypes): the
    result's (tgt_ids, score)."""
    from attend import _capi as C
    lib = C.lib()  # prototypes as _capi declares them
    ip = ctypes.POINTER(ctypes.c_int)
    f = lib.attend_translate_ids
    err = C.err_buffer()
    h = lib.attend_load(gguf.encode(), err, C.ERR_LEN)
    assert h, err.value
    try:
        s_arr, p_arr = (ctypes.c_int * len(src))(*src), (ctypes.c_int * max(len(prefix), 1))(*prefix)
        s_ptr, p_ptr = (ip * 1)(ctypes.cast(s_arr, ip)), (ip * 1)(ctypes.cast(p_arr, ip))
        lens, plens = (ctypes.c_int * 1)(len(src)), (ctypes.c_int * 1)(len(prefix))
        p = lib.attend_default_params()
        p.threads = 1
        for k, v in params.items():
            setattr(p, k, v)
        p.target_prefix_ids, p.target_prefix_lens = p_ptr, plens
        out = (C.attend_result * 1)()
        assert f(h, s_ptr, lens, 1, None, None, ctypes.byref(p), out, err, C.ERR_LEN) == 0, err.value
        r = out[0]
        assert r.status == 0, r.message
        got = ([r.tgt_ids[i] for i in range(r.n_tgt)], r.score)
        lib.attend_result_free(ctypes.byref(out[0]))
        return got
    finally:
        lib.attend_free(h)


def check_m2m(work):
    """M2M-100: the target-language token is still forced first and the prefix follows it:
    HF's generate(decoder_input_ids=[start, lang, *prefix]) (the reference, greedy and 3
    beams); the id API (prefix ids without the language token) gives the same."""
    import test_m2m100 as M
    spms = M.build_spms(work)
    name, over, opts = M.CONFIGS[0]
    hf, m = M.make_model(work, "m2m-" + name, over, opts, spms, 11)
    gguf = M.export(hf, os.path.join(work, "m2m.gguf"), opts["exporter"])
    model = attend.Model(gguf, threads=1)
    lang = m.tok.lang_id["en"]
    done = 0
    for line in M.sentences("de")[:6]:
        src = m.tok.encode(line, "de")
        for text in ("A", "Two men are"):
            pre = m.tok.tokens(text)
            ref = M.R.m2m_greedy(m, src, lang, prompt=[lang] + pre)
            got = model.translate(line, greedy=True, src_lang="de", tgt_lang="en", target_prefix=text)
            if T.smallest_top2_gap(ref.logits) >= TIE_GAP:
                assert got.tgt_ids.tolist() == ref.ids, (line, text, got.tgt_ids.tolist(), ref.ids)
                done += 1
            assert got.tgt_ids.tolist()[:1 + len(pre)] == [lang] + pre
            ids, score = translate_ids_prefix(gguf, src, pre, num_beams=1, tgt_lang=b"en")
            assert ids == got.tgt_ids.tolist(), (ids, got.tgt_ids.tolist())
            refb = M.R.m2m_beam_search(m, src, lang, 3, num_return_sequences=2, prompt=[lang] + pre)
            gotb = model.translate(line, beam=3, n_best=2, src_lang="de", tgt_lang="en", target_prefix=text)
            if refb.near_tie >= TIE_GAP:
                T.check_nbest(f"m2m {line!r} prefix {text!r}", gotb.nbest, refb, SCORE_TOL)
                done += 1
            ids, score = translate_ids_prefix(gguf, src, pre, num_beams=3, tgt_lang=b"en")
            assert ids == gotb.tgt_ids.tolist() and score == gotb.score, (ids, gotb.tgt_ids.tolist())
    assert done >= 16, f"only {done} runs without near ties"
    model.close()


def want_text(model, line, pre):
    return model.translate(line, target_prefix=pre).text


def main():
    run = T.Runner()
    t0 = time.time()
    work = T.tempdir()
    src_spm, tgt_spm = P.build_spms(work)
    lines = P.sentences()[:N_SENT]
    models = make_models(work, src_spm, tgt_spm)
    tally = {"greedy": 0, "beam": 0, "ties": 0, "ends at once": 0, "lengths": set(), "nbest": 0, "forced": 0}
    for name, *_ in MODELS:
        gguf, m = models[name]
        run.check(f"{name}: greedy with prefixes equals the reference", check_greedy, name, gguf, m, lines, tally)
        run.check(f"{name}: beams with prefixes equal the reference", check_beams, name, gguf, m, lines, tally)
        run.check(f"{name}: n-best attention and log-probs equal forced decoding", check_nbest_attention,
                  name, gguf, m, lines, tally)

    def coverage():
        print(f"   greedy {tally['greedy']}, beam {tally['beam']} runs identical ({tally['ties']} near ties "
              f"skipped); {tally['ends at once']} ended right after a whole-translation prefix; "
              f"{tally['forced']} n-best hypotheses equal to the engine's forced decoding")
        assert tally["greedy"] >= 40 and tally["beam"] >= 60 and tally["ties"] <= 10, tally
        assert tally["ends at once"] >= 3 and tally["lengths"] >= {1, 2, 3}, tally
        assert tally["nbest"] >= 20 and tally["forced"] >= 10, tally

    run.check("coverage", coverage)
    gguf, m = models["forced"]
    run.check("an empty prefix is no prefix, bit for bit", check_empty_prefix, gguf, lines)
    run.check("one prefix per line; a prefix too long fails its line only", check_per_line_and_refusals,
              gguf, m, lines)
    run.check("attend translate --prefix / --prefix-file", check_cli, gguf, m, lines, work)
    run.check("attend translate --n-best with --alignment and --dump-attention", check_cli_nbest,
              gguf, m, lines, work)
    run.check("m2m_100: the prefix follows the forced target-language token", check_m2m, work)
    print(f"   ({time.time() - t0:.0f} s)")
    run.finish()


if __name__ == "__main__":
    main()
