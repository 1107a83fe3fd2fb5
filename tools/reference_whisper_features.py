#!/usr/bin/python3
"""Whisper's log-mel features as Hugging Face transformers' WhisperFeatureExtractor computes
them, written independently for attend's tests from its rules (transformers itself is not
installed here), along both of its paths:

- numpy (`_np_extract_fbank_features`, used without torch): audio_utils.spectrogram, centred
  frames of 400 samples every 160 (numpy's reflect padding of 200 at each end), a periodic Hann
  window (np.hanning(401)[:-1]), np.fft.rfft in float64 stored as complex64, the power, the mel
  filters in float64 (mel_filter_bank: Slaney scale and norm, 0 to 8000 Hz), max(1e-10), log10,
  cast to float32; then the last frame dropped, max(x, x.max() - 8), (x + 4) / 4;
- torch (`_torch_extract_fbank_features`, what transformers uses when torch is installed):
  the same through torch.stft on float32 (torch.hann_window(400), center=True, reflect), the
  filters cast to float32.

Before either, transformers pads the float32 waveform with zeros to max_length (480,000
samples: 30 s) and, with truncation=True (its default), cuts it there. truncation=False keeps
the whole audio as one spectrogram with one maximum; padding="longest" does not pad.

Audio files are read as Hugging Face's loaders read them: soundfile (libsndfile) as float32,
channels averaged, other rates resampled to 16 kHz by libsoxr at its 'HQ' quality
(audio_utils.load_audio_as calls soxr.resample(..., quality="HQ")); libsoxr's one-shot call is
reached here through ctypes, python-soxr not being in Debian. `resample_scipy` is a second,
unrelated resampler (scipy's polyphase filter) for comparison.

Usage: reference_whisper_features.py FILE [-o OUT.npy] [--n-mels 80|128] [--whole] [--no-pad]
       [--torch]"""
import argparse
import ctypes
import ctypes.util
import sys

import numpy as np

RATE, N_FFT, HOP, WINDOW_SAMPLES = 16000, 400, 160, 480000


# ---------------------------------------------------------------------------------------
# The filter bank

def hertz_to_mel(f):
    """Slaney's scale: 3 f / 200 below 1 kHz, 15 + 27 log(f / 1000) / log(6.4) above."""
    f = np.asarray(f, dtype=np.float64)
    return np.where(f < 1000.0, 3.0 * f / 200.0, 15.0 + np.log(np.maximum(f, 1e-300) / 1000.0) * 27.0 / np.log(6.4))


def mel_to_hertz(m):
    m = np.asarray(m, dtype=np.float64)
    return np.where(m < 15.0, 200.0 * m / 3.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)))


