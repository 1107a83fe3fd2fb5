#!/usr/bin/python3
"""Beam search: attend translate --beam gives the PyTorch reference's hypotheses and scores.

First the reference itself (tools/reference.py beam_search) is checked on a fake model whose
next-token distributions are written out by hand, against outcomes worked out on paper from
HF transformers' (4.36-4.44) rules: early_stopping true / false / "never", the order of equal
scores, eviction of the earliest of equal worst scores, finalize at the length limit with and
without forced EOS, outputs that end at once, the logits processors.

Then build/attend (env ATTEND_BIN, else build/attend) on random Marian models exported to
.gguf, on every kernel set this CPU has: --beam 2..6, --length-penalty 0.0/0.6/1.0/1.4,
--early-stopping true/false/never, --n-best 1..4 ('i ||| text ||| score' lines: same texts,
HF's sequence scores within 1e-4, as the dump's normalized_score; its score, the reference's
sum of log-probabilities), --min-length, --no-repeat-ngram-size, --repetition-penalty, the model's
recorded generation defaults (renormalize_logits included), outputs ending by </s>, by the
length limit and at once; batched (-b 8) equals one at a time (-b 1) byte for byte; the
--dump-attention of the best hypothesis equals forced decoding of it (attend align --target,
and the reference); sampling (--sample --top-k/--top-p/--temperature/--seed) stays within
its candidate set, is reproducible per seed, and with a tiny temperature or top-k 1 is greedy.
"""
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402
import test_parity as P  # noqa: E402

if os.environ.get("ATTEND_BIN"):
    T.ATTEND = os.path.abspath(os.environ["ATTEND_BIN"])

TIMEOUT = 30         # seconds for one attend run (a hang fails the check, not the file)
SCORE_TOL = 1e-4     # n-best / dumped sequence scores against the reference
ATT_TOL = 1e-5       # engine attention against the PyTorch reference (as test_parity)
ALIGN_TOL = 1e-6     # engine beam attention against the engine's own forced decoding
ATT_KINDS = ("enc_self", "dec_self", "cross")
TIE_GAP = 1e-4       # a reference decision this close may legitimately go the other way
MAX_TIES = 3         # sentences per model, over all settings and kernel sets

# =====================================================================================
# Part 1: the reference on a fake model with hand-written distributions

EOS, PAD, V = 0, 7, 8   # tokens 1..6 are words


class FakeModel:
    """Duck-typed for R.beam_search: the next-token distribution of each prefix (generated
    ids, start token excluded) comes from `table`; unlisted prefixes are uniform over the
    non-pad tokens. Listed probabilities that sum below 1 leave the rest to the unlisted
    tokens in equal parts."""

    def __init__(self, table, max_length=8, forced=True):
        self.table = table
        self.config = dict(eos_token_id=EOS, pad_token_id=PAD, decoder_start_token_id=PAD,
                           forced_eos_token_id=EOS if forced else None, max_length=max_length,
                           max_position_embeddings=64)

    def eval(self):
        pass

    def encode(self, src):
        return torch.zeros(1, src.shape[1], 1), []

    def dist(self, prefix):
        probs = self.table.get(tuple(prefix))
        p = np.zeros(V)
        words = [t for t in range(V) if t != PAD]
        if probs is None:
            p[words] = 1.0 / len(words)
        else:
            rest = [t for t in words if t not in probs]
            left = 1.0 - sum(probs.values())
            for t, q in probs.items():
                p[t] = q
            if rest:
                p[rest] = max(left, 1e-6) / len(rest)
        return p

    def decode(self, tgt, memory):
        B, L = tgt.shape
        out = torch.zeros(B, L, V)
        for b in range(B):
            with np.errstate(divide="ignore"):
                out[b, -1] = torch.tensor(np.log(self.dist(tgt[b, 1:].tolist())), dtype=torch.float32)
        return out, [], []


def L(*ps):
    """Sum of log-probabilities (double)."""
    return sum(math.log(p) for p in ps)


def expect(res, want, what):
    """want: [(ids, score)] best first."""
    got = [(r.ids, r.score) for r in res]
    assert len(got) == len(want), f"{what}: {len(got)} results, want {len(want)}: {got}"
    for (gi, gs), (wi, ws) in zip(got, want):
        assert gi == wi and abs(gs - ws) < 1e-5, f"{what}: got {got}, want {want}"


