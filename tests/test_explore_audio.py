#!/usr/bin/python3
"""attend explore on speech: the page of a Whisper model and an audio file.

A random Whisper checkpoint (tools/reference_whisper.py, as tests/test_whisper.py makes them,
with three alignment heads) hears espeak-ng speech. The page's embedded data must equal what
the other commands give for the same file: the spectrogram `attend features` (within 1e-5; it
is stored as float32, so exactly; past 30 s the first window of `attend features --whole`),
the tokens and every layer and head's cross-attention `attend transcribe --dump-attention`
(within the page's one-byte precision: a row's maximum / 510), the alignment heads those the
checkpoint records; Python's attend.explore(model, audio=...) writes the same data; pooled
pages (a small $ATTEND_EXPLORE_MAX_CELLS) hold the mean of each column's frames. Hostile audio
gives one clear line and leaves no page; --max-duration refuses long audio at once. Headless Chromium (tests/test_explore.py's WebDriver client)
opens the page with no network: no console error, the views and keys work, a hostile file
name is shown as text. Screenshot: build/explore-audio-screenshot.png.

Run: /usr/bin/python3 tests/test_explore_audio.py
     /usr/bin/python3 tests/test_explore_audio.py --docs-screenshot   (also docs/explore-audio.png,
     from a whisper-tiny-shaped random checkpoint)"""
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import testlib as T  # noqa: E402
import test_whisper as W  # noqa: E402  (write_tokenizer, ending_model)
import reference_whisper as R  # noqa: E402

SPEECH = "The quick brown fox jumps over the lazy dog. Speech engines read sound."
MAX_LENGTH = 40


# ---------------------------------------------------------------------------------------
# Fixtures

def espeak(work, name="speech.wav", text=SPEECH):
    out = os.path.join(work, name)
    subprocess.run(["espeak-ng", "-v", "en", "-w", out, text], check=True)
    return out


def wav(rate=16000, bits=16, fmt=1, data=b""):
    """A WAV file with a hand-made header (as tests/test_audio.py makes its hostile ones)."""
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16, fmt, 1, rate,
                       rate * bits // 8, bits // 8, bits, b"data", len(data)) + data


def features(path, work, *args):
    out = os.path.join(work, "features.npy")
    T.run_attend(["features", path, "-o", out] + list(args))
    return np.load(out)


def whisper_model(work, name, shape, overrides, heads, window):
    """A random multilingual Whisper checkpoint of shape whose English transcription of the
    window ends, exported to NAME.gguf, recording alignment heads `heads`."""
    c = R.shape_config(shape, False)
    c.update(overrides)
    tok = os.path.join(work, name + "-tokenizer")
    W.write_tokenizer(tok, c)
    s = R.special_ids(c)
    prompt = [s["sot"], s["lang"]["en"], s["transcribe"], s["notimestamps"]]
    model = W.ending_model(c, 7, [window], prompt)
    R.save_checkpoint(model, os.path.join(work, name), tok, suppress=[5, 7], alignment_heads=heads)
    return T.export(os.path.join(work, name), os.path.join(work, name + ".gguf"), exporter="export_whisper.py")


def page_data(page):
    html = open(page, encoding="utf-8").read()
    return json.loads(html.split('id="attend-data">')[1].split("</script>")[0])


def explore(gguf, audio, page, *args, env=None):
    T.run_attend(["explore", "-m", gguf, audio, "-o", page, "--max-length", str(MAX_LENGTH)] + list(args), env=env)
    return page_data(page)


def unpack_cross(d):
    """The page's cross-attention as float [L, H, T, columns], and each row's maximum."""
    x = d["cross"]
    q = np.frombuffer(base64.b64decode(x["data"]), np.uint8).astype(np.float64)
    scale = np.frombuffer(base64.b64decode(x["scale"]), "<f4").astype(np.float64)
    shape = (x["layers"], x["heads"], x["rows"])
    return (q.reshape(shape + (x["columns"],)) / 255 * scale.reshape(shape + (1,))), scale.reshape(shape)


def unpack_mel(d):
    return np.frombuffer(base64.b64decode(d["mel"]["data"]), "<f4").reshape(d["mel"]["rows"], d["mel"]["frames"])


def dump(gguf, audio, work, *args):
    npz = os.path.join(work, "dump.npz")
    T.run_attend(["transcribe", "-m", gguf, audio, "--dump-attention", npz, "--max-length", str(MAX_LENGTH)]
                 + list(args))
    return np.load(npz)


