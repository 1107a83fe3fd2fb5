"""attend.dask's command line."""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from ._dask_common import EXIT_USAGE, EXIT_MODEL, Failure
from ._dask_workdir import _message


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
