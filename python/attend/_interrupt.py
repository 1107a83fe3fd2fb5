"""Ctrl-C during a library call."""
from __future__ import annotations

import signal
import threading
from typing import Any




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
