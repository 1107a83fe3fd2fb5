"""numpy, imported when first used: plain translation (text, pieces, scores; without numpy
ids and per-token log-probs come as lists) needs none, so the package installs and translates without it; whatever makes an array
(attention, logits, per-token log-probs, plots, .npz files, id arrays in) imports it then,
and without numpy raises an ImportError that says what to install."""
from __future__ import annotations

import sys
from typing import Any, Tuple

MISSING = ("attend: numpy is not installed: pip install numpy for attention arrays (also "
           "logits, plots, .npz files and ids given as arrays; plain translation works "
           "without it)")


class _LazyNumpy:
    """Stands for the numpy module (``np.zeros``, ``np.float32`` ...): the first attribute
    read imports it, or raises ImportError(MISSING)."""

    _module: Any = None

    def __getattr__(self, name: str) -> Any:
        if _LazyNumpy._module is None:
            try:
                import numpy
            except ImportError as e:
                raise ImportError(MISSING) from e
            _LazyNumpy._module = numpy
        return getattr(_LazyNumpy._module, name)


np: Any = _LazyNumpy()


def available() -> bool:
    """Whether numpy can be imported (imports it when it can)."""
    try:
        np.ndarray
    except ImportError:
        return False
    return True


def require() -> None:
    """ImportError(MISSING) now, before any work, when numpy is not there."""
    np.ndarray


def integer_types() -> Tuple[type, ...]:
    """int and, once numpy is imported (else no numpy integer can exist), numpy.integer."""
    numpy = sys.modules.get("numpy")
    return (int, numpy.integer) if numpy is not None else (int,)


def number_types() -> Tuple[type, ...]:
    """int and float and, once numpy is imported, its integer and floating types."""
    numpy = sys.modules.get("numpy")
    return (int, float, numpy.integer, numpy.floating) if numpy is not None else (int, float)
