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
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

# the parts (each name stays importable from attend.dask, as before the split)
from ._dask_common import (PROG, MANIFEST, MANIFEST_VERSION, CHUNK_RE, TMP_RE, EXIT_OK, EXIT_FAIL,
                           EXIT_USAGE, EXIT_MODEL, EXIT_IO, EXIT_INCOMPLETE, EXIT_INTERRUPTED,
                           Failure)
from ._dask_workdir import (_message, scan_input, chunk_line_counts, chunk_path, write_atomic,
                            prepare_workdir, remove_workdir, Progress)
from ._dask_worker import (AttendModelPlugin, model_fingerprint, probe_worker, split_lines,
                           SPLIT_MAX_LINE, cli_line, translate_chunk)
from ._dask_cli import (build_parser, _fix_argv, translate_options, _check_args, _model_path,
                        _quiet_logs, _start_cluster, _wait_for_workers)


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
