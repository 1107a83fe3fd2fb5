#!/usr/bin/python3
"""Audio in (issue 39): `attend features` (audio/read.c: libsndfile and libsoxr; audio/mel.c)
against tools/reference_whisper_features.py, Hugging Face's WhisperFeatureExtractor written
out along its numpy and torch paths.

Speech is synthesised here with espeak-ng (German and English), at its own 22,050 Hz and made
into 16 kHz, 8 kHz, 44.1 kHz and 48 kHz files, FLAC, Ogg Vorbis and Opus, MP3 and stereo. 16 kHz input (a short clip,
exactly 30 s, 70 s as one long-form spectrogram; 80 and 128 mels) must give the reference's
features within 1e-4; resampled input must give the features of the reference's own
resampling (libsoxr's one-shot call at HQ, as Hugging Face's loaders do) within 1e-4; scipy's
unrelated resampler is measured beside it. Standard input (the memory reader) gives what the
file gives. Hostile files (truncated at many points, random bytes, headers claiming 0 samples,
huge sizes, absurd rates and channel counts, NaN and infinite floats, overflowing values) give
features or one clear line and exit 1, never a crash; an hour of silence (16 and 8 kHz) runs
in bounded time and memory (peak RSS measured with /usr/bin/time -v).

ATTEND_BIN=path runs another build (make sanitize runs it with AUDIO_QUICK=1: the hostile
files and the options, without the references and the hour).
Run: /usr/bin/python3 tests/test_audio.py"""
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference_whisper_features as R  # noqa: E402  (tools/, on the path through testlib)

ATTEND = os.environ.get("ATTEND_BIN", T.ATTEND)
QUICK = os.environ.get("AUDIO_QUICK") == "1"
WORK = T.tempdir()
TOL = 1e-4
SENTENCES = [("de", "Guten Morgen. Wo ist der Bahnhof? Ich möchte eine Fahrkarte nach Berlin kaufen."),
             ("en", "The quick brown fox jumps over the lazy dog, and the weather is fine today."),
             ("de", "Zwei Hunde spielen im Schnee vor dem alten Haus am Fluss."),
             ("en", "Where is the nearest train station? I would like to buy a ticket.")]


def path(name):
    return os.path.join(WORK, name)


def espeak(i):
    """Sentence i spoken by espeak-ng: float32 samples at its 22,050 Hz."""
    import soundfile
    out = path(f"espeak{i}.wav")
    if not os.path.exists(out):
        voice, text = SENTENCES[i]
        subprocess.run(["espeak-ng", "-v", voice, "-w", out, text], check=True, capture_output=True)
    x, rate = soundfile.read(out, dtype="float32")
    assert rate == 22050 and len(x) > rate, (rate, len(x))
    return x


def speech(seconds, rate):
    """The sentences in turn, 0.3 s of silence between them, resampled to rate (scipy), cut or
    padded to exactly seconds."""
    parts, n = [], 0
    while n < seconds * 22050:
        for i in range(len(SENTENCES)):
            parts += [espeak(i), np.zeros(6615, np.float32)]
            n += len(parts[-2]) + 6615
    x = np.concatenate(parts)[:int(seconds * 22050)]
    x = x if rate == 22050 else R.resample_scipy(x, 22050, rate)
    want = int(round(seconds * rate))
    return np.concatenate([x, np.zeros(max(0, want - len(x)), np.float32)])[:want]


def write(name, x, rate, **kw):
    import soundfile
    soundfile.write(path(name), x, rate, **kw)
    return path(name)


def features(file, *opts, stdin=None):
    """attend features FILE -o X.npy: the array, [n_mels, frames]."""
    out = path("out.npy")
    if os.path.exists(out):
        os.remove(out)
    p = subprocess.run([ATTEND, "features", file, "-o", out, *opts], capture_output=True, input=stdin, timeout=300)
    assert p.returncode == 0, (file, opts, p.stderr.decode())
    return np.load(out)


def diff(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a.astype(np.float64) - b).max())


# ---------------------------------------------------------------------------------------
# 16 kHz: the features themselves

