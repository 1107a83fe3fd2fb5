"""attend.dask, worker side: the plugin that keeps the model, the chunk task."""
from __future__ import annotations

import hashlib
import os
import signal
import socket
import threading
import time
import warnings
from typing import Any, Dict, List, Optional

try:  # the plugin class needs distributed's base class; main() reports a missing module
    from distributed import WorkerPlugin as _WorkerPluginBase
except ImportError:  # pragma: no cover - checked in main()
    _WorkerPluginBase = object  # type: ignore[misc,assignment]

from ._dask_common import EXIT_FAIL, EXIT_USAGE, EXIT_MODEL
from ._dask_workdir import _message


# ---------------------------------------------------------------------------------------
# Worker side: the plugin that keeps the model, the chunk task


class AttendModelPlugin(_WorkerPluginBase):  # type: ignore[misc,valid-type]
    """Keeps one attend.Model on a Dask worker: loaded once in setup(), when the plugin is
    registered (and on every worker that joins or restarts later), and used by every
    chunk task that runs there. A model that fails to load does not fail the worker:
    the error is kept and reported by probe_worker() and by each task."""

    def __init__(self, path: str, threads: int, name: str, local: bool = False) -> None:
        self.path = path
        self.threads = threads
        self.name = name
        self.local = local  # the driver's own local cluster (see setup)
        self.model: Any = None
        self.error: Optional[str] = None
        self.error_status = EXIT_MODEL
        self.load_seconds = self.hash_seconds = 0.0
        self.pid = 0
        self.fp: Dict[str, Any] = {}

    def __getstate__(self) -> Dict[str, Any]:  # the model never travels
        return {"path": self.path, "threads": self.threads, "name": self.name, "local": self.local}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["path"], state["threads"], state["name"], state["local"])  # type: ignore[misc]

    def setup(self, worker: Any = None) -> None:
        self.pid = os.getpid()
        if self.local and threading.current_thread() is threading.main_thread():
            # Ctrl-C (or a SIGTERM to the process group) reaches these workers too: the
            # driver stops its local cluster itself, so they leave both signals to it.
            # Dying at once instead would make their nannies start new workers that the
            # driver's shutdown then stops half-started (Dask 2022.12 prints a traceback).
            # A driver killed outright still ends them (its nannies' pipes close), and a
            # nanny stopping a worker that ignores SIGTERM sends SIGKILL after a timeout.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        t0 = time.perf_counter()
        try:
            import attend
            # translations report cut lines themselves, numbered in the whole input
            warnings.filterwarnings("ignore", category=attend.AttendWarning)
            self.model = attend.Model(self.path, threads=self.threads)
            self.load_seconds = time.perf_counter() - t0
            self.fp = model_fingerprint(self.path)
            self.hash_seconds = time.perf_counter() - t0 - self.load_seconds
            self.error = None
        except Exception as e:  # AttendError (the library's message), OSError, ImportError
            self.model = None
            self.error = _message(e)
            self.error_status = EXIT_FAIL if isinstance(e, ImportError) else EXIT_MODEL
            self.load_seconds = time.perf_counter() - t0

    def teardown(self, worker: Any = None) -> None:
        # only drop the reference: a task still using the model keeps it alive, and the
        # Model frees itself when the last reference goes (closing it here could fail a
        # task that a re-registration races with)
        self.model = None

    def fingerprint(self) -> Dict[str, Any]:
        return self.fp