def check_early_stopping_true_false():
    # step 1: </s> .5 -> A=[</s>] score log .5; beams 1 (.3) and 2 (.2)
    # step 2: after 1: </s> .9 -> B=[1 </s>] (-0.654), full. True stops here.
    #         after 2: 3 .98 is a live beam. False: worst -0.693 >= -1.309/2? no, go on.
    # step 3: [2 3 </s>] -1.630/3 = -0.543 evicts A. False then runs to the limit.
    table = {(): {EOS: .5, 1: .3, 2: .2 - 6e-6},
             (1,): {EOS: .9}, (2,): {3: .98, EOS: .01}, (2, 3): {EOS: .999}}
    m = FakeModel(table, max_length=8)
    a = R.beam_search(m, [1], 2, early_stopping=True, num_return_sequences=2)
    expect(a, [([1, EOS], L(.3, .9) / 2), ([EOS], L(.5))], "early_stopping=True")
    assert a.steps == 2, a.steps
    b = R.beam_search(m, [1], 2, early_stopping=False, num_return_sequences=2)
    expect(b, [([2, 3, EOS], L(.2 - 6e-6, .98, .999) / 3), ([1, EOS], L(.3, .9) / 2)],
           "early_stopping=False")


def check_early_stopping_never():
    # step 1: A=[</s>] -0.693; beams 1 (.3), 2 (.2)
    # step 2: [1 </s>] -1.877 is the best candidate: B = -0.9385 fills the heap and equals
    #         the best attainable -1.877/2, so False stops with A, B.
    #         "never" divides by max_length - 1 = 7 instead and goes on:
    # step 3: [1 3 </s>] -1.918/3 = -0.639 beats A and evicts B.
    table = {(): {EOS: .5, 1: .3, 2: .2 - 6e-6},
             (1,): {EOS: .51, 3: .49 - 6e-6}, (2,): {4: .5}, (1, 3): {EOS: .999}, (2, 4): {EOS: .999}}
    m = FakeModel(table, max_length=8)
    f = R.beam_search(m, [1], 2, early_stopping=False, num_return_sequences=2)
    expect(f, [([EOS], L(.5)), ([1, EOS], L(.3, .51) / 2)], "early_stopping=False")
    n = R.beam_search(m, [1], 2, early_stopping="never", num_return_sequences=2)
    expect(n, [([1, 3, EOS], L(.3, .49 - 6e-6, .999) / 3), ([EOS], L(.5))], "early_stopping=never")
    # with length_penalty 0 "never" compares like False (sums, hf_cur_len), stopping at step 2
    z = R.beam_search(m, [1], 2, early_stopping="never", length_penalty=0.0, num_return_sequences=2)
    expect(z, [([EOS], L(.5)), ([1, EOS], L(.3, .51))], "never, length_penalty 0")


def check_equal_scores():
    # 1 and 2 tie at step 1 (beam 0 takes 1: lower index). Their </s> at step 2 tie exactly:
    # both are added, [1 </s>] first; the later-added [2 </s>] comes out first.
    table = {(): {1: .45, 2: .45, EOS: .05}, (1,): {EOS: .9}, (2,): {EOS: .9}}
    m = FakeModel(table)
    r = R.beam_search(m, [1], 2, num_return_sequences=2)
    expect(r, [([2, EOS], L(.45, .9) / 2), ([1, EOS], L(.45, .9) / 2)], "equal scores")
    assert r[0].beam_indices == [0, 1] and r[1].beam_indices == [0, 0], [x.beam_indices for x in r]
    # step 1's </s> (.05) ranks 2 >= num_beams: skipped, never a hypothesis
    # eviction: with "never" the search goes on; [1 3 </s>] evicts the EARLIER of the two
    # equal worst ([1 </s>]), keeping [2 </s>].
    table = {(): {1: .45, 2: .45, EOS: .05}, (1,): {EOS: .5, 3: .3, 4: .2}, (2,): {EOS: .5, 3: .3, 4: .2},
             (1, 3): {EOS: .999}}
    m = FakeModel(table)
    r = R.beam_search(m, [1], 2, early_stopping="never", num_return_sequences=2)
    expect(r, [([1, 3, EOS], L(.45, .3, .999) / 3), ([2, EOS], L(.45, .5) / 2)], "eviction of equal worst")


def check_length_limit():
    # No </s> ever likely: with forced EOS the last step (cur_len == max_length - 1) gives every
    # beam </s> with log-prob 0; without, finalize adds the live beams (no </s>).
    table = {(): {1: .6, 2: .4 - 7e-6}, (1,): {3: .7, 4: .3 - 6e-6}, (2,): {3: .9, 4: .1 - 6e-6},
             (1, 3): {5: .99}, (1, 4): {5: .99}, (2, 3): {5: .99}, (2, 4): {5: .99}}
    for k in list(table):
        table[k][EOS] = 1e-6
    forced = FakeModel(table, max_length=4, forced=True)
    r = R.beam_search(forced, [1], 2, num_return_sequences=2)
    expect(r, [([1, 3, EOS], L(.6, .7) / 3), ([2, 3, EOS], L(.4 - 7e-6, .9) / 3)], "forced EOS at the limit")
    free = FakeModel(table, max_length=4, forced=False)
    r = R.beam_search(free, [1], 2, num_return_sequences=2, length_penalty=2.0)
    expect(r, [([1, 3, 5], L(.6, .7, .99) / 9), ([2, 3, 5], L(.4 - 7e-6, .9, .99) / 9)], "finalize at the limit")
    # an explicit max_length overrides the model's
    r = R.beam_search(free, [1], 2, max_length=3)
    expect(r, [([1, 3], L(.6, .7) / 2)], "max_length 3")


