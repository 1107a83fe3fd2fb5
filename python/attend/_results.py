"""Result, Hypothesis, Sentence: what a translation call returns, and save_npz."""
from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import _numpy
from ._numpy import np  # imported on first use: plain translation needs no numpy

from . import _capi as C
from ._common import PathLike, AttendError
from ._library import parse_view, default_view
from ._config import Config


# ---------------------------------------------------------------------------------------
# Result


class Hypothesis(NamedTuple):
    """One entry of an n-best list: the text, its ``score`` and ``normalized_score`` (as
    Result's) and its target ids; then what was computed along its own path: ``logprob``
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
    normalized_score: float = 0.0  # last: the fields before it keep their places
    align_head: Optional[np.ndarray] = None  # float32 [T, S]: the file's alignment head (Result.align_head)


class Sentence(NamedTuple):
    """One sentence of a line translated sentence by sentence (Result.sentences): its
    source and translation text, where its tokens are in the line's arrays
    (``src_tokens[src_start:src_start + n_src]``, ``tgt_tokens[tgt_start:tgt_start +
    n_tgt]``; the attention matrices are block-diagonal over the sentences), its own
    ``score`` and ``normalized_score`` (as Result's) and whether it was cut; ``src_bytes`` /
    ``text_bytes``: its (begin, end) byte offsets in the UTF-8 line and translation."""

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
    normalized_score: float = 0.0


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
                            (s.src_begin, s.src_end), (s.text_begin, s.text_end), float(s.normalized_score)))
    return out


def _floats(ptr: Any, shape: Tuple[int, ...]) -> np.ndarray:
    n = 1
    for d in shape:
        n *= d
    if len(shape) == 1 and not _numpy.available():  # log-probs without numpy: a list
        return [float(ptr[i]) for i in range(n)] if n and ptr else []
    if n == 0:
        return np.zeros(shape, dtype=np.float32)
    addr = ctypes.cast(ptr, ctypes.c_void_p).value
    buf = (ctypes.c_float * n).from_address(addr)
    return np.frombuffer(buf, dtype=np.float32, count=n).reshape(shape).copy()


def _ints(ptr: Any, n: int) -> np.ndarray:
    if not _numpy.available():  # without numpy: the ids as a list
        return [ptr[i] for i in range(n)] if n and ptr else []
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
    for ``attention=True``. A blank input line gives text "", scores 0.0 and empty arrays,
    without running the model (as ``attend translate``).

    Two scores, each with one meaning whatever the search (a target prefix's tokens left
    out of both, as HF leaves the prompt out): ``score``, the sum of the tokens'
    log-probabilities, and ``normalized_score``, that sum / length ** length_penalty as
    HF's beam search computes it (length: the tokens generated, ``</s>`` and a forced
    target-language token counted). With beams normalized_score is HF's
    ``sequences_scores`` (what beams rank by and ``attend translate --n-best`` prints)."""

    source: str
    """The input line."""
    text: str
    """The translation (or, for Model.score, the target as the model's tokens give it back)."""
    score: float
    """The sum of the generated tokens' log-probabilities (``logprob`` after a target
    prefix). Beam search sums them as it ranks them, after the logits processors (HF's
    beam scores): a ``</s>`` forced at max_length counts 0, repetition_penalty and
    renormalization change them; else it equals the sum of ``logprob`` within float32
    rounding. Greedy, sampling and Model.score: NaN with scores=False (their
    log-probabilities are what scores=True computes); beams always have it."""
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
    normalized_score: float = 0.0
    """``score / length ** length_penalty`` (the call's or the model's length_penalty;
    length: the generated tokens after a target prefix, ``</s>`` and a forced first token
    counted): with beams, HF's ``sequences_scores``. NaN where score is."""
    align_head: Optional[np.ndarray] = None
    """float32 [T, S]: the rows of the model file's trained alignment head (attention=True and
    a file with one, Config.align_head_width > 0; laid out as one cross-attention head's, row t
    the step that predicts target token t); views name it ``align``. Else None."""
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
        return (f"Result(text={self.text!r}, score={self.score:.6g}, "
                f"normalized_score={self.normalized_score:.6g}, src_tokens={len(self.src_tokens)}, "
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

    def _head(self) -> Optional[np.ndarray]:
        return None if self.align_head is None else np.ascontiguousarray(self.align_head, dtype=np.float32)

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
        head = self._head()
        if C.lib().attend_view_reduce_head(ctypes.byref(v), cross.ctypes.data_as(fp),
                                           head.ctypes.data_as(fp) if head is not None else None, L, H, T, S,
                                           out.ctypes.data_as(fp), err, C.ERR_LEN):
            raise AttendError(C.decode(err.value))
        return out

    def _c_result(self) -> Tuple[Any, Any, list]:
        """This result as the library's attend_result and attend_config (what attend_alignment
        reads), and the buffers they point into (keep them alive while they are used)."""
        cross = self._need_cross()
        cfg = self._config._to_c() if self._config else C.attend_config()
        cfg.decoder_layers, cfg.decoder_heads = cross.shape[0], cross.shape[1]
        r = C.attend_result()
        r.n_src, r.n_tgt = cross.shape[3], cross.shape[2]
        src = _char_array(self._src_raw)
        tgt = _char_array(self._tgt_raw)
        r.src_pieces = ctypes.cast(src, C.c_char_pp)
        r.tgt_pieces = ctypes.cast(tgt, C.c_char_pp)
        r.cross = cross.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        head = self._head()
        if head is not None:
            r.align_head = head.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        return r, cfg, [cross, src, tgt, head]

    def pharaoh(self, view: Optional[str] = None, reverse: Optional["Result"] = None) -> str:
        """The word alignment as Pharaoh text ("0-0 1-2": source word - target word,
        0-based), exactly as ``attend translate --alignment=VIEW`` appends it (without a
        view: the model's own, as ``--alignment``). reverse: the Result of a model of the
        other direction scoring this pair the other way round (``rev.score(target, source)``):
        the links both directions agree on, as ``attend align --reverse-model`` prints them
        (each one's word matrix under its own view, row-normalised, added, read by this
        view's link rule)."""
        cross = self._need_cross()
        v = self._c_view(view)
        if cross.shape[2] == 0:  # a blank line: nothing translated, nothing aligned
            return ""
        r, cfg, keep = self._c_result()
        err = C.err_buffer()
        if reverse is None:
            ptr = C.lib().attend_alignment(ctypes.byref(r), ctypes.byref(cfg), ctypes.byref(v), err, C.ERR_LEN)
        else:
            rv = reverse._c_view(None)
            rr, rcfg, rkeep = reverse._c_result()
            ptr = C.lib().attend_alignment_both(ctypes.byref(r), ctypes.byref(cfg), ctypes.byref(v), ctypes.byref(rr),
                                                ctypes.byref(rcfg), ctypes.byref(rv), err, C.ERR_LEN)
            del rkeep
        del keep
        if not ptr:
            raise AttendError(f"alignment: {C.decode(err.value)}")
        try:
            return C.decode(ctypes.string_at(ptr))
        finally:
            C.libc_free(ptr)

    def alignment(self, view: Optional[str] = None, reverse: Optional["Result"] = None) -> List[Tuple[int, int]]:
        """Word alignment from a cross-attention view (default: the model's own, as
        ``attend align`` and ``--alignment`` use it; see default_view): a sorted list of
        (source word, target word) index pairs into src_words / tgt_words. Computed by the
        library (attend_view_parse + attend_alignment) as the view says: by default each
        target piece links to its highest-weight source piece (``</s>`` excluded), "words"
        reads links off whole words, "mutual" / "grow" keep the mutual argmaxes / grow them
        (docs/alignment-and-attention.md); words are aligned if any of their pieces are.
        Needs attention=True. reverse: a model of the other direction's Result for this pair
        the other way round, as pharaoh() takes it (both directions' links)."""
        out = []
        for link in self.pharaoh(view, reverse).split():
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
            self, text=h.text, score=h.score, normalized_score=h.normalized_score, tgt_ids=h.ids, tgt_tokens=[C.decode(b) for b in raw],
            logprob=h.logprob, logits=self.logits if k == 0 else None, dec_self=h.dec_self,
            cross=h.cross, nbest=[h], _tgt_raw=raw, align_head=h.align_head)

    # -- Jupyter
    def _repr_html_(self) -> str:
        from ._display import result_html
        return result_html(self)


def _result_from_c(r: C.attend_result, cfg: Config, source: str, target: Optional[str]) -> Result:
    if r.status:  # this line failed on its own (attend_result.status)
        empty = _ints(None, 0)
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
            tokens=[C.decode(b) for b in raw], raw_tokens=raw, normalized_score=float(h.normalized_score),
            align_head=_floats(h.align_head, (n, S)) if h.align_head else None))
    return Result(
        source=source, text=C.decode(r.text), score=float(r.score), normalized_score=float(r.normalized_score),
        src_ids=_ints(r.src_ids, S), tgt_ids=_ints(r.tgt_ids, T),
        src_tokens=[C.decode(p) for p in src_raw], tgt_tokens=[C.decode(p) for p in tgt_raw],
        logprob=_floats(r.logprob, (T,)) if r.logprob else None,
        logits=_floats(r.logits, (T, cfg.decoder_vocab_size)) if r.logits else None,
        enc_self=_floats(r.enc_self, (Le, He, S, S)) if r.enc_self else None,
        dec_self=_floats(r.dec_self, (Ld, Hd, T, T)) if r.dec_self else None,
        cross=_floats(r.cross, (Ld, Hd, T, S)) if r.cross else None,
        align_head=_floats(r.align_head, (T, S)) if r.align_head else None,
        nbest=nbest, truncated=bool(r.truncated), forced=target is not None, target=target,
        sentences=_sentences(r, source, C.decode(r.text)),
        _config=cfg, _src_raw=src_raw, _tgt_raw=tgt_raw)


