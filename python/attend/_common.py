"""Names every module of the package shares: the error types, path and text aliases."""
from __future__ import annotations

import os
from typing import Union




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
