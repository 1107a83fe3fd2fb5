"""Streaming one translation token by token (CTranslate2's generate_tokens): the library
calls attend_params.on_token as greedy search or sampling chooses each token."""
from __future__ import annotations

import ctypes
import queue
import threading
from typing import Any, Iterator, NamedTuple, Optional

from . import _capi as C

# the token hook of a generate_tokens call, for the _run of the translate() it makes on its
# own thread: Model._run reads it (attach_hook) when it builds the call's parameters
_local = threading.local()


class TokenStep(NamedTuple):
    """One chosen token: its step (0 = the first after the start token), id, piece and
    log-probability (the model's, before sampling's temperature and cuts)."""

    step: int
    id: int
    piece: str
    logprob: float


def attach_hook(p: Any) -> bool:
    """Set this thread's generate_tokens hook (if any) on attend_params p; whether one was."""
    hook = getattr(_local, "hook", None)
    if hook is None:
        return False
    p.on_token, p.stop = hook
    return True


def generate_tokens(model: Any, line: Any, **options: Any) -> Iterator[TokenStep]:
    """Model.generate_tokens: see there."""
    if options.get("beam") not in (None, 1) or options.get("n_best") not in (None, 1):
        raise ValueError("generate_tokens streams greedy search or one sample: beam and n_best must be 1")
    if not isinstance(line, (str, bytes)):
        raise TypeError(f"generate_tokens takes one line (str), not {type(line).__name__}")
    if not options.get("sample"):
        options["beam"] = 1
    options["split"] = False  # one sequence: sentence 0 of the batch
    steps: "queue.Queue[Any]" = queue.Queue()
    stop = ctypes.c_int(0)

    def on_token(user: Any, sentence: int, row: int, tid: int, lp: float) -> None:
        if sentence == 0 and row == 0:
            steps.put((tid, lp))

    callback = C.ON_TOKEN(on_token)

    def work() -> None:
        _local.hook = (callback, ctypes.pointer(stop))
        try:
            model.translate(line, **options)
            steps.put(None)
        except BaseException as e:  # handed to the consumer
            steps.put(e)
        finally:
            _local.hook = None

    worker = threading.Thread(target=work, name="attend-generate-tokens", daemon=True)
    worker.start()
    step = 0
    try:
        while True:
            item: Optional[Any] = steps.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            tid, lp = item
            yield TokenStep(step, tid, model.id_to_piece(tid, "target"), lp)
            step += 1
    finally:
        stop.value = 1  # a consumer that stops early stops the decoding within a step
        worker.join()
