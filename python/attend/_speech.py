"""Speech with Whisper checkpoints: Model.transcribe (attend.h's attend_transcribe).

Audio comes as 16 kHz mono samples (a numpy array or any sequence of floats) or as a file
path. Files are read with the soundfile module (Debian's python3-soundfile, libsndfile's
formats) and resampled to 16 kHz with libsoxr through ctypes when their rate differs; the
library itself takes samples only, so the wheel needs neither."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Union

from . import _capi as C
from ._common import AttendError

RATE = 16000


class attend_speech_params(ctypes.Structure):
    _fields_ = [("language", ctypes.c_char_p), ("task", ctypes.c_int), ("timestamps", ctypes.c_int),
                # temperature fallback
                ("temperatures", ctypes.POINTER(ctypes.c_float)), ("n_temperatures", ctypes.c_int),
                ("use_compression_ratio", ctypes.c_int), ("use_logprob", ctypes.c_int), ("use_no_speech", ctypes.c_int),
                ("compression_ratio_threshold", ctypes.c_float), ("logprob_threshold", ctypes.c_float),
                ("no_speech_threshold", ctypes.c_float),
                ("word_timestamps", ctypes.c_int), ("audio_frames", ctypes.c_int)]


class attend_segment(ctypes.Structure):
    _fields_ = [("start", ctypes.c_double), ("end", ctypes.c_double), ("text", ctypes.c_char_p),
                ("ids", ctypes.POINTER(ctypes.c_int)), ("n_ids", ctypes.c_int), ("avg_logprob", ctypes.c_float),
                ("first_word", ctypes.c_int), ("n_words", ctypes.c_int),
                # its window's measures (temperature fallback)
                ("no_speech_prob", ctypes.c_float), ("temperature", ctypes.c_float),
                ("compression_ratio", ctypes.c_float)]


class attend_word(ctypes.Structure):
    _fields_ = [("start", ctypes.c_double), ("end", ctypes.c_double), ("word", ctypes.c_char_p),
                ("probability", ctypes.c_float)]


class attend_transcript(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char_p), ("language", ctypes.c_char_p), ("duration", ctypes.c_double),
                ("n_segments", ctypes.c_int), ("segments", ctypes.POINTER(attend_segment)),
                ("n_words", ctypes.c_int), ("words", ctypes.POINTER(attend_word))]


def _declare() -> ctypes.CDLL:
    lib = C.lib()
    if not hasattr(lib, "attend_transcribe"):
        raise AttendError(f"{C.library_path()} has no attend_transcribe: rebuild it (make)")
    lib.attend_transcribe.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                                      ctypes.POINTER(attend_speech_params), ctypes.POINTER(C.attend_params),
                                      ctypes.POINTER(attend_transcript), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_transcribe.restype = ctypes.c_int
    lib.attend_transcript_free.argtypes = [ctypes.POINTER(attend_transcript)]
    lib.attend_transcript_free.restype = None
    return lib


@dataclass
class Word:
    """A word (with the space before it, as the text has it), the seconds it was heard, and
    the mean probability of its tokens."""
    start: float
    end: float
    word: str
    probability: float


@dataclass
class Segment:
    """A stretch of speech: its times in seconds, text, tokens (timestamps included), and its
    window's mean log-probability (HF's avg_logprob), words, no-speech probability, the
    temperature it was decoded at and its compression ratio (OpenAI's verbose_json fields)."""
    start: float
    end: float
    text: str
    tokens: List[int]
    avg_logprob: float
    words: List[Word] = field(default_factory=list)
    no_speech_prob: float = 0.0
    temperature: float = 0.0
    compression_ratio: float = 0.0


@dataclass
class Transcript:
    text: str
    language: str
    duration: float
    segments: List[Segment]

    @property
    def words(self) -> List[Word]:
        return [w for s in self.segments for w in s.words]


# --------------------------------------------------------------------------------------
# Audio in

class _SoxrIo(ctypes.Structure):  # soxr_io_spec_t
    _fields_ = [("itype", ctypes.c_int), ("otype", ctypes.c_int), ("scale", ctypes.c_double),
                ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]


class _SoxrQuality(ctypes.Structure):  # soxr_quality_spec_t
    _fields_ = [("precision", ctypes.c_double), ("phase_response", ctypes.c_double),
                ("passband_end", ctypes.c_double), ("stopband_begin", ctypes.c_double),
                ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]


_FLOAT32, _HQ = 0, 4  # SOXR_FLOAT32_I, SOXR_HQ


def _soxr() -> Any:
    name = ctypes.util.find_library("soxr")
    if not name:
        return None
    lib = ctypes.CDLL(name)
    lib.soxr_io_spec.restype = _SoxrIo
    lib.soxr_io_spec.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.soxr_quality_spec.restype = _SoxrQuality
    lib.soxr_quality_spec.argtypes = [ctypes.c_ulong, ctypes.c_ulong]
    lib.soxr_oneshot.restype = ctypes.c_char_p
    lib.soxr_oneshot.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_uint, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                 ctypes.POINTER(_SoxrIo), ctypes.POINTER(_SoxrQuality), ctypes.c_void_p]
    return lib