def same_cross(d, z, layers, pool=1):
    got, scale = unpack_cross(d)
    for layer in range(layers):
        want = z[f"s0/cross/l{layer}"].astype(np.float64)
        want = want.reshape(want.shape[:2] + (-1, pool)).mean(-1)
        err = np.abs(got[layer] - want) - scale[layer][..., None] / 510
        assert err.max() <= 1e-6, f"cross layer {layer} differs from the dump by {err.max()} past the page's precision"


# ---------------------------------------------------------------------------------------
# Checks

def check_page_equals_commands(gguf, speech, work, heads):
    d = explore(gguf, speech, os.path.join(work, "p.html"), "--language", "en")
    z = dump(gguf, speech, work, "--language", "en")
    assert d["tokens"] == [str(p) for p in z["s0/tgt_pieces"]], (d["tokens"], z["s0/tgt_pieces"])
    assert d["ids"] == [int(i) for i in z["s0/tgt_ids"]]
    assert d["text"] == str(z["s0/text"][0])
    assert np.allclose(d["logprob"], z["s0/logprob"], atol=6e-5)
    assert d["cross"]["pool"] == 1 and d["cross"]["columns"] == 1500
    same_cross(d, z, d["config"]["decoder_layers"])
    mel = unpack_mel(d)
    err = np.abs(mel - features(speech, work)).max()
    assert mel.shape == (80, 3000) and err <= 1e-5, f"spectrogram differs from attend features by {err}"
    assert d["alignment_heads"] == heads, d["alignment_heads"]
    info = T.run_attend(["info", gguf]).stdout
    assert "alignment heads     3: " + " ".join(f"{a}:{b}" for a, b in heads) in info, info
    total = sum(z[f"s0/cross/l{a}"][b] for a, b in heads)
    for t, f in enumerate(d["token_frame"]):
        assert total[t][f] == total[t].max(), f"token {t}: frame {f} is not the alignment heads' peak"
    import attend
    assert d["samples"] == len(attend.load_audio(speech)), d["samples"]
    assert d["language"] == "en" and d["language_given"] is True
    # the words: attend transcribe --word-timestamps's (timestamps on), placed where they were heard
    d = explore(gguf, speech, os.path.join(work, "pt.html"), "--language", "en", "--timestamps")
    js = json.loads(T.run_attend(["transcribe", "-m", gguf, "--language", "en", "--max-length", str(MAX_LENGTH),
                                  "--word-timestamps", "--output", "json", speech]).stdout)
    want = [w for seg in js["segments"] for w in seg["words"]]
    assert want and [(w["word"], w["start"], w["end"]) for w in d["words"]] == \
        [(w["word"], w["start"], w["end"]) for w in want], (d["words"], want)
    assert all(abs(a["probability"] - b["probability"]) <= 1e-4 for a, b in zip(d["words"], want))
    print(f"   {len(d['tokens'])} tokens, 3x2 heads: {os.path.getsize(os.path.join(work, 'p.html')) / 1e6:.2f} MB")


def check_options(gguf, speech, work):
    """--task translate --timestamps and a detected language give transcribe's tokens."""
    d = explore(gguf, speech, os.path.join(work, "t.html"), "--task", "translate", "--timestamps")
    z = dump(gguf, speech, work, "--task", "translate", "--timestamps")
    assert d["ids"] == [int(i) for i in z["s0/tgt_ids"]] and d["task"] == "translate" and d["timestamps"]
    assert d["language_given"] is False and d["language"] in attend_languages(gguf)
    same_cross(d, z, d["config"]["decoder_layers"])


def attend_languages(gguf):
    import attend
    return attend.Model(gguf).config.languages


def peak_rss_kib(args):
    """attend's peak RSS (KiB) running args, spawned by a small Python of its own: a child of
    this process would count this process's memory (torch's) from before its exec."""
    spawn = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL); _, s, ru = os.wait4(p.pid, 0); print(ru.ru_maxrss if s == 0 else -1)")
    kib = int(subprocess.run([T.PYTHON, "-c", spawn, T.ATTEND] + args, capture_output=True, text=True).stdout)
    assert kib > 0, args
    return kib


def check_memory(gguf, speech, work):
    """The page keeps what it shows: every head's cross-attention, not the encoder's
    self-attention (layers x heads x 1500 x 1500 floats) that want_attention would keep too.
    explore's peak memory stays within half of that of transcribe's on the same window."""
    import attend
    c = attend.Model(gguf).config
    enc_self = c.encoder_layers * c.encoder_heads * 1500 * 1500 * 4 // 1024
    common = ["-m", gguf, "--language", "en", "--max-length", str(MAX_LENGTH)]
    page = peak_rss_kib(["explore", *common, speech, "-o", os.path.join(work, "m.html")])
    plain = peak_rss_kib(["transcribe", *common, speech])
    assert page - plain < enc_self // 2, (page, plain, enc_self)


