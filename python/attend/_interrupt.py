"""Ctrl-C during a library call: a KeyboardInterrupt within a decoder step (or encoder layer) of the signal."""
from __future__ import annotations

import concurrent.futures
import ctypes
import os
import signal
import threading
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T")

# the thread that runs the main thread's library calls while Ctrl-C is held back: one, kept,
# so that its engine thread pool (one per calling thread) is reused from call to call
_runner: Optional[concurrent.futures.ThreadPoolExecutor] = None
_runner_pid = 0
_runner_lock = threading.Lock()


def _library_thread() -> concurrent.futures.ThreadPoolExecutor:
    global _runner, _runner_pid
    with _runner_lock:
        # a forked child has no copy of the parent's thread: it makes its own
        if _runner is None or _runner_pid != os.getpid():
            _runner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="attend-call")
            _runner_pid = os.getpid()
        return _runner


class _CtrlC:
    """Holds Ctrl-C back while the library works, so that it stops the call cleanly and soon.

    A Python signal handler runs only in the main thread, between bytecodes: never while
    that thread sits in a ctypes call, however long the batch. So while a call runs, in the
    main thread and when SIGINT has Python's default handler, a handler that notes the
    signal takes its place, and run() hands the call to a library thread while the main
    thread waits (a wait that signals interrupt, so the handler runs at once). The handler
    sets ``stop``, which the library reads before each decoder step (attend_params.stop):
    the call ends within a step, and the caller raises KeyboardInterrupt once it has
    returned. on_batch also sees ``pending`` and asks the library to stop. Anywhere else
    (other threads, a handler of the user's) the call runs where it is called and nothing
    changes."""

    def __init__(self) -> None:
        self.pending = False
        self.stop = ctypes.c_int(0)
        self._old: Any = None

    def _note(self, signum: int, frame: Any) -> None:
        self.pending = True
        self.stop.value = 1

    def stop_pointer(self) -> Any:
        """the flag as attend_params.stop takes it"""
        return ctypes.pointer(self.stop)

    def run(self, call: Callable[[], T]) -> T:
        """call(), on the library thread while Ctrl-C is held back, else here."""
        if self._old is None:
            return call()
        return _library_thread().submit(call).result()

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