def resample(samples: Any, rate: int) -> Any:
    """Mono float32 samples at rate -> 16 kHz with libsoxr's high quality (as attend's
    command line and HF's audio loading resample)."""
    import numpy as np
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if rate == RATE or x.size == 0:
        return x
    lib = _soxr()
    if lib is None:
        raise AttendError(f"audio at {rate} Hz needs resampling to 16 kHz: install libsoxr (Debian: libsoxr0), "
                          "or pass 16 kHz samples")
    out = np.zeros(int(x.size * RATE / rate) + 16, dtype=np.float32)
    done = ctypes.c_size_t(0)
    io, quality = lib.soxr_io_spec(_FLOAT32, _FLOAT32), lib.soxr_quality_spec(_HQ, 0)
    err = lib.soxr_oneshot(float(rate), float(RATE), 1, x.ctypes.data, x.size, None, out.ctypes.data, out.size,
                           ctypes.byref(done), ctypes.byref(io), ctypes.byref(quality), None)
    if err:
        raise AttendError(f"resampling {rate} Hz to 16 kHz: {err.decode(errors='replace')}")
    return out[:done.value]


def load_audio(path: Union[str, "os.PathLike[str]"]) -> Any:
    """A sound file as 16 kHz mono float32 samples: soundfile reads it (WAV, FLAC, Ogg, MP3
    with a recent libsndfile), channels are averaged, other rates resampled."""
    try:
        import soundfile
    except ImportError:
        raise AttendError("reading audio files needs the soundfile module (Debian: python3-soundfile); "
                          "or pass 16 kHz samples as a numpy array") from None
    try:
        data, rate = soundfile.read(os.fspath(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError, ValueError) as e:  # soundfile's LibsndfileError is a RuntimeError
        raise AttendError(f"{os.fspath(path)}: not readable as audio: {e}") from None
    return resample(data.mean(axis=1), rate)


def _samples(audio: Any) -> Any:
    import numpy as np
    if isinstance(audio, (str, bytes, os.PathLike)):
        return load_audio(os.fsdecode(audio))
    x = np.ascontiguousarray(audio, dtype=np.float32)
    if x.ndim != 1:
        raise AttendError(f"audio samples must be one-dimensional (16 kHz mono), not of shape {x.shape}")
    return x


# --------------------------------------------------------------------------------------
# The call

def _from_c(t: attend_transcript) -> Transcript:
    words = [Word(t.words[i].start, t.words[i].end, C.decode(t.words[i].word), t.words[i].probability)
             for i in range(t.n_words)]
    segments = []
    for i in range(t.n_segments):
        s = t.segments[i]
        segments.append(Segment(s.start, s.end, C.decode(s.text), [s.ids[k] for k in range(s.n_ids)],
                                s.avg_logprob, words[s.first_word:s.first_word + s.n_words], s.no_speech_prob,
                                s.temperature, s.compression_ratio))
    return Transcript(C.decode(t.text), C.decode(t.language), t.duration, segments)


def fallback_params(sp: attend_speech_params, p: Any, temperature: Any, thresholds: Sequence[Optional[float]],
                    seed: Optional[int]) -> Any:
    """temperature (one number: that one; a sequence: fallback, as HF's generate) and the
    three thresholds (None: off) into sp and p. Returns the C array sp points into (keep it)."""
    temps = list(temperature) if isinstance(temperature, (list, tuple)) else [temperature]
    temps = [float(t) for t in temps]
    if not temps or any(not t >= 0 or t != t for t in temps):
        raise ValueError(f"temperature must be a number >= 0 or a list of them, not {temperature!r}")
    array = (ctypes.c_float * len(temps))(*temps)
    sp.temperatures, sp.n_temperatures = array, len(temps)
    cr, lp, ns = thresholds
    if ns is not None and lp is None:
        raise ValueError("no_speech_threshold needs logprob_threshold (HF's rule reads both)")
    sp.use_compression_ratio, sp.compression_ratio_threshold = cr is not None, cr or 0.0
    sp.use_logprob, sp.logprob_threshold = lp is not None, lp or 0.0
    sp.use_no_speech, sp.no_speech_threshold = ns is not None, ns or 0.0
    if seed is not None:
        p.seed = seed
    return array


TASKS = {"transcribe": 0, "translate": 1, None: 2}  # attend.h's ATTEND_TASK_*; None: ATTEND_TASK_MODEL


def transcribe(model: Any, audio: Any, language: Optional[str], task: Optional[str], timestamps: bool,
               beam: Optional[int], max_length: Optional[int], threads: Optional[int], temperature: Any = 0.0,
               thresholds: Sequence[Optional[float]] = (None, None, None), seed: Optional[int] = None,
               word_timestamps: bool = False) -> Transcript:
    from ._interrupt import _CtrlC
    if task not in ("transcribe", "translate", None):
        raise ValueError(f"task is 'transcribe', 'translate' or None (the model's), not {task!r}")
    if not model.config.audio:
        raise AttendError(f"{model.path} is a text model ({model.config.architecture}): use translate()")
    lib = _declare()
    x = _samples(audio)
    sp = attend_speech_params(language.encode() if language else None, TASKS[task],
                              1 if timestamps or word_timestamps else 0)
    sp.word_timestamps = 1 if word_timestamps else 0
    p = lib.attend_default_params()
    p.threads = threads if threads is not None else model.threads
    p.num_beams = beam or 0
    p.max_length = max_length or 0
    keep = fallback_params(sp, p, temperature, thresholds, seed)  # noqa: F841 (sp points into it)
    out = attend_transcript()
    err = C.err_buffer()
    ctrl_c = _CtrlC()
    p.stop = ctrl_c.stop_pointer()
    ptr = x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    with ctrl_c:
        h = model._enter()
        try:
            rc = ctrl_c.run(lambda: lib.attend_transcribe(h, ptr, x.size, ctypes.byref(sp), ctypes.byref(p),
                                                          ctypes.byref(out), err, C.ERR_LEN))
        finally:
            model._leave()
    if ctrl_c.pending:
        if rc == 0:
            lib.attend_transcript_free(ctypes.byref(out))
        raise KeyboardInterrupt
    if rc:
        raise AttendError(C.decode(err.value))
    try:
        return _from_c(out)
    finally:
        lib.attend_transcript_free(ctypes.byref(out))


def transcribe_many(model: Any, audios: Sequence[Any], **options: Any) -> List[Transcript]:
    return [transcribe(model, a, **options) for a in audios]