def check_pooling(gguf, speech, work):
    """A small budget: columns of 4 frames, each their mean; Python pools the same."""
    env = {"ATTEND_EXPLORE_MAX_CELLS": "3000"}
    d = explore(gguf, speech, os.path.join(work, "pool.html"), "--language", "en", env=env)
    rows = d["cross"]["layers"] * d["cross"]["heads"] * d["cross"]["rows"]
    pool = min(k for k in range(1, 1501) if 1500 % k == 0 and rows * 1500 // k <= 3000)
    assert d["cross"]["pool"] == pool > 1 and d["cross"]["columns"] == 1500 // pool, (d["cross"]["pool"], pool)
    same_cross(d, dump(gguf, speech, work, "--language", "en"), d["config"]["decoder_layers"], pool)
    os.environ.update(env)
    try:
        assert python_page(gguf, speech, language="en")["cross"] == d["cross"], "Python pools differently"
    finally:
        del os.environ["ATTEND_EXPLORE_MAX_CELLS"]


def python_page(gguf, audio, **kw):
    import attend
    page = attend.explore(attend.Model(gguf), audio=audio, max_length=MAX_LENGTH, **kw)
    return json.loads(page.html.split('id="attend-data">')[1].split("</script>")[0])


def check_python(gguf, speech, work):
    """attend.explore(model, audio=path) embeds the CLI's data; samples give the same window."""
    import attend
    cli = explore(gguf, speech, os.path.join(work, "p.html"), "--language", "en")
    got = python_page(gguf, speech, language="en")
    assert got == cli, [k for k in cli if got.get(k) != cli[k]]
    samples = python_page(gguf, attend.load_audio(speech), language="en")
    differ = [k for k in cli if samples.get(k) != cli[k]]
    assert differ == ["file"] and samples["file"] == "samples", differ
    try:
        attend.explore(attend.Model(gguf))
        raise AssertionError("a speech model without audio accepted")
    except ValueError as e:
        assert "audio" in str(e)


def check_long_audio(gguf, speech, work):
    """75 s: the page is the first window of the whole audio's features, as attend transcribe
    --dump-attention hears it; --max-duration refuses longer audio at once."""
    import soundfile
    x, rate = soundfile.read(speech, dtype="float32")
    long = os.path.join(work, "long.wav")
    soundfile.write(long, np.concatenate([x] * (int(75 * rate / len(x)) + 1)), rate)
    d = explore(gguf, long, os.path.join(work, "l.html"), "--language", "en")
    assert d["samples"] > 75 * 16000, d["samples"]
    assert np.abs(unpack_mel(d) - features(long, work, "--whole")[:, :3000]).max() <= 1e-5
    z = dump(gguf, long, work, "--language", "en")
    assert d["ids"] == [int(i) for i in z["s0/tgt_ids"]]
    same_cross(d, z, d["config"]["decoder_layers"])
    start = time.time()
    p = T.run_attend(["explore", "-m", gguf, long, "--max-duration", "60", "-o", os.path.join(work, "m.html")],
                     check=False)
    assert p.returncode == 1 and "longer than the limit of 60 s" in p.stderr and time.time() - start < 5, p.stderr


def check_hostile(gguf, work, text_model):
    """Broken files: exit 1 and one line naming the file; no page, no temporary file left."""
    floats = np.array([0.1] * 100 + [np.nan] + [0.0] * 100, np.float32)
    cases = [("0 samples", wav(), "no audio samples"),
             ("0 bytes", b"", "not readable as audio"),
             ("text", b"Hello, this is not a sound file.\n" * 20, "not readable as audio"),
             ("NaN floats", wav(fmt=3, bits=32, data=floats.tobytes()), "not a finite number"),
             ("rate 1 Hz", wav(rate=1, data=bytes(100)), "sample rate 1 Hz")]
    page = os.path.join(work, "bad.html")
    for name, data, words in cases:
        bad = os.path.join(work, "bad.wav")
        with open(bad, "wb") as f:
            f.write(data)
        for args, stdin in (([bad], None), (["-"], data)):
            p = subprocess.run([T.ATTEND, "explore", "-m", gguf, *args, "-o", page], input=stdin, capture_output=True,
                               timeout=60)
            err = p.stderr.decode(errors="replace")
            assert p.returncode == 1 and words in err and err.count("\n") == 1, f"{name}: {p.returncode} {err!r}"
            assert err.startswith(f"attend explore: {args[0]}: "), f"{name}: {err!r}"
            assert not os.path.exists(page) and not os.path.exists(page + ".tmp"), f"{name}: a page was left"
    p = T.run_attend(["explore", "-m", gguf, os.path.join(work, "missing.wav"), "-o", page], check=False)
    assert p.returncode == 1 and "missing.wav" in p.stderr, p.stderr
    usage = [(["explore", "-m", gguf], "which audio file"),
             (["explore", "-m", gguf, "x.wav", "--target", "y"], "--target is for text models"),
             (["explore", "-m", gguf, "x.wav", "--task", "dance"], "--task is transcribe or translate"),
             (["explore", "-m", text_model, "Hallo", "--language", "de"], "--language is for speech models")]
    for args, words in usage:
        p = T.run_attend(args + ["-o", page], check=False)
        assert p.returncode == 2 and words in p.stderr, f"{args}: {p.returncode} {p.stderr}"


# ---------------------------------------------------------------------------------------
# In a browser

SHOWN = """
const lane = [...document.querySelectorAll('#lane text.tok')];
const spec = document.getElementById('spec'), g = spec.getContext('2d');
const px = g.getImageData(160, 0, spec.width - 170, spec.height).data;
let colours = new Set();
for (let i = 0; i < px.length; i += 4 * 97) colours.add(px[i] + ',' + px[i + 1] + ',' + px[i + 2]);
return {head: document.getElementById('head').value, layer: document.getElementById('layer').value,
        lane: lane.map(e => +e.dataset.token), colours: colours.size,
        panels: document.querySelectorAll('#grid figure').length,
        align: [...document.querySelectorAll('#grid figure.align')].map(f => f.dataset.layer + ':' + f.dataset.head),
        selected: [...document.querySelectorAll('#grid figure.sel')].map(f => f.dataset.layer + ':' + f.dataset.head),
        hover: document.body.dataset.hover, hot: [...document.querySelectorAll('#toks tr.hot')].map(r => +r.dataset.row),
        readout: document.getElementById('readout').textContent,
        meta: document.getElementById('meta-audio').textContent, rows: document.querySelectorAll('#rows text').length};
"""


def hover(b, css):
    el = b.s("POST", "/element", {"using": "css selector", "value": css})
    b.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "actions": [
        {"type": "pointerMove", "origin": el, "x": 0, "y": 0}]}]})


