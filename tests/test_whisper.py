#!/usr/bin/python3
"""Whisper: attend gives the reference's tokens, logits and attention on random checkpoints.

Each configuration goes through the user's path: random Whisper weights of real layouts
(tools/reference_whisper.py's independent implementation of HF's model) saved as an HF
folder (config.json, generation_config.json, preprocessor_config.json, model.safetensors or
pytorch_model.bin, the tokenizer files) -> tools/export_whisper.py -> .gguf -> build/attend
transcribe on windows of log-mel features (.npy). Greedy tokens must be identical, logits
within 1e-3 and every attention matrix within 1e-4, on every kernel set this CPU has (the
encoder's 1500 frames take the matrix-product attention, engine/attention_gemm.c); the
language detected and the prompts of both tasks as the reference builds them; then broken
inputs, refusals, and f16 / int8 exports.
"""
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
import reference as B  # noqa: E402  (HF's beam search bookkeeping)
import reference_bpe  # noqa: E402  (GPT-2's byte alphabet, the slow tokenizer)
import reference_whisper as R  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT = os.path.join(ROOT, "tools", "export_whisper.py")
N_WINDOWS = 3
MAX_LENGTH = 40

# name, shape, English-only, weights format, config overrides
CONFIGS = [
    ("mini.en", "mini", True, "safetensors", {}),
    ("mini-multilingual", "mini", False, "bin", dict(decoder_layers=3, decoder_attention_heads=2)),
    ("narrow-128-mels", "mini", False, "safetensors", dict(num_mel_bins=128, d_model=48, encoder_attention_heads=3,
                                                            decoder_attention_heads=3, vocab_size=51866)),
]


# --------------------------------------------------------------------------------------
# Fixtures