def check_at_once():
    table = {(): {EOS: .9}}
    m = FakeModel(table, max_length=8)
    for es in (True, False, "never"):
        r = R.beam_search(m, [1], 3, early_stopping=es)
        expect(r, [([EOS], L(.9))], f"</s> first, early_stopping={es}")
    # max_length 2 with forced EOS: every beam's </s> (beam 0: 0, beams 1..: -1e9) is taken
    m = FakeModel({}, max_length=2, forced=True)
    r = R.beam_search(m, [1], 3, num_return_sequences=3)
    expect(r, [([EOS], 0.0), ([EOS], -1e9), ([EOS], -1e9)], "max_length 2, forced EOS")
    # without forced EOS: one token, the best first-step candidates
    m = FakeModel({(): {4: .5, EOS: .3, 2: .2 - 6e-6}}, max_length=2, forced=False)
    r = R.beam_search(m, [1], 2, num_return_sequences=2)
    expect(r, [([4], L(.5)), ([EOS], L(.3))], "max_length 2, no forced EOS")


def check_processors():
    c = dict(eos_token_id=EOS, pad_token_id=PAD)

    def run(ids, **kw):
        logp = torch.log(torch.tensor([[.1, .2, .3, .1, .1, .1, .1, 0.0]]))
        opts = dict(min_length=0, no_repeat_ngram_size=0, repetition_penalty=1.0, renormalize_logits=False)
        opts.update(kw)
        return R._process_logits(logp, [ids], len(ids), c, 20, True, **opts)[0]

    inf = float("-inf")
    row = run([PAD, 1, 2, 1], no_repeat_ngram_size=2)     # last token 1 was followed by 2
    assert row[2] == inf and np.isfinite(row[1]) and np.isfinite(row[3]), row
    row = run([PAD, 1, 2, 1, 2], no_repeat_ngram_size=3)  # (1 2) was followed by 1
    assert row[1] == inf and np.isfinite(row[2]), row
    row = run([PAD, 1], no_repeat_ngram_size=3)           # cur_len + 1 >= 3 but no trigram yet
    assert np.isfinite(row[:PAD]).all(), row
    row = run([PAD, 3, 5], no_repeat_ngram_size=1)        # every seen token banned
    assert row[3] == inf and row[5] == inf and np.isfinite(row[4]), row
    row = run([PAD, 2, 2, 4], repetition_penalty=2.0)
    assert abs(row[2] - math.log(.3) * 2) < 1e-6 and abs(row[4] - math.log(.1) * 2) < 1e-6, row
    assert abs(row[1] - math.log(.2)) < 1e-6, row
    row = run([PAD, 2], repetition_penalty=0.5)
    assert abs(row[2] - math.log(.3) * 0.5) < 1e-6, row
    row = run([PAD, 1, 2], min_length=3)                  # cur_len counts the start token
    assert np.isfinite(row[EOS])
    row = run([PAD, 1, 2], min_length=4)
    assert row[EOS] == inf
    row = run([PAD, 1, 2, 3], min_length=4)
    assert np.isfinite(row[EOS])
    row = run([PAD] + [1] * 18)                           # cur_len 19 == max_length - 1
    assert row[EOS] == 0 and (row[1:] == inf).all(), row
    row = run([PAD] + [1] * 18, min_length=30)            # forced EOS wins over min_length
    assert row[EOS] == 0, row
    row = run([PAD, 1, 2], no_repeat_ngram_size=1, renormalize_logits=True)
    assert abs(float(torch.logsumexp(row, 0))) < 1e-6 and row[1] == inf, row
    # min_length in a search: </s> held back, then the best
    m = FakeModel({(): {EOS: .9}, (1,): {EOS: .9}}, max_length=8)
    r = R.beam_search(m, [1], 2, min_length=2)
    assert r[0].ids[-1] == EOS and len(r[0].ids) == 2, [x.ids for x in r]


def check_generation_defaults():
    d = R.generation_defaults({})
    assert d == dict(num_beams=1, length_penalty=1.0, early_stopping=False, min_length=0,
                     no_repeat_ngram_size=0, repetition_penalty=1.0, renormalize_logits=False), d
    d = R.generation_defaults(dict(num_beams=4, early_stopping="never", min_length=2, min_new_tokens=5,
                                   length_penalty=None, renormalize_logits=True, repetition_penalty=1.1))
    assert d["num_beams"] == 4 and d["early_stopping"] == "never" and d["min_length"] == 6, d
    assert d["length_penalty"] == 1.0 and d["renormalize_logits"] and d["repetition_penalty"] == 1.1, d
    assert R.generation_defaults(dict(min_length=9, min_new_tokens=2))["min_length"] == 9
    assert R.generation_defaults(dict(early_stopping=True))["early_stopping"] is True