def check_16k():
    """Short, exactly 30 s, 70 s (long form, padded and not): C, numpy and torch within 1e-4."""
    cases = [("short", 5.0, ()), ("30 s", 30.0, ()), ("70 s --whole", 70.0, ("--whole",)),
             ("70 s --no-pad", 70.0, ("--no-pad",)), ("70 s cut to 30", 70.0, ()), ("short --no-pad", 5.0, ("--no-pad",))]
    for name, seconds, opts in cases:
        f = write(f"s16-{seconds}.wav", speech(seconds, 16000), 16000, subtype="PCM_16")
        x = R.load(f)
        assert len(x) == int(seconds * 16000)
        pad_to = 0 if "--no-pad" in opts else R.WINDOW_SAMPLES
        truncate = not opts
        want_np = R.features_numpy(x, 80, pad_to, truncate)
        want_torch = R.features_torch(x, 80, pad_to, truncate)
        got = features(f, *opts)
        frames = 3000 if truncate else max(len(x), pad_to) // 160
        assert got.shape == (80, frames), (name, got.shape)
        d_np, d_torch, d_ref = diff(got, want_np), diff(got, want_torch), diff(want_np, want_torch)
        print(f"     {name}: {got.shape[1]} frames; C - numpy {d_np:.2g}, C - torch {d_torch:.2g}, "
              f"numpy - torch {d_ref:.2g}")
        assert d_np <= TOL and d_torch <= TOL and d_ref <= TOL, name


def check_128():
    """128 mels (large-v3), short and long form."""
    f = write("s16-128.wav", speech(12.0, 16000), 16000, subtype="PCM_16")
    x = R.load(f)
    for opts, pad_to, truncate in (((), R.WINDOW_SAMPLES, True), (("--no-pad",), 0, False)):
        got = features(f, "--n-mels", "128", *opts)
        d_np = diff(got, R.features_numpy(x, 128, pad_to, truncate))
        d_torch = diff(got, R.features_torch(x, 128, pad_to, truncate))
        print(f"     128 mels {' '.join(opts) or 'window'}: C - numpy {d_np:.2g}, C - torch {d_torch:.2g}")
        assert got.shape[0] == 128 and d_np <= TOL and d_torch <= TOL


def check_filter_bank():
    """The reference's bank is Hugging Face's recipe; the C bank (through test_mel.c's hand
    values) and this one agree on the same hand values."""
    bank = R.mel_filter_bank(80)
    assert bank.shape == (201, 80)
    assert abs(bank[1, 0] - 0.02486259398417609) < 1e-15 and bank[200, 79] == 0
    assert abs(R.hertz_to_mel(8000.0) - 45.245640471924965) < 1e-12


# ---------------------------------------------------------------------------------------
# Other rates, formats, channels

def check_formats():
    """WAV 22,050 Hz, FLAC, Ogg Vorbis, stereo, 8 kHz, 48 kHz, float 44.1 kHz, MP3, Ogg Opus: the
    features of the reference's soxr resampling within 1e-4; scipy's resampler measured beside it."""
    x22 = speech(8.0, 22050)
    stereo = np.stack([x22, np.roll(x22, 5000) * 0.5], axis=1)
    files = [("WAV 22,050 Hz", write("f22.wav", x22, 22050, subtype="PCM_16")),
             ("FLAC 22,050 Hz", write("f22.flac", x22, 22050)),
             ("Ogg Vorbis", write("f22.ogg", x22, 22050, format="OGG", subtype="VORBIS")),
             ("stereo WAV", write("st.wav", stereo, 22050, subtype="PCM_16")),
             ("WAV 8 kHz", write("f8.wav", speech(8.0, 8000), 8000, subtype="PCM_16")),
             ("FLAC 48 kHz", write("f48.flac", speech(8.0, 48000), 48000, subtype="PCM_24")),
             ("float WAV 44,100 Hz", write("f44.wav", speech(8.0, 44100), 44100, subtype="FLOAT")),
             ("MP3 22,050 Hz", write("f22.mp3", x22, 22050, format="MP3")),
             ("Ogg Opus 16 kHz", write("f16.opus", speech(8.0, 16000), 16000, format="OGG", subtype="OPUS"))]
    for name, f in files:
        got = features(f)
        d_soxr = diff(got, R.features_numpy(R.load(f)))
        scipy = np.abs(got - R.features_numpy(R.load(f, R.resample_scipy)))
        print(f"     {name}: C - reference (soxr HQ) {d_soxr:.2g}; C - reference (scipy) max {scipy.max():.2g}, "
              f"mean {scipy.mean():.2g}")
        assert d_soxr <= TOL, name
        # another filter: alike where there is sound, apart in the near-empty bands (above 4 kHz
        # for 8 kHz audio, near 8 kHz for the others), which the log scale magnifies
        assert scipy.mean() < 0.05, name
        assert np.array_equal(got, features("-", stdin=open(f, "rb").read())), f"{name}: stdin differs"