def check_browser(b, gguf, speech, work, heads):
    page = os.path.join(work, "p.html")
    d = explore(gguf, speech, page, "--language", "en")
    b.open(page)
    s = b.js(SHOWN)
    L, H = d["config"]["decoder_layers"], d["config"]["decoder_heads"]
    assert s["head"] == "-2", s["head"]                      # the alignment heads' average first
    assert s["panels"] == L * H + 1 and sorted(s["align"]) == sorted(["-1:-2"] + [f"{a}:{c}" for a, c in heads])
    assert d["words"] and len(s["lane"]) == len([w for w in d["words"] if w["start"] < 30]), (s["lane"], d["words"])
    assert s["lane"][0] == min(t for t in range(len(d["tokens"])) if not d["special"][t]), s["lane"]
    assert s["colours"] > 20, f"the spectrogram looks blank: {s['colours']} colours"
    assert s["rows"] == len(d["tokens"]) and "speech.wav" in s["meta"], s
    first = s["lane"][0]
    hover(b, f'#rows text[data-token="{first}"]')
    s = b.js(SHOWN)
    assert s["hover"] == str(first) and s["hot"] == [first] and "heard" in s["readout"], s
    b.keys("right")                                           # alignment heads -> layer average
    s = b.js(SHOWN)
    assert s["head"] == "-1" and s["selected"] == [], s
    b.keys("right", "up")                                     # head 0, one layer up
    s = b.js(SHOWN)
    assert s["head"] == "0" and s["layer"] == str(L - 2) and s["selected"] == [f"{L - 2}:0"], s
    b.click(f'#grid figure[data-layer="0"][data-head="{H - 1}"]')
    s = b.js(SHOWN)
    assert s["head"] == str(H - 1) and s["layer"] == "0", s
    b.keys("a", "z")                                          # back to the alignment heads; the whole window
    b.js("window.scrollTo(0, 0)")
    os.makedirs(os.path.join(T.REPO, "build"), exist_ok=True)
    b.keys("z")
    b.screenshot(os.path.join(T.REPO, "build", "explore-audio-screenshot.png"))
    errors = [e for e in b.console() if e.get("level") == "SEVERE"]
    assert not errors, f"console errors: {errors}"
    loaded = b.js("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded == [], f"the page loaded resources: {loaded}"


def check_words(b, work):
    """The words path (attend_transcript.words, empty until word timestamps land): a page
    whose data carries words draws each at its times and hovers it as its tokens' span."""
    from attend import _explore_audio as A
    d = page_data(os.path.join(work, "p.html"))
    text = [t for t in range(len(d["ids"])) if not d["special"][t]]
    d["words"] = [{"word": " " + d["texts"][t], "start": 0.3 + 0.5 * k, "end": 0.7 + 0.5 * k, "probability": 0.9}
                  for k, t in enumerate(text)]
    page = os.path.join(work, "words.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(A.page_html(d))
    b.open(page)
    assert b.js("return document.querySelectorAll('#lane rect').length") == len(text)
    hover(b, f'#lane text[data-token="{text[1]}"]')
    s = b.js(SHOWN)
    assert s["hover"] == str(text[1]) and "heard 0.80 s to 1.20 s (its word's times)" in s["readout"], s["readout"]
    assert not [e for e in b.console() if e.get("level") == "SEVERE"]


def check_hostile_name(b, gguf, speech, work):
    name = os.path.join(work, '<img src=x onerror="window.pwned=1"><script>window.pwned=2<\\script>.wav')
    shutil.copy(speech, name)
    page = os.path.join(work, "n.html")
    explore(gguf, name, page, "--language", "en")
    assert open(page, encoding="utf-8").read().count("</script>") == 2
    b.open(page)
    assert b.js("return window.pwned === undefined") is True, "a file name ran"
    assert 'onerror="window.pwned=1"' in b.js(SHOWN)["meta"]
    assert b.js("return document.querySelectorAll('img').length") == 0
    assert not [e for e in b.console() if e.get("level") == "SEVERE"]


def docs_screenshot(b, work):
    """docs/explore-audio.png: a whisper-tiny-shaped random checkpoint on espeak-ng speech."""
    speech = espeak(work, "docs.wav", "Attention shows where in the audio each word was heard.")
    heads = [[2, 3], [3, 0], [3, 4]]
    gguf = whisper_model(work, "tiny-shape", "tiny", {}, heads, features(speech, work))
    page = os.path.join(work, "docs.html")
    explore(gguf, speech, page, "--language", "en")
    b.s("POST", "/window/rect", {"width": 1400, "height": 1250})
    b.open(page)
    hover(b, '#rows text[data-token="5"]')
    b.screenshot(os.path.join(T.REPO, "docs", "explore-audio.png"))
    print(f"   wrote docs/explore-audio.png ({os.path.getsize(page) / 1e6:.2f} MB page)")


def main():
    from test_explore import Browser
    run = T.Runner()
    work = T.tempdir()
    try:
        speech = espeak(work)
        heads = [[1, 1], [2, 0], [2, 1]]
        gguf = whisper_model(work, "mini", "mini", dict(decoder_layers=3, decoder_attention_heads=2), heads,
                             features(speech, work))
        run.check("the page holds attend features' spectrogram and transcribe's tokens and attention",
                  check_page_equals_commands, gguf, speech, work, heads)
        run.check("--task translate, --timestamps, a detected language", check_options, gguf, speech, work)
        run.check("the page keeps no encoder self-attention (peak memory)", check_memory, gguf, speech, work)
        run.check("a small page budget pools frames (CLI and Python alike)", check_pooling, gguf, speech, work)
        run.check("Python's attend.explore(model, audio=...) writes the same data", check_python, gguf, speech, work)
        run.check("long audio: the first window of its features; --max-duration", check_long_audio, gguf, speech, work)
        run.check("hostile audio and wrong options: one clear line, no page", check_hostile, gguf, work,
                  os.path.join(HERE, "data", "tiny-v1.gguf"))
        b = None
        try:
            b = Browser(work)
        except Exception as e:  # noqa: BLE001 (reported as the failing check below)
            run.check("browser starts", lambda: (_ for _ in ()).throw(e))
        if b:
            run.check("browser: views, keys, hover, no console error, no network", check_browser, b, gguf, speech,
                      work, heads)
            run.check("browser: words drawn at their times (when the transcript has them)", check_words, b, work)
            run.check("browser: a hostile file name is shown, never run", check_hostile_name, b, gguf, speech, work)
            if "--docs-screenshot" in sys.argv:
                run.check("docs/explore-audio.png", docs_screenshot, b, work)
            b.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