def check_cli_parse():
    assert R.parse_early_stopping("never") == "never"
    assert R.parse_early_stopping("true") is True and R.parse_early_stopping("false") is False


# =====================================================================================
# Part 2: attend against the reference on random models


def attend(args, input_text=None, env=None, check=True):
    return T.run_attend(args, input_text, env=env, check=check, timeout=TIMEOUT)


BASE = dict(P.BASE, max_length=16)
MODELS = [
    # name, config overrides, extra eos bias after calibration, seed, options for P.make_model
    ("forced", dict(), 0.0, 11, {}),
    ("no-forced-eos", dict(d_model=48, encoder_attention_heads=3, decoder_attention_heads=2,
                           forced_eos_token_id=None, max_length=12), 1.0, 12, {}),
    ("separate-vocab", dict(d_model=32, encoder_layers=1, decoder_layers=3, decoder_attention_heads=2,
                            activation_function="relu", share_encoder_decoder_embeddings=False,
                            tie_word_embeddings=False, max_length=14), 0.5, 14, dict(separate_vocab=True)),
]
# the model's own generation defaults: config.json, then generation_config.json over it
DEFAULTS_CONFIG = dict(num_beams=5, length_penalty=1.5, no_repeat_ngram_size=3, max_length=20)
DEFAULTS_GENERATION = dict(num_beams=3, length_penalty=0.8, early_stopping="never",
                           renormalize_logits=True, repetition_penalty=1.2, min_new_tokens=2,
                           max_new_tokens=13)

# beam, length_penalty, early_stopping, n_best, extra attend options (and reference kwargs)
SETTINGS = [
    (2, 1.0, "false", 1, {}),
    (3, 0.6, "true", 2, {}),
    (4, 1.4, "never", 4, {}),
    (5, 1.0, "never", 3, {}),
    (6, 0.6, "false", 4, {}),
    (3, 0.0, "never", 2, {}),
    (3, 1.0, "false", 3, {"max_length": 2}),
    (4, 1.0, "true", 2, {"max_length": 5}),
    (4, 1.0, "false", 2, {"min_length": 6}),
    (3, 1.0, "false", 2, {"no_repeat_ngram_size": 2}),
    (4, 1.0, "false", 2, {"repetition_penalty": 1.3}),
    (5, 1.2, "never", 3, {"no_repeat_ngram_size": 3, "repetition_penalty": 0.8, "min_length": 3}),
]
PER_SETTING = 10  # sentences per setting (rotating through the inputs)

FLAG = {"max_length": "--max-length", "min_length": "--min-length",
        "no_repeat_ngram_size": "--no-repeat-ngram-size", "repetition_penalty": "--repetition-penalty"}


def make_models(work, src_spm, tgt_spm):
    """HF directories and .gguf exports; returns {name: (hf_dir, gguf, reference model)}."""
    out = {}
    ssp, tsp = open(src_spm, "rb").read(), open(tgt_spm, "rb").read()
    for name, over, eos_extra, seed, opts in MODELS + [("defaults", DEFAULTS_CONFIG, 1.0, 13, {})]:
        hf = P.make_model(work, name, dict(BASE, **over), dict(opts, fmt="safetensors", bias_std=1.0),
                          src_spm, tgt_spm, seed)
        m = R.load_hf_dir(hf)
        with torch.no_grad():
            m.final_logits_bias[0, m.config["eos_token_id"]] += eos_extra
        separate = os.path.exists(os.path.join(hf, "target_vocab.json"))
        R.save_hf_dir(m, hf, ssp, tsp, m.tok.src_vocab, m.tok.tgt_vocab if separate else None)
        if name == "defaults":
            with open(os.path.join(hf, "generation_config.json"), "w") as f:
                json.dump(DEFAULTS_GENERATION, f)
        out[name] = (hf, T.export(hf, os.path.join(work, name + ".gguf")), R.load_hf_dir(hf))
    return out


def parse_nbest(stdout, n_inputs, k):
    """{i: [(text, score)]} from 'i ||| text ||| score' lines, k per input in order."""
    got = {}
    lines = stdout.split("\n")
    assert lines[-1] == "", "output does not end in a newline"
    for line in lines[:-1]:
        parts = line.split(" ||| ")
        assert len(parts) == 3, f"not an n-best line: {line!r}"
        got.setdefault(int(parts[0]), []).append((parts[1], float(parts[2])))
    assert sorted(got) == list(range(n_inputs)), f"n-best line indices {sorted(got)}"
    for i, hyps in got.items():
        assert len(hyps) == k, f"input {i}: {len(hyps)} n-best lines, want {k}"
    return got