def model_fingerprint(path: str) -> Dict[str, Any]:
    """What identifies a model file's content: its size and SHA-256 (read right after
    attend_load read and checked it all, so from the page cache). attend_config's
    metadata_checksum only says whether the file records a CRC-32, not which."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
            n += len(b)
    return {"bytes": n, "sha256": h.hexdigest()}


def _worker_plugin(spec: Dict[str, Any]) -> AttendModelPlugin:
    """This worker's plugin for spec (installed here if the scheduler has not: a worker
    that raced with a re-registration or an unregistration)."""
    from distributed import get_worker
    worker = get_worker()
    plugin = worker.plugins.get(spec["plugin"])
    if plugin is None or getattr(plugin, "path", None) != spec["model"]:
        plugin = AttendModelPlugin(spec["model"], spec["threads"], spec["plugin"], spec.get("local", False))
        plugin.setup(worker)
        worker.plugins[spec["plugin"]] = plugin
    return plugin


def probe_worker(spec: Dict[str, Any], dask_worker: Any = None) -> Dict[str, Any]:
    """Run on every worker before the work (client.run): is the model loaded, what is it,
    does the library accept the options? Never raises: returns a dict."""
    out: Dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
    try:
        plugin = dask_worker.plugins.get(spec["plugin"]) if dask_worker is not None else None
        if plugin is None:
            plugin = AttendModelPlugin(spec["model"], spec["threads"], spec["plugin"], spec.get("local", False))
            plugin.setup(dask_worker)
            if dask_worker is not None:
                dask_worker.plugins[spec["plugin"]] = plugin
        out["load_seconds"] = plugin.load_seconds
        out["hash_seconds"] = plugin.hash_seconds
        if plugin.model is None:
            out["error"] = plugin.error
            out["status"] = plugin.error_status
            return out
        out["fingerprint"] = plugin.fingerprint()
        out["max_line_bytes"] = int(plugin.model.config.max_line_bytes)
        try:
            import attend
            if spec["alignment"]:  # "": the model's own view
                attend.parse_view(spec["alignment"])
            # no lines: the library still checks the settings (n_best > beams, ...)
            plugin.model.translate([], **spec["options"], **spec["batching"])
        except Exception as e:
            out["error"] = _message(e)
            out["status"] = EXIT_USAGE
    except Exception as e:
        out["error"] = _message(e)
        out["status"] = EXIT_FAIL
    return out


class _RawLine(str):
    """A line that is not valid UTF-8, given to Model.translate as it is: a str (its
    U+FFFD-replaced decoding, for Result.source) whose encode() returns the raw bytes.
    Model.translate encodes a str line with str.encode("utf-8"), so the library gets the
    bytes `attend translate` would give it (Model.translate refuses bytes that are not
    UTF-8). _raw_lines_pass() checks that the package still works this way."""

    raw: bytes

    def __new__(cls, raw: bytes) -> "_RawLine":
        s = super().__new__(cls, raw.decode("utf-8", errors="replace"))
        s.raw = raw
        return s

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:  # type: ignore[override]
        return self.raw


_raw_ok: Optional[bool] = None


def _raw_lines_pass() -> bool:
    global _raw_ok
    if _raw_ok is None:
        try:
            from attend import _args as _model
            probe = _RawLine(b"a\xff\xfe b")
            _raw_ok = _model._lines([probe], "line")[1][0][1] == probe.raw
        except Exception:
            _raw_ok = False
    return _raw_ok


def split_lines(data: bytes) -> List[bytes]:
    """A chunk's lines as attend translate reads them: split at \\n; a last line without \\n
    counts, a final \\n starts no line."""
    if not data:
        return []
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    return lines


# attend translate reads this much of a line it splits into sentences (cli/translate.h)
SPLIT_MAX_LINE = 1 << 20


def cli_line(raw: bytes, max_line_bytes: int, split: bool = False) -> bytes:
    """One input line as attend translate gives it to the library: a line longer than
    max_line_bytes + 1 bytes is its first max_line_bytes + 1 bytes (the rest is dropped;
    the library then cuts it to max_line_bytes and flags it truncated); split into
    sentences, a line longer than SPLIT_MAX_LINE is its first SPLIT_MAX_LINE bytes;
    otherwise one \\r before the \\n is dropped."""
    keep = SPLIT_MAX_LINE if split else max_line_bytes + 1
    if len(raw) > keep:
        return raw[:keep]
    if raw.endswith(b"\r"):
        return raw[:-1]
    return raw


def _one_line(text: str) -> str:
    """attend translate's one_line(): a newline or CR the model emits is written as a space."""
    return text.replace("\n", " ").replace("\r", " ")