def check_summary():
    """Without -o: one line naming the container, rate, channels, length and shape."""
    f = write("sum.flac", np.stack([speech(3.0, 22050)] * 2, axis=1), 22050)
    p = subprocess.run([ATTEND, "features", f, "--n-mels", "128"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.count("\n") == 1, p
    assert re.search(r"FLAC .*22050 Hz, 2 channels; 3\.00 s at 16 kHz used -> 3000 frames x 128 mels", p.stdout), p.stdout
    npz = path("f.npz")
    assert subprocess.run([ATTEND, "features", f, "-o", npz]).returncode == 0
    assert np.array_equal(np.load(npz)["input_features"], features(f))


# ---------------------------------------------------------------------------------------
# Hostile files

def wav(rate=16000, channels=1, bits=16, fmt=1, data=b"", data_len=None, riff_len=None):
    """A WAV file with a hand-made header (any field may lie)."""
    data_len = len(data) if data_len is None else data_len
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data) if riff_len is None else riff_len, b"WAVE",
                       b"fmt ", 16, fmt, channels, rate, (rate * channels * bits // 8) & 0xFFFFFFFF,
                       (channels * bits // 8) & 0xFFFF, bits, b"data", data_len) + data


def run_hostile(name, data, expect=None):
    """attend features on the bytes: features of the right shape or exit 1 with one line
    (matching expect when given); never a signal. Also through standard input."""
    f = path("hostile")
    with open(f, "wb") as out:
        out.write(data)
    for args, stdin in (([f], None), (["-"], data)):
        p = subprocess.run([ATTEND, "features", *args, "-o", path("h.npy")], capture_output=True, input=stdin,
                           timeout=60)
        err = p.stderr.decode(errors="replace")
        assert p.returncode in (0, 1), f"{name}: exit {p.returncode}: {err[-500:]}"
        if p.returncode == 1:
            assert err.startswith("attend features: ") and err.count("\n") == 1, f"{name}: {err!r}"
            assert expect is None or re.search(expect, err), f"{name}: {err!r}"
        else:
            assert expect is None, f"{name}: accepted, expected {expect!r}"
            x = np.load(path("h.npy"))
            assert x.shape == (80, 3000) and np.isfinite(x).all(), name


def check_truncated():
    """WAV, FLAC and Ogg cut inside the header and at 19 points of the data."""
    x = speech(2.0, 22050)
    for f in (write("t.wav", x, 22050, subtype="PCM_16"), write("t.flac", x, 22050),
              write("t.ogg", x, 22050, format="OGG", subtype="VORBIS")):
        data = open(f, "rb").read()
        cuts = sorted({0, 1, 4, 12, 30, 43, 44, 45, 60, 200} | {len(data) * k // 20 for k in range(1, 20)})
        for cut in cuts:
            run_hostile(f"{os.path.basename(f)} cut at {cut}", data[:cut])


def check_headers():
    """Lying headers, random bytes, NaN and infinity: one line each (or features)."""
    rng = np.random.default_rng(3)
    floats = np.array([0.1] * 100 + [np.nan] + [0.0] * 100, np.float32)
    cases = [("0 samples", wav(), "no audio samples"),
             ("0 bytes", b"", "not readable as audio"),
             ("random bytes", rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(), "not readable as audio"),
             ("random after RIFF", b"RIFF" + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(), None),
             ("huge sizes, little data", wav(data=b"\x01\x00" * 1000, data_len=0xFFFFFFF0, riff_len=0xFFFFFFF8), None),
             ("rate 0", wav(rate=0, data=bytes(100)), "not readable as audio"),
             ("rate 2 GHz", wav(rate=2000000000, data=bytes(100)), r"sample rate 2000000000 Hz: outside"),
             ("rate 1 Hz", wav(rate=1, data=bytes(100)), r"sample rate 1 Hz"),
             ("60,000 channels", wav(channels=60000, data=bytes(1000)), "not readable as audio"),
             ("300 channels", wav(channels=300, data=bytes(6000)), "300 channels: at most 256"),
             ("0 channels", wav(channels=0, data=bytes(1000)), "not readable as audio"),
             ("NaN float", wav(fmt=3, bits=32, data=floats.tobytes()), r"sample 100 \(0\.006 s\) is not a finite number"),
             ("infinite float", wav(fmt=3, bits=32, data=np.where(np.isnan(floats), np.inf, floats).astype(np.float32)
                                    .tobytes()), "not a finite number"),
             ("NaN float, stereo 44.1 kHz", wav(rate=44100, channels=2, fmt=3, bits=32,
                                                data=np.repeat(floats, 2).tobytes()), "not a finite number"),
             ("3e38 floats at 16 kHz", wav(fmt=3, bits=32, data=np.full(1000, 3e38, np.float32).tobytes()), None),
             ("3e38 floats at 22,050 Hz", wav(rate=22050, fmt=3, bits=32,
                                              data=np.tile(np.float32([3e38, -3e38]), 1000).tobytes()),
              "resampling overflowed"),
             ("7-bit samples", wav(bits=7, data=bytes(100)), None)]
    for name, data, expect in cases:
        run_hostile(name, data, expect)


def check_limits():
    """--max-duration: from the header at once, else while decoding; the hour of silence."""
    f = write("l70.wav", speech(70.0, 16000), 16000, subtype="PCM_16")
    p = subprocess.run([ATTEND, "features", f, "--max-duration", "60"], capture_output=True, text=True)
    assert p.returncode == 1 and "70.0 s of audio: longer than the limit of 60 s" in p.stderr, p.stderr
    p = subprocess.run([ATTEND, "features", "-", "--max-duration", "60"], capture_output=True, text=True,
                       stdin=open(f, "rb"))
    assert p.returncode == 1 and "longer than the limit of 60 s" in p.stderr, p.stderr
    # an Ogg stream's length is read from its last page: cut, the limit is met while decoding
    g = write("l70.ogg", speech(70.0, 22050), 22050, format="OGG", subtype="VORBIS")
    data = open(g, "rb").read()
    p = subprocess.run([ATTEND, "features", "-", "--max-duration", "30"], capture_output=True, input=data[:len(data) * 3 // 4])
    assert p.returncode == 1 and b"longer than the limit of 30 s" in p.stderr, p.stderr


def write_silence(name, seconds, rate):
    """A 16-bit mono WAV of silence, written without holding it in memory twice."""
    f = path(name)
    n = int(seconds * rate)
    with open(f, "wb") as out:
        out.write(wav(rate=rate, data=b"", data_len=2 * n, riff_len=36 + 2 * n))
        block = bytes(2 * rate * 60)
        for _ in range(n // (rate * 60)):
            out.write(block)
    return f


def check_hour():
    """An hour of silence, 16 kHz and 8 kHz: the whole spectrogram (360,000 frames) in bounded
    time and memory (the frames, 115 MB, and little more); refused at once by a lower limit."""
    for rate in (16000, 8000):
        f = write_silence(f"hour{rate}.wav", 3600, rate)
        t0 = time.time()
        p = subprocess.run(["/usr/bin/time", "-v", ATTEND, "features", f, "--whole", "-o", path("hour.npy")],
                           capture_output=True, text=True, timeout=300)
        seconds = time.time() - t0
        assert p.returncode == 0, p.stderr[-800:]
        rss_mb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
        x = np.load(path("hour.npy"), mmap_mode="r")
        assert x.shape == (80, 360000) and float(x.min()) == float(x.max()) == -1.5, x.shape
        print(f"     1 h of silence at {rate} Hz: {seconds:.1f} s, peak RSS {rss_mb:.0f} MB")
        assert seconds < 120 and rss_mb < 200, (seconds, rss_mb)
        t0 = time.time()
        p = subprocess.run([ATTEND, "features", f, "--max-duration", "1800"], capture_output=True, text=True)
        assert p.returncode == 1 and "3600.0 s of audio: longer than the limit of 1800 s" in p.stderr, p.stderr
        assert time.time() - t0 < 2
        os.remove(f)


def check_usage():
    """Usage errors exit 2 with one line; --help lists every option; a bad output path exits 4."""
    f = write("u.wav", speech(1.5, 16000), 16000)
    for args in ([], ["--n-mels", "64", f], ["--n-mels"], [f, "-o", path("x.txt")], [f, "--bogus"], [f, f],
                 [f, "--max-duration", "0"]):
        p = subprocess.run([ATTEND, "features", *args], capture_output=True, text=True)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (args, p.returncode, p.stderr)
    p = subprocess.run([ATTEND, "features", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and all(o in p.stdout for o in ("-o, --output", "--n-mels", "--whole", "--no-pad",
                                                           "--max-duration", "--help")), p.stdout
    p = subprocess.run([ATTEND, "features", f, "-o", "/nonexistent-dir/x.npy"], capture_output=True, text=True)
    assert p.returncode == 4 and "nonexistent-dir" in p.stderr, p


def main():
    r = T.Runner()
    for tool in ("espeak-ng",):
        if not shutil.which(tool):
            print(f"FAIL {tool} is not installed (make deps)")
            r.failed += 1
            r.finish()
    if not QUICK:
        r.check("16 kHz: short, 30 s, 70 s long form: C = numpy = torch within 1e-4", check_16k)
        r.check("128 mels", check_128)
        r.check("the reference's filter bank on hand values", check_filter_bank)
        r.check("WAV, FLAC, Ogg, MP3, Opus, stereo, 8 to 48 kHz: soxr reference within 1e-4; stdin", check_formats)
    r.check("without -o: one summary line; .npz", check_summary)
    r.check("truncated WAV, FLAC, Ogg: features or one line, no crash", check_truncated)
    r.check("lying headers, random bytes, NaN, infinity, overflow: one line, no crash", check_headers)
    r.check("--max-duration from the header and while decoding", check_limits)
    if not QUICK:
        r.check("an hour of silence: bounded time and memory", check_hour)
    r.check("usage errors, --help", check_usage)
    shutil.rmtree(WORK, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