class Tally:
    def __init__(self):
        self.ties = {}
        self.endings = {"at once": 0, "by </s>": 0, "by length, ending in </s>": 0, "by length, no </s>": 0}
        self.compared = 0


def ending(ids, ml):
    if len(ids) == 1 and ids[0] == 0:
        return "at once"
    if len(ids) == ml - 1:
        return "by length, ending in </s>" if ids[-1] == 0 else "by length, no </s>"
    return "by </s>"


def compare_setting(model_name, gguf, m, lines, idx, setting, isas, tally, work):
    beam, lp, es, k, extra = setting
    opts = ["--beam", str(beam), "--length-penalty", str(lp), "--early-stopping", es, "--n-best", str(k)]
    for key, v in extra.items():
        opts += [FLAG[key], str(v)]
    sub = [lines[i] for i in idx]
    refs = [R.beam_search(m, m.tok.encode(s), beam, length_penalty=lp, early_stopping=es,
                          num_return_sequences=k, **extra) for s in sub]
    ml = R.generation_limits(m.config, extra.get("max_length"))
    for r in refs:
        scores = [h.score for h in r]
        assert scores == sorted(scores, reverse=True), f"reference n-best not best first: {scores}"
        assert len(r) == k
        tally.endings[ending(r[0].ids, ml)] += 1
    text = "".join(s + "\n" for s in sub)
    for isa in isas:
        npz = os.path.join(work, f"b-{model_name}-{isa}.npz")
        args = ["translate", "-m", gguf] + opts + ["--dump-attention", npz]
        p = attend(args, text, env={"ATTEND_ISA": isa})
        got = parse_nbest(p.stdout, len(sub), k)
        dump = np.load(npz)
        for j, (s, r) in enumerate(zip(sub, refs)):
            want = [(m.tok.decode(h.ids), h.score) for h in r]
            e_ids = dump[f"s{j}/tgt_ids"].tolist()
            e_score = float(dump[f"s{j}/normalized_score"][0])  # HF's sequence score, as --n-best prints
            e_sum = float(dump[f"s{j}/score"][0])               # the beam's sum of log-probabilities
            ok = (e_ids == r[0].ids and abs(e_score - r[0].score) <= SCORE_TOL
                  and abs(e_sum - r[0].sum_logprobs) <= SCORE_TOL
                  and str(dump[f"s{j}/text"][0]) == want[0][0]
                  and all(gt == wt and abs(gs - ws) <= SCORE_TOL for (gt, gs), (wt, ws) in zip(got[j], want)))
            where = f"{model_name} {isa} {' '.join(opts)} sentence {s!r}"
            if ok:
                tally.compared += 1
                continue
            if r.near_tie < TIE_GAP:
                tally.ties.setdefault(model_name, set()).add((tuple(opts), s))
                print(f"   near-tie ({r.near_tie:.1e} at {r.where}), allowed: {where}")
                continue
            raise AssertionError(
                f"{where}: engine best ids {e_ids} score {e_score:.6f}, reference {r[0].ids} "
                f"{r[0].score:.6f}\n   engine n-best {got[j]}\n   reference    {want}\n"
                f"   (reference's closest decision: gap {r.near_tie:.1e} at {r.where})\n"
                f"   repro: printf '%s\\n' {s!r} | ATTEND_ISA={isa} {T.ATTEND} {' '.join(args[:-2])}")
    assert len(tally.ties.get(model_name, [])) <= MAX_TIES, f"{model_name}: too many near-ties"


def check_model_defaults(gguf, m, lines, isas, work):
    """No options: the exported generation defaults (generation_config.json over config.json)."""
    st = R.generation_defaults(m.config)
    want_cfg = dict(num_beams=3, length_penalty=0.8, early_stopping="never", min_length=3,
                    no_repeat_ngram_size=3, repetition_penalty=1.2, renormalize_logits=True)
    assert st == want_cfg, f"reference read {st}"
    assert R.generation_limits(m.config) == 14, m.config["max_length"]
    sub = lines[:8]
    text = "".join(s + "\n" for s in sub)
    # no options; then --beam 2 alone, the other recorded settings staying (as HF's generate)
    for opts, over in (([], {}), (["--beam", "2"], dict(num_beams=2))):
        refs = [R.beam_search(m, m.tok.encode(s), num_return_sequences=2, **dict(st, **over)) for s in sub]
        for isa in isas:
            p = attend(["translate", "-m", gguf, "--n-best", "2"] + opts, text, env={"ATTEND_ISA": isa})
            got = parse_nbest(p.stdout, len(sub), 2)
            plain = attend(["translate", "-m", gguf] + opts, text, env={"ATTEND_ISA": isa}).stdout.splitlines()
            for j, r in enumerate(refs):
                want = [(m.tok.decode(h.ids), h.score) for h in r]
                if r.near_tie < TIE_GAP:
                    continue
                assert plain[j] == want[0][0], f"defaults {opts} {isa} s{j}: {plain[j]!r} != {want[0][0]!r}"
                for (gt, gs), (wt, ws) in zip(got[j], want):
                    assert gt == wt and abs(gs - ws) <= SCORE_TOL, \
                        f"defaults {opts} {isa} sentence {sub[j]!r}: engine {got[j]} reference {want}"