def _truncation_messages(model: Any, line: int, r: Any) -> List[str]:
    try:
        from attend._model import _truncation_messages as tm
        return tm(model.config, line, r)
    except Exception:  # pragma: no cover - older package
        return [f"line {line}: longer than the model allows; translated its first {len(r.src_ids)} tokens"]


def translate_chunk(index: int, first_line: int, n_lines: int, data: bytes,
                    spec: Dict[str, Any]) -> Dict[str, Any]:
    """The task: translate one chunk (its raw bytes, n_lines lines, the first one line
    first_line + 1 of the input) with this worker's model; returns the chunk's output
    bytes (one line per input line, or K with n_best) and statistics."""
    import attend
    t0 = time.perf_counter()
    plugin = _worker_plugin(spec)
    if plugin.model is None:
        raise attend.AttendError(f"{socket.gethostname()}: {plugin.error}")
    model = plugin.model
    fp = plugin.fingerprint()
    if fp != spec["fingerprint"]:
        raise attend.AttendError(f"{socket.gethostname()}: {spec['model']} is not the model the "
                                 f"run started with ({fp} != {spec['fingerprint']})")
    mlb = int(model.config.max_line_bytes)
    items: List[Any] = []
    notes: List[str] = []
    cut: Dict[int, str] = {}
    split = spec["options"].get("split", True)
    for raw in split_lines(data):
        b = cli_line(raw, mlb, split)
        if split and len(raw) > SPLIT_MAX_LINE:  # the warning attend translate gives instead of the library's
            cut[len(items)] = (f"line {first_line + len(items) + 1}: longer than {SPLIT_MAX_LINE} bytes; "
                               f"translated its first {SPLIT_MAX_LINE}")
        try:
            b.decode("utf-8")
            items.append(b)
        except UnicodeDecodeError:
            if not _raw_lines_pass():
                raise attend.AttendError(
                    f"line {first_line + len(items) + 1}: not UTF-8, and this attend package "
                    "cannot pass such bytes to the library as attend translate does") from None
            items.append(_RawLine(b))
    if len(items) != n_lines:
        raise attend.AttendError(f"chunk {index}: {len(items)} lines, expected {n_lines}")
    opts = dict(spec["options"])
    aligned = spec["alignment"] is not None
    view = spec["alignment"] or None  # "": the model's own view (pharaoh's None)
    if aligned:
        opts["attention"] = True
    t1 = time.perf_counter()
    results = model.translate(items, **opts, **spec["batching"]) if items else []
    t2 = time.perf_counter()
    out: List[str] = []
    n_best = spec["options"].get("n_best")
    translated = 0
    for i, r in enumerate(results):
        line_no = first_line + i + 1  # 1-based in the whole input, as attend translate counts
        if len(r.src_ids):
            translated += 1
        if i in cut:
            notes.append(cut[i])
        elif r.truncated:
            notes.extend(_truncation_messages(model, line_no, r))
        if n_best:
            for k, h in enumerate(r.nbest):
                line = f"{line_no - 1} ||| {_one_line(h.text)} ||| {h.normalized_score:.6f}"
                if aligned:  # each hypothesis's own, as attend translate
                    line += " ||| " + (r.hypothesis(k).pharaoh(view) if len(r.src_ids) else "")
                out.append(line)
        elif aligned:
            out.append(f"{_one_line(r.text)} ||| {r.pharaoh(view)}")
        else:
            out.append(_one_line(r.text))
    text = ("\n".join(out) + "\n").encode("utf-8") if out else b""
    return {"index": index, "text": text, "lines": len(results), "translated": translated,
            "notes": notes, "pid": os.getpid(), "host": socket.gethostname(),
            "seconds": time.perf_counter() - t0, "model_seconds": t2 - t1}
