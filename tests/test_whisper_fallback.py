#!/usr/bin/python3
"""Whisper's temperature fallback (model/speech_fallback.c) against
tools/reference_whisper_generate.py (HF's generate_with_fallback and _need_fallback), on a
random mini multilingual model with likely timestamps (test_whisper_reference.py's) whose
<|nospeech|> row is moved so its probability after <|startoftranscript|> varies between
windows, and a copy whose greedy output repeats one token:

- at temperature 0 every segment equals the reference's: tokens, times (a window without a
  timestamp pair ends on the 0.02 s step), and its window's avg_logprob, compression ratio
  and no-speech probability within 1e-4;
- windows the thresholds call silent are skipped as the reference skips them;
- whether a window falls back is the reference's decision (a threshold between the
  windows' averages splits them);
- the repeating model surely falls back (compression ratio above 2.4): every kept window
  meets the thresholds or is the last temperature's, sampling reproducible by its seed;
- --language auto detects in the first window's decode (no separate pass);
- a window decoded again at each fallback temperature runs the encoder once;
- the no-speech probability reads the file's whisper.no_speech_id;
- without --task the prompt is HF's for task=None (forced_decoder_ids' task, or none);
- forced_decoder_ids that fix the language give HF's prompt (that language unless a language
  or a task is given);
- Python's Model.transcribe takes the same options; bad options are clear errors.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import test_whisper as TW  # noqa: E402  (its random tokenizer folder)
import test_whisper_reference as TR  # noqa: E402  (its timestamp model)
import reference_whisper as W  # noqa: E402
import reference_whisper_generate as G  # noqa: E402
import gguf_io  # noqa: E402  (tools/: rewrites a key of an exported file)

MAX_LENGTH = 40
N_FEATURES = 4
BASE = dict(language="de", task="transcribe", max_length=MAX_LENGTH)


# --------------------------------------------------------------------------------------
# Fixtures

def with_nospeech(m, s, features):
    """m with <|nospeech|>'s output row set along the decoder's state after
    <|startoftranscript|>, scaled so its probability there spreads around 0.5 over features.
    It is suppressed (never generated), so only the no-speech probability changes."""
    emb = m.model.decoder.embed_tokens.weight
    with torch.no_grad():
        h = torch.stack([m.decode(m.encode(f), [s.sot], states=True)[0][0] for f in features])
        emb[s.nospeech].zero_()
        d = h.mean(0) - h.mean(0).mean()
        emb[s.nospeech] = d / d.norm()
        dots = h @ emb[s.nospeech]
        others = torch.stack([torch.logsumexp(x @ emb.T, -1) for x in h])
        # logit = scale * dot: choose scale so the median window sits at even odds
        k = int(torch.argsort(dots)[len(dots) // 2])
        emb[s.nospeech] *= float(others[k] / dots[k]) if dots[k] > 0 else 1.0
    return m


def repeating(m, s, token=8969):
    """A copy of m whose greedy output without timestamps is token again and again: its row
    moved far along the mean decoder state."""
    r = W.random_model(m.config, seed=1)
    r.load_state_dict(m.state_dict())
    r = G.cache_cross_projections(r)
    emb = r.model.decoder.embed_tokens.weight
    with torch.no_grad():
        h = r.decode(r.encode(W.random_features(80, seed=3)), [s.sot], states=True)[0][0]
        emb[token] += 200 * h / h.norm() ** 2
    return r


def with_key(src, dst, key, value):
    """The .gguf file src written again as dst with metadata key set to value (CRCs redone)."""
    f = gguf_io.GGUFFile(src)
    meta = []
    for k, v in f.metadata.items():
        t = f.types[k]
        if isinstance(t, tuple):  # an array: (element type, values)
            t, v = gguf_io.ARRAY, (t[1], bytes(np.asarray(v, dtype=np.uint8)) if t[1] == gguf_io.UINT8 else v)
        meta.append((k, t, value if k == key else v))
    tensors = [(i["name"], np.array(f.tensors[i["name"]]), i["ggml_type"]) for i in f.tensor_infos]
    gguf_io.write(dst, meta, tensors)
    return dst


class Setup:
    def __init__(self, work):
        m, s = TR.timestamp_model()
        self.s = s
        self.features = [W.random_features(80, seed=7 + k) for k in range(N_FEATURES)]
        suppress = TR.SUPPRESS + [s.nospeech]
        s.suppress = suppress
        self.m = with_nospeech(m, s, self.features)
        self.rep = repeating(self.m, s)
        tok = os.path.join(work, "tok")
        TW.write_tokenizer(tok, m.config)
        self.gguf, self.rep_gguf = os.path.join(work, "m.gguf"), os.path.join(work, "rep.gguf")
        for model, gguf in ((self.m, self.gguf), (self.rep, self.rep_gguf)):
            ck = os.path.join(work, os.path.basename(gguf) + ".hf")
            W.save_checkpoint(model, ck, tok, suppress=suppress, alignment_heads=TR.HEADS)
            T.export(ck, gguf, exporter="export_whisper.py")
        # the same model with forced_decoder_ids as OpenAI's checkpoints have them, forcing translate
        self.forced_gguf = self.forced_export(work, tok, "forced", [[1, None], [2, s.task_to_id["translate"]]])
        # and as older multilingual checkpoints have them, forcing a language none of the
        # first two windows would be detected as
        detected = {G.detect_language(self.m, s, f) for f in self.features[:2]}
        self.forced_lang = next(i for i in sorted(s.lang_to_id.values()) if i not in detected)
        self.forced_lang_ids = [[1, self.forced_lang], [2, s.task_to_id["transcribe"]], [3, s.no_timestamps]]
        self.forced_lang_gguf = self.forced_export(work, tok, "forced-lang", self.forced_lang_ids)
        self.paths = []
        for k, f in enumerate(self.features):
            self.paths.append(os.path.join(work, f"f{k}.npy"))
            np.save(self.paths[-1], f)
        self.short = os.path.join(work, "short.npy")  # 24.01 s: no pair ends on the 0.02 s step
        np.save(self.short, self.features[0][:, :2401])
        self.cache = {}

    def forced_export(self, work, tok, name, forced_decoder_ids):
        """self.m exported with these forced_decoder_ids in its generation config."""
        ck = os.path.join(work, name + ".hf")
        W.save_checkpoint(self.m, ck, tok, suppress=self.s.suppress, alignment_heads=TR.HEADS)
        with open(os.path.join(ck, "generation_config.json")) as f:
            g = json.load(f)
        g["forced_decoder_ids"] = forced_decoder_ids
        with open(os.path.join(ck, "generation_config.json"), "w") as f:
            json.dump(g, f)
        return T.export(ck, os.path.join(work, name + ".gguf"), exporter="export_whisper.py")

    def reference(self, k, **options):
        """The reference on features k with timestamps (cached)."""
        key = (k, tuple(sorted(options.items())))
        if key not in self.cache:
            self.cache[key] = reference_segments(self.m, self.s, self.features[k], timestamps=True, **options)
        return self.cache[key]

    def attend(self, path, *args, gguf=None):
        p = T.run_attend(["transcribe", "-m", gguf or self.gguf, "--output", "json", "--language", "de",
                          "--max-length", str(MAX_LENGTH), *args, path])
        return json.loads(p.stdout)["segments"]


def reference_segments(model, s, f, **options):
    """The reference's transcribe() with BASE's options and these."""
    return G.transcribe(model, s, f, G.Options(**BASE, **options))


def same_segments(got, want):
    assert [g["tokens"] for g in got] == [w["tokens"] for w in want], ([g["tokens"] for g in got],
                                                                         [w["tokens"] for w in want])
    for g, w in zip(got, want):
        assert abs(g["start"] - w["start"]) < 0.006 and abs(g["end"] - w["end"]) < 0.006, (g, w)
        for key in ("avg_logprob", "compression_ratio", "no_speech_prob"):
            assert abs(g[key] - w[key]) < 1e-4, (key, g[key], w[key])
        assert g["temperature"] == w["temperature"], (g, w)


THRESHOLDS = ("--compression-ratio-threshold", "--logprob-threshold", "--no-speech-threshold")


def flags(cr=None, lp=None, ns=None):
    return [x for k, v in zip(THRESHOLDS, (cr, lp, ns)) if v is not None for x in (k, repr(float(v)))]


# --------------------------------------------------------------------------------------
# Checks

def check_measures(u):
    """Temperature 0, timestamps: segments, times and window measures equal the reference's;
    without timestamps a 24.01 s window without timestamp tokens ends at 24.00 s, as HF
    rounds (the repeating model writes none)."""
    nsp = []
    for k, path in enumerate(u.paths):
        r = u.reference(k)
        same_segments(u.attend(path, "--timestamps"), r["segments"])
        nsp += [w.no_speech_prob for w in r["windows"]]
    assert 0.02 < np.median(nsp) < 0.98 and max(nsp) - min(nsp) > 0.05, nsp  # the measure is exercised
    got = u.attend(u.short, gguf=u.rep_gguf)
    want = G.transcribe(u.rep, u.s, np.load(u.short), G.Options(**BASE))["segments"]
    same_segments(got, want)
    assert len(got) == 1 and max(got[0]["tokens"]) < u.s.timestamp_begin and got[0]["end"] == 24.0, got


def check_skip(u):
    """no_speech_threshold with logprob_threshold: the windows the reference skips are
    skipped (no segments), the others kept; the threshold at the median skips some only."""
    cut = float(np.median([u.reference(k)["windows"][0].no_speech_prob for k in range(N_FEATURES)]))
    skipped = 0
    for k, path in enumerate(u.paths):
        r = u.reference(k, logprob_threshold=0.0, no_speech_threshold=cut)
        skipped += r["windows"][0].skip
        same_segments(u.attend(path, "--timestamps", *flags(lp=0.0, ns=cut)), r["segments"])
    assert 0 < skipped < N_FEATURES, skipped


def check_decision(u):
    """With temperatures 0 and 1 and a logprob threshold between the first windows' averages,
    the first window falls back (sampled at 1.0) where the reference's average is below it
    (HF's _need_fallback), else attend keeps greedy's segments; sampling is reproducible by
    its seed and another seed draws differently."""
    firsts = [u.reference(k)["windows"][0].avg_logprob for k in range(N_FEATURES)]
    cut = float(np.median(firsts))
    fell = []
    for k, path in enumerate(u.paths):
        args = ["--timestamps", "--temperature", "0,1", *flags(lp=cut)]
        got = u.attend(path, *args)
        if firsts[k] < cut:
            fell.append((path, args, got))
            assert got and got[0]["temperature"] == 1.0, got
        else:  # the first window's segments (a later window may fall back)
            want = [seg for seg in u.reference(k)["segments"] if seg["window"] == 0]
            same_segments(got[:len(want)], want)
    assert 0 < len(fell) < N_FEATURES, fell
    path, args, got = fell[0]
    assert u.attend(path, *args) == got, "the same seed drew differently"
    assert u.attend(path, *args, "--seed", "7") != got, "seeds 0 and 7 drew the same"


def check_repeats_fall_back(u):
    """The repeating model: greedy's compression ratio is above 2.4 in attend and in the
    reference alike; with OpenAI's list every kept window meets the thresholds or is the last
    temperature's."""
    temps = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    for path, f in zip(u.paths[:2], u.features[:2]):
        greedy = u.attend(path, "--timestamps", "--max-length", "60", gguf=u.rep_gguf)
        want = G.transcribe(u.rep, u.s, f, G.Options(**dict(BASE, max_length=60), timestamps=True))["segments"]
        same_segments(greedy, want)
        assert greedy[0]["compression_ratio"] > 2.4, greedy[0]
        args = ["--timestamps", "--max-length", "60", "--temperature", ",".join(map(str, temps)),
                *flags(cr=2.4, lp=-1.0)]
        got = u.attend(path, *args, gguf=u.rep_gguf)
        assert got, "no segments"
        for g in got:
            assert g["temperature"] in temps[1:], g
            assert g["temperature"] == temps[-1] or (g["compression_ratio"] <= 2.4 and g["avg_logprob"] >= -1.0), g


def check_encode_once(u):
    """A window decoded again at each fallback temperature is encoded once: the repeating
    model on a one-window clip falls back through every temperature (more decoder steps than
    greedy's) on one encoder pass, as temperature 0 alone does."""
    import re
    temps = "0,0.2,0.4,0.6,0.8,1"
    runs = {}
    for t in ("0", temps):
        p = T.run_attend(["transcribe", "-m", u.rep_gguf, "--output", "json", "--language", "de", "--max-length",
                          "60", "--timing", "--temperature", t, *flags(cr=2.4, lp=-1.0), u.short])
        steps, passes = re.search(r"(\d+) steps, (\d+) encoder passes", p.stderr).groups()
        runs[t] = (json.loads(p.stdout)["segments"], int(steps), int(passes))
    (greedy, steps0, passes0), (kept, steps, passes) = runs["0"], runs[temps]
    assert greedy[0]["temperature"] == 0.0 and kept[0]["temperature"] > 0.0, (greedy, kept)
    assert steps > steps0, (steps, steps0)  # decoded more than once
    assert passes0 == 1 and passes == 1, (passes0, passes)


def check_no_speech_id(u):
    """The no-speech probability reads the file's whisper.no_speech_id: a copy naming another
    token (not the id before <|notimestamps|>) gives that token's probability after
    <|startoftranscript|>, as the reference computes it."""
    probs = [torch.softmax(u.m.decode(u.m.encode(f), [u.s.sot])[0][0].float(), -1) for f in u.features[:2]]
    order = torch.argsort(probs[0], descending=True).tolist()
    other = next(i for i in order if i != u.s.nospeech)
    assert all(abs(float(p[other] - p[u.s.nospeech])) > 0.01 for p in probs), [(p[other], p[u.s.nospeech]) for p in probs]
    moved = with_key(u.gguf, os.path.join(os.path.dirname(u.gguf), "moved.gguf"), "whisper.no_speech_id", other)
    for path, p in zip(u.paths[:2], probs):
        got = u.attend(path, gguf=moved)
        assert got and all(abs(g["no_speech_prob"] - float(p[other])) < 1e-4 for g in got), (got, float(p[other]))


def check_python(u):
    """Model.transcribe(temperature=[...], thresholds) on samples equals the command line on
    the same samples as a WAV file."""
    import attend
    import soundfile
    rng = np.random.default_rng(5)
    samples = (0.1 * rng.standard_normal(16000 * 12)).astype(np.float32)
    wav = os.path.join(os.path.dirname(u.gguf), "noise.wav")
    soundfile.write(wav, samples, 16000, subtype="FLOAT")
    m = attend.Model(u.gguf)
    opts = dict(language="de", timestamps=True, max_length=MAX_LENGTH)
    for temperature, cr, lp in ((0.0, None, None), ([0.0, 0.5, 1.0], 1.0, -0.5)):
        t = m.transcribe(wav, temperature=temperature, compression_ratio_threshold=cr, logprob_threshold=lp,
                         seed=3, **opts)
        temp = ",".join(map(str, temperature)) if isinstance(temperature, list) else str(temperature)
        cli = u.attend(wav, "--timestamps", "--temperature", temp, "--seed", "3", *flags(cr=cr, lp=lp))
        assert [s.tokens for s in t.segments] == [s["tokens"] for s in cli], (t.segments, cli)
        for s, c in zip(t.segments, cli):
            assert abs(s.avg_logprob - c["avg_logprob"]) < 1e-5 and s.temperature == c["temperature"], (s, c)
            assert abs(s.no_speech_prob - c["no_speech_prob"]) < 1e-5, (s, c)
    for bad in (dict(temperature=-1), dict(temperature=[]), dict(no_speech_threshold=0.5)):
        try:
            m.transcribe(samples, **bad)
            raise AssertionError(f"{bad} accepted")
        except ValueError:
            pass


def check_detect_once(u):
    """--language auto detects in the first window's decode, on its encoder output: the same
    segments and decoder steps as naming the language detected (a separate detection pass
    would add one step), and the reference's language."""
    import re
    for k in range(2):
        runs = []
        for lang in (None, "?"):
            args = ["--language", runs[0][0]] if lang else []
            p = T.run_attend(["transcribe", "-m", u.gguf, "--output", "json", "--timestamps", "--timing", "--task",
                              "transcribe", "--max-length", str(MAX_LENGTH), *args, u.paths[k]])
            out = json.loads(p.stdout)
            runs.append((out["language"], out["segments"], re.search(r"(\d+) steps", p.stderr).group(1)))
        assert runs[0] == runs[1], runs
        detected = G.detect_language(u.m, u.s, u.features[k])
        assert u.s.id_to_lang[detected] == runs[0][0], (u.s.id_to_lang[detected], runs[0][0])


def check_task_none(u):
    """No task given (HF's task=None): with the language detected, the prompt has no task
    token when the checkpoint forces none, the forced one when it forces one; with a language
    given, <|transcribe|>. Segments equal the reference's in each case."""
    import copy
    forced = copy.copy(u.s)
    forced.forced_decoder_ids = [[1, None], [2, u.s.task_to_id["translate"]]]
    for gguf, s, language, task in ((u.gguf, u.s, None, None), (u.forced_gguf, forced, None, None),
                                    (u.forced_gguf, forced, "de", None)):
        want = G.transcribe(u.m, s, u.features[0], G.Options(language=language, task=task, timestamps=True,
                                                               max_length=MAX_LENGTH))
        p = T.run_attend(["transcribe", "-m", gguf, "--output", "json", "--timestamps", "--max-length",
                          str(MAX_LENGTH), *(["--language", language] if language else []), u.paths[0]])
        same_segments(json.loads(p.stdout)["segments"], want["segments"])
        init = want["init"]
        has = [t for t in init if t in s.task_to_id.values()]
        assert has == ([] if gguf == u.gguf else [s.task_to_id["translate" if language is None else "transcribe"]]), \
            (gguf, language, init)


def check_forced_language(u):
    """forced_decoder_ids fixing the language (older multilingual checkpoints): given neither
    language nor task (or --language auto), the prompt holds that language, not a detected
    one, as HF's; --task given, the forced ids are ignored and the language detected; with a
    language given, that one. Segments and the reported language equal the reference's."""
    import copy
    forced = copy.copy(u.s)
    forced.forced_decoder_ids = u.forced_lang_ids
    code = u.s.id_to_lang[u.forced_lang]
    for k, args, opts in ((0, [], {}), (1, ["--timestamps"], dict(timestamps=True)),
                          (0, ["--timestamps", "--language", "auto"], dict(timestamps=True)),
                          (1, ["--task", "transcribe"], dict(task="transcribe")),
                          (0, ["--language", "de"], dict(language="de"))):
        want = G.transcribe(u.m, forced, u.features[k], G.Options(**dict(dict(max_length=MAX_LENGTH), **opts)))
        p = T.run_attend(["transcribe", "-m", u.forced_lang_gguf, "--output", "json", "--max-length", str(MAX_LENGTH),
                          *args, u.paths[k]])
        out = json.loads(p.stdout)
        if "--timestamps" in args:
            same_segments(out["segments"], want["segments"])
        else:  # one decode, one segment without timestamps (docs/whisper.md): its tokens
            got, first = [t for g in out["segments"] for t in g["tokens"]], want["windows"][0].tokens
            assert got == [t for t in first if t != u.s.eot], (got, first)
        lang = want["init"][1]
        assert out["language"] == u.s.id_to_lang[lang], (args, out["language"], want["init"])
        assert (lang == u.forced_lang) == (not opts.get("task") and not opts.get("language")), (args, want["init"], code)
    # the exporter reads forced_decoder_ids as HF's _retrieve_init_tokens: positions 1, 2, ... in a run
    from attend.export import whisper as XW
    V, tr, tl, lang, langs = u.m.config["vocab_size"], u.s.task_to_id["transcribe"], u.s.task_to_id["translate"], \
        u.forced_lang, list(u.s.lang_to_id.values())
    sp = {"transcribe": tr, "translate": tl}
    for ids, task, language in (([[1, None], [2, tl]], tl, V), ([[2, tr]], V, V), ([[1, lang], [3, tr]], V, lang),
                                (u.forced_lang_ids, tr, lang), ([[1, u.s.no_timestamps]], V, V), (None, V, V)):
        cfg = {"forced_decoder_ids": ids}
        assert (XW.forced_task(cfg, sp, V), XW.forced_language(cfg, langs, V)) == (task, language), (ids, task, language)


def check_cli_errors(u):
    """--help names the options; bad values are clear errors with status 2."""
    h = T.run_attend(["transcribe", "--help"]).stdout
    for opt in ("--temperature", *THRESHOLDS, "--seed"):
        assert opt in h, opt
    for args, words in ((["--temperature", "0,x"], "--temperature"), (["--temperature", "-1"], "--temperature"),
                        (["--no-speech-threshold", "0.5"], "needs --logprob-threshold"),
                        (["--logprob-threshold", "1"], "--logprob-threshold")):
        p = T.run_attend(["transcribe", "-m", u.gguf, *args, u.paths[0]], check=False)
        assert p.returncode == 2 and words in p.stderr, (args, p.returncode, p.stderr)


def main():
    r = T.Runner()
    work = T.tempdir()
    try:
        u = Setup(work)
        r.check("temperature 0: segments and window measures equal the reference's", check_measures, u)
        r.check("no-speech windows skipped as the reference skips them", check_skip, u)
        r.check("which windows fall back: the reference's decision", check_decision, u)
        r.check("a repeating model falls back; kept windows meet the thresholds or are the last", check_repeats_fall_back,
                u)
        r.check("--language auto: detected in the first decode, no second encoder pass", check_detect_once, u)
        r.check("a window falling back is encoded once", check_encode_once, u)
        r.check("the no-speech probability reads whisper.no_speech_id", check_no_speech_id, u)
        r.check("no task given: HF's prompt (the checkpoint's forced task, or none)", check_task_none, u)
        r.check("forced_decoder_ids fixing the language: HF's prompt", check_forced_language, u)
        r.check("Python's Model.transcribe takes the fallback options", check_python, u)
        r.check("the command line's options: --help and errors", check_cli_errors, u)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