def check_batched_equals_single(gguf, lines, isas):
    opts = ["--beam", "4", "--n-best", "3", "--length-penalty", "1.2", "--early-stopping", "false"]
    text = "".join(s + "\n" for s in lines)
    for isa in isas:
        env = {"ATTEND_ISA": isa}
        b8 = attend(["translate", "-m", gguf, "-b", "8"] + opts, text, env=env).stdout
        b1 = attend(["translate", "-m", gguf, "-b", "1"] + opts, text, env=env).stdout
        assert b8 == b1, f"{isa}: -b 8 output differs from -b 1"
        bt = attend(["translate", "-m", gguf, "--batch-tokens", "40"] + opts, text, env=env).stdout
        assert bt == b1, f"{isa}: --batch-tokens 40 output differs from -b 1"
        assert len(b1.splitlines()) == 3 * len(lines)


def check_attention(name, gguf, m, lines, isas, work, need):
    """The best hypothesis's attention equals forced decoding of it: the reference's (every
    sentence, 1e-5), attend align --target of its text (when the text re-tokenizes into the
    same pieces, 1e-6), and attend align --beam 5 gives the same archive as translate."""
    sub = lines[:8]
    text = "".join(s + "\n" for s in sub)
    same = 0
    for isa in isas:
        env = {"ATTEND_ISA": isa}
        npz = os.path.join(work, f"att-{name}-{isa}.npz")
        attend(["translate", "-m", gguf, "--beam", "5", "--dump-attention", npz], text, env=env)
        d = np.load(npz)
        for j, s in enumerate(sub):
            ids = d[f"s{j}/tgt_ids"].tolist()
            ref = R.attention_of(m, m.tok.encode(s), ids)
            for kind in ("enc_self", "dec_self", "cross"):
                for l, want in enumerate(ref[kind]):
                    got = d[f"s{j}/{kind}/l{l}"]
                    assert got.shape == want.shape, f"{name} {isa} s{j} {kind}/l{l}: {got.shape} != {want.shape}"
                    diff = np.abs(got - want).max()
                    assert diff <= ATT_TOL, f"{name} {isa} s{j} {kind}/l{l}: {diff:.1e} from the reference"
            keys = [x for x in d.files if x.startswith(f"s{j}/") and x.split("/")[1] in ATT_KINDS]
            if j < 3:  # attend align --beam: the same search, the same archive
                g = os.path.join(work, f"alb-{name}-{isa}-{j}.npz")
                attend(["align", "-m", gguf, s, "--beam", "5", "--dump-attention", g, "--color", "never"], env=env)
                a = np.load(g)
                assert a["s0/tgt_ids"].tolist() == ids, f"{name} {isa} s{j}: align --beam 5 chose other ids"
                for key in keys:
                    diff = np.abs(a["s0/" + key.split("/", 1)[1]] - d[key]).max()
                    assert diff <= ALIGN_TOL, f"{name} {isa} s{j} {key}: align --beam vs translate {diff:.1e}"
            tgt_text = str(d[f"s{j}/text"][0])
            if not ids or ids[-1] != 0 or not tgt_text:
                continue   # align --target appends </s>: only outputs that ended by it
            g = os.path.join(work, f"al-{name}-{isa}-{j}.npz")
            p = attend(["align", "-m", gguf, s, "--target", tgt_text, "--dump-attention", g,
                        "--color", "never"], env=env, check=False)
            assert p.returncode == 0, (
                f"{name} {isa}: attend align --target exited {p.returncode} {p.stderr.strip()[:200]}\n"
                f"   repro: ATTEND_ISA={isa} {T.ATTEND} align -m {gguf} {s!r} --target {tgt_text!r}")
            a = np.load(g)
            if a["s0/tgt_ids"].tolist() != ids:
                continue   # the text re-tokenizes into other pieces
            same += 1
            for key in keys:
                diff = np.abs(a["s0/" + key.split("/", 1)[1]] - d[key]).max()
                assert diff <= ALIGN_TOL, f"{name} {isa} s{j} {key}: beam vs forced decoding differ by {diff:.1e}"
    assert same >= need, f"{name}: only {same} outputs could be force-decoded to the same pieces"
    print(f"   {name}: {same} beam outputs equal to attend align --target (all: the reference)")


