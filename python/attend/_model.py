"""Model, Result and the translation calls over libattend (see model/attend.h)."""
from __future__ import annotations

import ctypes
import dataclasses
import inspect
import math
import os
import signal
import sys
import threading
import warnings
from typing import (Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple,
                    Union, overload)

import numpy as np

from . import _capi as C
from ._options import hint_keywords
from . import _stream

PathLike = Union[str, "os.PathLike[str]"]
Text = Union[str, bytes]

_INT_MAX = 2 ** 31 - 1
# characters of a blank line, as `attend translate` counts them (NUL reads as a space); a
# Python string may also hold a newline, which a line of the CLI never does
_BLANK = " \t\r\n\f\v\0"


class AttendError(Exception):
    """A failure the library reports (an unloadable model, a refused setting, an attention
    view that does not parse or does not fit the model, a refused export); the message is
    attend's own one-line message."""


class AttendWarning(UserWarning):
    """Something attend did and says (a source cut to the model's length, exporter notes)."""


# ---------------------------------------------------------------------------------------
# Library-level helpers


def library_version() -> str:
    """The version of the loaded libattend.so (attend_version()); "unknown" for libraries
    older than 0.4.0, which lack the function."""
    lib = C.lib()
    return C.decode(lib.attend_version()) if hasattr(lib, "attend_version") else "unknown"


def split_sentences(text: Text, lang: Optional[str] = None) -> List[str]:
    """The sentences of text as attend_translate splits them (``attend split``; the rules:
    docs/splitting.md): lang a language code ("de", "en", ...; None: every language's rules
    together). Each sentence without the whitespace around it; [] for blank text."""
    src, raw = _encode(text, "text")
    spans = ctypes.POINTER(C.attend_span)()
    err = C.err_buffer()
    code = None if lang is None else _encode(lang, "lang")[1]
    n = C.lib().attend_split_sentences(raw, len(raw), code, ctypes.byref(spans), err, C.ERR_LEN)
    if n < 0:
        raise AttendError(C.decode(err.value))
    try:
        return [raw[spans[k].begin:spans[k].end].decode("utf-8") for k in range(n)]
    finally:
        if spans:
            C.libc_free(ctypes.cast(spans, ctypes.c_void_p))


_isa_selected = False


def isa() -> str:
    """The kernel set in use: "generic", "avx2" or "avx512" (the best one CPUID reports;
    $ATTEND_ISA forces one). AttendError when $ATTEND_ISA names a set this CPU lacks."""
    global _isa_selected
    lib = C.lib()
    if not _isa_selected:
        err = C.err_buffer()
        if lib.attend_select_isa(err, C.ERR_LEN):
            raise AttendError(C.decode(err.value))
        _isa_selected = True
    return C.decode(lib.attend_isa())


def isa_available() -> str:
    """The kernel sets this CPU supports."""
    return C.decode(C.lib().attend_isa_available())


def default_threads() -> int:
    """Threads used when threads=0: $OMP_NUM_THREADS if set, else the physical cores."""
    return int(C.lib().attend_default_threads())


def default_model_path() -> str:
    """The model Model() loads without a path: $ATTEND_MODEL, else the shipped
    ``models/de-en.gguf`` of the build tree (``<repo>/models``, this package being
    ``<repo>/python/attend``), else ``share/attend/de-en.gguf`` beside the library's
    ``lib/`` directory (``make install``'s layout)."""
    env = os.environ.get("ATTEND_MODEL")
    if env:
        return env
    looked = []
    repo = C.repo_dir()
    if repo:
        looked.append(os.path.join(repo, "models", "de-en.gguf"))
    libdir = C.library_dir()
    if libdir:
        looked.append(os.path.normpath(os.path.join(libdir, "..", "share", "attend", "de-en.gguf")))
    if C.prefix_dir():
        looked.append(os.path.join(C.prefix_dir(), "share", "attend", "de-en.gguf"))
    looked = list(dict.fromkeys(looked))
    for p in looked:
        if os.path.exists(p):
            return p
    raise AttendError("no model given and no shipped model found (looked for "
                      + ", ".join(looked) + "): pass a path or set ATTEND_MODEL")


def _check_view_text(view: str) -> bytes:
    if not isinstance(view, str):
        raise TypeError(f"an attention view is a str such as 'last:0', not {type(view).__name__}")
    if "\0" in view:
        raise AttendError(f"attention view {view!r}: contains a NUL character")
    return view.encode("utf-8")


def parse_view(view: str) -> C.attend_view:
    """Parse an attention view ("last:0", "penultimate:avg", "3:avg,shift", "4:1,5:0",
    "all:avg") with the library's parser; AttendError when it does not parse."""
    v = C.attend_view()
    err = C.err_buffer()
    if C.lib().attend_view_parse(_check_view_text(view), ctypes.byref(v), err, C.ERR_LEN):
        raise AttendError(C.decode(err.value))
    return v


def default_view(decoder_layers: int) -> str:
    """The view of a model whose file records none (the library's attend_default_view)."""
    buf = ctypes.create_string_buffer(C.ATTEND_VIEW_MAX * 8)
    C.lib().attend_default_view(decoder_layers, buf, len(buf))
    return C.decode(buf.value)


def view_name(view: str) -> str:
    """The view written back by the library in its canonical form ("penultimate:avg")."""
    v = parse_view(view)
    buf = ctypes.create_string_buffer(512)
    C.lib().attend_view_name(ctypes.byref(v), buf, len(buf))
    return C.decode(buf.value)


# ---------------------------------------------------------------------------------------
# Config


@dataclasses.dataclass(frozen=True)
class Config:
    """A loaded model's configuration: attend_config's fields, same names and values
    (``activation`` and ``dtype`` as str; ``early_stopping`` 0 false, 1 true, 2 never)."""

    vocab_size: int
    decoder_vocab_size: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_position_embeddings: int
    max_length: int
    activation: str
    scale_embedding: int
    shared_embeddings: int
    tied_output: int
    forced_eos: int
    pad_id: int
    eos_id: int
    unk_id: int
    decoder_start_id: int
    dtype: str
    tensor_count: int
    file_bytes: int
    metadata_checksum: int
    model_max_length: int
    generation_recorded: int
    num_beams: int
    early_stopping: int
    min_length: int
    no_repeat_ngram_size: int
    renormalize_logits: int
    length_penalty: float
    repetition_penalty: float
    max_line_bytes: int
    architecture: str
    n_languages: int
    languages: Tuple[str, ...]  # the codes src_lang / tgt_lang take (multilingual models)
    language_ids: Tuple[int, ...]
    alignment_view: str  # the view alignments use by default: the file's, else the default
    alignment_view_recorded: int  # 1: the file records it (attend.alignment.view)
    n_tasks: int
    tasks: Tuple[str, ...]  # the names task takes (T5's task_specific_params)
    task_prefixes: Tuple[str, ...]
    encoder_head_dim: int  # a head's width (T5's d_kv)
    decoder_head_dim: int
    relative_buckets: int  # T5's relative position buckets (0: other families)
    relative_max_distance: int

    @classmethod
    def _from_c(cls, c: C.attend_config) -> "Config":
        values = {}
        for name, _ in C.attend_config._fields_:
            v = getattr(c, name)
            if name in ("activation", "dtype", "architecture", "alignment_view"):
                v = C.decode(v)
            elif name in ("languages", "language_ids"):
                v = tuple(C.decode(v[i]) if name == "languages" else v[i] for i in range(c.n_languages))
            elif name in ("tasks", "task_prefixes"):
                v = tuple(C.decode(v[i]) for i in range(c.n_tasks))
            values[name] = v
        return cls(**values)

    def _to_c(self) -> C.attend_config:
        c = C.attend_config()
        for name, _ in C.attend_config._fields_:
            if name in ("n_languages", "languages", "language_ids", "n_tasks", "tasks", "task_prefixes"):
                continue  # pointers into the loaded model: not needed by the callers
            v = getattr(self, name)
            setattr(c, name, v.encode("utf-8") if isinstance(v, str) else v)
        return c

    def as_dict(self) -> Dict[str, Any]:
        """The configuration as a plain dict."""
        return dataclasses.asdict(self)

    @property
    def default_beams(self) -> int:
        """The beams a translation uses when none are asked for (1: greedy)."""
        return self.num_beams if self.generation_recorded else 1