def mel_filter_bank(n_mels, n_fft=N_FFT, rate=RATE, fmax=8000.0):
    """[n_fft // 2 + 1, n_mels] float64: triangles between corners evenly spaced in mels from 0
    to fmax, each scaled by 2 / its width in Hz."""
    corners = mel_to_hertz(np.linspace(hertz_to_mel(0.0), hertz_to_mel(fmax), n_mels + 2))
    freqs = np.linspace(0, rate // 2, n_fft // 2 + 1)
    rising = (freqs[:, None] - corners[None, :-2]) / (corners[1:-1] - corners[:-2])
    falling = (corners[None, 2:] - freqs[:, None]) / (corners[2:] - corners[1:-1])
    bank = np.maximum(0.0, np.minimum(rising, falling))
    return bank * (2.0 / (corners[2:] - corners[:-2]))[None, :]


# ---------------------------------------------------------------------------------------
# Padding, and the two spectrogram paths

def pad_or_cut(x, pad_to=WINDOW_SAMPLES, truncate=True):
    """The float32 waveform as transformers' pad() leaves it: cut to pad_to when truncating,
    zeros appended up to pad_to (0: none)."""
    x = np.asarray(x, dtype=np.float32)
    if truncate and pad_to and len(x) > pad_to:
        x = x[:pad_to]
    if len(x) < pad_to:
        x = np.concatenate([x, np.zeros(pad_to - len(x), np.float32)])
    return x


def _finish(log_spec):
    """The last frame dropped, everything raised to the maximum - 8, then (x + 4) / 4."""
    log_spec = log_spec[:, :-1]
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def features_numpy(x, n_mels=80, pad_to=WINDOW_SAMPLES, truncate=True, bank=None):
    """[n_mels, frames] float32 along transformers' numpy path."""
    bank = mel_filter_bank(n_mels) if bank is None else bank
    wave = np.pad(pad_or_cut(x, pad_to, truncate), (N_FFT // 2, N_FFT // 2), mode="reflect").astype(np.float64)
    window = np.hanning(N_FFT + 1)[:-1]
    n_frames = 1 + (len(wave) - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(wave, (n_frames, N_FFT), (wave.strides[0] * HOP, wave.strides[0]))
    spec = np.fft.rfft(frames * window, axis=1).astype(np.complex64)
    power = np.abs(spec, dtype=np.float64) ** 2
    mel = np.maximum(1e-10, bank.T @ power.T)
    return _finish(np.log10(mel).astype(np.float32))


def features_torch(x, n_mels=80, pad_to=WINDOW_SAMPLES, truncate=True, bank=None):
    """[n_mels, frames] float32 along transformers' torch path."""
    import torch
    bank = mel_filter_bank(n_mels) if bank is None else bank
    wave = torch.from_numpy(pad_or_cut(x, pad_to, truncate))
    stft = torch.stft(wave, N_FFT, HOP, window=torch.hann_window(N_FFT), return_complex=True)
    power = stft[..., :-1].abs() ** 2
    mel = torch.from_numpy(bank).type(torch.float32).T @ power
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).numpy()


# ---------------------------------------------------------------------------------------
# Reading audio

class _IoSpec(ctypes.Structure):
    _fields_ = [("itype", ctypes.c_int), ("otype", ctypes.c_int), ("scale", ctypes.c_double),
                ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]


class _QualitySpec(ctypes.Structure):
    _fields_ = [("precision", ctypes.c_double), ("phase_response", ctypes.c_double),
                ("passband_end", ctypes.c_double), ("stopband_begin", ctypes.c_double),
                ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]


SOXR_FLOAT32_I, SOXR_HQ = 0, 4


def resample_soxr(x, rate, to=RATE):
    """x (float32, mono) from rate to `to` Hz by libsoxr's one-shot call at 'HQ' quality."""
    lib = ctypes.CDLL(ctypes.util.find_library("soxr") or "libsoxr.so.0")
    lib.soxr_io_spec.restype = _IoSpec
    lib.soxr_quality_spec.restype = _QualitySpec
    lib.soxr_quality_spec.argtypes = [ctypes.c_ulong, ctypes.c_ulong]
    lib.soxr_oneshot.restype = ctypes.c_char_p
    lib.soxr_oneshot.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_uint, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                 ctypes.POINTER(_IoSpec), ctypes.POINTER(_QualitySpec), ctypes.c_void_p]
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(int(np.ceil(len(x) * to / rate)) + 16, np.float32)
    done = ctypes.c_size_t(0)
    io = lib.soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
    quality = lib.soxr_quality_spec(SOXR_HQ, 0)
    err = lib.soxr_oneshot(rate, to, 1, x.ctypes.data, len(x), None, out.ctypes.data, len(out), ctypes.byref(done),
                           ctypes.byref(io), ctypes.byref(quality), None)
    if err:
        raise RuntimeError("soxr: " + err.decode())
    return out[:done.value]


def resample_scipy(x, rate, to=RATE):
    """The same by scipy's polyphase resampler (Kaiser window): another resampler entirely."""
    from math import gcd
    from scipy.signal import resample_poly
    g = gcd(rate, to)
    return resample_poly(np.asarray(x, np.float64), to // g, rate // g).astype(np.float32)


def load(path, resampler=resample_soxr):
    """16 kHz mono float32 samples of an audio file."""
    import soundfile
    x, rate = soundfile.read(path, dtype="float32", always_2d=True)
    x = x.mean(axis=1, dtype=np.float32) if x.shape[1] > 1 else x[:, 0]
    return x if rate == RATE else resampler(x, rate)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("-o", "--output", help="write [n_mels, frames] as .npy (else print the shape)")
    ap.add_argument("--n-mels", type=int, default=80)
    ap.add_argument("--whole", action="store_true", help="truncation=False")
    ap.add_argument("--no-pad", action="store_true", help='padding="longest" (and truncation=False)')
    ap.add_argument("--torch", action="store_true", help="the torch path (default: numpy)")
    a = ap.parse_args()
    x = load(a.file)
    f = (features_torch if a.torch else features_numpy)(x, a.n_mels, 0 if a.no_pad else WINDOW_SAMPLES,
                                                        not (a.whole or a.no_pad))
    if a.output:
        np.save(a.output, f)
    else:
        print(f"{a.file}: {len(x) / RATE:.2f} s -> {f.shape[1]} frames x {f.shape[0]} mels")


if __name__ == "__main__":
    sys.exit(main())
