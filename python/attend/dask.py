"""Translate a corpus on a Dask cluster, resumably:

    python3 -m attend.dask -m MODEL.gguf IN.txt OUT.txt [--workers N | --scheduler tcp://HOST:8786]

OUT.txt is byte for byte what ``attend translate -m MODEL.gguf [options] < IN.txt`` writes:
one line per input line, in order (the same options: --beam, --greedy, --n-best,
--alignment, --sample ...). Lines are read as the CLI reads them: split at \\n only, one
\\r before it dropped, a last line without \\n accepted, blank lines (spaces, tabs, \\r,
\\f, \\v, NUL) give empty lines without running the model, invalid UTF-8 goes to the
tokenizer as it is, a line longer than the model's byte limit is cut where the CLI cuts
it.

How it works:

- The driver (this process) reads IN.txt once to hash it (SHA-256) and find the byte
  offsets of its chunks of --chunk-lines lines.
- Each chunk is one Dask task that carries its own bytes (so the scheduler can run it
  again on another worker when one dies: no data lives only on a worker). Tasks are
  submitted a few per worker thread at a time, so the driver's memory does not grow with
  the corpus.
- Every worker process loads the model once: a WorkerPlugin (AttendModelPlugin) keeps an
  attend.Model on the worker; Dask installs it on workers that join or restart later too.
- Finished chunks come back to the driver, which writes each one atomically (temporary
  file, fsync, rename) to WORKDIR/NNNNNN.txt (default WORKDIR: OUT.txt.chunks) beside a
  manifest.json holding the input's hash, the chunk size, the model's identity (size and
  SHA-256) and every option that changes the output. A rerun with the same
  manifest translates only the chunks missing there; a different input, model or option
  clears them. When every chunk is there, OUT.txt is written (atomically) by
  concatenating them in order, and WORKDIR is removed unless --keep-chunks.
- A worker that dies (killed, out of memory) loses nothing: the scheduler runs its
  chunks again elsewhere (a chunk that kills distributed.scheduler.allowed-failures
  workers, 3 by default, fails the run); an exception in a task is retried --retries
  times.
- Progress (lines done, lines/s, ETA) goes to standard error: a bar redrawn in place on
  a terminal, a line every few seconds otherwise.

Exit statuses, as attend's: 0 success; 1 the work failed (a chunk failed after its
retries, no workers, lost scheduler); 2 usage error (bad option, settings the library
refuses); 3 model refused (missing, unreadable, not GGUF, different on some worker);
4 I/O error (reading IN, writing OUT or WORKDIR); 75 stopped by --max-chunks with
chunks left (rerun to go on); 130 interrupted (SIGINT, SIGTERM; finished chunks are
kept). Every error is one line on standard error, without a traceback.

A real cluster (the model at the same path on every machine, this package importable
by the workers, e.g. PYTHONPATH=/path/to/attend/python):

    dask scheduler                                            # on one machine: tcp://HOST:8786
    PYTHONPATH=/opt/attend/python dask worker tcp://HOST:8786 --nworkers 4 --nthreads 1   # each machine
    PYTHONPATH=/opt/attend/python python3 -m attend.dask -m /models/de-en.gguf \
        --scheduler tcp://HOST:8786 in.de out.en
"""
from __future__ import annotations

import argparse
import asyncio
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

try:  # the plugin class needs distributed's base class; main() reports a missing module
    from distributed import WorkerPlugin as _WorkerPluginBase
except ImportError:  # pragma: no cover - checked in main()
    _WorkerPluginBase = object  # type: ignore[misc,assignment]

PROG = "attend.dask"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
CHUNK_RE = re.compile(r"^(\d{6,})\.txt$")
TMP_RE = re.compile(r"^(\d{6,}\.txt|manifest\.json)\.tmp\.\d+$")  # an interrupted write_atomic

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_MODEL, EXIT_IO = 0, 1, 2, 3, 4
EXIT_INCOMPLETE = 75  # EX_TEMPFAIL: --max-chunks stopped the run, chunks are left
EXIT_INTERRUPTED = 130