# ---------------------------------------------------------------------------------------
# Result


class Hypothesis(NamedTuple):
    """One entry of an n-best list: the text, its score (beams: HF's sequence score;
    greedy and samples: the sum of the tokens' log-probabilities; a target prefix's left
    out) and its target ids; then what was computed along its own path: ``logprob``
    (float32 [T], each token's log-probability; with scores=True or n_best),
    ``dec_self`` / ``cross`` (float32 [layers, heads, T, T] / [..., T, S]; with
    attention=True) and its target pieces ``tokens``. Result.hypothesis(k) gives entry k
    as a Result (alignment(), view(), explore)."""

    text: str
    score: float
    ids: np.ndarray
    logprob: Optional[np.ndarray] = None
    dec_self: Optional[np.ndarray] = None
    cross: Optional[np.ndarray] = None
    tokens: Optional[List[str]] = None
    raw_tokens: Optional[List[bytes]] = None  # the pieces as the library gives them (bytes)


class Sentence(NamedTuple):
    """One sentence of a line translated sentence by sentence (Result.sentences): its
    source and translation text, where its tokens are in the line's arrays
    (``src_tokens[src_start:src_start + n_src]``, ``tgt_tokens[tgt_start:tgt_start +
    n_tgt]``; the attention matrices are block-diagonal over the sentences), its own score
    and whether it was cut; ``src_bytes`` / ``text_bytes``: its (begin, end) byte offsets
    in the UTF-8 line and translation."""

    source: str
    text: str
    src_start: int
    n_src: int
    tgt_start: int
    n_tgt: int
    score: float
    truncated: bool
    src_bytes: Tuple[int, int] = (0, 0)
    text_bytes: Tuple[int, int] = (0, 0)


def _sentences(r: Any, source: str, text: str) -> List[Sentence]:
    """A split line's sentences (attend_result.sentences), byte offsets read as text."""
    if not r.sentences or r.n_sentences < 2:
        return []
    sb, tb = source.encode("utf-8"), text.encode("utf-8")
    out = []
    for k in range(r.n_sentences):
        s = r.sentences[k]
        out.append(Sentence(sb[s.src_begin:s.src_end].decode("utf-8", "replace"),
                            tb[s.text_begin:s.text_end].decode("utf-8", "replace"),
                            s.src_token, s.n_src, s.tgt_token, s.n_tgt, float(s.score), bool(s.truncated),
                            (s.src_begin, s.src_end), (s.text_begin, s.text_end)))
    return out


def _floats(ptr: Any, shape: Tuple[int, ...]) -> np.ndarray:
    n = 1
    for d in shape:
        n *= d
    if n == 0:
        return np.zeros(shape, dtype=np.float32)
    addr = ctypes.cast(ptr, ctypes.c_void_p).value
    buf = (ctypes.c_float * n).from_address(addr)
    return np.frombuffer(buf, dtype=np.float32, count=n).reshape(shape).copy()


def _ints(ptr: Any, n: int) -> np.ndarray:
    if n == 0 or not ptr:
        return np.zeros(0, dtype=np.int32)
    addr = ctypes.cast(ptr, ctypes.c_void_p).value
    buf = (ctypes.c_int * n).from_address(addr)
    return np.frombuffer(buf, dtype=np.int32, count=n).copy()


def _pieces(ptr: Any, n: int) -> List[bytes]:
    return [ptr[i] or b"" for i in range(n)] if ptr else []


def _char_array(items: Sequence[bytes]) -> ctypes.Array:
    return (ctypes.c_char_p * max(len(items), 1))(*items)


