"""Argument checks (TypeError / ValueError, before anything reaches C)."""
from __future__ import annotations

import math
from typing import Any, List, Tuple

from . import _numpy
from ._numpy import np  # imported on first use: plain translation needs no numpy

from . import _capi as C
from ._common import _INT_MAX, _BLANK


# ---------------------------------------------------------------------------------------
# Argument checks (TypeError / ValueError, before anything reaches C)


def _int(name: str, v: Any, lo: int, hi: int = _INT_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, _numpy.integer_types()):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, not {v}")
    return v


def _float(name: str, v: Any, lo: float = -math.inf, hi: float = math.inf,
           lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, _numpy.number_types()):
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
