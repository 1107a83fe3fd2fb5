#!/usr/bin/python3
"""tools/reference_whisper_generate.py and reference_whisper_timing.py checked against
themselves, against hand-worked cases and against the C side (model/token_times.c through
build/tests/test_token_times), on random Whisper models whose timestamp tokens are made
likely (their rows of the tied output projection moved along the mean decoder state):

- the timestamp rules (checked here by an independent reading of the rules) hold in every
  greedy and beam output, which hold several timestamp pairs;
- a beam of 1 gives greedy's tokens and log-probabilities;
- the decoder prompt and language detection as HF builds them;
- DTW paths worked out by hand, the median filter against a loop version, token times
  inside the audio's frames;
- 70 s of features decode window after window with HF's seek rule: windows that tile the
  audio in order, segments in order inside their windows;
- temperature fallback and skipping when their thresholds say so, reproducible sampling;
- the C token times and word merges equal the reference's on random cases;
- the command line prints the same result as the library call, with words.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import test_whisper as TW  # noqa: E402  (its random tokenizer folder)
import reference_whisper as W  # noqa: E402
import reference_whisper_generate as G  # noqa: E402
import reference_whisper_timing as TT  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C_TIMES = os.path.join(ROOT, "build", "tests", "test_token_times")
HEADS = [[1, 0], [1, 2], [0, 3]]
SUPPRESS = [5, 7]


# --------------------------------------------------------------------------------------
# Fixtures

def timestamp_model(seed=1, boost=1.5):
    """A mini multilingual model and its Settings; the timestamp tokens' rows moved by boost
    along the mean final decoder state of a few greedy paths, so timestamps come often."""
    c = W.shape_config("mini", False)
    s = G.settings_of(c, W.generation_config(c, SUPPRESS, HEADS))
    m = G.cache_cross_projections(W.random_model(c, seed=seed))
    prompt = G.init_tokens(s, "de", "transcribe", True)
    states = []
    with torch.no_grad():
        for k in range(2):
            memory = m.encode(W.random_features(80, seed=100 + k))
            r = G.greedy_or_sample(m, memory, prompt, G.Processors(s, len(prompt), True), 20, s.eot)
            states.append(m.decode(memory, prompt + r.tokens[:-1], states=True)[0])
        d = torch.cat(states).mean(0)
        m.model.decoder.embed_tokens.weight[s.timestamp_begin:] += boost * d / d.norm()
    return m, s


def pretty(s, tokens):
    return [f"<{(t - s.timestamp_begin) * 0.02:.2f}>" if t >= s.timestamp_begin else t for t in tokens]


def rule_breaks(tokens, tb, eot, max_initial, no_timestamps):
    """Where tokens (generated with timestamps, <|endoftext|> possibly last) break Whisper's
    timestamp rules, read from the paper's description rather than HF's code: a first
    timestamp within max_initial steps; never <|notimestamps|>; timestamps never decrease and
    come as pairs around text (after text a timestamp is followed by another or the end;
    after two, or after the first, text follows); a timestamp after text is later than the
    last one. Returns a list of messages (empty: all hold)."""
    out = []
    if not tokens or not tb <= tokens[0] <= tb + max_initial:
        out.append(f"first token {tokens[:1]} is not a timestamp within {max_initial} steps")
    if no_timestamps in tokens:
        out.append("<|notimestamps|> generated")
    last = None
    for i, t in enumerate(tokens):
        if t < tb:
            continue
        if last is not None and t < last:
            out.append(f"timestamp at {i} decreases")
        before = tokens[i - 1] if i else None
        if before is not None and before < tb and last is not None and t <= last:
            out.append(f"timestamp at {i} after text does not move on")
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        run = 1 + (before is not None and before >= tb)
        if i == 0 or run == 2:
            if after is not None and after >= tb:
                out.append(f"three timestamps (or two at the start) at {i}")
        elif after is not None and after < tb and after != eot:
            out.append(f"text right after the single timestamp at {i}")
        last = t
    return out


def pairs(tokens, tb):
    return sum(a >= tb and b >= tb for a, b in zip(tokens, tokens[1:]))


# --------------------------------------------------------------------------------------
# Checks

def check_rule_checker():
    """The rule reader can fail: each broken sequence is caught."""
    tb, eot, nt = 100, 50, 99
    good = [100, 1, 2, 105, 105, 3, 110, eot]
    assert rule_breaks(good, tb, eot, 50, nt) == [], rule_breaks(good, tb, eot, 50, nt)
    for bad in ([1, 100], [151, 1], [100, 1, 105, 3], [100, 1, 105, 104, 3], [100, 1, 105, 105, 106],
                [100, 1, 105, 105, 2, 105, eot], [100, 1, nt], [100, 101, 1]):
        assert rule_breaks(bad, tb, eot, 50, nt), f"{bad} passes"


def check_timestamp_rules(m, s):
    found = 0
    for k in range(3):
        f = W.random_features(80, seed=k)
        for beams in (1, 2) if k == 0 else (1,):
            r = G.transcribe(m, s, f, G.Options(language="de", task="transcribe", timestamps=True, num_beams=beams,
                                                max_length=36))
            for w in r["windows"]:
                breaks = rule_breaks(w.tokens, s.timestamp_begin, s.eot, s.max_initial_timestamp_index,
                                     s.no_timestamps)
                assert not breaks, f"features {k}, beams {beams}: {breaks}: {pretty(s, w.tokens)}"
                found += pairs(w.tokens, s.timestamp_begin)
    assert found >= 4, f"only {found} timestamp pairs: the check saw too few"


def check_beam_of_one(m, s):
    for k, timestamps in ((0, True), (1, False)):
        memory = m.encode(W.random_features(80, seed=k))
        prompt = G.init_tokens(s, "de", "transcribe", timestamps)
        procs = G.Processors(s, len(prompt), timestamps)
        g = G.greedy_or_sample(m, memory, prompt, procs, 30, s.eot)
        b = G.beam_search(m, memory, prompt, procs, 1, 30, s.eot)
        assert b.tokens == g.tokens, f"beam 1 {b.tokens} != greedy {g.tokens}"
        # greedy records processed logits, beams processed log-probabilities (not renormalised
        # after suppression); HF's avg_logprob takes log_softmax of either
        lg = [float(torch.log_softmax(r, -1)[t]) for r, t in zip(g.scores, g.tokens)]
        lb = [float(torch.log_softmax(r, -1)[t]) for r, t in zip(b.scores, b.tokens)]
        assert np.allclose(lg, lb, atol=1e-4), (lg, lb)


def check_prompts(m, s):
    lang, tr, tl, nt = s.lang_to_id["<|de|>"], s.task_to_id["transcribe"], s.task_to_id["translate"], s.no_timestamps
    assert G.init_tokens(s, "de", "translate", False) == [s.sot, lang, tl, nt]
    assert G.init_tokens(s, "de", None, True) == [s.sot, lang, tr]      # a language alone: transcribe
    assert G.init_tokens(s, None, None, False, lambda: lang) == [s.sot, lang, nt]  # HF adds no task here
    forced = G.Settings(**{**s.__dict__, "forced_decoder_ids": [[1, None], [2, tr]]})
    assert G.init_tokens(forced, None, None, False, lambda: lang) == [s.sot, lang, tr, nt]
    en = G.Settings(**{**s.__dict__, "lang_to_id": {}, "task_to_id": {}})
    assert G.init_tokens(en, None, None, False) == [s.sot, nt]
    try:
        G.init_tokens(en, "de", None, False)
        raise AssertionError("a language accepted by an English-only model")
    except ValueError:
        pass
    f = W.random_features(80, seed=5)
    with torch.no_grad():
        logits = m.decode(m.encode(f), [s.sot])[0][-1]
    ids = sorted(s.lang_to_id.values())
    assert G.detect_language(m, s, f) == ids[int(torch.argmax(logits[ids]))]
    r = G.transcribe(m, s, f, G.Options(task="transcribe", max_length=8))
    assert r["init"][:2] == [s.sot, G.detect_language(m, s, f)], r["init"]


def check_dtw_by_hand():
    """Paths worked out cell by cell (see tests/test_token_times.c): equal neighbours and a
    diagonal that only ties go left."""
    cases = [([[1, 0, 0], [0, 1, 1]], [0, 1, 1, 1], [0, 0, 1, 2]),
             ([[1, 0], [-1, 0]], [0, 1, 1], [0, 0, 1]),
             ([[5, 0, 0], [0, 5, 0], [0, 0, 5]], [0, 1, 1, 2, 2], [0, 0, 1, 1, 2]),
             ([[0, 9, 0, 0], [0, 0, 0, 9]], [0, 0, 1, 1, 1], [0, 1, 1, 2, 3])]
    for m, rows, cols in cases:
        text, time = TT.dtw(-np.array(m, dtype=np.float64))
        assert text.tolist() == rows and time.tolist() == cols, (m, text, time)


def naive_median(row, width):
    pad = width // 2
    n = len(row)
    if n <= pad:
        return list(row)
    out = []
    for i in range(n):
        win = [row[abs(k) if k < n else 2 * (n - 1) - k] for k in range(i - pad, i + pad + 1)]
        win.sort(key=lambda v: (np.isnan(v), v))
        out.append(win[pad])
    return out


def check_median_filter():
    rng = np.random.default_rng(3)
    for n in range(1, 16):
        for width in (1, 3, 5, 7):
            x = rng.integers(-3, 4, size=(2, n)).astype(np.float32)
            if n > 4:
                x[1, 2] = np.nan
            got = TT.median_filter(torch.from_numpy(x), width).numpy()
            for r in range(2):
                want = np.array(naive_median(list(x[r]), width), dtype=np.float32)
                assert np.array_equal(got[r], want, equal_nan=True), (x[r], width, got[r], want)


def check_token_times_inside_audio(m, s):
    f = W.random_features(80, seed=2)
    prompt = G.init_tokens(s, "de", "transcribe", False)
    memory = m.encode(f)
    r = G.greedy_or_sample(m, memory, prompt, G.Processors(s, len(prompt), False), 24, s.eot)
    weights = TT.alignment_weights(G.path_cross_attention(m, memory, prompt + r.tokens), HEADS)
    assert weights.shape[:2] == (3, len(prompt) + len(r.tokens) - 1), weights.shape
    for num_frames in (None, 1000, 60):
        t = TT.token_timestamps(weights, num_frames)
        assert t[0] == 0 and len(t) == len(prompt) + len(r.tokens), t
        assert all(a <= b for a, b in zip(t[1:], t[2:])), t
        top = (num_frames // 2 if num_frames else 1500) - 1
        assert 0 <= t[1:].min() and t.max() <= top * 0.02 + 1e-6, (num_frames, t.max())


def long_features(seconds=70):
    parts = [W.random_features(80, seed=20 + k) for k in range(seconds // 30 + 1)]
    return np.concatenate(parts, axis=1)[:, : seconds * 100]


def seek_advance(tokens, tb, frames):
    """HF's seek rule, read off a window's tokens (without the end token) independently:
    two timestamps in a row close a segment; a last lone timestamp or no pair: the whole
    window; else the first timestamp of the last pair, 2 frames a step."""
    if len(tokens) >= 2 and tokens[-1] >= tb and tokens[-2] < tb:
        return frames
    last_pair = [i for i in range(len(tokens) - 1) if tokens[i] >= tb and tokens[i + 1] >= tb]
    return 2 * (tokens[last_pair[-1]] - tb) if last_pair else frames


def check_long_form(m, s):
    f = long_features()
    r = G.transcribe(m, s, f, G.Options(language="de", task="transcribe", max_length=24))
    wins, segs = r["windows"], r["segments"]
    assert len(wins) >= 3, len(wins)
    assert wins[0].seek == 0 and wins[-1].seek + wins[-1].frames == f.shape[1], [(w.seek, w.frames) for w in wins]
    for a, b in zip(wins, wins[1:]):
        seq = [t for t in a.tokens if t != s.eot]
        assert b.seek == a.seek + seek_advance(seq, s.timestamp_begin, a.frames), (a.seek, b.seek, pretty(s, seq))
        assert a.frames == min(3000, f.shape[1] - a.seek)
    assert len(segs) >= len(wins) - 1, len(segs)
    for a, b in zip(segs, segs[1:]):
        assert a["start"] <= b["start"] and a["seek"] <= b["seek"], (a, b)
    for seg in segs:
        assert seg["seek"] * 0.01 - 1e-9 <= seg["start"] <= seg["end"] <= seg["seek"] * 0.01 + 30 + 1e-9, seg


def check_fallback(m, s):
    f = W.random_features(80, seed=7)
    base = dict(language="de", task="transcribe", max_length=20)  # one window each: no timestamps
    r = G.transcribe(m, s, f, G.Options(**base, temperatures=(0.0, 0.5, 1.0), compression_ratio_threshold=0.0,
                                        seed=4))
    assert {w.temperature for w in r["windows"]} == {1.0}, [w.temperature for w in r["windows"]]
    again = G.transcribe(m, s, f, G.Options(**base, temperatures=(0.0, 0.5, 1.0), compression_ratio_threshold=0.0,
                                            seed=4))
    assert [w.tokens for w in r["windows"]] == [w.tokens for w in again["windows"]], "sampling not reproducible"
    greedy = G.transcribe(m, s, f, G.Options(**base))
    assert r["windows"][0].tokens != greedy["windows"][0].tokens, "sampling at 1.0 gave greedy's tokens"
    kept = G.transcribe(m, s, f, G.Options(**base, temperatures=(0.0, 1.0), logprob_threshold=-1e9))
    assert [w.temperature for w in kept["windows"]] == [0.0] * len(kept["windows"])
    assert [w.tokens for w in kept["windows"]] == [w.tokens for w in greedy["windows"]]
    skipped = G.transcribe(m, s, f, G.Options(**base, temperatures=(0.0, 1.0), logprob_threshold=1e9,
                                              no_speech_threshold=0.0))
    assert skipped["segments"] == [] and all(w.skip for w in skipped["windows"]), skipped["segments"]
    assert G.compression_ratio([7] * 200, 51865) > 10 > G.compression_ratio(list(range(40)), 51865)
    lp = G.avg_logprob([torch.tensor([0.0, 0.0]), torch.tensor([0.0, float("-inf")])], [1, 0], 0.0)
    assert abs(lp - (np.log(0.5) + 0.0) / 2) < 1e-6, lp


def check_c_token_times():
    if not os.path.exists(C_TIMES):
        raise AssertionError(f"{C_TIMES} is missing: make {os.path.relpath(C_TIMES, ROOT)}")
    rng = np.random.default_rng(11)
    for k in range(60):
        heads, rows, frames = int(rng.integers(1, 5)), int(rng.integers(1, 40)), int(rng.integers(1, 300))
        audio, width = int(rng.integers(0, frames + 5)), int(rng.choice([1, 3, 7]))
        a = rng.random((heads, rows, frames)) ** 4
        a = (a / a.sum(-1, keepdims=True)).astype(np.float32)
        # (not rows equal in a column: there HF's result hangs on torch's float32 rounding of
        # the mean, NaN or +-inf; model/token_times.h says what attend does)
        want = TT.token_timestamps(a, 2 * audio if 0 < audio < frames else None, width)[1:]
        inp = f"{heads} {rows} {frames} {audio} {width} 0.02\n" + " ".join("%.9g" % x for x in a.ravel())
        p = subprocess.run([C_TIMES, "--times"], input=inp, capture_output=True, text=True, check=True)
        got = np.array([float(x) for x in p.stdout.split()])
        assert np.allclose(got, want, atol=1e-6), (k, got, want)


PIECES = [" the", "cat", " sat", ",", ".", " (", ")", " \"", "\"", "!", " ", "-", " ¿", "?", "。", "，", "你", "好",
          "é", "\u2028", "\u3000", " “", "”", "'", " '", "s", "\ufffd", "\xa0"]


def check_c_words():
    rng = np.random.default_rng(12)
    for k in range(200):
        text = b"".join(PIECES[int(rng.integers(len(PIECES)))].encode() for _ in range(int(rng.integers(0, 12))))
        if k % 5 == 0:
            text += bytes([int(rng.integers(128, 256))])
        cuts = sorted(set(int(x) for x in rng.integers(0, len(text) + 1, size=int(rng.integers(0, 8))))) + [len(text)]
        toks = [text[a:b] for a, b in zip([0] + cuts, cuts) if b > a]
        unicode_split = k % 3 == 0
        words, idx = TT.combine_into_words(toks, "zh" if unicode_split else "en")
        want = [(i[0], len(i), w.encode().hex()) for w, i in zip(words, idx)]
        inp = f"{len(toks)} {int(unicode_split)}\n" + "".join(f"{t.hex() or '-'} {j} {j + 1}\n" for j, t in enumerate(toks))
        p = subprocess.run([C_TIMES, "--words"], input=inp, capture_output=True, text=True, check=True)
        got = []
        for line in p.stdout.splitlines():
            f = line.split()
            got.append((int(f[0]), int(f[1]), f[4] if len(f) > 4 else ""))
            assert float(f[2]) == int(f[0]) and float(f[3]) == int(f[0]) + int(f[1]), line
        assert got == want, (toks, got, want)


def check_command_line(m, s, work):
    tok = os.path.join(work, "tokenizer")
    TW.write_tokenizer(tok, m.config)
    ck = os.path.join(work, "checkpoint")
    W.save_checkpoint(m, ck, tok, suppress=SUPPRESS, alignment_heads=HEADS)
    feats = os.path.join(work, "f.npy")
    f = W.random_features(80, seed=1)
    np.save(feats, f)
    p = subprocess.run([T.PYTHON, os.path.join(ROOT, "tools", "reference_whisper_generate.py"), ck, feats,
                        "--language", "de", "--task", "transcribe", "--timestamps", "--max-length", "30",
                        "--word-timestamps", "--num-frames", "2400"], capture_output=True, text=True, check=True)
    out = json.loads(p.stdout)
    r = G.transcribe(m, s, f, G.Options(language="de", task="transcribe", timestamps=True, max_length=30,
                                        token_timestamps=True, num_frames=2400))
    assert out["tokens"] == [t for seg in r["segments"] for t in seg["tokens"]]
    assert [(x["start"], x["end"]) for x in out["segments"]] == [(x["start"], x["end"]) for x in r["segments"]]
    assert out["language"] == "de" and out["prompt"] == r["windows"][0].prompt
    for seg in out["segments"]:
        assert len(seg["token_times"]) == len(seg["tokens"]), seg
        assert all(a <= b for a, b in zip(seg["token_times"], seg["token_times"][1:])), seg["token_times"]
    words = out["words"]
    assert words, "no words"
    for i, seg in enumerate(out["segments"]):  # a segment's words hold its text tokens, in order
        mine = [w for w in words if w["segment"] == i]
        text = [k for k, t in enumerate(seg["tokens"]) if t < s.eot]
        covered = [k for w in mine for k in range(*w["tokens"]) if seg["tokens"][k] < s.eot]
        assert covered == text, (i, covered, text)
        assert "".join(w["word"] for w in mine) == seg["text"], (mine, seg["text"])
    assert all(w["start"] <= w["end"] for w in words) and all(a["start"] <= b["start"] for a, b in zip(words, words[1:]))
    assert all(w["end"] <= 1200 * 0.02 + 30 for w in words)


def main():
    r = T.Runner()
    work = T.tempdir()
    try:
        m, s = timestamp_model()
        r.check("the rule reader catches broken timestamp sequences", check_rule_checker)
        r.check("timestamp rules hold in greedy and beam outputs", check_timestamp_rules, m, s)
        r.check("a beam of 1 gives greedy's tokens and log-probabilities", check_beam_of_one, m, s)
        r.check("decoder prompts and language detection as HF builds them", check_prompts, m, s)
        r.check("DTW paths worked out by hand", check_dtw_by_hand)
        r.check("the median filter equals a loop version", check_median_filter)
        r.check("token times inside the audio's frames", check_token_times_inside_audio, m, s)
        r.check("70 s decode in windows by HF's seek rule", check_long_form, m, s)
        r.check("temperature fallback and skipping", check_fallback, m, s)
        r.check("C token times equal the reference's", check_c_token_times)
        r.check("C word merges equal the reference's", check_c_words)
        r.check("the command line prints the library's result, with words", check_command_line, m, s, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
