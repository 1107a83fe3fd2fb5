"""The `attend explore` page from Python: the same self-contained HTML file (explore.html,
which the CLI compiles in), filled with the same JSON data from Results, and shown inline in
Jupyter. tests/test_python.py checks that the data equal the CLI's for the same sentences."""
from __future__ import annotations

import html
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._numpy import np  # imported on first use: plain translation needs no numpy

from . import _capi as C
from ._options import hint_keywords

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "explore.html")
DEFAULT_PRESETS = ("last:0", "penultimate:avg", "all:avg")
MAX_PIECES = 200  # as attend explore: a longer side makes a page no browser draws well


def _weights(a: np.ndarray) -> List[int]:
    """Thousandths, rounded half to even in float32 as the CLI's lrintf(x * 1000.0f)."""
    return np.rint(np.asarray(a, dtype=np.float32) * np.float32(1000)).astype(np.int64).ravel().tolist()


def _presets(first: Optional[str], own: str, decoder_layers: int) -> List[str]:
    """As attend explore: the chosen view (else the model's own), the model's own, the usual ones."""
    out: List[str] = []
    for i, p in enumerate((first or own, own) + DEFAULT_PRESETS):
        if p == "penultimate:avg" and decoder_layers < 2 and i > 0:
            continue
        if p not in out:
            out.append(p)
    return out


def _sentence(r: Any, presets: Sequence[str]) -> Dict[str, Any]:
    if not r.src_tokens:  # a blank line: listed, not translated (as attend translate)
        return {"source": r.source, "translation": "", "empty": True, "forced": False, "score": 0,
                "normalized_score": 0,
                "src": [], "tgt": [], "src_words": [], "tgt_words": [], "logprob": [], "align": {},
                "enc": [], "dec": [], "cross": []}
    if len(r.src_tokens) > MAX_PIECES or len(r.tgt_tokens) > MAX_PIECES:
        raise ValueError(f"{r.source[:40]!r}... is too long for the page: {len(r.src_tokens)} source and "
                         f"{len(r.tgt_tokens)} target pieces (at most {MAX_PIECES} each)")
    return {"source": r.source, "translation": r.text, "forced": bool(r.forced),
            "score": float(format(float(np.float32(r.score)), ".6g")),
            "normalized_score": float(format(float(np.float32(r.normalized_score)), ".6g")),
            "src": list(r.src_tokens), "tgt": list(r.tgt_tokens),
            "src_words": r.src_words, "tgt_words": r.tgt_words,
            "logprob": [float(f"{float(v):.4f}") for v in r.logprob],
            "align": {p: [list(x) for x in r.alignment(p)] for p in presets},
            "enc": _weights(r.enc_self), "dec": _weights(r.dec_self), "cross": _weights(r.cross)}


def _script_safe(text: str) -> str:
    # as the CLI's JSON: nothing that could end the <script> element or start a comment
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _check(results: Sequence[Any]) -> None:
    """ValueError, before any work, when a result cannot go on the page: not made by a
    Model, or translated without attention=True (or with scores=False)."""
    if not results:
        raise ValueError("explore needs at least one result")
    for i, r in enumerate(results):
        if getattr(r, "_config", None) is None:
            raise ValueError(f"explore needs Results made by Model.translate or Model.score "
                             f"(item {i} is {type(r).__name__})")
        if not r.src_tokens:  # a blank line: shown empty
            continue
        call = "score" if r.forced else "translate"
        if r.cross is None:
            raise ValueError(f"explore needs results made with attention=True: result {i} "
                             f"({r.source[:40]!r}) holds no attention; call "
                             f"Model.{call}(..., attention=True)")
        if r.logprob is None:
            raise ValueError(f"explore needs results with scores: result {i} ({r.source[:40]!r}) "
                             f"holds none; call Model.{call}(..., attention=True) without scores=False")


