#!/usr/bin/python3
"""Whisper word timestamps: attend's words (attend_speech_params.word_timestamps) equal the
reference's, HF's return_token_timestamps and its pipeline's word merging
(tools/reference_whisper_generate.py, reference_whisper_timing.py), on a random multilingual
checkpoint whose timestamp tokens are made likely (test_whisper_reference.timestamp_model),
saved as an HF folder with its tokenizer files and exported with tools/export_whisper.py.

- one window: greedy and beam search, with timestamp tokens (several segments) and without,
  the attention cropped to the frames of sound (HF's num_frames) or not: the same tokens,
  then the same words (text, start, end, segment), each word's probability (the mean of its
  tokens' as the segment's avg_logprob reads them) within 1e-4;
- long-form (70 s): window after window by HF's seek rule, words across windows;
- the command line (--word-timestamps: json's segment words, verbose_json's "words") and
  Model.transcribe(word_timestamps=True) give the library's words;
- --word-timestamps with --dump-attention (one window's raw result) is refused.
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import testlib as T  # noqa: E402
import test_whisper as TW  # noqa: E402  (its tokenizer folder)
import test_whisper_reference as TR  # noqa: E402  (its timestamp-prone model)
import reference_whisper as W  # noqa: E402
import reference_whisper_generate as G  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LENGTH = 30


# --------------------------------------------------------------------------------------
# Fixtures

def checkpoint(work, m, name):
    """m as an HF folder with a tokenizer, exported to .gguf; (folder, gguf path)."""
    tok = os.path.join(work, "tokenizer")
    if not os.path.isdir(tok):
        TW.write_tokenizer(tok, m.config)
    ck = os.path.join(work, name)
    W.save_checkpoint(m, ck, tok, suppress=TR.SUPPRESS, alignment_heads=TR.HEADS)
    gguf = os.path.join(work, name + ".gguf")
    subprocess.run([T.PYTHON, os.path.join(ROOT, "tools", "export_whisper.py"), ck, gguf], check=True,
                   capture_output=True)
    return ck, gguf


def reference_words(m, s, table, features, **options):
    """(segments' tokens, words) of the reference's transcription; each word with the mean
    probability of its tokens as the window's avg_logprob reads them (HF's recorded scores,
    after the processors; with beams the model's own; HF's pipeline gives no probability)."""
    r = G.transcribe(m, s, features, G.Options(language="de", task="transcribe", max_length=MAX_LENGTH,
                                               token_timestamps=True, **options))
    words = G.words_of(table, r, s)
    probs = {}  # window -> [generated token] -> probabilities
    with torch.no_grad():
        for k, w in enumerate(r["windows"]):
            if options.get("num_beams", 1) > 1:  # beams: the model's own (raw logits along the path)
                memory = m.encode(G.window_of(features, w.seek, w.frames, 3000))
                rows = m.decode(memory, w.prompt + w.tokens[:-1])[0][len(w.prompt) - 1:]
            else:  # greedy: the scores HF records (after the processors), as avg_logprob reads them
                rows = torch.stack(w.scores)
            probs[k] = torch.softmax(rows.double(), -1)
    for w in words:
        seg = r["segments"][w["segment"]]
        p, at = probs[seg["window"]], seg["idxs"][0] - len(r["windows"][seg["window"]].prompt)
        w["probability"] = float(np.mean([float(p[at + j, seg["tokens"][j]]) for j in range(*w["tokens"])
                                          if seg["tokens"][j] < s.eot]))
    return [seg["tokens"] for seg in r["segments"]], words


def attend_words(model, features, timestamps, beams, audio_frames):
    """(segments' tokens, words, transcript text) from attend_transcribe_features on the same
    features, through the Python package's structs."""
    from attend import _capi as C, _speech as S
    lib = S._declare()
    lib.attend_transcribe_features.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int,
                                               ctypes.POINTER(S.attend_speech_params),
                                               ctypes.POINTER(C.attend_params), ctypes.POINTER(S.attend_transcript),
                                               ctypes.c_char_p, ctypes.c_size_t]
    x = np.ascontiguousarray(features, dtype=np.float32)
    sp = S.attend_speech_params(b"de", 0, int(timestamps))
    sp.word_timestamps, sp.audio_frames = 1, audio_frames
    p = lib.attend_default_params()
    p.num_beams, p.max_length, p.threads = beams, MAX_LENGTH, 2
    t, err = S.attend_transcript(), C.err_buffer()
    h = model._enter()
    try:
        rc = lib.attend_transcribe_features(h, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), x.shape[1],
                                            ctypes.byref(sp), ctypes.byref(p), ctypes.byref(t), err, C.ERR_LEN)
    finally:
        model._leave()
    assert rc == 0, C.decode(err.value)
    try:
        out = S._from_c(t)
    finally:
        lib.attend_transcript_free(ctypes.byref(t))
    words = [(w.word, w.start, w.end, k, w.probability) for k, seg in enumerate(out.segments) for w in seg.words]
    return [seg.tokens for seg in out.segments], words, out


