"""The speech explore page from Python: `attend explore -m WHISPER.gguf AUDIO`'s page
(explore_audio.html, which the CLI compiles in), filled with the object
cli/explore_audio_json.c writes, field for field: the first 30-second window of the audio's
features (attend_features: the whole audio, one normalisation, as attend transcribe hears it),
decoded with every cross-attention matrix kept.
tests/test_explore_audio.py checks that the two pages carry the same data."""
from __future__ import annotations

import base64
import ctypes
import json
import os
from typing import Any, Dict, List, Optional

from . import _capi as C
from . import _speech
from ._common import AttendError
from ._numpy import np

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "explore_audio.html")
MAX_CELLS = 16 << 20        # as EXPLORE_AUDIO_MAX_CELLS: bytes of cross-attention on one page


def _declare() -> ctypes.CDLL:
    lib = _speech._declare()
    f32p, mels = ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.POINTER(ctypes.c_float))
    lib.attend_features.argtypes = [ctypes.c_void_p, f32p, ctypes.c_size_t, ctypes.POINTER(f32p),
                                    ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_features.restype = ctypes.c_int
    lib.attend_decode_features.argtypes = [ctypes.c_void_p, mels, ctypes.c_int,
                                           ctypes.POINTER(_speech.attend_speech_params),
                                           ctypes.POINTER(C.attend_params), ctypes.POINTER(C.attend_result),
                                           ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_decode_features.restype = ctypes.c_int
    lib.attend_transcribe_features.argtypes = [ctypes.c_void_p, f32p, ctypes.c_int,
                                               ctypes.POINTER(_speech.attend_speech_params),
                                               ctypes.POINTER(C.attend_params),
                                               ctypes.POINTER(_speech.attend_transcript), ctypes.c_char_p,
                                               ctypes.c_size_t]
    lib.attend_transcribe_features.restype = ctypes.c_int
    return lib


# ---------------------------------------------------------------------------------------
# Packed arrays, as cli/explore_audio_json.c packs them

def _b64(a: Any) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def _pool(layers: int, heads: int, rows: int, frames: int) -> int:
    try:  # as the CLI: $ATTEND_EXPLORE_MAX_CELLS sets another budget
        budget = float(os.environ.get("ATTEND_EXPLORE_MAX_CELLS", ""))
    except ValueError:
        budget = 0
    budget = budget if budget >= 1 else MAX_CELLS
    for pool in range(1, frames + 1):
        if frames % pool == 0 and layers * heads * rows * (frames // pool) <= budget:
            return pool
    return frames


def _cross(cross: Any) -> Dict[str, Any]:
    """[L, H, T, S] weights: pooled (the mean of pool frames, summed in order as C does),
    each row scaled to its maximum as bytes, the maxima as float32."""
    L, H, T, S = cross.shape
    pool = _pool(L, H, T, S)
    x = cross.reshape(L * H * T, S // pool, pool)
    rows = x[..., 0].copy()
    for j in range(1, pool):
        rows += x[..., j]
    if pool > 1:
        rows /= np.float32(pool)
    scale = rows.max(axis=1)
    safe = np.where(scale > 0, scale, np.float32(1))[:, None]
    q = np.where(scale[:, None] > 0, np.rint(rows / safe * np.float32(255)), 0).astype(np.uint8)
    return {"layers": L, "heads": H, "rows": T, "frames": S, "pool": pool, "columns": S // pool,
            "scale": _b64(scale.astype("<f4")), "data": _b64(q)}


def _token_frames(cross: Any, heads: List[Any]) -> List[int]:
    """Each token's peak frame under the alignment heads' summed weights (heads in order)."""
    total = np.zeros(cross.shape[2:], dtype=np.float32)
    for layer, head in heads:
        total += cross[layer, head]
    return [int(i) for i in total.argmax(axis=1)]


# ---------------------------------------------------------------------------------------
# The window, decoded

def _features(lib: ctypes.CDLL, h: int, x: Any, cfg: Any) -> Any:
    ptr = ctypes.POINTER(ctypes.c_float)()
    frames = ctypes.c_int()
    err = C.err_buffer()
    if lib.attend_features(h, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), x.size, ctypes.byref(ptr),
                           ctypes.byref(frames), err, C.ERR_LEN):
        raise AttendError(C.decode(err.value))
    try:
        n = cfg.n_mels * frames.value
        return np.ctypeslib.as_array(ptr, shape=(n,)).reshape(cfg.n_mels, frames.value).copy()
    finally:
        C.lib().attend_mem_free(ptr)


def _decode(lib: ctypes.CDLL, h: int, mel: Any, cfg: Any, sp: Any, p: Any) -> Dict[str, Any]:
    """The window decoded with scores and every head's cross-attention: tokens, texts,
    cross-attention. The heads through cross_heads, every (layer, head) in order (cross's
    layout), not want_attention: that would keep the encoder's self-attention too, which the
    page does not show (layers x heads x 1500 x 1500 floats)."""
    out, lang, err = C.attend_result(), ctypes.c_char_p(), C.err_buffer()
    row = mel.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    mels = (ctypes.POINTER(ctypes.c_float) * 1)(row)
    L, H = cfg.decoder_layers, cfg.decoder_heads
    heads = (ctypes.c_int * (2 * L * H))(*[x for layer in range(L) for head in range(H) for x in (layer, head)])
    p.want_attention, p.want_scores = 0, 1
    p.cross_heads, p.n_cross_heads = ctypes.cast(heads, ctypes.POINTER(ctypes.c_int)), L * H
    try:
        if lib.attend_decode_features(h, mels, 1, ctypes.byref(sp), ctypes.byref(p), ctypes.byref(out),
                                      ctypes.byref(lang), err, C.ERR_LEN):
            raise AttendError(C.decode(err.value))
    finally:
        p.cross_heads, p.n_cross_heads = None, 0  # p goes on to the transcript's decode
    try:
        T, S = out.n_tgt, out.n_src
        cross = np.ctypeslib.as_array(out.head_cross, shape=(L * H * T * S,))
        return {"language": C.decode(lang.value), "text": C.decode(out.text),
                "tokens": [C.decode(out.tgt_pieces[t]) for t in range(T)],
                "ids": [int(out.tgt_ids[t]) for t in range(T)],
                "logprob": [float(f"{float(out.logprob[t]):.4f}") for t in range(T)],
                "cross": cross.reshape(L, H, T, S).copy()}
    finally:
        C.lib().attend_result_free(ctypes.byref(out))


def _words(lib: ctypes.CDLL, h: int, mel: Any, sp: Any, p: Any, samples: int, n_heads: int) -> List[Dict[str, Any]]:
    """The transcript's words for the same features, with word timestamps when the model has
    alignment heads (samples: the audio's, HF's num_frames = samples // 160)."""
    t, err = _speech.attend_transcript(), C.err_buffer()
    p.want_attention = 0
    sp = _speech.attend_speech_params(sp.language, sp.task, sp.timestamps)
    sp.word_timestamps, sp.audio_frames = 1 if n_heads else 0, min(samples // 160, mel.shape[1])
    if lib.attend_transcribe_features(h, mel.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), mel.shape[1],
                                      ctypes.byref(sp), ctypes.byref(p), ctypes.byref(t), err, C.ERR_LEN):
        raise AttendError(C.decode(err.value))
    try:
        return [{"word": C.decode(t.words[i].word), "start": float(f"{t.words[i].start:.3f}"),
                 "end": float(f"{t.words[i].end:.3f}"), "probability": float(f"{t.words[i].probability:.4f}")}
                for i in range(t.n_words)]
    finally:
        lib.attend_transcript_free(ctypes.byref(t))


def page_data(model: Any, audio: Any, language: Optional[str] = None, task: str = "transcribe",
              timestamps: bool = False, beam: Optional[int] = None, max_length: Optional[int] = None,
              threads: Optional[int] = None) -> Dict[str, Any]:
    """The JSON object `attend explore -m MODEL AUDIO` embeds, for a Whisper Model and audio (a
    file path, or 16 kHz mono samples): its first window."""
    cfg = model.config
    if not cfg.audio:
        raise AttendError(f"{model.path} is a text model ({cfg.architecture}): explore its translations")
    if task not in ("transcribe", "translate"):
        raise ValueError(f"task is 'transcribe' or 'translate', not {task!r}")
    lib = _declare()
    x = np.ascontiguousarray(_speech._samples(audio), dtype=np.float32)
    sp = _speech.attend_speech_params(language.encode() if language else None, 1 if task == "translate" else 0,
                                      1 if timestamps else 0)
    p = lib.attend_default_params()
    p.threads = threads if threads is not None else model.threads
    p.num_beams, p.max_length = beam or 0, max_length or 0
    h = model._enter()
    try:
        mel = np.ascontiguousarray(_features(lib, h, x, cfg)[:, :cfg.audio_frames])
        r = _decode(lib, h, mel, cfg, sp, p)
        words = _words(lib, h, mel, sp, p, x.size, len(cfg.alignment_heads))
        texts = [model.detokenize([i]) for i in r["ids"]]
    finally:
        model._leave()
    beams = beam or cfg.num_beams
    name = os.path.basename(os.fsdecode(audio)) if isinstance(audio, (str, bytes, os.PathLike)) else "samples"
    heads = [list(x) for x in cfg.alignment_heads]
    return {"kind": "speech", "model": os.path.basename(model.path),
            "settings": f"beam search, {beams} beams" if beams > 1 else "greedy search", "file": name,
            "language": r["language"], "language_given": bool(language and language != "auto"), "task": task,
            "timestamps": bool(timestamps),
            "config": {"encoder_layers": cfg.encoder_layers, "encoder_heads": cfg.encoder_heads,
                       "decoder_layers": cfg.decoder_layers, "decoder_heads": cfg.decoder_heads,
                       "n_mels": cfg.n_mels, "audio_frames": cfg.audio_frames, "n_languages": cfg.n_languages},
            "rate": 16000, "samples": int(x.size), "alignment_heads": heads,
            "text": r["text"], "tokens": r["tokens"], "texts": texts, "ids": r["ids"],
            "special": [i >= cfg.eos_id for i in r["ids"]], "logprob": r["logprob"], "words": words,
            "token_frame": _token_frames(r["cross"], heads),
            "mel": {"rows": cfg.n_mels, "frames": mel.shape[1], "data": _b64(mel.astype("<f4"))},
            "cross": _cross(r["cross"])}


def page_html(data: Dict[str, Any]) -> str:
    from ._explore import _script_safe
    with open(TEMPLATE, encoding="utf-8") as f:
        head, tail = f.read().split("@@DATA@@", 1)
    return head + _script_safe(json.dumps(data, ensure_ascii=False, separators=(",", ":"))) + tail