def _blank_result(cfg: Config, source: str, p: C.attend_params, n_best: int) -> Result:
    """What `attend translate` gives a blank line: an empty translation, score 0."""
    def att(L: int, H: int) -> Optional[np.ndarray]:
        return np.zeros((L, H, 0, 0), dtype=np.float32) if p.want_attention else None
    empty = _ints(None, 0)
    return Result(
        source=source, text="", score=0.0, src_ids=empty, tgt_ids=empty.copy(), src_tokens=[],
        tgt_tokens=[], logprob=_floats(None, (0,)) if p.want_scores else None,
        logits=np.zeros((0, cfg.decoder_vocab_size), dtype=np.float32) if p.want_logits else None,
        enc_self=att(cfg.encoder_layers, cfg.encoder_heads),
        dec_self=att(cfg.decoder_layers, cfg.decoder_heads),
        cross=att(cfg.decoder_layers, cfg.decoder_heads),
        nbest=[Hypothesis("", 0.0, empty.copy()) for _ in range(max(n_best, 1))],
        truncated=False, _config=cfg)



# ---------------------------------------------------------------------------------------
# .npz in attend translate --dump-attention's layout


def save_npz(results: Sequence[Result], path: PathLike, logits: bool = False) -> None:
    """Write results as ``attend translate --dump-attention`` does: ``s{i}/src_ids``,
    ``tgt_ids``, ``src_pieces``, ``tgt_pieces``, ``text``, ``logprob``, ``score``, ``normalized_score``,
    ``enc_self/l{l}``, ``dec_self/l{l}``, ``cross/l{l}`` (and ``logits`` with logits=True,
    ``align_head`` for a model file with a trained alignment head), i counting the results from 0; blank lines get no keys; with n_best, the other
    hypotheses under ``s{i}/nbest{k}/`` as ``--n-best`` writes them. The results need
    attention (and scores)."""
    _numpy.require()
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
        arrays[k + "normalized_score"] = np.array([r.normalized_score], dtype=np.float32)
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
        if r.align_head is not None:  # a file with a trained alignment head
            arrays[k + "align_head"] = r.align_head
        for j, h in enumerate(r.nbest[1:] if r.nbest else [], start=1):
            _add_hypothesis(arrays, f"{k}nbest{j}/", h)
    np.savez_compressed(path, **arrays)


def _add_hypothesis(arrays: Dict[str, np.ndarray], k: str, h: Hypothesis) -> None:
    """n-best entry h under prefix k, as attend translate --n-best --dump-attention writes it."""
    arrays[k + "tgt_ids"] = h.ids
    arrays[k + "tgt_pieces"] = np.array(h.tokens or [], dtype=str)
    arrays[k + "text"] = np.array([h.text], dtype=str)
    arrays[k + "score"] = np.array([h.score], dtype=np.float32)
    arrays[k + "normalized_score"] = np.array([h.normalized_score], dtype=np.float32)
    if h.logprob is not None:
        arrays[k + "logprob"] = h.logprob
    for name in ("dec_self", "cross"):
        a = getattr(h, name)
        for layer in range(a.shape[0] if a is not None else 0):
            arrays[f"{k}{name}/l{layer}"] = a[layer]