@dataclasses.dataclass(repr=False, eq=False)
class Result:
    """One translated (or force-decoded) sentence, everything copied out of the library.

    Token arrays count ``</s>``: S source tokens (ending in ``</s>``), T target tokens
    (ending in ``</s>`` unless cut by the length limit). Attention arrays are float32
    ``[layers, heads, rows, cols]``: ``enc_self`` [encoder layers, heads, S, S],
    ``dec_self`` [decoder layers, heads, T, T], ``cross`` [decoder layers, heads, T, S]
    (row t is the step that predicts target token t); they are None unless the call asked
    for ``attention=True``. A blank input line gives text "", score 0.0 and empty arrays,
    without running the model (as ``attend translate``)."""

    source: str
    """The input line."""
    text: str
    """The translation (or, for Model.score, the target as the model's tokens give it back)."""
    score: float
    """Beams: HF's sequence score (sum of log-probs / length ^ length_penalty); greedy,
    samples and forced decoding: the sum of ``logprob`` (greedy: only with scores=True,
    else 0.0); 0.0 for a blank line."""
    src_ids: np.ndarray
    tgt_ids: np.ndarray
    src_tokens: List[str]
    """SentencePiece pieces of the source (``▁`` starts a word), ``</s>`` last."""
    tgt_tokens: List[str]
    logprob: Optional[np.ndarray]
    """float32 [T]: each target token's log-probability (None with scores=False)."""
    logits: Optional[np.ndarray]
    """float32 [T, decoder vocabulary]: raw logits of each step (logits=True only)."""
    enc_self: Optional[np.ndarray]
    dec_self: Optional[np.ndarray]
    cross: Optional[np.ndarray]
    nbest: List[Hypothesis]
    """The K best (beams, best first; nbest[0] is this translation) or K samples in the
    order drawn; one entry without n_best."""
    truncated: bool
    """The source was cut to the model's length (a warning is also issued)."""
    sentences: List[Sentence] = dataclasses.field(default_factory=list)
    """A line translated sentence by sentence (split=True, the default, and more than one
    sentence): each sentence; empty when the line was one sequence."""
    forced: bool = False
    """Made by Model.score (forced decoding of a given target)."""
    target: Optional[str] = None
    """The target given to Model.score."""
    error: Optional[str] = None
    """Why the library could not translate this one line (the others of the call were
    translated; a warning is also issued); text is then empty."""
    _config: Optional[Config] = None
    _src_raw: List[bytes] = dataclasses.field(default_factory=list)
    _tgt_raw: List[bytes] = dataclasses.field(default_factory=list)
    _model_name: str = ""  # the model file's name and the decoding, for explore's header
    _decoding: str = ""

    # -- aliases in the README's words
    @property
    def src_pieces(self) -> List[str]:
        """Alias of src_tokens."""
        return self.src_tokens

    @property
    def tgt_pieces(self) -> List[str]:
        """Alias of tgt_tokens."""
        return self.tgt_tokens

    def __repr__(self) -> str:
        att = "yes" if self.cross is not None else "no"
        return (f"Result(text={self.text!r}, score={self.score:.6g}, src_tokens={len(self.src_tokens)}, "
                f"tgt_tokens={len(self.tgt_tokens)}, attention={att})")

    # -- words
    def _words(self, raw: List[bytes]) -> Tuple[List[str], List[int]]:
        w = C.attend_words()
        arr = _char_array(raw)
        lib = C.lib()
        if lib.attend_words_from_pieces(arr, len(raw), ctypes.byref(w)):
            raise MemoryError("attend_words_from_pieces: out of memory")
        try:
            words = [C.decode(w.words[i]) for i in range(w.n_words)]
            word_of = [w.word_of[i] for i in range(w.n_pieces)]
        finally:
            lib.attend_words_free(ctypes.byref(w))
        return words, word_of

    @property
    def src_words(self) -> List[str]:
        """Source words: pieces merged at ``▁`` (the library's rule; ``</s>`` is no word).
        alignment() counts words in this list."""
        return self._words(self._src_raw)[0]

    @property
    def tgt_words(self) -> List[str]:
        """Target words, as src_words."""
        return self._words(self._tgt_raw)[0]

    @property
    def src_word_of(self) -> List[int]:
        """For each source piece, its word's index in src_words, or -1 (``</s>``)."""
        return self._words(self._src_raw)[1]

    @property
    def tgt_word_of(self) -> List[int]:
        """For each target piece, its word's index in tgt_words, or -1."""
        return self._words(self._tgt_raw)[1]

    # -- attention views and alignments
    def _need_cross(self) -> np.ndarray:
        if self.cross is None:
            raise ValueError("this result holds no attention: translate with attention=True")
        return np.ascontiguousarray(self.cross, dtype=np.float32)

    def default_view(self) -> str:
        """The view alignments use when none is given: the model's own (Config.alignment_view:
        the one its file records, else attend_default_view for its decoder layers)."""
        if self._config is not None:
            return self._config.alignment_view
        return default_view(self._need_cross().shape[0])

    def _c_view(self, view: Optional[str]) -> C.attend_view:
        cross = self._need_cross()
        if view is None:
            view = self.default_view()
        v = parse_view(view)
        err = C.err_buffer()
        if C.lib().attend_view_check(ctypes.byref(v), cross.shape[0], cross.shape[1], err, C.ERR_LEN):
            raise AttendError(C.decode(err.value))
        return v

    def view(self, view: Optional[str] = None) -> np.ndarray:
        """The cross-attention reduced to one float32 [T, S] matrix by a view (default: the
        model's own, see default_view; "last:0",
        "penultimate:avg", "L:avg,shift", "all:avg", "L:H[,L:H...]"; see docs/alignment-and-attention.md), computed
        by the library's attend_view_reduce."""
        cross = self._need_cross()
        v = self._c_view(view)
        L, H, T, S = cross.shape
        out = np.zeros((T, S), dtype=np.float32)
        if T == 0 or S == 0:
            return out
        err = C.err_buffer()
        fp = ctypes.POINTER(ctypes.c_float)
        if C.lib().attend_view_reduce(ctypes.byref(v), cross.ctypes.data_as(fp), L, H, T, S,
                                      out.ctypes.data_as(fp), err, C.ERR_LEN):
            raise AttendError(C.decode(err.value))
        return out

    def pharaoh(self, view: Optional[str] = None) -> str:
        """The word alignment as Pharaoh text ("0-0 1-2": source word - target word,
        0-based), exactly as ``attend translate --alignment=VIEW`` appends it (without a
        view: the model's own, as ``--alignment``)."""
        cross = self._need_cross()
        v = self._c_view(view)
        if cross.shape[2] == 0:  # a blank line: nothing translated, nothing aligned
            return ""
        cfg = self._config._to_c() if self._config else C.attend_config()
        cfg.decoder_layers, cfg.decoder_heads = cross.shape[0], cross.shape[1]
        r = C.attend_result()
        r.n_src, r.n_tgt = cross.shape[3], cross.shape[2]
        src = _char_array(self._src_raw)
        tgt = _char_array(self._tgt_raw)
        r.src_pieces = ctypes.cast(src, C.c_char_pp)
        r.tgt_pieces = ctypes.cast(tgt, C.c_char_pp)
        r.cross = cross.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        err = C.err_buffer()
        ptr = C.lib().attend_alignment(ctypes.byref(r), ctypes.byref(cfg), ctypes.byref(v), err, C.ERR_LEN)
        if not ptr:
            raise AttendError(f"alignment: {C.decode(err.value)}")
        try:
            return C.decode(ctypes.string_at(ptr))
        finally:
            C.libc_free(ptr)

    def alignment(self, view: Optional[str] = None) -> List[Tuple[int, int]]:
        """Word alignment from a cross-attention view (default: the model's own, as
        ``attend align`` and ``--alignment`` use it; see default_view): a sorted list of
        (source word, target word) index pairs into src_words / tgt_words. Computed by the
        library (attend_view_parse + attend_alignment) as the view says: by default each
        target piece links to its highest-weight source piece (``</s>`` excluded), "words"
        reads links off whole words, "mutual" / "grow" keep the mutual argmaxes / grow them
        (docs/alignment-and-attention.md); words are aligned if any of their pieces are.
        Needs attention=True."""
        out = []
        for link in self.pharaoh(view).split():
            i, j = link.split("-")
            out.append((int(i), int(j)))
        return out

    # -- n-best
    def hypothesis(self, k: int) -> "Result":
        """n-best entry k as a Result of its own: its text, score, ids, pieces,
        log-probabilities and (attention=True) attention, with this Result's source and
        encoder attention; alignment(), view() and pharaoh() then describe that
        hypothesis. hypothesis(0) equals this Result's own fields."""
        h = self.nbest[k]
        raw = h.raw_tokens if h.raw_tokens is not None else list(self._tgt_raw)
        return dataclasses.replace(
            self, text=h.text, score=h.score, tgt_ids=h.ids, tgt_tokens=[C.decode(b) for b in raw],
            logprob=h.logprob, logits=self.logits if k == 0 else None, dec_self=h.dec_self,
            cross=h.cross, nbest=[h], _tgt_raw=raw)

    # -- Jupyter
    def _repr_html_(self) -> str:
        from ._display import result_html
        return result_html(self)


def _result_from_c(r: C.attend_result, cfg: Config, source: str, target: Optional[str]) -> Result:
    if r.status:  # this line failed on its own (attend_result.status)
        empty = np.zeros(0, dtype=np.int32)
        return Result(source=source, text="", score=0.0, src_ids=empty, tgt_ids=empty.copy(),
                      src_tokens=[], tgt_tokens=[], logprob=None, logits=None, enc_self=None,
                      dec_self=None, cross=None, nbest=[], truncated=False,
                      forced=target is not None, target=target, error=C.decode(r.message),
                      _config=cfg)
    S, T = r.n_src, r.n_tgt
    Le, He = cfg.encoder_layers, cfg.encoder_heads
    Ld, Hd = cfg.decoder_layers, cfg.decoder_heads
    src_raw, tgt_raw = _pieces(r.src_pieces, S), _pieces(r.tgt_pieces, T)
    nbest = []
    for k in range(r.n_best if r.nbest else 0):
        h = r.nbest[k]
        n = h.n
        raw = _pieces(h.pieces, n)
        nbest.append(Hypothesis(
            C.decode(h.text), float(h.score), _ints(h.ids, n),
            logprob=_floats(h.logprob, (n,)) if h.logprob else None,
            dec_self=_floats(h.dec_self, (Ld, Hd, n, n)) if h.dec_self else None,
            cross=_floats(h.cross, (Ld, Hd, n, S)) if h.cross else None,
            tokens=[C.decode(b) for b in raw], raw_tokens=raw))
    return Result(
        source=source, text=C.decode(r.text), score=float(r.score),
        src_ids=_ints(r.src_ids, S), tgt_ids=_ints(r.tgt_ids, T),
        src_tokens=[C.decode(p) for p in src_raw], tgt_tokens=[C.decode(p) for p in tgt_raw],
        logprob=_floats(r.logprob, (T,)) if r.logprob else None,
        logits=_floats(r.logits, (T, cfg.decoder_vocab_size)) if r.logits else None,
        enc_self=_floats(r.enc_self, (Le, He, S, S)) if r.enc_self else None,
        dec_self=_floats(r.dec_self, (Ld, Hd, T, T)) if r.dec_self else None,
        cross=_floats(r.cross, (Ld, Hd, T, S)) if r.cross else None,
        nbest=nbest, truncated=bool(r.truncated), forced=target is not None, target=target,
        sentences=_sentences(r, source, C.decode(r.text)),
        _config=cfg, _src_raw=src_raw, _tgt_raw=tgt_raw)


