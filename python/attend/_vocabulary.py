"""What a CTranslate2 or Hugging Face user reaches for on a Model: pieces and the vocabularies,
translation from pieces (CT2's translate_batch shape), async calls, and attend.quantize."""
from __future__ import annotations

import asyncio
import ctypes
import functools
import os
from typing import Any, List, Optional, Sequence, Union

from . import _capi as C
from ._common import AttendError, PathLike, Text

_SIDES = {"source": 0, "target": 1}  # ATTEND_SOURCE, ATTEND_TARGET


def _side(side: str) -> int:
    if side not in _SIDES:
        raise ValueError(f"side must be 'source' or 'target', not {side!r}")
    if not C.has("attend_vocab_size"):
        raise AttendError(f"{C.library_path()} has no attend_vocab_size: rebuild it")
    return _SIDES[side]


class VocabularyMixin:
    """Model's pieces and vocabularies; needs the Model's _enter/_leave, tokenize, translate,
    translate_ids and score."""

    def vocab_size(self, side: str = "source") -> int:
        """the number of pieces of the source (or target) vocabulary"""
        s = _side(side)
        h = self._enter()  # type: ignore[attr-defined]
        try:
            return int(C.lib().attend_vocab_size(h, s))
        finally:
            self._leave()  # type: ignore[attr-defined]

    def id_to_piece(self, ids: Union[int, Sequence[int]], side: str = "target") -> Any:
        """An id's piece (a list of ids: their pieces), e.g. 'Hall' or '▁Bahnhof';
        IndexError for an id outside the vocabulary. Target side by default (what
        Result.tgt_ids hold)."""
        s = _side(side)
        one = isinstance(ids, int) or hasattr(ids, "__index__")
        h = self._enter()  # type: ignore[attr-defined]
        try:
            out = []
            for i in ([ids] if one else ids):
                piece = C.lib().attend_id_to_piece(h, s, int(i)) if -2 ** 31 <= int(i) < 2 ** 31 else None
                if piece is None:
                    raise IndexError(f"id {int(i)} is outside the {side} vocabulary")
                out.append(C.decode(piece))
            return out[0] if one else out
        finally:
            self._leave()  # type: ignore[attr-defined]

    def piece_to_id(self, pieces: Union[str, Sequence[str]], side: str = "source") -> Any:
        """A piece's id (a list of pieces: their ids); None for a piece the vocabulary
        lacks. Source side by default (what translate_batch takes)."""
        s = _side(side)
        one = isinstance(pieces, str)
        h = self._enter()  # type: ignore[attr-defined]
        try:
            out: List[Optional[int]] = []
            for p in ([pieces] if one else pieces):
                b = p.encode("utf-8")
                i = C.lib().attend_piece_to_id(h, s, b, len(b))
                out.append(i if i >= 0 else None)
            return out[0] if one else out
        finally:
            self._leave()  # type: ignore[attr-defined]

    def _suppress(self, p: Any, suppress: Any, disable_unk: bool) -> None:
        """suppress= (a list of sequences, each a list of target ids, HF's bad_words_ids, or
        of target pieces, CT2's suppress_sequences) and disable_unk= into attend_params; the
        arrays are kept alive on p."""
        if not isinstance(disable_unk, bool):
            raise TypeError(f"disable_unk must be True or False, not {type(disable_unk).__name__}")
        p.disable_unk = int(disable_unk)
        if suppress is None:
            return
        if isinstance(suppress, (str, bytes)) or not all(isinstance(q, (list, tuple)) for q in suppress):
            raise TypeError("suppress must be a list of sequences, each a list of target ids or pieces")
        seqs = []
        for q in suppress:
            if not q:
                raise ValueError("suppress: an empty sequence")
            if all(isinstance(x, str) for x in q):
                ids = self.piece_to_id(list(q), "target")
                if None in ids:
                    raise AttendError(f"suppress: piece {q[ids.index(None)]!r} is not in the target vocabulary")
            elif all(isinstance(x, int) and not isinstance(x, bool) for x in q):
                ids = list(q)
            else:
                raise TypeError("suppress: a sequence holds either ids (int) or pieces (str)")
            if any(not -2 ** 31 <= i < 2 ** 31 for i in ids):
                raise AttendError("suppress: an id is outside the target vocabulary")
            seqs.append((ctypes.c_int * len(ids))(*ids))
        ptrs = (C.c_int_p * max(len(seqs), 1))(*[ctypes.cast(a, C.c_int_p) for a in seqs])
        lens = (ctypes.c_int * max(len(seqs), 1))(*[len(a) for a in seqs])
        p.suppress_ids, p.suppress_lens, p.n_suppress = ptrs, lens, len(seqs)
        p._keep_suppress = (seqs, ptrs, lens)

    @property
    def vocabulary(self) -> List[str]:
        """The target vocabulary's pieces, index = id (HF's convert_ids_to_tokens over all
        ids); source_vocabulary for the source side."""
        return self.id_to_piece(range(self.vocab_size("target")), "target")

    @property
    def source_vocabulary(self) -> List[str]:
        return self.id_to_piece(range(self.vocab_size("source")), "source")

    def tokenize_pieces(self, line: Text) -> List[str]:
        """The source pieces translate() uses for line, ``</s>`` last (tokenize()'s ids as
        pieces: SentencePiece's encode(out_type=str) plus the end token)."""
        return self.id_to_piece(self.tokenize(line).tolist(), "source")  # type: ignore[attr-defined]

    def detokenize_pieces(self, pieces: Sequence[str]) -> str:
        """Target pieces to text, as Result.text is made (detokenize() of their ids);
        AttendError for a piece the target vocabulary lacks."""
        ids = self.piece_to_id(list(pieces), "target")
        missing = [p for p, i in zip(pieces, ids) if i is None]
        if missing:
            raise AttendError(f"piece {missing[0]!r} is not in the target vocabulary")
        return self.detokenize(ids)  # type: ignore[attr-defined]

    def translate_batch(self, source: Sequence[Sequence[str]], **options: Any) -> List[Any]:
        """Translate sentences given as source pieces (CTranslate2's
        ``translate_batch([["▁Hallo", "▁Welt", "!"]])``): each list of pieces becomes ids,
        ``</s>`` added when it does not end with it, then translate_ids(**options).
        AttendError for a piece the source vocabulary lacks. Returns a list of Results."""
        if isinstance(source, str) or not all(isinstance(s, (list, tuple)) for s in source):
            raise TypeError("source must be a list of lists of pieces")
        eos = self.config.eos_id  # type: ignore[attr-defined]
        batch = []
        for pieces in source:
            ids = self.piece_to_id(list(pieces), "source")
            missing = [p for p, i in zip(pieces, ids) if i is None]
            if missing:
                raise AttendError(f"piece {missing[0]!r} is not in the source vocabulary")
            batch.append(ids if ids and ids[-1] == eos else ids + [eos])
        if not batch:
            return []
        return self.translate_ids(batch, **options)  # type: ignore[attr-defined]

    def generate_tokens(self, line: Text, **options: Any) -> Any:
        """Stream one translation token by token (CTranslate2's generate_tokens): yields a
        TokenStep (step, id, piece, logprob) as greedy search (or, with sample=True, one
        sample) chooses each token, </s> last; the tokens equal translate(line, beam=1,
        split=False)'s (or the same sample's). Options are translate()'s; beam and n_best
        must be 1. Leaving the loop early stops the decoding within a step."""
        from ._tokens import generate_tokens
        return generate_tokens(self, line, **options)

    # -- async: each call runs in a thread of the event loop's executor (the library
    # releases the GIL), so the loop keeps running while it works

    async def _in_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))

    async def translate_async(self, lines: Any, **options: Any) -> Any:
        """``await model.translate_async(...)``: translate() in a thread."""
        return await self._in_thread(self.translate, lines, **options)  # type: ignore[attr-defined]

    async def translate_batch_async(self, source: Any, **options: Any) -> Any:
        return await self._in_thread(self.translate_batch, source, **options)

    async def score_async(self, source: Any, target: Any, **options: Any) -> Any:
        return await self._in_thread(self.score, source, target, **options)  # type: ignore[attr-defined]


def quantize(src: PathLike, dst: PathLike) -> None:
    """Rewrite an f32/f16 .gguf with every matrix in int8 (one f32 scale per row), as
    ``attend quantize SRC DST`` does; AttendError with attend's message on failure."""
    if not C.has("attend_quantize"):
        raise AttendError(f"{C.library_path()} has no attend_quantize: rebuild it")
    err = C.err_buffer()
    if C.lib().attend_quantize(os.fsencode(src), os.fsencode(dst), err, C.ERR_LEN):
        raise AttendError(C.decode(err.value))


__all__: List[str] = ["VocabularyMixin", "quantize"]
