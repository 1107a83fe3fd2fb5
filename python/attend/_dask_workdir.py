"""attend.dask, driver side: the input, the work directory, progress."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._dask_common import PROG, MANIFEST, CHUNK_RE, TMP_RE


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