def _blank_result(cfg: Config, source: str, p: C.attend_params, n_best: int) -> Result:
    """What `attend translate` gives a blank line: an empty translation, score 0."""
    def att(L: int, H: int) -> Optional[np.ndarray]:
        return np.zeros((L, H, 0, 0), dtype=np.float32) if p.want_attention else None
    empty = np.zeros(0, dtype=np.int32)
    return Result(
        source=source, text="", score=0.0, src_ids=empty, tgt_ids=empty.copy(), src_tokens=[],
        tgt_tokens=[], logprob=np.zeros(0, dtype=np.float32) if p.want_scores else None,
        logits=np.zeros((0, cfg.decoder_vocab_size), dtype=np.float32) if p.want_logits else None,
        enc_self=att(cfg.encoder_layers, cfg.encoder_heads),
        dec_self=att(cfg.decoder_layers, cfg.decoder_heads),
        cross=att(cfg.decoder_layers, cfg.decoder_heads),
        nbest=[Hypothesis("", 0.0, empty.copy()) for _ in range(max(n_best, 1))],
        truncated=False, _config=cfg)


# ---------------------------------------------------------------------------------------
# Argument checks (TypeError / ValueError, before anything reaches C)


def _int(name: str, v: Any, lo: int, hi: int = _INT_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, not {v}")
    return v


def _float(name: str, v: Any, lo: float = -math.inf, hi: float = math.inf,
           lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise ValueError(f"{name} must be a finite number in {bound}, not {v}")
    return v


def _encode(x: Any, what: str) -> Tuple[str, bytes]:
    """An input line as (str, UTF-8 bytes); TypeError / ValueError for anything else."""
    if isinstance(x, str):
        try:
            return x, x.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{what}: not encodable as UTF-8 ({e.reason} at {e.start})") from None
    if isinstance(x, (bytes, bytearray, memoryview)):
        b = bytes(x)
        try:
            return b.decode("utf-8"), b
        except UnicodeDecodeError as e:
            raise ValueError(f"{what}: bytes that are not UTF-8 ({e.reason} at byte {e.start}); "
                             "pass str, or bytes holding UTF-8") from None
    raise TypeError(f"{what}: expected str (or UTF-8 bytes), not {type(x).__name__}")


def _lines(lines: Any, what: str) -> Tuple[bool, List[Tuple[str, bytes]]]:
    if isinstance(lines, (str, bytes, bytearray, memoryview)):
        return True, [_encode(lines, what)]
    if lines is None:
        raise TypeError(f"{what}: expected str or a list of str, not None")
    try:
        items = list(lines)
    except TypeError:
        raise TypeError(f"{what}: expected str or a list of str, not {type(lines).__name__}") from None
    return False, [_encode(x, f"{what} {i}") for i, x in enumerate(items)]


def _is_blank(b: bytes) -> bool:
    return all(chr(c) in _BLANK for c in b)


_EARLY = {None: C.ATTEND_EARLY_MODEL, False: C.ATTEND_EARLY_FALSE, True: C.ATTEND_EARLY_TRUE,
          "false": C.ATTEND_EARLY_FALSE, "true": C.ATTEND_EARLY_TRUE, "never": C.ATTEND_EARLY_NEVER}


# ---------------------------------------------------------------------------------------
# Ctrl-C during a library call


class _CtrlC:
    """Holds Ctrl-C back while the library works, so that it stops the call cleanly.

    ctypes releases the GIL during attend_translate; a SIGINT then only sets CPython's
    flag, and Python's handler runs when Python code next runs: at the first instruction
    of the on_batch callback, before any ``try`` in it could catch the KeyboardInterrupt
    (ctypes would print "Exception ignored" and hand the library an undefined return
    value). So while the call runs, in the main thread and when SIGINT has Python's
    default handler, a handler that only notes the signal takes its place: on_batch sees
    ``pending`` and asks the library to stop, and the caller raises KeyboardInterrupt
    once the call has returned. Anywhere else (other threads, a handler of the user's)
    nothing changes."""

    def __init__(self) -> None:
        self.pending = False
        self._old: Any = None

    def _note(self, signum: int, frame: Any) -> None:
        self.pending = True

    def __enter__(self) -> "_CtrlC":
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._old = signal.signal(signal.SIGINT, self._note)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._old is not None:
            # signal.signal runs a signal still pending through _note first
            signal.signal(signal.SIGINT, self._old)
            self._old = None


# ---------------------------------------------------------------------------------------
# Model


class Model:
    """A loaded .gguf checkpoint (attend_load: structure, CRC-32s and finite weights are
    checked first). Thread-safe: several threads may translate with one Model at once
    (the GIL is released while the library works). Use as a context manager, or call
    close(); the model is also freed when garbage-collected.

    >>> m = Model("models/de-en.gguf", threads=2)
    >>> m.translate("Wo ist der Bahnhof?").text
    "Where's the station?"
    """

    @hint_keywords
    def __init__(self, path: Optional[PathLike] = None, threads: int = 0) -> None:
        """Load ``path`` (default: default_model_path()). ``threads``: threads per call
        (0: attend_default_threads(), the physical cores or $OMP_NUM_THREADS). Raises
        AttendError with attend's message when the file is refused."""
        self._h: Optional[int] = None
        self._cv = threading.Condition()
        self._busy = 0
        self.threads = _int("threads", threads, 0, 1024)
        if path is None:
            path = default_model_path()
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        bpath = os.fsencode(path)
        if b"\0" in bpath:
            raise ValueError("path contains a NUL character")
        self.path: str = os.fsdecode(bpath)
        lib = C.lib()
        err = C.err_buffer()
        h = lib.attend_load(bpath, err, C.ERR_LEN)
        if not h:
            raise AttendError(f"{self.path}: {C.decode(err.value)}")
        self._h = h
        self.config: Config = Config._from_c(lib.attend_get_config(h).contents)

    # -- lifetime
    def close(self) -> None:
        """Free the model (waits for translations running in other threads to finish).
        Idempotent; later calls raise AttendError."""
        with self._cv:
            h, self._h = self._h, None
            while self._busy:
                self._cv.wait()
        if h:
            C.lib().attend_free(h)

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            h, self._h = getattr(self, "_h", None), None
            if h and C._lib is not None:
                C._lib.attend_free(h)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self) -> str:
        state = "closed" if self._h is None else f"{self.config.dtype}, {self.config.d_model}d"
        return f"attend.Model({self.path!r}, {state})"

    def _enter(self) -> int:
        with self._cv:
            if self._h is None:
                raise AttendError(f"{self.path}: model is closed")
            self._busy += 1
            return self._h

    def _leave(self) -> None:
        with self._cv:
            self._busy -= 1
            self._cv.notify_all()

    # -- small calls
    def verify(self) -> None:
        """Re-check the mapped file's CRC-32s and finiteness (attend_verify); AttendError
        when the file changed."""
        h = self._enter()
        try:
            err = C.err_buffer()
            if C.lib().attend_verify(h, err, C.ERR_LEN):
                raise AttendError(f"{self.path}: {C.decode(err.value)}")
        finally:
            self._leave()

    def count_tokens(self, line: Text) -> int:
        """Source tokens the line translates with (pieces and </s>, and the language token
        of a multilingual model, after truncation)."""
        _, b = _encode(line, "line")
        h = self._enter()
        try:
            err = C.err_buffer()
            n = C.lib().attend_count_tokens(h, b, len(b), err, C.ERR_LEN)
            if n < 0:
                raise AttendError(C.decode(err.value))
            return n
        finally:
            self._leave()

    def tokenize(self, line: Text) -> np.ndarray:
        """The source ids attend_translate uses for line (pieces, </s> last, cut to
        model_max_length), int32 (attend_tokenize); for a multilingual model without the
        source-language token that translation puts first."""
        _, b = _encode(line, "line")
        if not C.has("attend_tokenize"):
            raise AttendError(f"{C.library_path()} has no attend_tokenize: rebuild it")
        h = self._enter()
        try:
            ids = C.c_int_p()
            n = ctypes.c_int()
            err = C.err_buffer()
            if C.lib().attend_tokenize(h, b, len(b), ctypes.byref(ids), ctypes.byref(n), err, C.ERR_LEN):
                raise AttendError(C.decode(err.value))
            try:
                return _ints(ids, n.value)
            finally:
                C.libc_free(ctypes.cast(ids, ctypes.c_void_p).value)
        finally:
            self._leave()

    def detokenize(self, ids: Sequence[int]) -> str:
        """Target ids to text, as Result.text is made (special tokens skipped;
        attend_detokenize). AttendError for an id outside the target vocabulary."""
        a = np.ascontiguousarray(ids, dtype=np.int64)
        if a.ndim != 1:
            raise ValueError("ids must be one-dimensional")
        if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
            raise AttendError("an id is outside the target vocabulary")
        a = a.astype(np.int32)
        if not C.has("attend_detokenize"):
            raise AttendError(f"{C.library_path()} has no attend_detokenize: rebuild it")
        h = self._enter()
        try:
            ptr = C.lib().attend_detokenize(h, a.ctypes.data_as(C.c_int_p), int(a.size))
            if not ptr:
                raise AttendError("an id is outside the target vocabulary (or out of memory)")
            try:
                return C.decode(ctypes.string_at(ptr))
            finally:
                C.libc_free(ptr)
        finally:
            self._leave()

    # -- parameters
    def _params(self, *, beam: Optional[int], greedy: bool, n_best: Optional[int],
                length_penalty: Optional[float], early_stopping: Any, min_length: Optional[int],
                no_repeat_ngram_size: Optional[int], repetition_penalty: Optional[float],
                max_length: Optional[int], sample: bool, top_k: Optional[int], top_p: Optional[float],
                temperature: Optional[float], seed: Optional[int], attention: bool, scores: bool,
                logits: bool, threads: Optional[int], src_lang: Optional[str] = None,
                tgt_lang: Optional[str] = None, task: Optional[str] = None, split: bool = True,
                split_lang: Optional[str] = None) -> C.attend_params:
        p = C.lib().attend_default_params()
        if not isinstance(split, bool):
            raise TypeError(f"split must be True or False, not {type(split).__name__}")
        p.split = C.ATTEND_SPLIT_SENTENCES if split else C.ATTEND_SPLIT_NONE
        if split_lang is not None:
            if not isinstance(split_lang, str):
                raise TypeError(f"split_lang must be a str, not {type(split_lang).__name__}")
            p.split_lang = split_lang.encode("utf-8")
        for name, v in (("src_lang", src_lang), ("tgt_lang", tgt_lang), ("task", task)):
            if v is not None:
                if not isinstance(v, str):
                    raise TypeError(f"{name} must be a str, not {type(v).__name__}")
                setattr(p, name, v.encode("utf-8"))  # ctypes keeps the bytes alive with p
        p.threads = self.threads if threads is None else _int("threads", threads, 0, 1024)
        if max_length is not None:
            p.max_length = _int("max_length", max_length, 2)
        p.want_scores = int(bool(scores))
        p.want_logits = int(bool(logits))
        p.want_attention = int(bool(attention))
        if greedy and beam not in (None, 1):
            raise ValueError(f"greedy=True is beam=1: not with beam={beam}")
        if beam is not None:
            p.num_beams = _int("beam", beam, 1, 1024)
        if greedy:
            p.num_beams = 1
        if n_best is not None:
            p.n_best = _int("n_best", n_best, 1, 1024)
        try:
            p.early_stopping = _EARLY[early_stopping]
        except (KeyError, TypeError):
            raise ValueError("early_stopping is None (the model's), True, False or 'never', "
                             f"not {early_stopping!r}") from None
        if length_penalty is not None:
            p.set_length_penalty = 1
            p.length_penalty = _float("length_penalty", length_penalty, -100, 100)
        if min_length is not None:
            p.set_min_length = 1
            p.min_length = _int("min_length", min_length, 0)
        if no_repeat_ngram_size is not None:
            p.set_no_repeat_ngram_size = 1
            p.no_repeat_ngram_size = _int("no_repeat_ngram_size", no_repeat_ngram_size, 0)
        if repetition_penalty is not None:
            p.repetition_penalty = _float("repetition_penalty", repetition_penalty, 0, 1e6, lo_open=True)
        p.sample = int(bool(sample))
        if not sample and any(x is not None for x in (top_k, top_p, temperature, seed)):
            raise ValueError("top_k, top_p, temperature and seed need sample=True")
        if top_k is not None:
            p.top_k = _int("top_k", top_k, 0)
        if top_p is not None:
            p.top_p = _float("top_p", top_p, 0, 1, lo_open=True)
        if temperature is not None:
            p.temperature = _float("temperature", temperature, 0, 1e9, lo_open=True)
        if seed is not None:
            p.seed = _int("seed", seed, 0, 2 ** 64 - 1)
        return p

    def _settings(self, options: Dict[str, Any]) -> Tuple[C.attend_params, int, int]:
        """The decoding settings of translate()'s and translate_ids()'s keywords (options:
        the call's locals(); each of _params's keywords the call takes goes to it): the
        library's parameters, the batch size and the token budget (0: none; a batch size of
        32 when neither is given)."""
        p = self._params(**{k: options[k] for k in _PARAM_KEYWORDS if k in options})
        batch_size, batch_tokens = options["batch_size"], options["batch_tokens"]
        if batch_size is not None:
            batch_size = _int("batch_size", batch_size, 1)
        if batch_tokens is not None:
            batch_tokens = _int("batch_tokens", batch_tokens, 1)
        if batch_size is None and batch_tokens is None:
            batch_size = 32
        return p, batch_size or 0, batch_tokens or 0

    # -- translation
    @overload
    def translate(self, lines: Text, **options: Any) -> Result: ...

    @overload
    def translate(self, lines: Iterable[Text], **options: Any) -> List[Result]: ...

    @hint_keywords
    def translate(self, lines: Union[Text, Iterable[Text]], *, beam: Optional[int] = None,
                  greedy: bool = False, n_best: Optional[int] = None,
                  length_penalty: Optional[float] = None, early_stopping: Any = None,
                  min_length: Optional[int] = None, no_repeat_ngram_size: Optional[int] = None,
                  repetition_penalty: Optional[float] = None, max_length: Optional[int] = None,
                  sample: bool = False, top_k: Optional[int] = None, top_p: Optional[float] = None,
                  temperature: Optional[float] = None, seed: Optional[int] = None,
                  attention: bool = False, scores: bool = True, logits: bool = False,
                  threads: Optional[int] = None, batch_size: Optional[int] = None,
                  batch_tokens: Optional[int] = None, verbose: bool = False,
                  src_lang: Optional[str] = None, tgt_lang: Optional[str] = None,
                  progress: bool = False, task: Optional[str] = None,
                  target_prefix: Union[None, Text, Sequence[Optional[Text]]] = None,
                  split: bool = True, split_lang: Optional[str] = None, format: str = "text"
                  ) -> Union[Result, List[Result]]:
        """Translate one line (a str: returns one Result) or several (a list or any
        iterable of str: returns a list of Results, in order).

        Every option left at None decodes as the model's generation settings say, as
        ``attend translate`` without options (greedy for files that record none). The
        options are those of ``attend translate``:

        - ``beam`` (--beam N), ``greedy`` (--greedy), ``n_best`` (--n-best K: Result.nbest
          holds K hypotheses), ``length_penalty``, ``early_stopping`` (True, False or
          "never"), ``min_length``, ``no_repeat_ngram_size``, ``repetition_penalty``,
          ``max_length`` (the generation limit counting the start token);
        - ``sample`` with ``top_k``, ``top_p``, ``temperature``, ``seed`` (--sample ...);
        - ``attention`` (--dump-attention: fill enc_self / dec_self / cross; needed by
          Result.alignment, the --alignment option), ``logits`` (--dump-logits),
          ``scores`` (per-token log-probabilities and, for greedy, the score);
        - ``threads`` (-t; default: the Model's), ``batch_size`` (-b, default 32) and
          ``batch_tokens`` (--batch-tokens): how lines are grouped into library calls (the
          results never depend on it), ``verbose`` (-v: one line per batch on stderr);
        - ``src_lang``, ``tgt_lang`` (--src-lang, --tgt-lang): required by multilingual
          models (M2M-100, mBART-50), codes of Config.languages;
        - ``progress``: a progress line on stderr (lines done, lines/s), rewritten in place
          on a terminal, every 10 s elsewhere, and a final count.
        - ``target_prefix`` (--prefix / --prefix-file): each translation starts with this
          text (tokenized as a target, without </s>) and the search continues from it, as
          HF's ``generate(decoder_input_ids=[start, *prefix])``; one str for every line, or
          a list with one str (or None) per line. A multilingual model's target-language
          token still comes first. "" is no prefix. Result.score leaves the prefix out
          (HF's sequences_scores), Result.logprob and tgt_ids include it.
        - ``task`` (--task): T5 models: the prefix of a task of Config.tasks written before
          each line.
        - ``split`` (--split): True (the default) translates a line's sentences one by one
          and joins them (Result.sentences says where each is; attention is block-diagonal
          over them); False translates each line as one sequence. ``split_lang``
          (--split-lang): the splitting rules' language (default: src_lang, else every
          language's rules). A target prefix goes with a line's first sentence.
        - ``format`` (--format): "text" (the default) or "html": each line an HTML
          fragment, Result.text its translation with the tags put back (translate_html();
          the Result holds no tokens or attention then).

        Blank lines (spaces, tabs, \\r, \\n, \\f, \\v, NUL only) give an empty Result without
        running the model. Bad arguments raise TypeError / ValueError; settings the library
        refuses (n_best above the beam count, sample with beams) raise AttendError."""
        if format not in ("text", "html"):
            raise ValueError(f"format is 'text' or 'html', not {format!r}")
        if format == "html":
            if n_best or attention or logits or target_prefix is not None:
                raise ValueError("n_best, attention, logits and target_prefix are for plain text: not with "
                                 "format='html'")
            return self._html_results(lines, locals())
        single, items = _lines(lines, "line")
        p, batch_size, batch_tokens = self._settings(locals())
        prefixes = _prefixes(target_prefix, len(items), single)
        out = self._run(items, None, p, n_best or 0, batch_size, batch_tokens, verbose,
                        progress=progress, prefixes=prefixes)
        return out[0] if single else out

    def translate_html(self, docs: Union[Text, Iterable[Text]], *, document: bool = False,
                       **options: Any) -> Union[str, List[str]]:
        """Translate HTML (attend_translate_html; ``attend translate --format html``, or
        ``--document`` with document=True): one str (returns a str) or several (a list). The
        text between block tags is translated sentence by sentence, each inline tag (<b>,
        <a href=...>, <span>...) put back around the target words aligned to the source words
        it wrapped, <script>, <pre>, <code> and translate="no" copied untouched
        (docs/markup.md). document=True: each str a whole page (its doctype kept). The other
        options are translate()'s search and splitting keywords (beam, greedy, sample...,
        split, split_lang, src_lang, tgt_lang, task, threads)."""
        unknown = [k for k in options if k not in _PARAM_KEYWORDS or k in ("attention", "logits", "n_best")]
        if unknown:
            raise TypeError(f"translate_html() got an unexpected keyword argument {unknown[0]!r}")
        single, items = _lines(docs, "document")
        p, _, _ = self._settings(dict(_HTML_DEFAULTS, **options))
        texts, cut = self._run_html(items, p, bool(document))
        for i, c in enumerate(cut):
            if c:
                warnings.warn(f"document {i + 1}: a sentence was cut to the model's length", AttendWarning,
                              stacklevel=2)
        return texts[0] if single else texts

    def _run_html(self, items: List[Tuple[str, bytes]], p: C.attend_params, document: bool
                  ) -> Tuple[List[str], List[bool]]:
        n = len(items)
        arr = _char_array([b for _, b in items])
        lens = (ctypes.c_size_t * max(n, 1))(*[len(b) for _, b in items])
        out = (ctypes.c_void_p * max(n, 1))()
        cut = (ctypes.c_int * max(n, 1))()
        err = C.err_buffer()
        h = self._enter()
        try:
            rc = C.lib().attend_translate_html(h, arr, lens, n, int(document), ctypes.byref(p), out, cut, err,
                                               C.ERR_LEN)
        finally:
            self._leave()
        if rc:
            raise AttendError(C.decode(err.value))
        texts = []
        for i in range(n):
            texts.append(C.decode(ctypes.cast(out[i], ctypes.c_char_p).value or b""))
            C.libc_free(out[i])
        return texts, [bool(c) for c in cut[:n]]

    def _html_results(self, lines: Any, options: Dict[str, Any]) -> Union[Result, List[Result]]:
        """translate(format='html'): Results holding translate_html()'s text."""
        single, items = _lines(lines, "line")
        p, _, _ = self._settings(options)
        texts, cut = self._run_html(items, p, False)
        out = []
        for i, ((src, _), text) in enumerate(zip(items, texts)):
            r = _blank_result(self.config, src, p, 0)
            r.text, r.truncated = text, cut[i]
            if cut[i]:
                warnings.warn(f"line {i + 1}: a sentence was cut to the model's length", AttendWarning, stacklevel=3)
            out.append(r)
        return out[0] if single else out

    def __call__(self, lines: Union[Text, Iterable[Text]], **options: Any) -> Union[Result, List[Result]]:
        """The same as translate()."""
        return self.translate(lines, **options)

    def translate_iter(self, lines: Iterable[Text], *, batch_size: Optional[int] = None,
                       lookahead: Optional[int] = None, progress: bool = False,
                       **options: Any) -> Iterator[Result]:
        """Translate an iterable of lines (a list, an open file, a generator) lazily: yields
        one Result per line, in input order, as each group of lines is translated; at most
        ``lookahead`` lines (default: batch_size, 32) are read ahead of what has been
        yielded, so a huge file is never held in memory. Each group is one translate() call
        (the library sorts it by length into batches): the Results equal translate()'s of
        the whole list bit for bit. A trailing newline (and \\r before it) is dropped from
        each line, as ``attend translate`` reads lines. ``progress``: as translate()'s,
        counting every line so far. The other options are translate()'s (checked when
        translate_iter is called, before any line is read); a ``target_prefix`` that is not
        one str is an iterable of one prefix (or None) per line, read in step with the
        lines (ValueError when it has fewer or more). CTranslate2 calls this
        translate_iterable."""
        _stream.check_iterable(lines)
        if "batch_tokens" in options and batch_size is None and lookahead is None:
            lookahead = 32
        size = _int("lookahead", lookahead if lookahead is not None else batch_size or 32, 1)
        if batch_size is not None:
            options["batch_size"] = _int("batch_size", batch_size, 1)
        per_line = options.get("target_prefix")
        if per_line is None or isinstance(per_line, (str, bytes)):
            per_line = None
        else:  # one prefix per line, read in step with the lines
            try:
                per_line = iter(per_line)
            except TypeError:
                raise TypeError("target_prefix is a str or an iterable of str (one per line), not "
                                f"{type(per_line).__name__}") from None
            del options["target_prefix"]
        self.translate([], **options)  # the options' errors now, not at the first next()
        return self._iter(lines, size, progress, options, per_line)

    def _iter(self, lines: Iterable[Text], size: int, progress: bool,
              options: Dict[str, Any], per_line: Optional[Iterator[Any]]) -> Iterator[Result]:
        shown = _stream.as_progress(progress, None)
        prefixes = per_line
        try:
            for chunk in _stream.chunks(lines, size):
                if prefixes is not None:
                    options["target_prefix"] = _stream.take(prefixes, len(chunk), "target_prefix")
                yield from self.translate(chunk, progress=shown or False, **options)
            if prefixes is not None and next(prefixes, _stream.END) is not _stream.END:
                raise ValueError("target_prefix: more prefixes than lines")
        finally:
            if shown is not None:
                shown.close()

    @hint_keywords
    def translate_ids(self, ids: Any, *, beam: Optional[int] = None, greedy: bool = False,
                      n_best: Optional[int] = None, length_penalty: Optional[float] = None,
                      early_stopping: Any = None, min_length: Optional[int] = None,
                      no_repeat_ngram_size: Optional[int] = None,
                      repetition_penalty: Optional[float] = None, max_length: Optional[int] = None,
                      sample: bool = False, top_k: Optional[int] = None,
                      top_p: Optional[float] = None, temperature: Optional[float] = None,
                      seed: Optional[int] = None, attention: bool = False, scores: bool = True,
                      logits: bool = False, threads: Optional[int] = None,
                      batch_size: Optional[int] = None, batch_tokens: Optional[int] = None,
                      tgt_lang: Optional[str] = None, progress: bool = False
                      ) -> Union[Result, List[Result]]:
        """Translate from source token ids (attend_translate_ids): one sentence (a flat list
        or 1-D array of ints: returns one Result) or several (a list of them, or a 2-D
        array: a list of Results). Each sentence's ids are as tokenize() gives them,
        ``</s>`` last, each in 0..vocab_size-1; a multilingual model's source-language id
        goes first (an id of Config.language_ids), so src_lang is not taken. The options
        are translate()'s; the Results equal translate()'s of the same text, with
        Result.source "". An empty sentence, an id outside the source vocabulary or a
        sentence longer than the model's positions raises AttendError."""
        single, arrays = _stream.id_lists(ids)
        bad = _stream.check_ids(arrays, self.config.vocab_size)
        if bad:
            raise AttendError(bad)
        p, batch_size, batch_tokens = self._settings(locals())
        items = [("", b"")] * len(arrays)
        out = self._run(items, None, p, n_best or 0, batch_size, batch_tokens, False,
                        progress=progress, src_ids=arrays)
        return out[0] if single else out

    @overload
    def score(self, source: Text, target: Text, **options: Any) -> Result: ...

    @overload
    def score(self, source: Iterable[Text], target: Iterable[Text], **options: Any) -> List[Result]: ...

    @hint_keywords
    def score(self, source: Union[Text, Iterable[Text]], target: Union[Text, Iterable[Text]], *,
              attention: bool = True, logits: bool = False, max_length: Optional[int] = None,
              threads: Optional[int] = None, src_lang: Optional[str] = None,
              tgt_lang: Optional[str] = None) -> Union[Result, List[Result]]:
        """Forced decoding (``attend align --target``): the model reads ``target`` as its
        output and reports each token's log-probability (Result.logprob, Result.score =
        their sum) and, with attention=True (the default), every attention matrix of that
        translation. Two str give one Result; two lists of equal length give a list. Every
        source runs through the model, a blank one too (as ``attend align``). Multilingual
        models need ``src_lang`` and ``tgt_lang`` (the target then starts with its language
        token, as HF encodes text_target)."""
        single_s, srcs = _lines(source, "source")
        single_t, tgts = _lines(target, "target")
        if single_s != single_t or len(srcs) != len(tgts):
            raise ValueError("score() takes a str source and a str target, or two lists of equal "
                             f"length ({len(srcs)} sources, {len(tgts)} targets)")
        # the library reads targets up to a NUL; a NUL in the source reads as a space: the same
        tgts = [(t, b.replace(b"\0", b" ")) for t, b in tgts]
        p = self._params(beam=None, greedy=False, n_best=None, length_penalty=None,
                         early_stopping=None, min_length=None, no_repeat_ngram_size=None,
                         repetition_penalty=None, max_length=max_length, sample=False, top_k=None,
                         top_p=None, temperature=None, seed=None, attention=attention,
                         scores=True, logits=logits, threads=threads, src_lang=src_lang,
                         tgt_lang=tgt_lang)
        out = self._run(srcs, tgts, p, 0, 32, 0, False)
        return out[0] if single_s else out

    def _run(self, items: List[Tuple[str, bytes]], targets: Optional[List[Tuple[str, bytes]]],
             p: C.attend_params, n_best: int, batch: int, batch_tokens: int,
             verbose: bool, progress: Any = False,
             src_ids: Optional[List[np.ndarray]] = None,
             prefixes: Optional[List[Optional[bytes]]] = None) -> List[Result]:
        """One attend_translate call for every line that needs the model. The library sorts
        and batches them (batch_size / batch_tokens); after each batch on_batch copies the
        batch's results into Python objects and frees them, so memory holds one batch of
        attention matrices at a time. The GIL is released while the library works and taken
        back for each on_batch. progress: see _stream.as_progress. src_ids: the sources as
        ids (translate_ids; items then only give Result.source), each sentence through
        attend_translate_ids, a per-sentence failure raising AttendError."""
        cfg = self.config
        results: List[Optional[Result]] = [None] * len(items)
        todo = [i for i, (_, b) in enumerate(items)
                if targets is not None or src_ids is not None or not _is_blank(b)]
        todo_set = set(todo)
        for i, (text, _) in enumerate(items):
            if i not in todo_set:
                results[i] = _blank_result(cfg, text, p, n_best)
        if verbose:
            print(f"attend: {len(items)} line{'' if len(items) == 1 else 's'}, {len(todo)} to translate",
                  file=sys.stderr, flush=True)
        n = len(todo)
        lines = [items[i][1] for i in todo]
        arr = _char_array(lines)
        lens = (ctypes.c_size_t * max(n, 1))(*[len(b) for b in lines])
        tg = _char_array([targets[i][1] for i in todo]) if targets is not None else None
        if prefixes is not None:  # kept alive by pa until the call returns
            pa = _char_array([prefixes[i] for i in todo])
            p.target_prefix = ctypes.cast(pa, C.c_char_pp)
        out = (C.attend_result * max(n, 1))()
        failure: List[BaseException] = []
        warn: List[str] = []
        refused: List[str] = []
        ctrl_c = _CtrlC()
        shown = _stream.as_progress(progress, len(items))
        own_progress = shown is not None and shown is not progress
        if shown is not None:
            shown.add(len(items) - n)  # blank lines: done already

        def on_batch(user: Any, index: Any, k: int) -> int:
            # called by the library, in this thread, with the GIL held by ctypes; a Ctrl-C
            # that came while the library worked has just run ctrl_c's handler (see _CtrlC)
            try:
                try:
                    total = lo = hi = 0
                    for j in range(k if not ctrl_c.pending else 0):
                        x = index[j]
                        i = todo[x]
                        r = _result_from_c(out[x], cfg, items[i][0],
                                           targets[i][0] if targets is not None else None)
                        results[i] = r
                        S = len(r.src_ids)
                        total, lo, hi = total + S, S if j == 0 else lo, S
                        if r.truncated:
                            warn.extend(_truncation_messages(cfg, i + 1, r))
                        if r.error:
                            warn.append(f"line {i + 1}: {r.error}")
                            refused.append(f"ids {i}: {r.error}")
                finally:
                    for j in range(k):
                        C.lib().attend_result_free(ctypes.byref(out[index[j]]))
                if ctrl_c.pending:
                    return 1
                if shown is not None:
                    shown.add(k)
                if verbose:
                    print(f"attend: batch of {k} sentence{'' if k == 1 else 's'}, {total} source tokens, "
                          f"lengths {lo}-{hi}", file=sys.stderr, flush=True)
                return 0
            except BaseException as e:  # KeyboardInterrupt included: stop the call
                failure.append(e)
                return 1

        callback = C.ON_BATCH(on_batch)
        p.on_batch = callback
        p.batch_size, p.batch_tokens = batch, batch_tokens
        with ctrl_c:
            h = self._enter()
            try:
                err = C.err_buffer()
                # n = 0 too: the library then still checks the settings
                if src_ids is None:
                    rc = C.lib().attend_translate(h, arr, lens, n, tg, ctypes.byref(p), out, err,
                                                  C.ERR_LEN)
                else:
                    rc = _translate_ids_call(h, src_ids, p, out, err)
            finally:
                self._leave()
                p.on_batch = C.ON_BATCH()
                if own_progress:
                    shown.close()
        if ctrl_c.pending:
            raise KeyboardInterrupt
        if failure:
            raise failure[0]
        if rc:
            raise AttendError(C.decode(err.value))
        if src_ids is not None and refused:  # translate_ids: a refused sentence is an error
            raise AttendError(refused[0])
        for w in warn:
            warnings.warn(w, AttendWarning, stacklevel=3)
        name, decoding = os.path.basename(self.path), _decoding(cfg, p, targets is not None)
        done = [r for r in results if r is not None]
        for r in done:
            r._model_name, r._decoding = name, decoding
        return done


# the keywords Model._params takes (Model._settings forwards these of a call's options)
_PARAM_KEYWORDS = [n for n in inspect.signature(Model._params).parameters if n != "self"]
# translate_html()'s settings where a keyword is not given: translate()'s defaults
_HTML_DEFAULTS = {n: v.default for n, v in inspect.signature(Model.translate).parameters.items()
                  if n in _PARAM_KEYWORDS or n in ("batch_size", "batch_tokens")}


def _translate_ids_call(h: int, src_ids: List[np.ndarray], p: C.attend_params,
                        out: ctypes.Array, err: ctypes.Array) -> int:
    """attend_translate_ids over int32 copies of src_ids (kept alive for the call)."""
    if not C.has("attend_translate_ids"):
        raise AttendError(f"{C.library_path()} has no attend_translate_ids: rebuild it")
    n = len(src_ids)
    arrays = [np.ascontiguousarray(a, dtype=np.int32) for a in src_ids]
    ptrs = (C.c_int_p * max(n, 1))(*[a.ctypes.data_as(C.c_int_p) for a in arrays])
    lens = (ctypes.c_int * max(n, 1))(*[int(a.size) for a in arrays])
    return C.lib().attend_translate_ids(h, ptrs, lens, n, None, None, ctypes.byref(p), out, err,
                                        C.ERR_LEN)


def _prefixes(prefix: Any, n: int, single: bool) -> Optional[List[Optional[bytes]]]:
    """translate()'s target_prefix as one bytes (or None) per line: a str (or bytes) for
    every line, or a list of one per line."""
    if prefix is None:
        return None
    if isinstance(prefix, (str, bytes)):
        one = _encode(prefix, "target_prefix")[1].replace(b"\0", b" ")
        return [one] * n
    if single:
        raise TypeError("target_prefix for one line is a str, not a list")
    if not isinstance(prefix, (list, tuple)):
        raise TypeError(f"target_prefix is a str or a list of str, not {type(prefix).__name__}")
    if len(prefix) != n:
        raise ValueError(f"target_prefix: {len(prefix)} prefixes for {n} lines")
    return [None if x is None else _encode(x, "target_prefix")[1].replace(b"\0", b" ") for x in prefix]


def _decoding(cfg: Config, p: C.attend_params, forced: bool) -> str:
    """The search in attend explore's words (its page header)."""
    if forced:
        return "forced decoding of the given target"
    if p.sample:
        return "sampling"
    beams = p.num_beams or cfg.default_beams
    return f"beam search, {beams} beams" if beams > 1 else "greedy search"


def _truncation_message(c: Config, line: Any, n_src: int) -> str:
    """attend translate's warning for a source that was cut (line: its number, or "N,
    sentence K of M")."""
    if n_src >= c.model_max_length and c.model_max_length < c.max_position_embeddings:
        return (f"line {line}: longer than the tokenizer's {c.model_max_length} tokens "
                f"(model_max_length); translated its first {n_src}")
    if n_src >= c.max_position_embeddings:
        return (f"line {line}: longer than the model's {c.max_position_embeddings} positions; "
                f"translated its first {n_src} tokens")
    nb = c.max_line_bytes
    return f"line {line}: longer than {nb} bytes; translated its first {nb} ({n_src} tokens)"


def _truncation_messages(c: Config, line: int, r: "Result") -> List[str]:
    """The warnings of a cut result: one, or one per cut sentence of a split line."""
    if not r.sentences:
        return [_truncation_message(c, line, len(r.src_ids))]
    n = len(r.sentences)
    return [_truncation_message(c, f"{line}, sentence {k + 1} of {n}", s.n_src)
            for k, s in enumerate(r.sentences) if s.truncated]


# ---------------------------------------------------------------------------------------
# .npz in attend translate --dump-attention's layout


def save_npz(results: Sequence[Result], path: PathLike, logits: bool = False) -> None:
    """Write results as ``attend translate --dump-attention`` does: ``s{i}/src_ids``,
    ``tgt_ids``, ``src_pieces``, ``tgt_pieces``, ``text``, ``logprob``, ``score``,
    ``enc_self/l{l}``, ``dec_self/l{l}``, ``cross/l{l}`` (and ``logits`` with logits=True),
    i counting the results from 0; blank lines get no keys; with n_best, the other
    hypotheses under ``s{i}/nbest{k}/`` as ``--n-best`` writes them. The results need
    attention (and scores)."""
    arrays: Dict[str, np.ndarray] = {}
    for i, r in enumerate(results):
        if r.src_ids.size == 0:
            continue
        if r.cross is None or r.enc_self is None or r.dec_self is None or r.logprob is None:
            raise ValueError(f"result {i}: translate with attention=True and scores=True to save it")
        k = f"s{i}/"
        arrays[k + "src_ids"] = r.src_ids
        arrays[k + "tgt_ids"] = r.tgt_ids
        arrays[k + "src_pieces"] = np.array(r.src_tokens, dtype=str)
        arrays[k + "tgt_pieces"] = np.array(r.tgt_tokens, dtype=str)
        arrays[k + "text"] = np.array([r.text], dtype=str)
        arrays[k + "logprob"] = r.logprob
        arrays[k + "score"] = np.array([r.score], dtype=np.float32)
        if r.sentences:  # as attend translate --dump-attention: one row per sentence
            arrays[k + "sentences"] = np.array(
                [[*x.src_bytes, *x.text_bytes, x.src_start, x.n_src, x.tgt_start, x.n_tgt]
                 for x in r.sentences], dtype=np.int32)
        if logits:
            if r.logits is None:
                raise ValueError(f"result {i}: translate with logits=True to save logits")
            arrays[k + "logits"] = r.logits
        for name in ("enc_self", "dec_self", "cross"):
            a = getattr(r, name)
            for layer in range(a.shape[0]):
                arrays[f"{k}{name}/l{layer}"] = a[layer]
        for j, h in enumerate(r.nbest[1:] if r.nbest else [], start=1):
            _add_hypothesis(arrays, f"{k}nbest{j}/", h)
    np.savez_compressed(path, **arrays)


def _add_hypothesis(arrays: Dict[str, np.ndarray], k: str, h: Hypothesis) -> None:
    """n-best entry h under prefix k, as attend translate --n-best --dump-attention writes it."""
    arrays[k + "tgt_ids"] = h.ids
    arrays[k + "tgt_pieces"] = np.array(h.tokens or [], dtype=str)
    arrays[k + "text"] = np.array([h.text], dtype=str)
    arrays[k + "score"] = np.array([h.score], dtype=np.float32)
    if h.logprob is not None:
        arrays[k + "logprob"] = h.logprob
    for name in ("dec_self", "cross"):
        a = getattr(h, name)
        for layer in range(a.shape[0] if a is not None else 0):
            arrays[f"{k}{name}/l{layer}"] = a[layer]