def _header(results: Sequence[Any], model: Optional[str], settings: Optional[str]) -> Tuple[str, str]:
    """The page header's model name and settings: the ones given, else the results' own
    (the model file's name; the search, as attend explore words it)."""
    def joined(values: Sequence[str], fallback: str) -> str:
        distinct = [v for i, v in enumerate(values) if v and v not in values[:i]]
        return "; ".join(distinct) if distinct else fallback
    if model is None:
        model = joined([getattr(r, "_model_name", "") for r in results], "model")
    if settings is None:
        settings = joined([getattr(r, "_decoding", "") for r in results], "")
    return model, settings


def page_data(results: Sequence[Any], model: Optional[str] = None, settings: Optional[str] = None,
              preset: Optional[str] = None) -> Dict[str, Any]:
    """The page's JSON object (what `attend explore` embeds) for these results; model and
    settings (the header) default to the results' model file name and search."""
    _check(results)
    cfg = results[0]._config
    model, settings = _header(results, model, settings)
    presets = _presets(preset, cfg.alignment_view, cfg.decoder_layers)
    return {"model": model, "settings": settings,
            "config": {"encoder_layers": cfg.encoder_layers, "encoder_heads": cfg.encoder_heads,
                       "decoder_layers": cfg.decoder_layers, "decoder_heads": cfg.decoder_heads},
            "presets": presets, "sentences": [_sentence(r, presets) for r in results]}


class Page:
    """An explore page: ``.html`` (the whole file), ``.save(path)``, and in Jupyter the page
    itself, inline (an iframe holding the file; its script needs a trusted notebook)."""

    def __init__(self, html_text: str):
        self.html = html_text

    def save(self, path: Union[str, os.PathLike]) -> None:
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.html)
        os.replace(tmp, path)

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
                'style="width:100%;height:820px;border:1px solid #ddd"></iframe>')

    def __repr__(self) -> str:
        return f"Page({len(self.html)} bytes)"


@hint_keywords
def explore(results: Union[Any, Sequence[Any]], path: Union[str, os.PathLike, None] = None,
            model: Optional[str] = None, settings: Optional[str] = None,
            preset: Optional[str] = None, *, audio: Any = None, language: Optional[str] = None,
            task: str = "transcribe", timestamps: bool = False, beam: Optional[int] = None,
            max_length: Optional[int] = None) -> Page:
    """The `attend explore` page for one Result or a list (translated with attention=True;
    ValueError up front otherwise): head view, matrix view, every layer x head, word
    alignment of `preset` (then penultimate:avg and all:avg) with log-probs. Written to
    `path` when given; shown inline in Jupyter. `model` and `settings` go in the page's
    header; by default the model file's name and the search the results were made with
    (e.g. "de-en.gguf", "beam search, 4 beams"), as attend explore writes them.

    Speech: ``explore(whisper_model, audio="talk.wav")`` (a Model of a Whisper checkpoint;
    audio a file path or 16 kHz mono samples) is `attend explore -m WHISPER.gguf AUDIO`'s
    page: the first 30 s decoded (``language``, ``task``, ``timestamps``, ``beam``,
    ``max_length`` as Model.transcribe takes them), its spectrogram, tokens and every
    decoder layer and head's cross-attention over the audio."""
    if getattr(getattr(results, "config", None), "audio", 0):
        if audio is None:
            raise ValueError("explore(model, audio=...): a speech model explores audio (a path or 16 kHz samples)")
        from . import _explore_audio as A
        page = Page(A.page_html(A.page_data(results, audio, language, task, timestamps, beam, max_length)))
        if path is not None:
            page.save(path)
        return page
    rs = [results] if hasattr(results, "src_tokens") else list(results)
    data = json.dumps(page_data(rs, model, settings, preset), ensure_ascii=False, separators=(",", ":"))
    with open(TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    head, tail = template.split("@@DATA@@", 1)
    page = Page(head + _script_safe(data) + tail)
    if path is not None:
        page.save(path)
    return page