def same_words(got, want):
    """attend's words against the reference's: text, start, end (to the centisecond HF rounds
    to), segment, probability within 1e-4."""
    assert [g[0] for g in got] == [w["word"] for w in want], ([g[0] for g in got], [w["word"] for w in want])
    for g, w in zip(got, want):
        assert (round(g[1], 2), round(g[2], 2), g[3]) == (w["start"], w["end"], w["segment"]), (g, w)
        assert abs(g[4] - w["probability"]) <= 1e-4, (g, w)


# --------------------------------------------------------------------------------------
# Checks

def first_window(segments, tb):
    """How many of the segments came from the first window: a later window's first timestamp
    restarts below the one before it."""
    for i in range(1, len(segments)):
        if tb <= segments[i][0] < segments[i - 1][-1]:
            return i
    return len(segments)


def check_one_window(m, s, table, model, timestamps, beams, num_frames):
    f = W.random_features(80, seed=1)
    want_tokens, want = reference_words(m, s, table, f, timestamps=timestamps, num_beams=beams,
                                        num_frames=num_frames)
    got_tokens, got, _ = attend_words(model, f, timestamps, beams, num_frames or 0)
    if num_frames:  # the first window's segments: the reference's seek runs on into the padding
        n = first_window(want_tokens, s.timestamp_begin)  # (HF without an attention mask), attend's
        want_tokens, want = want_tokens[:n], [w for w in want if w["segment"] < n]  # stops at the sound's end
        got_tokens, got = got_tokens[:n], [w for w in got if w[3] < n]
    assert got_tokens == want_tokens, (got_tokens, want_tokens)
    assert want, "the reference gave no words"
    if timestamps:
        assert len(want_tokens) >= 2, f"one segment only: {want_tokens}"
    same_words(got, want)


def check_short_form(m, s, table, model):
    """Features without their length decode as HF's generate() without an attention mask: a
    window whose last segment closes early is decoded again from there, padding and all (the
    reference's windows). With the sound's length known (HF's attention mask; attend_transcribe
    and the command line know it) the seek stops at the sound's end: only the first window's
    segments that start inside the sound."""
    ends_early = 0
    for seed in range(2, 8):
        f = W.random_features(80, seed=seed)
        want_tokens, _ = reference_words(m, s, table, f, timestamps=True, num_beams=1, num_frames=None)
        got_tokens, _, out = attend_words(model, f, True, 1, 0)
        assert got_tokens == want_tokens, (seed, got_tokens, want_tokens)
        tb, i = s.timestamp_begin, first_window(got_tokens, s.timestamp_begin)
        if i == len(got_tokens):
            continue
        seek = round(out.segments[i].start - (got_tokens[i][0] - tb) * 0.02, 2)  # where window 2 began
        ends_early += 1
        heard = int(seek * 100) - 1  # the sound ends just before: no second window
        short_tokens, _, short = attend_words(model, f, True, 1, heard)
        assert abs(short.duration - heard / 100) < 1e-9 and short_tokens == got_tokens[:i], (seed, short_tokens)
    assert ends_early, "no seed decoded a second window: the check tests nothing"


def check_long_form(m, s, table, model):
    f = TR.long_features(70)
    want_tokens, want = reference_words(m, s, table, f)
    got_tokens, got, out = attend_words(model, f, True, 1, 3000)  # past one window HF crops nothing
    assert got_tokens == want_tokens, (got_tokens, want_tokens)
    assert len(want_tokens) >= 3 and max(w["start"] for w in want) > 30, want
    same_words(got, want)


def check_command_line(gguf, work, model):
    f = W.random_features(80, seed=1)
    feats = os.path.join(work, "f.npy")
    np.save(feats, f)
    base = ["transcribe", "-m", gguf, "--language", "de", "--max-length", str(MAX_LENGTH), "-t", "2",
            "--word-timestamps", feats]
    js = json.loads(T.run_attend(base + ["--output", "json"]).stdout)
    _, want, _ = attend_words(model, f, True, 0, 0)  # --word-timestamps turns timestamps on
    got = [(w["word"], w["start"], w["end"], k) for k, seg in enumerate(js["segments"]) for w in seg["words"]]
    assert got == [(w[0], round(w[1], 2), round(w[2], 2), w[3]) for w in want], (got, want)
    flat = [w for seg in js["segments"] for w in seg["words"]]
    assert len(js["segments"]) >= 2 and all(abs(w["probability"] - x[4]) < 1e-4 for w, x in zip(flat, want))
    vj = json.loads(T.run_attend(base + ["--output", "verbose_json"]).stdout)
    _, want, _ = attend_words(model, f, True, 0, 0)
    assert [(w["word"], w["start"], w["end"]) for w in vj["words"]] == \
        [(w[0].strip(), round(w[1], 2), round(w[2], 2)) for w in want], vj["words"]
    plain = json.loads(T.run_attend(base[:-2] + [feats, "--output", "json"]).stdout)
    assert all("words" not in seg for seg in plain["segments"]), "words without --word-timestamps"
    assert "--word-timestamps" in T.run_attend(["transcribe", "--help"]).stdout


