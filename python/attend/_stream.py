"""Long inputs: streaming an iterable of lines (Model.translate_iter), the progress line
(progress=True) and token-id input (Model.translate_ids)."""
from __future__ import annotations

import itertools
import sys
import time
from typing import Any, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple, Union

from ._numpy import np  # imported on first use (ids in): plain translation needs no numpy

# seconds between two progress lines when stderr is not a terminal (a log file gets a line
# now and then, not one per batch); on a terminal the line is rewritten in place
SPARSE_SECONDS = 10.0
TTY_SECONDS = 0.2


class Progress:
    """The progress line of a long call on stderr: lines done (of how many, when known) and
    lines per second. On a terminal it is rewritten in place (``\\r``) at most every
    TTY_SECONDS; elsewhere (a file, a notebook's captured stderr) one line is written every
    SPARSE_SECONDS; close() writes the final count on its own line."""

    def __init__(self, total: Optional[int] = None, stream: Optional[TextIO] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self.total = total
        self.done = 0
        self.start = self.last = time.monotonic()
        self.closed = False
        self.written = -1  # the count a sparse line last showed

    def _line(self, now: float) -> str:
        of = f" of {self.total}" if self.total is not None else ""
        rate = self.done / max(now - self.start, 1e-9)
        return f"attend: {self.done}{of} lines, {rate:.1f} lines/s"

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr never fails the translation
            pass

    def add(self, n: int) -> None:
        """n more lines done; writes the line when its interval has passed."""
        self.done += n
        now = time.monotonic()
        if now - self.last >= (TTY_SECONDS if self.tty else SPARSE_SECONDS):
            self.last, self.written = now, self.done
            self._write(("\r" + self._line(now) + "\x1b[K") if self.tty else self._line(now) + "\n")

    def close(self) -> None:
        """The final count (idempotent); a terminal's line is ended."""
        if self.closed:
            return
        self.closed = True
        if not self.tty and self.written == self.done and self.done:
            return  # the last sparse line already says it
        line = self._line(time.monotonic())
        self._write(("\r" + line + "\x1b[K\n") if self.tty else line + "\n")


class UserProgress:
    """progress= given as a tqdm bar (anything with update(n): it gets the lines done, and
    its total is set when it has none) or a callable (called as fn(done, total) after each
    batch; total None for translate_iter). close() leaves the user's bar open."""

    def __init__(self, target: Any, total: Optional[int]) -> None:
        self.target, self.total, self.done = target, total, 0
        if hasattr(target, "update") and getattr(target, "total", 0) is None and total is not None:
            target.total = total

    def add(self, n: int) -> None:
        if n <= 0:
            return
        self.done += n
        if hasattr(self.target, "update"):
            self.target.update(n)
        else:
            self.target(self.done, self.total)

    def close(self) -> None:
        pass


def as_progress(progress: Any, total: Optional[int]) -> Any:
    """progress= of a call: False / None (off), True (a new Progress on stderr), a tqdm
    bar or a callable (UserProgress), or a Progress a caller already holds (translate_iter's,
    spanning its chunks)."""
    if isinstance(progress, (Progress, UserProgress)):
        return progress
    if isinstance(progress, bool) or progress is None:
        return Progress(total) if progress else None
    if hasattr(progress, "update") or callable(progress):
        return UserProgress(progress, total)
    raise TypeError(f"progress must be True, False, a tqdm bar or a callable, not {type(progress).__name__}")


def strip_newline(line: Any) -> Any:
    """A line as a file yields it, without its newline (and a \\r before it, as
    ``attend translate`` reads lines)."""
    if isinstance(line, str):
        if line.endswith("\n"):
            line = line[:-1]
        return line[:-1] if line.endswith("\r") else line
    if isinstance(line, (bytes, bytearray)):
        if line.endswith(b"\n"):
            line = line[:-1]
        return line[:-1] if line.endswith(b"\r") else line
    return line


def chunks(lines: Iterable[Any], size: int) -> Iterator[List[Any]]:
    """Lists of up to size lines, read from lines only as each list is needed."""
    it = iter(lines)
    while True:
        chunk = [strip_newline(x) for x in itertools.islice(it, size)]
        if not chunk:
            return
        yield chunk


def check_iterable(lines: Any) -> None:
    if isinstance(lines, (str, bytes, bytearray, memoryview)):
        raise TypeError("translate_iter takes an iterable of lines (a list, an open file, a "
                        f"generator), not one {type(lines).__name__}: use translate() for one line")
    try:
        iter(lines)
    except TypeError:
        raise TypeError(f"translate_iter takes an iterable of lines, not {type(lines).__name__}") from None


END = object()  # what next() gives past the end of an iterator


def take(it: Iterator[Any], n: int, what: str) -> List[Any]:
    """The next n items of it (newlines stripped as from lines); ValueError when it has fewer."""
    got = [strip_newline(x) for x in itertools.islice(it, n)]
    if len(got) < n:
        raise ValueError(f"{what}: fewer prefixes than lines")
    return got


IdsInput = Union[Sequence[int], "np.ndarray", Sequence[Sequence[int]]]


def id_lists(ids: Any) -> Tuple[bool, List[np.ndarray]]:
    """translate_ids' input as (one sentence given, int32 arrays): one sentence is a flat
    sequence of ints (or a 1-D array), several a sequence of them (or a 2-D array).
    TypeError for anything else (check_ids then checks the values)."""
    if isinstance(ids, (str, bytes)):
        raise TypeError("translate_ids takes token ids (ints), not text: use translate() for text")
    if isinstance(ids, np.ndarray):
        if ids.ndim == 1:
            return True, [_one(ids, "ids")]
        if ids.ndim == 2:
            return False, [_one(row, f"ids {i}") for i, row in enumerate(ids)]
        raise TypeError(f"translate_ids takes a 1-D or 2-D array of ids, not {ids.ndim}-D")
    try:
        items = list(ids)
    except TypeError:
        raise TypeError(f"translate_ids takes a list of ids or a list of such lists, not "
                        f"{type(ids).__name__}") from None
    if items and all(_is_int(x) for x in items):
        return True, [_one(items, "ids")]
    return False, [_one(x, f"ids {i}") for i, x in enumerate(items)]


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _one(x: Any, what: str) -> np.ndarray:
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{what}: token ids (ints), not text")
    try:
        a = np.asarray(x)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: a sequence of ints, not {type(x).__name__}") from None
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{what}: a flat sequence of ints, not {type(x).__name__} of {a.dtype}")
    return a.astype(np.int64)


def check_ids(arrays: List[np.ndarray], vocab_size: int) -> Optional[str]:
    """The first rule an id list breaks (None: all fine), in the library's words."""
    for i, a in enumerate(arrays):
        if a.size == 0:
            return f"ids {i}: no ids (a source ends in </s>: at least one id)"
        bad = np.flatnonzero((a < 0) | (a >= vocab_size))
        if bad.size:
            return (f"ids {i}: id {int(a[bad[0]])} at position {int(bad[0])} is outside the "
                    f"source vocabulary (0..{vocab_size - 1})")
    return None