def check_long_forced_target(gguf, m, isas):
    """A forced target longer than the generation limit (max_length) is still decoded:
    forced decoding is bounded by the positions, not by max_length."""
    ml = R.generation_limits(m.config)
    words = "ab " * ml
    for isa in isas:
        p = attend(["align", "-m", gguf, "Ein kleiner Junge.", "--target", words, "--format", "json"],
                   env={"ATTEND_ISA": isa}, check=False)
        assert p.returncode == 0, (f"{isa}: a {ml}-word target with max_length {ml} exited {p.returncode} "
                                   f"{p.stderr.strip()[:200]}\n   repro: ATTEND_ISA={isa} {T.ATTEND} align -m "
                                   f"{gguf} 'Ein kleiner Junge.' --target '{words.strip()}'")
        got = json.loads(p.stdout)["target_pieces"]
        assert len(got) > ml, f"{isa}: {len(got)} target pieces"


def check_sampling(gguf, m, lines, isas, work):
    """--sample stays within top-k / top-p, is reproducible per seed and independent of the
    batch, and is greedy with top-k 1 or a tiny temperature."""
    sub = lines[:10]
    text = "".join(s + "\n" for s in sub)
    c = m.config
    ml = R.generation_limits(c)
    pad, eos = c["pad_token_id"], c["eos_token_id"]
    ref_greedy = [m.tok.decode(R.greedy(m, m.tok.encode(s)).ids) for s in sub]
    for isa in isas:
        env = {"ATTEND_ISA": isa}
        greedy = attend(["translate", "-m", gguf, "--greedy"], text, env=env).stdout
        beam1 = attend(["translate", "-m", gguf, "--beam", "1"], text, env=env).stdout
        assert greedy == beam1, f"{isa}: --greedy != --beam 1"
        assert greedy.splitlines() == ref_greedy, f"{isa}: --greedy differs from the reference's greedy"
        off_top1 = 0
        outs = {}
        for k, seed in ((5, 7), (2, 8), (5, 9)):
            npz = os.path.join(work, f"samp-{isa}.npz")
            args = ["translate", "-m", gguf, "--sample", "--top-k", str(k), "--seed", str(seed)]
            out = attend(args + ["--dump-attention", npz, "--dump-logits"], text, env=env).stdout
            outs[(k, seed)] = out
            assert attend(args + ["-b", "1"], text, env=env).stdout == out, f"{isa}: seed {seed}, -b 1 differs"
            alone = attend(args + [sub[3]], env=env).stdout
            assert alone == out.splitlines(True)[3], f"{isa}: a line's samples depend on the other lines"
            d = np.load(npz)
            for j in range(len(sub)):
                ids, lg = d[f"s{j}/tgt_ids"], d[f"s{j}/logits"].copy()
                lg[:, pad] = -np.inf
                for t, tok in enumerate(ids):
                    if t == ml - 2 and tok == eos:
                        continue   # forced </s> at the length limit
                    rank = int((lg[t] > lg[t, tok]).sum())
                    assert rank < k, f"{isa} top-k {k} s{j} step {t}: token {tok} has rank {rank}"
                    off_top1 += rank > 0
                lp = d[f"s{j}/logprob"].astype(np.float64).sum()
                assert abs(float(d[f"s{j}/score"][0]) - lp) < 1e-3, f"{isa} s{j}: score is not the sum of logprob"
        assert off_top1 > 0, f"{isa}: sampling never left the argmax"
        assert outs[(5, 7)] != outs[(5, 9)], f"{isa}: seeds 7 and 9 drew the same 10 translations"
        # n-best samples: K per line, reproducible
        nb = ["translate", "-m", gguf, "--sample", "--top-k", "4", "--seed", "2", "--n-best", "3"]
        first = attend(nb, text, env=env).stdout
        parse_nbest(first, len(sub), 3)
        assert attend(nb, text, env=env).stdout == first, f"{isa}: n-best samples not reproducible"
        one = attend(["translate", "-m", gguf, "--sample", "--top-k", "1", "--seed", "3"], text, env=env).stdout
        assert one == greedy, f"{isa}: --sample --top-k 1 differs from greedy"
        # top-p: the probability mass (at temperature 0.7) ranked above each drawn token is < p
        npz = os.path.join(work, f"topp-{isa}.npz")
        attend(["translate", "-m", gguf, "--sample", "--top-p", "0.6", "--temperature", "0.7",
                "--seed", "5", "--dump-attention", npz, "--dump-logits"], text, env=env)
        d = np.load(npz)
        for j in range(len(sub)):
            ids, lg = d[f"s{j}/tgt_ids"], d[f"s{j}/logits"].astype(np.float64) / 0.7
            lg[:, pad] = -np.inf
            pr = np.exp(lg - lg.max(1, keepdims=True))
            pr /= pr.sum(1, keepdims=True)
            for t, tok in enumerate(ids):
                if t == ml - 2 and tok == eos:
                    continue
                before = pr[t][pr[t] > pr[t, tok]].sum()
                assert before < 0.6 + 1e-4, f"{isa} top-p 0.6 s{j} step {t}: {before:.4f} of the mass ranks above"
        # a tiny temperature: greedy, unless greedy's top two were within 2e-3
        npz = os.path.join(work, f"greedy-{isa}.npz")
        attend(["translate", "-m", gguf, "--greedy", "--dump-attention", npz, "--dump-logits"], text, env=env)
        g = np.load(npz)
        cold = attend(["translate", "-m", gguf, "--sample", "--temperature", "1e-4", "--seed", "1"],
                      text, env=env).stdout.splitlines()
        for j, line in enumerate(greedy.splitlines()):
            lg = g[f"s{j}/logits"].copy()
            lg[:, pad] = -np.inf
            if cold[j] != line and T.smallest_top2_gap(lg) >= 2e-3:
                raise AssertionError(f"{isa} s{j}: --temperature 1e-4 gave {cold[j]!r}, greedy {line!r}")