def check_python(model):
    """Model.transcribe on 3 s of samples: the words of attend_transcribe_features on the
    same features with the 300 frames of sound (HF's num_frames) as the crop."""
    import attend
    from attend import _explore_audio as A
    rng = np.random.default_rng(5)
    n = 16000 * 3  # noise swelling and fading: the crop moves this random model's times
    audio = (0.1 * rng.standard_normal(n) * np.sin(np.arange(n) / 3000.0)).astype(np.float32)
    t = model.transcribe(audio, language="de", timestamps=True, max_length=MAX_LENGTH, word_timestamps=True)
    assert t.words and all(isinstance(w, attend.Word) for w in t.words), t
    assert t.duration == 3.0, f"a 3-s clip's duration: {t.duration} (its features are padded to 30 s)"
    untimed = model.transcribe(audio, language="de", max_length=MAX_LENGTH)  # one segment, to the sound's end
    assert untimed.segments and untimed.segments[-1].end == 3.0, untimed.segments
    assert "".join(w.word for w in t.words) == "".join(seg.text for seg in t.segments), t
    h = model._enter()
    try:
        mel = A._features(A._declare(), h, audio, model.config)
    finally:
        model._leave()
    _, want, _ = attend_words(model, mel, True, 0, 300)
    assert [(w.word, w.start, w.end, w.probability) for w in t.words] == [(w[0], w[1], w[2], w[4]) for w in want]
    _, cropped_not, _ = attend_words(model, mel, True, 0, 0)
    assert [w[1:3] for w in cropped_not] != [w[1:3] for w in want], "the 300 frames of sound changed no time"
    plain = model.transcribe(audio, language="de", timestamps=True, max_length=MAX_LENGTH)
    assert plain.words == [] and [s.text for s in plain.segments] == [s.text for s in t.segments]
    # word_timestamps turns timestamps on, as HF's pipeline does for return_timestamps="word"
    alone = model.transcribe(audio, language="de", max_length=MAX_LENGTH, word_timestamps=True)
    assert [(w.word, w.start, w.end) for w in alone.words] == [(w.word, w.start, w.end) for w in t.words]


def check_refusals(gguf, work):
    feats = os.path.join(work, "f.npy")
    p = T.run_attend(["transcribe", "-m", gguf, "--word-timestamps", "--dump-attention", os.path.join(work, "d.npz"),
                      feats], check=False)
    assert p.returncode == 2 and "--word-timestamps" in p.stderr, (p.returncode, p.stderr)


def main():
    r = T.Runner()
    work = T.tempdir()
    try:
        import attend
        m, s = TR.timestamp_model()
        ck, gguf = checkpoint(work, m, "boosted")
        table = G.token_bytes_table(ck)
        model = attend.Model(gguf, threads=2)
        for timestamps, beams, frames in ((True, 1, 600), (True, 3, 2400), (True, 1, None)):
            what = f"timestamps, {beams} beam(s), num_frames {frames}"
            r.check(f"one window, {what}: the reference's words", check_one_window, m, s, table, model,
                    timestamps, beams, frames)
        r.check("the seek stops at the sound's end, not in a short clip's padding", check_short_form, m, s, table, model)
        r.check("70 s, window by window: the reference's words", check_long_form, m, s, table, model)
        r.check("the command line's json and verbose_json words", check_command_line, gguf, work, model)
        r.check("Model.transcribe(word_timestamps=True)", check_python, model)
        r.check("--word-timestamps with --dump-attention refused", check_refusals, gguf, work)
        # without timestamp tokens: a model that seldom emits them (the boosted one emits them
        # even after <|notimestamps|>, where HF cuts segments at them and attend does not)
        m, s = TR.timestamp_model(boost=0.0)
        ck, gguf = checkpoint(work, m, "plain")
        for beams, frames in ((1, None), (3, 2000)):
            r.check(f"one window, no timestamps, {beams} beam(s), num_frames {frames}: the reference's words",
                    check_one_window, m, s, G.token_bytes_table(ck), attend.Model(gguf, threads=2), False, beams,
                    frames)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