def write_tokenizer(path, config):
    """A Whisper tokenizer folder in HF's layout for config's vocabulary: the 256 byte
    tokens, a few merges, filler tokens up to <|endoftext|>, then Whisper's added tokens
    (languages, tasks, <|notimestamps|>, the 1501 timestamps) at HF's ids."""
    os.makedirs(path, exist_ok=True)
    s = R.special_ids(config)
    chars = reference_bpe.byte_alphabet()
    vocab = {chars[b]: b for b in range(256)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    while len(vocab) < s["eot"]:
        vocab[f"w{len(vocab)}"] = len(vocab)
    vocab["<|endoftext|>"] = s["eot"]
    added = {"<|startoftranscript|>": s["sot"]}
    added.update({f"<|{k}|>": v for k, v in s["lang"].items()})
    for k in ("translate", "transcribe", "startoflm", "startofprev"):
        added[f"<|{k}|>"] = s[k]
    added["<|nocaptions|>"] = s["nospeech"]
    added["<|notimestamps|>"] = s["notimestamps"]
    added.update({f"<|{i * 0.02:.2f}|>": s["timestamp_begin"] + i for i in range(1501)})
    with open(os.path.join(path, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(path, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    with open(os.path.join(path, "added_tokens.json"), "w") as f:
        json.dump(added, f)


def ending_model(config, seed, features, prompt):
    """A random model whose outputs end: <|endoftext|>'s output row (the output projection is
    the token embedding, and the token is never an input) is pointed along the mean final
    state of greedy paths and scaled so that every window of features ends within 25 steps.
    The row moves only <|endoftext|>'s logit, so the path up to the end is the unscaled one:
    the scale at which a step would choose the end is max(other logits) / (state . row)."""
    m = R.random_model(config, seed=seed)
    eot = config["eos_token_id"]
    emb = m.model.decoder.embed_tokens.weight
    with torch.no_grad():
        emb[eot].zero_()
        paths = []
        for f in features:
            ids, _ = R.greedy(m, f, prompt, max_length=26)
            h, _, _ = m.decode(m.encode(f), prompt + ids[:-1], states=True)
            paths.append(h[len(prompt) - 1:])
        direction = torch.cat(paths).mean(0)
        direction /= direction.norm()
        needed = []
        for h in paths:
            logits = h @ emb.T
            best = logits.max(dim=1).values
            dots = h @ direction
            scales = [float(b / d) for b, d in zip(best, dots) if d > 0 and b > 0]
            needed.append(min(scales) if scales else 1e3)
        emb[eot] = direction * max(needed) * 1.02
    return m


class Case:
    def __init__(self, work, name, shape, english_only, fmt, overrides):
        self.name = name
        c = R.shape_config(shape, english_only)
        c.update(overrides)
        self.dir = os.path.join(work, name)
        tok = os.path.join(work, name + "-tokenizer")
        if english_only:  # the real *.en tokenizer: GPT-2's ranks (js-tiktoken, make npm-tiktoken)
            subprocess.run([T.PYTHON, os.path.join(ROOT, "tools", "whisper_tokenizer_files.py"), tok], check=True,
                           stdout=subprocess.DEVNULL)
        else:
            write_tokenizer(tok, c)
        self.tokenizer = tok
        feats = [R.random_features(c["num_mel_bins"], seed=10 * k + len(name)) for k in range(N_WINDOWS)]
        self.config = c
        self.ids = R.special_ids(c)
        self.model = ending_model(c, len(name), feats, self.prompt(None if english_only else "de"))
        suppress = [self.ids["eot"] - 1, 1, 2, 3] if english_only else [5, 7]
        R.save_checkpoint(self.model, self.dir, tok, suppress=suppress,
                          alignment_heads=[[self.config["decoder_layers"] - 1, 0]], fmt=fmt)
        self.suppress = suppress
        self.gguf = os.path.join(work, name + ".gguf")
        T.export(self.dir, self.gguf, exporter="export_whisper.py")
        self.windows = []
        for k, f in enumerate(feats):
            path = os.path.join(work, f"{name}-w{k}.npy")
            np.save(path, f)
            self.windows.append((path, f))

    def prompt(self, lang=None, task="transcribe"):
        s = self.ids
        if self.config["vocab_size"] == 51864:
            return [s["sot"], s["notimestamps"]]
        return [s["sot"], s["lang"][lang], s[task], s["notimestamps"]]

    def reference(self, features, prompt):
        return R.greedy(self.model, features, prompt, suppress=self.suppress,
                        begin_suppress=[220, self.ids["eot"]], max_length=MAX_LENGTH)

    @staticmethod
    def tokens(result):
        """A transcript's tokens: its segments' end to end."""
        return [t for seg in result["segments"] for t in seg["tokens"]]

    def transcribe(self, args, env=None):
        p = T.run_attend(["transcribe", "-m", self.gguf, "--output", "json", "--max-length", str(MAX_LENGTH)] + args,
                         env=env)
        return [json.loads(line) for line in p.stdout.splitlines()]


# --------------------------------------------------------------------------------------
# Checks

def check_greedy(case, isa):
    env = {"ATTEND_ISA": isa}
    lang = None if case.config["vocab_size"] == 51864 else "de"
    args = ["--language", lang] if lang else []
    got = case.transcribe(args + [p for p, _ in case.windows], env=env)
    lengths = []
    for (path, f), g in zip(case.windows, got):
        prompt = case.prompt(lang)
        ids, _ = case.reference(f, prompt)
        want = ids[:-1] if ids[-1] == case.ids["eot"] else ids
        assert case.tokens(g) == want, f"{path}: {case.tokens(g)} != reference {want}"
        lengths.append(len(ids))
    assert min(lengths) < MAX_LENGTH - len(case.prompt(lang)), f"no output ended: {lengths}"
    tok = reference_bpe.Tokenizer.load(case.tokenizer)
    for g in got:  # the text: WhisperTokenizer.decode(skip_special_tokens=True) of each segment
        for seg in g["segments"]:
            assert seg["text"] == tok.whisper_decode(seg["tokens"], skip_special=True), seg


class BeamAdapter:
    """The Whisper reference in the shape reference.beam_loop drives: encode a batch of one
    window, decode a batch of one prefix."""

    def __init__(self, model):
        self.m, self.config = model, model.config

    def eval(self):
        return self

    def encode(self, x):
        return self.m.encode(x[0].numpy()), None

    def decode(self, ids, memory):
        logits, ps, pc = self.m.decode(memory, ids[0].tolist())
        return logits[None], ps, pc


def check_beams(case, beams=3):
    """Beam search as HF's generate runs it for Whisper (its processors on the log-probs,
    the prompt as decoder_prompt_len) on each window."""
    lang = None if case.config["vocab_size"] == 51864 else "de"
    args = ["--language", lang] if lang else []
    got = case.transcribe(args + ["--beam", str(beams)] + [p for p, _ in case.windows])
    prompt = case.prompt(lang)

    def process(logp, rows):
        out = logp.clone()
        for b, ids in enumerate(rows):
            out[b] = R.suppress_row(logp[b], ids, len(prompt), case.suppress, [220, case.ids["eot"]])
        return out

    for (path, f), g in zip(case.windows, got):
        ref = B.beam_loop(BeamAdapter(case.model), f, prompt, process, beams, 1.0, False, 1,
                          MAX_LENGTH)
        want = [t for t in ref[0].ids[len(prompt) - 1:] if t != case.ids["eot"]]
        assert case.tokens(g) == want, f"{path}: {case.tokens(g)} != reference {want}"


def check_logits_attention(case, work, isa):
    path, f = case.windows[0]
    dump = os.path.join(work, case.name + "-dump.npz")
    lang = None if case.config["vocab_size"] == 51864 else "fr"
    args = ["--language", lang] if lang else []
    T.run_attend(["transcribe", "-m", case.gguf, "--max-length", str(MAX_LENGTH), "--dump-attention", dump,
                  "--dump-logits"] + args + [path], env={"ATTEND_ISA": isa})
    z = np.load(dump)
    prompt = case.prompt(lang)
    ids = [int(x) for x in z["s0/tgt_ids"]]
    full = prompt[:1] + ids
    with torch.no_grad():
        memory, enc_probs = case.model.encode(f, want_attention=True)
        logits, dec_self, cross = case.model.decode(memory, full[:-1])
    got = z["s0/logits"]
    assert got.shape == tuple(logits.shape), f"logits {got.shape} vs {tuple(logits.shape)}"
    diff = np.abs(got - logits.numpy()).max()
    assert diff < 1e-3, f"logits differ by {diff}"
    for layer in range(case.config["decoder_layers"]):
        d = np.abs(z[f"s0/cross/l{layer}"] - cross[layer].numpy()).max()
        assert d < 1e-4, f"cross attention layer {layer} differs by {d}"
        d = np.abs(z[f"s0/dec_self/l{layer}"] - dec_self[layer].numpy()).max()
        assert d < 1e-4, f"decoder self-attention layer {layer} differs by {d}"
    d = np.abs(z["s0/enc_self/l0"] - enc_probs[0].numpy()).max()
    assert d < 1e-4, f"encoder self-attention differs by {d}"


def check_language(case):
    """auto: the language token the reference finds likeliest at the first step; both tasks'
    prompts."""
    s = case.ids
    for path, f in case.windows:
        with torch.no_grad():
            logits = case.model.decode(case.model.encode(f), [s["sot"]])[0][-1]
        codes = list(s["lang"])
        want = codes[int(torch.argmax(logits[[s["lang"][c] for c in codes]]))]
        got = case.transcribe(["--language", "auto", "--task", "transcribe", path])[0]
        assert got["language"] == want, f"{path}: detected {got['language']}, reference {want}"
        ids, _ = case.reference(f, case.prompt(want))
        assert case.tokens(got) == [t for t in ids if t != s["eot"]]
        got = case.transcribe(["--language", "de", "--task", "translate", path])[0]
        ids, _ = case.reference(f, case.prompt("de", "translate"))
        assert case.tokens(got) == [t for t in ids if t != s["eot"]]


def check_bad_inputs(case, work, text_model):
    path, f = case.windows[0]
    bad = os.path.join(work, "bad.npy")
    cases = [
        ("wrong bins", lambda: np.save(bad, f[:-1]), 2, "features [%d, 3000]" % (f.shape[0] - 1)),
        ("NaN", lambda: np.save(bad, np.where(np.arange(f.size).reshape(f.shape) == 7, np.nan, f).astype(np.float32)),
         2, "not a finite number"),
        ("int dtype", lambda: np.save(bad, f.astype(np.int32)), 4, "unsupported dtype"),
        ("3 dimensions", lambda: np.save(bad, f[None]), 4, "unsupported shape"),
    ]
    for what, make, code, words in cases:
        make()
        p = T.run_attend(["transcribe", "-m", case.gguf, bad], check=False)
        assert p.returncode == code and words in p.stderr, f"{what}: exit {p.returncode}: {p.stderr}"
    raw = open(path, "rb").read()
    for cut in (5, 60, 200, len(raw) - 1):
        with open(bad, "wb") as out:
            out.write(raw[:cut])
        p = T.run_attend(["transcribe", "-m", case.gguf, bad], check=False)
        assert p.returncode == 4 and p.stderr.startswith("attend transcribe: "), f"cut {cut}: {p.stderr}"
    with open(bad, "wb") as out:
        out.write(raw + b"\0")
    p = T.run_attend(["transcribe", "-m", case.gguf, bad], check=False)
    assert p.returncode == 4 and "not the" in p.stderr, p.stderr
    p = T.run_attend(["transcribe", "-m", case.gguf, os.path.join(work, "missing.npy")], check=False)
    assert p.returncode == 4 and "cannot open" in p.stderr, p.stderr
    p = T.run_attend(["transcribe", "-m", text_model, path], check=False)
    assert p.returncode == 2 and "text model" in p.stderr, p.stderr
    p = T.run_attend(["translate", "-m", case.gguf, "Hallo"], check=False)
    assert p.returncode != 0 and "speech model" in p.stderr, p.stderr
    p = T.run_attend(["transcribe", "-m", case.gguf, "--task", "dance", path], check=False)
    assert p.returncode == 2 and "--task" in p.stderr, p.stderr


def check_language_errors(en_case, multi_case):
    p = T.run_attend(["transcribe", "-m", en_case.gguf, "--language", "de", en_case.windows[0][0]], check=False)
    assert p.returncode == 1 and "English-only" in p.stderr, p.stderr
    p = T.run_attend(["transcribe", "-m", multi_case.gguf, "--language", "xx", multi_case.windows[0][0]], check=False)
    assert p.returncode == 1 and "'xx' is not one of" in p.stderr, p.stderr


def check_other_dtypes(case, work):
    """f16 and int8 exports run and keep the prompt; f16's tokens stay close to f32's."""
    path, f = case.windows[0]
    want = case.tokens(case.transcribe([path])[0])
    for dtype in ("f16", "int8"):
        out = os.path.join(work, f"{case.name}-{dtype}.gguf")
        T.export(case.dir, out, dtype=dtype, exporter="export_whisper.py")
        p = T.run_attend(["transcribe", "-m", out, "--output", "json", "--max-length", str(MAX_LENGTH), path])
        got = case.tokens(json.loads(p.stdout))
        assert len(got) >= 1, f"{dtype}: {got}"
        if dtype == "f16":
            same = sum(a == b for a, b in zip(got, want))
            assert same >= min(len(got), len(want)) // 2, f"f16 {got} vs f32 {want}"


def check_audio_and_python(case, work):
    """Speech synthesised by espeak-ng, 8 s and (three clips) 75 s: attend transcribe on the WAV
    file and Python's Model.transcribe on the path and on the samples give the same segments;
    the long file is decoded as several windows whose segments cover it in order."""
    import attend
    short = os.path.join(work, "speech.wav")
    subprocess.run(["espeak-ng", "-v", "en", "-w", short, "The quick brown fox jumps over the lazy dog. "
                    "Speech engines read sound."], check=True)
    long = os.path.join(work, "long.wav")
    import soundfile
    x, rate = soundfile.read(short, dtype="float32")
    soundfile.write(long, np.concatenate([x] * max(1, int(75 * rate / len(x)) + 1)), rate)
    m = attend.Model(case.gguf)
    for path in (short, long):
        cli = case.transcribe(["--timestamps", path])[0]
        from_path = m.transcribe(path, timestamps=True, max_length=MAX_LENGTH)
        samples = attend.load_audio(path)
        from_samples = m.transcribe(samples, timestamps=True, max_length=MAX_LENGTH)
        for t in (from_path, from_samples):
            assert [s.tokens for s in t.segments] == [s["tokens"] for s in cli["segments"]], path
            assert [round(s.start, 2) for s in t.segments] == [s["start"] for s in cli["segments"]], path
        assert abs(cli["duration"] - len(samples) / 16000) < 0.02 or cli["duration"] == 30.0, cli["duration"]
        starts = [s["start"] for s in cli["segments"]]
        assert starts == sorted(starts), starts
    assert len({int(s["start"] // 30) for s in cli["segments"]}) >= 2, f"one window only: {cli['segments']}"
    try:
        m.transcribe(np.zeros((2, 100), dtype=np.float32))
        raise AssertionError("2-D samples accepted")
    except attend.AttendError as e:
        assert "one-dimensional" in str(e)
    try:
        m.transcribe(os.path.join(work, "missing.wav"))
        raise AssertionError("a missing file accepted")
    except attend.AttendError as e:
        assert "missing.wav" in str(e)


def check_refusals(case, work):
    """The exporter names what it cannot take."""
    def edited(name, edit):
        d = os.path.join(work, "edit-" + name)
        shutil.copytree(case.dir, d)
        edit(d)
        return subprocess.run([T.PYTHON, EXPORT, d, d + ".gguf"], capture_output=True, text=True)

    def drop(d, f):
        os.remove(os.path.join(d, f))

    def gen(d, **kv):
        p = os.path.join(d, "generation_config.json")
        g = json.load(open(p))
        g.update(kv)
        json.dump(g, open(p, "w"))

    checks = [
        ("no vocab", lambda d: (drop(d, "vocab.json")), "missing file"),
        ("bad heads", lambda d: gen(d, alignment_heads=[[99, 0]]), "alignment_heads"),
        ("bad suppress", lambda d: gen(d, suppress_tokens=[-1]), "suppress_tokens"),
        ("no sot", lambda d: drop(d, "added_tokens.json"), "<|startoftranscript|>"),
    ]
    for name, edit, words in checks:
        p = edited(name, edit)
        assert p.returncode == 2 and words in p.stderr, f"{name}: exit {p.returncode}: {p.stderr}"


def main():
    r = T.Runner()
    work = T.tempdir()
    try:
        cases = [Case(work, *c) for c in CONFIGS]
        for case in cases:
            for isa in T.available_isas():
                r.check(f"{case.name}: greedy tokens equal the reference ({isa})", check_greedy, case, isa)
                r.check(f"{case.name}: logits within 1e-3, attention within 1e-4 ({isa})", check_logits_attention,
                        case, work, isa)
            r.check(f"{case.name}: beam search equals the reference's", check_beams, case)
        for case in cases[1:]:
            r.check(f"{case.name}: language detection and both tasks' prompts", check_language, case)
        text_model = os.path.join(ROOT, "tests", "data", "tiny-v1.gguf")
        r.check("broken feature files and wrong models: clear errors", check_bad_inputs, cases[0], work, text_model)
        r.check("languages an English-only or multilingual model lacks", check_language_errors, cases[0], cases[1])
        r.check("f16 and int8 exports transcribe", check_other_dtypes, cases[0], work)
        r.check("the exporter refuses what it cannot convert", check_refusals, cases[0], work)
        r.check("audio files and Python's Model.transcribe equal the command line", check_audio_and_python, cases[1],
                work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