class Failure(Exception):
    """An error to report as one line and an exit status."""

    def __init__(self, message: str, status: int = EXIT_FAIL) -> None:
        super().__init__(message)
        self.status = status


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
        return [f"line {line}: longer than the model allows; translated its first {r.src_ids.size} tokens"]


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
        if r.src_ids.size:
            translated += 1
        if i in cut:
            notes.append(cut[i])
        elif r.truncated:
            notes.extend(_truncation_messages(model, line_no, r))
        if n_best:
            for k, h in enumerate(r.nbest):
                line = f"{line_no - 1} ||| {_one_line(h.text)} ||| {h.score:.6f}"
                if aligned:  # each hypothesis's own, as attend translate
                    line += " ||| " + (r.hypothesis(k).pharaoh(view) if r.src_ids.size else "")
                out.append(line)
        elif aligned:
            out.append(f"{_one_line(r.text)} ||| {r.pharaoh(view)}")
        else:
            out.append(_one_line(r.text))
    text = ("\n".join(out) + "\n").encode("utf-8") if out else b""
    return {"index": index, "text": text, "lines": len(results), "translated": translated,
            "notes": notes, "pid": os.getpid(), "host": socket.gethostname(),
            "seconds": time.perf_counter() - t0, "model_seconds": t2 - t1}


# ---------------------------------------------------------------------------------------
# Driver side: the input, the work directory, progress


def _message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if text else type(e).__name__


def scan_input(path: str, chunk_lines: int, block: int = 1 << 20) -> Dict[str, Any]:
    """One pass over the input: its SHA-256, size, line count (attend translate's count)
    and the byte offset where each chunk of chunk_lines lines starts (offsets[-1] is the
    size)."""
    h = hashlib.sha256()
    offsets = [0]
    pos = newlines = in_chunk = 0
    last = b""
    with open(path, "rb") as f:
        while True:
            b = f.read(block)
            if not b:
                break
            h.update(b)
            c = b.count(b"\n")
            newlines += c
            if in_chunk + c < chunk_lines:
                in_chunk += c
            else:
                j = -1
                for _ in range(c):
                    j = b.find(b"\n", j + 1)
                    in_chunk += 1
                    if in_chunk == chunk_lines:
                        offsets.append(pos + j + 1)
                        in_chunk = 0
            pos += len(b)
            last = b[-1:]
    lines = newlines + (1 if pos and last != b"\n" else 0)
    if offsets[-1] != pos:
        offsets.append(pos)
    return {"sha256": h.hexdigest(), "bytes": pos, "lines": lines, "offsets": offsets}


def chunk_line_counts(lines: int, chunk_lines: int, chunks: int) -> List[int]:
    return [min(chunk_lines, lines - i * chunk_lines) for i in range(chunks)]


def chunk_path(workdir: str, index: int) -> str:
    return os.path.join(workdir, f"{index:06d}.txt")


