#!/usr/bin/python3
"""Result.score and Result.normalized_score: one meaning each, whatever the search.

score is the sum of the generated tokens' log-probabilities, normalized_score that sum /
length ** length_penalty (length: the tokens generated after a target prefix, </s> and a
forced first token counted, as HF's beam search counts generated_len). On the shipped model
(models/de-en.gguf, Multi30k lines):

- greedy, beams, n-best, sampling (n-best samples) and Model.score, length penalties 1.0 and
  0.6: every hypothesis's score equals the sum of its logprob (scores=True; beams sum their
  log-probabilities with <pad> left out of the log-softmax, as HF's Marian beam search, so
  within 1e-3 there), and normalized_score equals score / len ** length_penalty;
- a target prefix is left out of both (its tokens' log-probabilities and its length);
- scores=False: beams still carry both (the same values); greedy and sampling give NaN;
- `attend translate --n-best` prints normalized_score; save_npz writes both.

On a random Marian model against tools/reference.py's beam search (HF's BeamSearchScorer
rules): normalized_score equals the reference's sequence score (HF's sequences_scores) and
score its running sum of log-probabilities, within 1e-4, for each n-best hypothesis.

Run: /usr/bin/python3 tests/test_python_scores.py"""
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402
import reference as R  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
LP_TOL = 1e-4      # a float32 sum of logprob against score, same log-probabilities
BEAM_LP_TOL = 1e-3  # beams: <pad> left out of the beam's log-softmax (HF's Marian rule)
REF_TOL = 1e-4     # against the reference's scores (as tests/test_beam.py)
TIE_GAP = 1e-4
M = None


def model():
    global M
    if M is None:
        M = attend.Model(MODEL, threads=2)
    return M


def lines(n=6):
    return T.corpus_lines("multi30k", "de", n, skip=100)


def check_scales(what, h, lp, tol, n_prefix=0):
    """h (a Result or Hypothesis): score = sum of logprob after the prefix, normalized_score
    = score / length ** lp."""
    logprob = h.logprob
    ids = h.tgt_ids if hasattr(h, "tgt_ids") else h.ids
    total = float(np.asarray(logprob[n_prefix:], dtype=np.float64).sum())
    assert abs(h.score - total) <= tol, f"{what}: score {h.score} != sum of logprob {total}"
    want = h.score / (len(ids) - n_prefix) ** lp
    assert abs(h.normalized_score - want) <= 1e-6 * abs(want) + 1e-7, \
        f"{what}: normalized_score {h.normalized_score} != {h.score} / {len(ids) - n_prefix} ** {lp} = {want}"


def every_search():
    m = model()
    src = lines()
    for lp in (1.0, 0.6):
        for kw, tol in ((dict(greedy=True), LP_TOL), (dict(beam=4), BEAM_LP_TOL),
                        (dict(beam=5, n_best=3), BEAM_LP_TOL), (dict(sample=True, n_best=3, seed=5), LP_TOL)):
            for r in m.translate(src, length_penalty=lp, **kw):
                check_scales(f"{kw} lp {lp} {r.source!r}", r, lp, tol)
                assert (r.score, r.normalized_score) == (r.nbest[0].score, r.nbest[0].normalized_score)
                for k, h in enumerate(r.nbest):
                    check_scales(f"{kw} lp {lp} {r.source!r} hypothesis {k}", h, lp, tol)
    targets = [r.text for r in m.translate(src, greedy=True)]
    for r in m.score(src, targets, attention=False):  # the model's length_penalty, 1.0
        check_scales(f"score() {r.source!r}", r, m.config.length_penalty, LP_TOL)


def prefix_left_out():
    m = model()
    for line in lines(3):
        n_prefix = len(m.score(line, "A man", attention=False).tgt_ids) - 1  # its ids, then </s>
        for kw, tol in ((dict(greedy=True), LP_TOL), (dict(beam=3, n_best=2), BEAM_LP_TOL)):
            r = m.translate(line, target_prefix="A man", **kw)
            for h in r.nbest:
                check_scales(f"{kw} prefix {line!r}", h, 1.0, tol, n_prefix)


def without_scores():
    m = model()
    src = lines(4)
    for a, b in zip(m.translate(src, beam=4, n_best=2), m.translate(src, beam=4, n_best=2, scores=False)):
        assert [(h.score, h.normalized_score) for h in a.nbest] == [(h.score, h.normalized_score) for h in b.nbest]
    for kw in (dict(greedy=True), dict(sample=True, seed=1)):
        for r in m.translate(src, scores=False, **kw):
            assert math.isnan(r.score) and math.isnan(r.normalized_score), (kw, r.score, r.normalized_score)
            assert r.logprob is None
    blank = m.translate("   ", greedy=True)
    assert (blank.score, blank.normalized_score) == (0.0, 0.0)


def cli_and_npz():
    m = model()
    src = lines(3)
    out = T.run_attend(["translate", "-m", MODEL, "-t", "2", "--beam", "4", "--n-best", "2"], "\n".join(src) + "\n").stdout
    want = [f"{i} ||| {h.text} ||| {h.normalized_score:.6f}" for i, r in enumerate(m.translate(src, beam=4, n_best=2))
            for h in r.nbest]
    assert out.splitlines() == want, (out, want)
    path = os.path.join(T.tempdir(), "s.npz")
    rs = m.translate(src, beam=3, n_best=2, attention=True)
    attend.save_npz(rs, path)
    z = np.load(path)
    for i, r in enumerate(rs):
        assert z[f"s{i}/score"][0] == np.float32(r.score)
        assert z[f"s{i}/normalized_score"][0] == np.float32(r.normalized_score)
        assert z[f"s{i}/nbest1/normalized_score"][0] == np.float32(r.nbest[1].normalized_score)


def hf_reference():
    """Beams on a random model against the reference's BeamSearchScorer: normalized_score is
    HF's sequence score, score the running sum of log-probabilities."""
    work = T.tempdir()
    gguf = T.random_gguf(work, seed=7, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                         decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=16)
    ref_model = R.load_hf_dir(os.path.join(work, "m"))
    m = attend.Model(gguf, threads=1)
    compared = 0
    for B, lp, k in ((3, 1.0, 2), (4, 0.6, 3), (2, 1.4, 2)):
        for line in T.corpus_lines("tatoeba", "de", 6, skip=500):
            ref = R.beam_search(ref_model, ref_model.tok.encode(line), B, length_penalty=lp, num_return_sequences=k)
            if ref.near_tie < TIE_GAP:
                continue
            got = m.translate(line, beam=B, length_penalty=lp, early_stopping=False, n_best=k, split=False)
            T.check_nbest(f"beam {B} lp {lp} {line!r}", got.nbest, ref, REF_TOL)
            assert got.normalized_score == got.nbest[0].normalized_score
            compared += 1
    m.close()
    assert compared >= 12, f"only {compared} sentences without near ties"


def main():
    run = T.Runner()
    run.check("greedy, beams, n-best, sampling, score(): score = sum of logprob, normalized = score / len ** lp",
              every_search)
    run.check("a target prefix is left out of both scores", prefix_left_out)
    run.check("scores=False: beams keep both, greedy and sampling NaN; blank lines 0", without_scores)
    run.check("attend translate --n-best prints normalized_score; save_npz writes both", cli_and_npz)
    run.check("beams: normalized_score = the reference's (HF's) sequence score, score its sum", hf_reference)
    run.finish()


if __name__ == "__main__":
    main()
