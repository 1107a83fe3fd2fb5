"""Model, Result and the translation calls over libattend (see model/attend.h)."""
from __future__ import annotations

import ctypes
import inspect
import os
import sys
import threading
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, overload

from . import _numpy
from ._numpy import np  # imported on first use: plain translation needs no numpy

from . import _capi as C
from ._options import hint_keywords
from . import _stream
from ._common import AttendError, AttendWarning, PathLike, Text
from ._compute import library_name
from ._library import default_model_path
from ._config import Config
from ._results import Result, _blank_result, _char_array, _ints, _result_from_c
from ._args import _int, _float, _encode, _lines, _is_blank, _EARLY
from ._interrupt import _CtrlC
from . import _speech
from ._vocabulary import VocabularyMixin
from . import _tokens


# ---------------------------------------------------------------------------------------
# Model


class Model(VocabularyMixin):
    """A loaded .gguf checkpoint (attend_load: structure, CRC-32s and finite weights are
    checked first). Thread-safe: several threads may translate with one Model at once
    (the GIL is released while the library works). Use as a context manager, or call
    close(); the model is also freed when garbage-collected.

    >>> m = Model("models/de-en.gguf", threads=2)
    >>> m.translate("Wo ist der Bahnhof?").text
    "Where's the station?"
    """

    @hint_keywords
    def __init__(self, path: Optional[PathLike] = None, threads: int = 0, compute_type: str = "default") -> None:
        """Load ``path`` (default: default_model_path()). ``threads``: threads per call
        (0: attend_default_threads(), the physical cores or $OMP_NUM_THREADS).
        ``compute_type`` (CTranslate2's names, ``attend translate --compute``): "default",
        "auto" or "float32": the file's matrices, f32 arithmetic (exact); "bfloat16": f32 /
        f16 matrices converted to bf16 at load, products on AVX-512 BF16 summed in f32
        (faster, approximate). ValueError for CTranslate2's int8 types (quantize the file:
        attend.quantize), "int16" and "float16". Raises AttendError with attend's message
        when the file is refused, or bf16 is (a CPU without AVX-512 BF16, an int8 file)."""
        self._h: Optional[int] = None
        self._cv = threading.Condition()
        self._busy = 0
        self.threads = _int("threads", threads, 0, 1024)
        self.compute_type: str = library_name(compute_type)  # the library's word: "f32" or "bf16"
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
        lp = lib.attend_default_load_params()
        lp.compute_type = self.compute_type.encode()
        h = lib.attend_load_with(bpath, ctypes.byref(lp), err, C.ERR_LEN)
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
        if self.compute_type != "f32":
            state += f", compute {self.compute_type}"
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

    # -- speech (Whisper checkpoints)
    def transcribe(self, audio: Any, *, language: Optional[str] = None, task: Optional[str] = None,
                   timestamps: bool = False, beam: Optional[int] = None, max_length: Optional[int] = None,
                   threads: Optional[int] = None, temperature: Union[float, Sequence[float]] = 0.0,
                   compression_ratio_threshold: Optional[float] = None, logprob_threshold: Optional[float] = None,
                   no_speech_threshold: Optional[float] = None, seed: Optional[int] = None,
                   word_timestamps: bool = False) -> "_speech.Transcript":
        """Speech to text with a Whisper model (``attend transcribe``): ``audio`` is a file
        path (read by the soundfile module, resampled to 16 kHz by libsoxr) or 16 kHz mono
        float samples (a numpy array). ``language``: a code of Config.languages, or None /
        "auto" to detect it from the first 30 s (without ``task``, a language the checkpoint's
        forced_decoder_ids fix is taken instead, as HF's generate() does); ``task``: "transcribe", "translate" (into
        English) or None (HF's default: the checkpoint's forced task when the language is
        detected, transcribe when it is given); ``timestamps``: segments with times (always on past 30 s: long audio is
        decoded window by window, HF's long-form rule). Returns a Transcript (text,
        language, duration, segments with start, end, text, tokens, avg_logprob, no_speech_prob,
        temperature, compression_ratio). ``temperature``: 0 decodes with the search (greedy
        or ``beam``), a number above 0 samples at it (``seed``), a list such as
        (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) falls back window by window as HF's generate does
        while ``compression_ratio_threshold`` (OpenAI: 2.4) or ``logprob_threshold`` (-1.0)
        says so; ``no_speech_threshold`` (0.6, with logprob_threshold) skips silent windows.
        None: that threshold is off, as in HF. ``word_timestamps``: each segment's words too
        (Word: start, end, word, probability), their times read from the alignment heads'
        cross-attention as HF's return_token_timestamps reads them (Transcript.words lists
        them all); turns ``timestamps`` on, as HF's pipeline does for return_timestamps="word"."""
        return _speech.transcribe(self, audio, language, task, timestamps, beam, max_length, threads, temperature,
                                  (compression_ratio_threshold, logprob_threshold, no_speech_threshold), seed,
                                  word_timestamps)

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
                split_lang: Optional[str] = None, suppress: Any = None,
                disable_unk: bool = False) -> C.attend_params:
        p = C.lib().attend_default_params()
        self._suppress(p, suppress, disable_unk)
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
        if logits or attention:
            _numpy.require()  # their arrays need numpy: say so before translating
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
                  split: bool = True, split_lang: Optional[str] = None, format: str = "text",
                  suppress: Any = None, disable_unk: bool = False
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
          ``scores`` (per-token log-probabilities; greedy search and sampling need them
          for Result.score / normalized_score, NaN without; beams always have both);
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
          token still comes first. "" is no prefix. Result.score and normalized_score
          leave the prefix out (HF's sequences_scores), Result.logprob and tgt_ids include it.
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
                      tgt_lang: Optional[str] = None, progress: bool = False,
                      suppress: Any = None, disable_unk: bool = False
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
        their sum, normalized_score = that / len(tgt_ids) ** length_penalty) and, with attention=True (the default), every attention matrix of that
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
            # called by the library with the GIL held by ctypes, in this thread or the
            # library thread of _CtrlC.run; a Ctrl-C has set ctrl_c.pending (see _CtrlC)
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
        if not _tokens.attach_hook(p):  # generate_tokens' own stop flag and token callback
            p.stop = ctrl_c.stop_pointer()
        err = C.err_buffer()

        def call() -> int:  # n = 0 too: the library then still checks the settings
            if src_ids is None:
                return C.lib().attend_translate(h, arr, lens, n, tg, ctypes.byref(p), out, err, C.ERR_LEN)
            return _translate_ids_call(h, src_ids, p, out, err)

        with ctrl_c:
            h = self._enter()
            try:
                rc = ctrl_c.run(call)
            finally:
                self._leave()
                p.on_batch = C.ON_BATCH()
                p.stop = None
                p.on_token = C.ON_TOKEN()
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