def write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def prepare_workdir(workdir: str, manifest: Dict[str, Any], out_lines: Sequence[int]) -> Tuple[List[int], bool]:
    """Make workdir hold manifest; returns (indices of the finished chunks kept there,
    whether an earlier run's chunks were cleared). Chunks are kept only under an equal
    manifest and with the line count they must have (out_lines[i] output lines);
    temporary files of an interrupted write are removed."""
    os.makedirs(workdir, exist_ok=True)
    mpath = os.path.join(workdir, MANIFEST)
    old = None
    try:
        with open(mpath, "r", encoding="utf-8") as f:
            old = json.load(f)
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        old = {"unreadable": True}
    same = old == manifest
    names = os.listdir(workdir)
    cleared = False
    for name in names:
        if TMP_RE.match(name) or (not same and CHUNK_RE.match(name)):
            os.unlink(os.path.join(workdir, name))
            cleared = cleared or not same
    if not same:
        write_atomic(mpath, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    done = []
    if same:
        for name in names:
            m = CHUNK_RE.match(name)
            if not m:
                continue
            i = int(m.group(1))
            p = os.path.join(workdir, name)
            ok = i < len(out_lines)
            if ok:
                with open(p, "rb") as f:
                    data = f.read()
                ok = data.count(b"\n") == out_lines[i] and (not data or data.endswith(b"\n"))
            if ok:
                done.append(i)
            else:
                os.unlink(p)
    return sorted(done), cleared


def remove_workdir(workdir: str) -> None:
    """Remove what this module put in workdir, then workdir if that left it empty (a
    --work-dir given by the user may hold other files)."""
    try:
        names = os.listdir(workdir)
    except OSError:
        return
    for name in names:
        if CHUNK_RE.match(name) or TMP_RE.match(name) or name in (MANIFEST, "lock"):
            try:
                os.unlink(os.path.join(workdir, name))
            except OSError:
                pass
    try:
        os.rmdir(workdir)
    except OSError:
        pass


def _fmt_time(s: float) -> str:
    s = int(max(s, 0) + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Lines done and lines/s on standard error: a bar redrawn in place on a terminal, a
    line every `interval` seconds otherwise."""

    def __init__(self, total_lines: int, total_chunks: int, done_lines: int, done_chunks: int,
                 enabled: bool, interval: Optional[float] = None) -> None:
        self.total, self.chunks = total_lines, total_chunks
        self.done, self.done_chunks = done_lines, done_chunks
        self.base = done_lines  # reused lines do not count in the speed
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.interval = interval if interval is not None else (0.25 if self.tty else 5.0)
        self.t0 = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def add(self, lines: int) -> None:
        self.done += lines
        self.done_chunks += 1

    def rate(self) -> float:
        dt = time.monotonic() - self.t0
        return (self.done - self.base) / dt if dt > 0 else 0.0

    def text(self) -> str:
        pct = 100.0 * self.done / self.total if self.total else 100.0
        r = self.rate()
        left = self.total - self.done
        eta = _fmt_time(left / r) if r > 0 and left else ("0:00" if not left else "?")
        return (f"{self.done}/{self.total} lines ({pct:.0f}%), {self.done_chunks}/{self.chunks} chunks, "
                f"{r:.1f} lines/s, ETA {eta}")

    def tick(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        if self.tty:
            width = 24
            filled = int(width * self.done / self.total) if self.total else width
            bar = "#" * filled + "." * (width - filled)
            sys.stderr.write(f"\r[{bar}] {self.text()}\x1b[K")
            sys.stderr.flush()
            self.drawn = True
        else:
            print(f"{PROG}: {self.text()}", file=sys.stderr, flush=True)

    def say(self, msg: str) -> None:
        """A message line that does not garble the bar."""
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            self.drawn = False
        print(msg, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.enabled:
            if self.tty:
                self.tick(force=True)
                sys.stderr.write("\n")
                sys.stderr.flush()
                self.drawn = False
            else:
                self.tick(force=True)


# ---------------------------------------------------------------------------------------
# Command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Failure(f"{message} (see --help)", EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python3 -m attend.dask",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Translate IN into OUT on a Dask cluster: one line out per line in, in "
                    "order, byte for byte what `attend translate -m MODEL [options] < IN` "
                    "writes. Finished chunks are kept in WORKDIR, so a rerun resumes.",
        epilog="Without --scheduler a local cluster of --workers processes is started. "
               "Exit statuses: 0 ok, 1 work failed, 2 usage, 3 model refused, 4 I/O, "
               "75 stopped by --max-chunks, 130 interrupted.")
    p.add_argument("input", metavar="IN", help="input text, one sentence per line")
    p.add_argument("output", metavar="OUT", help="output file (written when every chunk is done)")
    p.add_argument("-m", "--model", metavar="FILE",
                   help="checkpoint, at the same path on every worker (default: $ATTEND_MODEL, "
                        "else the shipped model)")
    g = p.add_argument_group("cluster")
    g.add_argument("--scheduler", metavar="ADDR", help="connect to a running cluster (tcp://HOST:8786)")
    g.add_argument("--workers", type=int, metavar="N",
                   help="local cluster: N single-threaded worker processes (default: CPUs / --threads)")
    g.add_argument("-t", "--threads", type=int, default=1, metavar="N",
                   help="attend threads per worker process (default 1)")
    g.add_argument("--chunk-lines", type=int, default=500, metavar="N",
                   help="lines per chunk, the unit of work and of resuming (default 500)")
    g.add_argument("--work-dir", metavar="DIR", help="finished chunks (default: OUT.chunks)")
    g.add_argument("--keep-chunks", action="store_true", help="keep WORKDIR after OUT is written")
    g.add_argument("--retries", type=int, default=2, metavar="N",
                   help="retries of a chunk whose task raised (default 2; a dying worker's "
                        "chunks are always run again)")
    g.add_argument("--max-chunks", type=int, metavar="N",
                   help="translate at most N missing chunks, then stop (exit 75; rerun to go on)")
    g.add_argument("--connect-timeout", type=float, default=30.0, metavar="S",
                   help="seconds to wait for the scheduler and for a first worker (default 30)")
    g.add_argument("--stats", metavar="FILE", help="write run statistics as JSON to FILE")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress, no summary")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="one line per chunk, and Dask's own log messages")
    t = p.add_argument_group("translation (as attend translate; default: the model's settings)")
    t.add_argument("-b", "--batch-size", type=int, metavar="N", help="sentences translated together (default 32)")
    t.add_argument("--batch-tokens", type=int, metavar="N", help="at most N source tokens per batch")
    t.add_argument("--max-length", type=int, metavar="N", help="generation limit counting the start token")
    t.add_argument("--split", choices=("sentences", "none"), default="sentences", metavar="MODE",
                   help="sentences (default): a line's sentences translated one by one, joined; "
                        "none: each line one sequence")
    t.add_argument("--split-lang", metavar="L", help="the splitting rules' language (de, en, ...)")
    t.add_argument("--beam", type=int, metavar="N", help="beam search with N beams (1: greedy)")
    t.add_argument("--greedy", action="store_true", help="the same as --beam 1")
    t.add_argument("--length-penalty", type=float, metavar="X")
    t.add_argument("--early-stopping", choices=("true", "false", "never"), metavar="V",
                   help="true, false or never")
    t.add_argument("--n-best", type=int, metavar="K", help="K lines per input line: 'i ||| text ||| score'")
    t.add_argument("--min-length", type=int, metavar="N")
    t.add_argument("--no-repeat-ngram-size", type=int, metavar="N")
    t.add_argument("--repetition-penalty", type=float, metavar="X")
    t.add_argument("--sample", action="store_true", help="draw each token at random")
    t.add_argument("--top-k", type=int, metavar="K")
    t.add_argument("--top-p", type=float, metavar="P")
    t.add_argument("--temperature", type=float, metavar="T")
    t.add_argument("--seed", type=int, metavar="S")
    t.add_argument("--alignment", metavar="VIEW", nargs="?", const="",
                   help="append ' ||| ' and the word alignment of VIEW (default: the model's own, "
                        "as attend translate); write it --alignment=VIEW")
    return p


def _fix_argv(argv: List[str]) -> List[str]:
    """--alignment takes its view only as --alignment=VIEW (as attend translate), so that
    `--alignment IN OUT` does not read IN as a view."""
    out: List[str] = []
    for i, a in enumerate(argv):
        if a == "--":
            return out + argv[i:]
        out.append("--alignment=" if a == "--alignment" else a)
    return out


def translate_options(a: argparse.Namespace) -> Dict[str, Any]:
    """Model.translate keywords for the options given (the ones that change the output)."""
    o: Dict[str, Any] = {}
    for name in ("beam", "n_best", "length_penalty", "min_length", "no_repeat_ngram_size",
                 "repetition_penalty", "max_length", "top_k", "top_p", "temperature", "seed"):
        v = getattr(a, name)
        if v is not None:
            o[name] = v
    if a.greedy:
        o["greedy"] = True
    if a.sample:
        o["sample"] = True
    if a.early_stopping is not None:
        o["early_stopping"] = {"true": True, "false": False, "never": "never"}[a.early_stopping]
    if a.split == "none":
        o["split"] = False
    if a.split_lang is not None:
        o["split_lang"] = a.split_lang
    return o


def _check_args(a: argparse.Namespace) -> None:
    def positive(name: str, v: Optional[int]) -> None:
        if v is not None and v < 1:
            raise Failure(f"--{name.replace('_', '-')} must be at least 1, not {v} (see --help)", EXIT_USAGE)
    for name in ("workers", "threads", "chunk_lines", "max_chunks", "batch_size", "batch_tokens"):
        positive(name, getattr(a, name))
    if a.retries < 0:
        raise Failure(f"--retries must be at least 0, not {a.retries} (see --help)", EXIT_USAGE)
    if a.scheduler and a.workers is not None:
        raise Failure("--workers starts a local cluster: not with --scheduler (see --help)", EXIT_USAGE)
    if not a.connect_timeout > 0:
        raise Failure("--connect-timeout must be positive (see --help)", EXIT_USAGE)


def _model_path(a: argparse.Namespace) -> str:
    if a.model is None:
        try:
            import attend
            return attend.default_model_path()
        except Exception as e:
            raise Failure(_message(e), EXIT_USAGE) from None
    path = a.model
    if not a.scheduler:
        # local workers: the file must be here; say so before starting any process
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise Failure(f"{path}: {e.strerror}", EXIT_MODEL) from None
        if os.path.isdir(path):
            raise Failure(f"{path}: Is a directory", EXIT_MODEL)
    return os.path.abspath(path) if os.path.exists(path) else path


def _quiet_logs(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.CRITICAL
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(level)


def _start_cluster(a: argparse.Namespace) -> Tuple[Any, Any]:
    from distributed import Client, LocalCluster
    if a.scheduler:
        try:
            client = Client(a.scheduler, timeout=a.connect_timeout)
        except Exception as e:
            raise Failure(f"cannot connect to the scheduler {a.scheduler}: {_message(e)}") from None
        return None, client
    n = a.workers
    if n is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover
            cpus = os.cpu_count() or 1
        n = max(1, cpus // a.threads)
    try:
        # the workers' scratch space: our own, removed in _Run.close (not the shared
        # dask-worker-space, where a killed run leaves stale locks that others then log)
        a._local_dir = tempfile.mkdtemp(prefix="attend-dask-")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None, scheduler_port=0,
                               local_directory=a._local_dir,
                               silence_logs=logging.INFO if a.verbose else logging.CRITICAL)
        client = Client(cluster, timeout=a.connect_timeout)
    except Exception as e:
        raise Failure(f"cannot start a local cluster of {n} workers: {_message(e)}") from None
    return cluster, client


def _wait_for_workers(client: Any, timeout: float) -> Dict[str, Any]:
    t_end = time.monotonic() + timeout
    while True:
        workers = client.scheduler_info().get("workers", {})
        if workers:
            return workers
        if time.monotonic() > t_end:
            raise Failure(f"no workers connected to the scheduler within {timeout:g} s")
        time.sleep(0.2)


class _Run:
    """One run of the driver: everything main() sets up, the loop, the summary."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.cluster: Any = None
        self.client: Any = None
        self.lock_fd: Optional[int] = None
        self.progress: Optional[Progress] = None
        self.plugin_name: Optional[str] = None
        self.stats: Dict[str, Any] = {"complete": False}
        self.t_start = time.monotonic()

    def say(self, msg: str) -> None:
        if self.progress is not None:
            self.progress.say(msg)
        else:
            print(msg, file=sys.stderr, flush=True)

    # -- the steps
    def run(self) -> int:
        a = self.a
        out_dir = os.path.dirname(os.path.abspath(a.output))
        if not os.path.isdir(out_dir):
            raise Failure(f"{a.output}: directory {out_dir} does not exist", EXIT_IO)
        try:
            if os.path.exists(a.output) and os.path.samefile(a.input, a.output):
                raise Failure(f"{a.output}: is the input file", EXIT_USAGE)
        except OSError:
            pass
        model = _model_path(a)
        try:
            info = scan_input(a.input, a.chunk_lines)
        except OSError as e:
            raise Failure(f"reading {a.input}: {e.strerror}" if e.strerror else
                          f"reading {a.input}: {e}", EXIT_IO) from None
        offsets = info["offsets"]
        n_chunks = len(offsets) - 1
        counts = chunk_line_counts(info["lines"], a.chunk_lines, n_chunks)
        workdir = a.work_dir or a.output + ".chunks"
        options = translate_options(a)
        alignment = a.alignment
        batching: Dict[str, Any] = {}
        if a.batch_size is not None:
            batching["batch_size"] = a.batch_size
        if a.batch_tokens is not None:
            batching["batch_tokens"] = a.batch_tokens

        t0 = time.monotonic()
        self.cluster, self.client = _start_cluster(a)
        workers = _wait_for_workers(self.client, a.connect_timeout)
        name = "attend-model-" + hashlib.sha1(f"{model}\0{a.threads}".encode()).hexdigest()[:12]
        self.plugin_name = name
        spec: Dict[str, Any] = {"plugin": name, "model": model, "threads": a.threads,
                                "options": options, "alignment": alignment, "batching": batching,
                                "local": self.cluster is not None}
        try:
            self.client.register_worker_plugin(
                AttendModelPlugin(model, a.threads, name, local=self.cluster is not None), name=name)
            probes = self.client.run(probe_worker, spec)
        except Exception as e:
            raise Failure(f"setting up the workers: {_message(e)}") from None
        bad = {w: p for w, p in probes.items() if p.get("error")}
        if bad:
            w, p = sorted(bad.items())[0]
            if len({q["error"] for q in bad.values()}) == 1 and len(bad) == len(probes):
                where = more = ""  # every worker says the same: a bad setting, a bad file
            else:
                where = f"worker {w} ({p.get('host')}): "
                more = f" (and {len(bad) - 1} more of {len(probes)} workers)" if len(bad) > 1 else ""
            msg = p["error"]
            if a.model and model != a.model and msg.startswith(model + ":"):
                msg = a.model + msg[len(model):]  # the path as the user wrote it
            raise Failure(f"{where}{msg}{more}", p.get("status", EXIT_FAIL))
        fps = {json.dumps(p["fingerprint"], sort_keys=True) for p in probes.values()}
        if len(fps) > 1:
            raise Failure(f"{model}: not the same file on every worker ({len(fps)} different ones)",
                          EXIT_MODEL)
        fingerprint = next(iter(probes.values()))["fingerprint"]
        spec["fingerprint"] = fingerprint
        self.stats["startup_seconds"] = time.monotonic() - t0
        self.stats["workers"] = {w: {"pid": p["pid"], "host": p["host"], "load_seconds": p["load_seconds"],
                                     "hash_seconds": p["hash_seconds"]} for w, p in probes.items()}

        # the work directory: what an earlier run finished
        k = options.get("n_best") or 1
        out_lines = [c * k for c in counts]
        manifest = {"attend.dask": MANIFEST_VERSION,
                    "input": {"sha256": info["sha256"], "bytes": info["bytes"], "lines": info["lines"]},
                    "chunk_lines": a.chunk_lines, "model": fingerprint,
                    "options": {"translate": options, "alignment": alignment}}
        try:
            os.makedirs(workdir, exist_ok=True)
            self.lock_fd = os.open(os.path.join(workdir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise Failure(f"{workdir}: another {PROG} run is using it") from None
            done, cleared = prepare_workdir(workdir, manifest, out_lines)
        except OSError as e:
            raise Failure(f"{workdir}: {_message(e)}", EXIT_IO) from None
        done_set = set(done)
        todo = [i for i in range(n_chunks) if i not in done_set]
        if a.max_chunks is not None:
            todo_now = todo[:a.max_chunks]
        else:
            todo_now = todo
        n_workers = len(workers)
        st = self.stats
        st.update({"lines": info["lines"], "chunks": n_chunks, "chunk_lines": a.chunk_lines,
                   "chunks_reused": len(done), "lines_reused": sum(counts[i] for i in done),
                   "chunks_translated": 0, "lines_translated": 0, "nonblank_translated": 0,
                   "chunk_seconds": [], "model_seconds": [], "pids": {}, "workers_lost": 0,
                   "work_dir": workdir, "cleared_old_chunks": cleared})
        if not a.quiet:
            if cleared:
                self.say(f"{PROG}: {workdir}: chunks of another input, model or options cleared")
            if done:
                self.say(f"{PROG}: resuming: {len(done)} of {n_chunks} chunks already done in {workdir}, "
                         f"{len(todo)} to translate")
            where = a.scheduler or "a local cluster"
            self.say(f"{PROG}: {info['lines']} lines in {n_chunks} chunks of {a.chunk_lines}, "
                     f"{n_workers} worker{'s' if n_workers != 1 else ''} on {where}")
        self.progress = Progress(info["lines"], n_chunks, st["lines_reused"], len(done),
                                 enabled=not a.quiet)
        t_work = time.monotonic()
        self._loop(spec, todo_now, offsets, counts, workdir)
        st["translate_seconds"] = time.monotonic() - t_work
        self.progress.end()

        left = n_chunks - len(done) - st["chunks_translated"]
        if left:
            st["seconds"] = time.monotonic() - self.t_start
            self._write_stats()
            if not a.quiet:
                self.say(f"{PROG}: stopped after {st['chunks_translated']} chunks as asked (--max-chunks); "
                         f"{left} of {n_chunks} left: rerun the same command to go on")
            return EXIT_INCOMPLETE
        # every chunk is there: write OUT in order
        try:
            tmp = f"{a.output}.tmp.{os.getpid()}"
            try:
                with open(tmp, "wb") as f:
                    for i in range(n_chunks):
                        with open(chunk_path(workdir, i), "rb") as c:
                            shutil.copyfileobj(c, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, a.output)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        except OSError as e:
            raise Failure(f"writing {a.output}: {_message(e)}", EXIT_IO) from None
        st["complete"] = True
        if not a.keep_chunks:
            self._release_lock()
            remove_workdir(workdir)
        st["seconds"] = time.monotonic() - self.t_start
        self._write_stats()
        if not a.quiet:
            tr = st["lines_translated"]
            dt = st["translate_seconds"]
            reused = f", {len(done)} reused from an earlier run" if done else ""
            self.say(f"{PROG}: done: {info['lines']} lines, {n_chunks} chunks ({st['chunks_translated']} "
                     f"translated this run, {tr} lines{reused}) in {st['seconds']:.1f} s, "
                     f"{tr / dt if dt > 0 else 0.0:.1f} lines/s, {n_workers} worker{'s' if n_workers != 1 else ''} "
                     f"-> {a.output}")
        return EXIT_OK

    def _loop(self, spec: Dict[str, Any], todo: List[int], offsets: List[int], counts: List[int],
              workdir: str) -> None:
        from distributed import wait
        a, client, st, progress = self.a, self.client, self.stats, self.progress
        assert progress is not None
        run_id = uuid.uuid4().hex[:8]
        pending: Iterator[int] = iter(todo)
        inflight: Dict[Any, int] = {}
        f_in = open(a.input, "rb")

        def limit() -> int:
            try:
                threads = sum(client.nthreads().values())
            except Exception:
                threads = 1
            return 2 * max(threads, 1) + 2

        def submit_more(n: int) -> None:
            while len(inflight) < n:
                i = next(pending, None)
                if i is None:
                    return
                f_in.seek(offsets[i])
                data = f_in.read(offsets[i + 1] - offsets[i])
                if len(split_lines(data)) != counts[i] or len(data) != offsets[i + 1] - offsets[i]:
                    raise Failure(f"{a.input}: changed while being read", EXIT_IO)
                fut = client.submit(translate_chunk, i, i * a.chunk_lines, counts[i], data, spec,
                                    key=f"attend-chunk-{i:06d}-{run_id}", retries=a.retries)
                inflight[fut] = i

        try:
            cap = limit()
            submit_more(cap)
            known = set(client.scheduler_info().get("workers", {}))
            last_check = time.monotonic()
            no_workers_since: Optional[float] = None
            while inflight:
                try:
                    done, _ = wait(list(inflight), timeout=0.5, return_when="FIRST_COMPLETED")
                except (asyncio.TimeoutError, TimeoutError):
                    done = set()
                for fut in done:
                    i = inflight.pop(fut)
                    try:
                        r = fut.result()
                    except Exception as e:
                        lo = i * a.chunk_lines + 1
                        what = type(e).__name__
                        if what == "KilledWorker":
                            msg = ("its workers died each time it ran (a crash on this input, or "
                                   "out of memory)")
                        else:
                            msg = _message(e)
                        raise Failure(f"chunk {i} (lines {lo}-{lo + counts[i] - 1}) failed: {msg}") from None
                    finally:
                        fut.release()
                    try:
                        write_atomic(chunk_path(workdir, i), r["text"])
                    except OSError as e:
                        raise Failure(f"{chunk_path(workdir, i)}: {_message(e)}", EXIT_IO) from None
                    for note in r["notes"]:
                        progress.say(f"attend: {note}")
                    st["chunks_translated"] += 1
                    st["lines_translated"] += r["lines"]
                    st["nonblank_translated"] += r["translated"]
                    st["chunk_seconds"].append(round(r["seconds"], 6))
                    st["model_seconds"].append(round(r["model_seconds"], 6))
                    key = f"{r['host']}:{r['pid']}"
                    st["pids"][key] = st["pids"].get(key, 0) + r["lines"]
                    progress.add(r["lines"])
                    if a.verbose:
                        lo = i * a.chunk_lines + 1
                        progress.say(f"{PROG}: chunk {i} (lines {lo}-{lo + r['lines'] - 1}) done on "
                                     f"{r['host']} pid {r['pid']} in {r['seconds']:.2f} s")
                now = time.monotonic()
                if now - last_check >= 1.0:
                    last_check = now
                    try:
                        workers = set(client.scheduler_info().get("workers", {}))
                    except Exception:
                        workers = known
                    for w in sorted(known - workers):
                        st["workers_lost"] += 1
                        if not a.quiet:
                            progress.say(f"{PROG}: worker {w} left; its chunks run again on the others")
                    for w in sorted(workers - known):
                        if not a.quiet:
                            progress.say(f"{PROG}: worker {w} joined")
                    known = workers
                    if not workers:
                        no_workers_since = no_workers_since or now
                        if now - no_workers_since > a.connect_timeout:
                            raise Failure(f"no workers left for {a.connect_timeout:g} s")
                    else:
                        no_workers_since = None
                    cap = limit()
                submit_more(cap)
                progress.tick()
        finally:
            f_in.close()
            for fut in inflight:
                try:
                    fut.cancel()
                except Exception:
                    pass

    def _write_stats(self) -> None:
        if not self.a.stats:
            return
        try:
            write_atomic(self.a.stats, (json.dumps(self.stats, indent=1, sort_keys=True) + "\n").encode())
        except OSError as e:
            raise Failure(f"{self.a.stats}: {_message(e)}", EXIT_IO) from None

    def _release_lock(self) -> None:
        if self.lock_fd is not None:
            try:
                os.close(self.lock_fd)
            except OSError:
                pass
            self.lock_fd = None

    def close(self) -> None:
        self._release_lock()
        client, cluster = self.client, self.cluster
        self.client = self.cluster = None
        if client is not None:
            if cluster is None:  # a shared cluster: free the model on its workers
                try:
                    if self.plugin_name:
                        client.unregister_worker_plugin(self.plugin_name)
                except Exception:
                    pass
            try:
                client.close(timeout=10)
            except Exception:
                pass
        if cluster is not None:
            try:
                cluster.close(timeout=10)
            except Exception:
                pass
        local_dir = getattr(self.a, "_local_dir", None)
        if local_dir:
            shutil.rmtree(local_dir, ignore_errors=True)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run: Optional[_Run] = None
    try:
        a = build_parser().parse_args(_fix_argv(argv))
        _check_args(a)
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise Failure(f"Dask's distributed is not installed for {sys.executable}: "
                          "apt-get install python3-distributed (and run /usr/bin/python3), "
                          "or pip install distributed", EXIT_FAIL) from None
        _quiet_logs(a.verbose)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _on_sigterm)
        run = _Run(a)
        return run.run()
    except Failure as e:
        if run is not None and run.progress is not None and run.progress.drawn:
            sys.stderr.write("\n")
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        if run is not None:
            run.stats["error"] = str(e)
            try:
                run._write_stats()
            except Failure:
                pass
        return e.status
    except KeyboardInterrupt:
        if run is not None and run.progress is not None and run.progress.drawn:
            sys.stderr.write("\n")
        kept = ""
        if run is not None and "work_dir" in run.stats:
            n = run.stats["chunks_reused"] + run.stats["chunks_translated"]
            kept = (f": {n} of {run.stats['chunks']} chunks kept in {run.stats['work_dir']}, "
                    "rerun the same command to resume")
        print(f"{PROG}: interrupted{kept}", file=sys.stderr, flush=True)
        if run is not None:
            run.stats["interrupted"] = True
            try:
                run._write_stats()
            except Failure:
                pass
        return EXIT_INTERRUPTED
    finally:
        if run is not None:
            try:
                run.close()
            except BaseException:
                pass


if __name__ == "__main__":
    # run as attend.dask, not __main__, so that what Dask pickles for the workers
    # (the plugin, the task) is found there by name
    from attend.dask import main as _main
    sys.exit(_main())