def check_cli_contract(gguf, m):
    """n-best > beams and unknown early_stopping values refused; a blank line gives K empty
    lines with score 0; --n-best 1 still prints the n-best layout."""
    p = attend(["translate", "-m", gguf, "--beam", "2", "--n-best", "3", "ja"], check=False)
    assert p.returncode != 0, "--n-best 3 with --beam 2 accepted"
    p = attend(["translate", "-m", gguf, "--beam", "3", "--early-stopping", "sometimes", "ja"], check=False)
    assert p.returncode != 0, "--early-stopping sometimes accepted"
    out = attend(["translate", "-m", gguf, "--beam", "3", "--n-best", "2"], "ja\n\nnein\n").stdout
    got = parse_nbest(out, 3, 2)
    assert got[1] == [("", 0.0), ("", 0.0)], f"blank line: {got[1]}"
    for i, s in ((0, "ja"), (2, "nein")):
        r = R.beam_search(m, m.tok.encode(s), 3, num_return_sequences=2)
        want = [(m.tok.decode(h.ids), h.score) for h in r]
        assert all(a == b and abs(x - y) <= SCORE_TOL for (a, x), (b, y) in zip(got[i], want)), (got[i], want)
    parse_nbest(attend(["translate", "-m", gguf, "--beam", "3", "--n-best", "1"], "ja\n").stdout, 1, 1)


def main():
    run = T.Runner()
    t0 = time.time()
    for name, fn in [("reference: early_stopping true vs false", check_early_stopping_true_false),
                     ("reference: early_stopping never", check_early_stopping_never),
                     ("reference: equal scores and eviction", check_equal_scores),
                     ("reference: length limit, forced EOS and finalize", check_length_limit),
                     ("reference: ending at once", check_at_once),
                     ("reference: logits processors", check_processors),
                     ("reference: generation defaults", check_generation_defaults),
                     ("reference: option parsing", check_cli_parse)]:
        run.check(name, fn)

    if not os.path.exists(T.ATTEND):
        print(f"no {T.ATTEND}: engine checks skipped")
        run.failed += 1
        run.finish()
    work = T.tempdir()
    src_spm, tgt_spm = P.build_spms(work)
    lines = P.sentences()
    isas = T.available_isas()
    models = make_models(work, src_spm, tgt_spm)
    print(f"kernel sets: {' '.join(isas)}; models built in {time.time() - t0:.0f} s")
    tally = Tally()
    for name, *_ in MODELS:
        hf, gguf, m = models[name]
        for n, setting in enumerate(SETTINGS):
            idx = [(n * PER_SETTING + j) % len(lines) for j in range(PER_SETTING)]
            beam, lp, es, k, extra = setting
            label = f"{name}: beam {beam} lp {lp} early {es} n-best {k} " + \
                " ".join(f"{a}={b}" for a, b in extra.items())
            run.check(label, compare_setting, name, gguf, m, lines, idx, setting, isas, tally, work)

    def endings():
        print(f"   {tally.compared} sentence runs identical; endings of the best: {tally.endings}")
        assert all(tally.endings.values()), "not every kind of ending was exercised"

    run.check("outputs end in every way", endings)
    hf, gguf, m = models["defaults"]
    run.check("model defaults (generation_config.json over config.json)", check_model_defaults,
              gguf, m, lines, isas, work)
    run.check("batched beam equals one at a time", check_batched_equals_single,
              models["forced"][1], lines, isas)
    for name, need in (("forced", len(isas)), ("no-forced-eos", 0)):  # the latter: mostly no </s>
        run.check(f"attention of the beam output: {name}", check_attention, name, models[name][1],
                  models[name][2], lines, isas, work, need)
    run.check("align --target longer than max_length", check_long_forced_target,
              models["forced"][1], models["forced"][2], isas)
    run.check("sampling", check_sampling, models["forced"][1], models["forced"][2], lines, isas, work)
    run.check("command-line contract", check_cli_contract, models["forced"][1], models["forced"][2])
    shutil.rmtree(work, ignore_errors=True)
    print(f"   ({time.time() - t0:.0f} s)")
    run.finish()


if __name__ == "__main__":
    main()
