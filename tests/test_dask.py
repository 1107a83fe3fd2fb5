#!/usr/bin/python3
"""Tests of python3 -m attend.dask (python/attend/dask.py): corpus translation on a Dask
cluster, on the shipped model models/de-en.gguf and ~230 Tatoeba lines with blank, CRLF,
NUL, invalid UTF-8, over-long lines and a last line without a newline, in chunks of a few lines:

- a local cluster of 2 worker processes writes exactly what `attend translate` writes;
- on a cluster started here (2 worker processes behind nannies, used with --scheduler), a
  worker killed with SIGKILL mid-run loses nothing;
- a run interrupted by SIGINT keeps its finished chunks and a rerun translates only the
  missing ones (counted by --stats); --max-chunks stops and resumes; a changed input or
  changed options clear the chunks; n-best and --alignment output match the CLI;
- bad arguments, a missing or refused model, a missing input, an unreachable scheduler
  give one clear line and the documented exit status.

Run as `/usr/bin/python3 tests/test_dask.py` (needs Debian's python3-distributed)."""
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

PYDIR = os.path.join(T.REPO, "python")
sys.path.insert(0, PYDIR)

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
TMP = T.tempdir()
ENV = dict(os.environ, PYTHONPATH=PYDIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
IN = os.path.join(TMP, "in.txt")
REF = os.path.join(TMP, "ref.txt")
TIMEOUT = 120

try:
    import distributed  # noqa: F401
    from distributed import Client, LocalCluster
    HAVE_DISTRIBUTED = None
except ImportError as e:
    HAVE_DISTRIBUTED = (f"cannot import distributed ({e}) for {sys.executable}: "
                        "apt-get install python3-distributed, and run the test with /usr/bin/python3")

import attend.dask as AD  # noqa: E402

CLUSTER = None  # (LocalCluster, Client) started here, for the --scheduler tests


def make_input():
    de = T.corpus_lines("tatoeba", "de", 230, skip=5000)
    odd = [b"", b"   \t", "Ich bin müde.".encode() + b"\r", b"Wo\0ist der Bahnhof?", b"\0\0",
           b"a\xff\xfe ist gut", b"Das Haus\rist rot.", b"\r",
           b" " * 9000 + b"Hallo Welt"]  # blank in the first max_line_bytes + 1: blank to the CLI
    lines = [x.encode("utf-8") for x in de[:100]] + odd + [x.encode("utf-8") for x in de[100:]]
    with open(IN, "wb") as f:
        f.write(b"\n".join(lines) + b"\n" + "Letzte Zeile ohne Ende.".encode())
    p = subprocess.run([T.ATTEND, "translate", "-m", MODEL, "--greedy", "-t", "1"],
                       stdin=open(IN, "rb"), capture_output=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    with open(REF, "wb") as f:
        f.write(p.stdout)
    return len(lines) + 1


def read(path):
    with open(path, "rb") as f:
        return f.read()


def dask_cmd(*args):
    return [T.PYTHON, "-m", "attend.dask", *args]


def run_dask(*args, timeout=TIMEOUT):
    return subprocess.run(dask_cmd(*args), capture_output=True, text=True, errors="replace",
                          env=ENV, timeout=timeout, cwd=TMP)


def no_traceback(p):
    assert "Traceback" not in p.stderr, p.stderr


def stats(path):
    with open(path) as f:
        return json.load(f)


def cluster():
    """A cluster of 2 single-threaded worker processes (with nannies, which restart a
    killed worker), as dask-scheduler + dask-worker would give; returns (address, client)."""
    global CLUSTER
    if CLUSTER is None:
        c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                         scheduler_port=0, silence_logs=logging.CRITICAL,
                         local_directory=os.path.join(TMP, "dask-worker-space"))
        CLUSTER = (c, Client(c))
    return CLUSTER[0].scheduler_address, CLUSTER[1]


def chunk_files(d):
    return sorted(n for n in os.listdir(d) if AD.CHUNK_RE.match(n)) if os.path.isdir(d) else []


# ---------------------------------------------------------------------------------------
# no cluster: reading lines, the work directory


def test_lines_and_chunks():
    assert AD.split_lines(b"") == []
    assert AD.split_lines(b"\n") == [b""]
    assert AD.split_lines(b"a\nb") == [b"a", b"b"]
    assert AD.split_lines(b"a\r\n\nb\n") == [b"a\r", b"", b"b"]
    assert AD.cli_line(b"abc\r", 10) == b"abc"
    assert AD.cli_line(b"abc\r\r", 10) == b"abc\r"
    assert AD.cli_line(b"x" * 20 + b"\r", 10) == b"x" * 11  # cut first, as the CLI's reader
    p = os.path.join(TMP, "scan.txt")
    for data, chunk, lines, offsets in [
            (b"", 2, 0, [0]), (b"a\n", 2, 1, [0, 2]), (b"a\nb\n", 2, 2, [0, 4]),
            (b"a\nb\nc", 2, 3, [0, 4, 5]), (b"a\nb\nc\n", 1, 3, [0, 2, 4, 6]),
            (b"\n\n\n\n\n", 2, 5, [0, 2, 4, 5])]:
        with open(p, "wb") as f:
            f.write(data)
        for block in (1, 3, 1 << 20):
            s = AD.scan_input(p, chunk, block=block)
            assert (s["lines"], s["offsets"]) == (lines, offsets), (data, chunk, block, s)


def test_manifest_invalidation():
    d = os.path.join(TMP, "wd")
    m = {"attend.dask": 1, "input": {"sha256": "aa", "bytes": 5, "lines": 3}, "chunk_lines": 2,
         "model": {"bytes": 1}, "options": {"translate": {"greedy": True}, "alignment": None}}
    assert AD.prepare_workdir(d, m, [2, 1]) == ([], False)
    AD.write_atomic(AD.chunk_path(d, 0), b"x\ny\n")
    AD.write_atomic(AD.chunk_path(d, 1), b"z\n")
    assert AD.prepare_workdir(d, m, [2, 1]) == ([0, 1], False)
    open(os.path.join(d, "000001.txt.tmp.123"), "wb").write(b"half")
    AD.write_atomic(AD.chunk_path(d, 1), b"z")                  # not a whole chunk: dropped
    assert AD.prepare_workdir(d, m, [2, 1]) == ([0], False)
    assert chunk_files(d) == ["000000.txt"] and "000001.txt.tmp.123" not in os.listdir(d)
    for change in ({"input": dict(m["input"], sha256="bb")},
                   {"options": {"translate": {"beam": 2}, "alignment": None}},
                   {"chunk_lines": 3}, {"model": {"bytes": 2}}):
        AD.prepare_workdir(d, m, [2, 1])
        AD.write_atomic(AD.chunk_path(d, 0), b"x\ny\n")
        assert AD.prepare_workdir(d, m, [2, 1]) == ([0], False)
        assert AD.prepare_workdir(d, dict(m, **change), [2, 1]) == ([], True), change
        assert chunk_files(d) == []
    open(os.path.join(d, "notes.txt"), "w").write("mine")  # a --work-dir of the user's own
    AD.write_atomic(AD.chunk_path(d, 0), b"x\ny\n")
    AD.remove_workdir(d)
    assert sorted(os.listdir(d)) == ["notes.txt"], os.listdir(d)
    os.unlink(os.path.join(d, "notes.txt"))
    AD.remove_workdir(d)
    assert not os.path.exists(d)


# ---------------------------------------------------------------------------------------
# local cluster


def test_local_cluster_identical(n_lines):
    out = os.path.join(TMP, "out1.txt")
    st = os.path.join(TMP, "stats1.json")
    p = run_dask("-m", MODEL, "--greedy", "--workers", "2", "--chunk-lines", "16", "--stats", st,
                 IN, out)
    assert p.returncode == 0, p.stderr
    no_traceback(p)
    assert read(out) == read(REF), "output differs from attend translate"
    s = stats(st)
    assert s["complete"] and s["lines"] == n_lines and s["lines_translated"] == n_lines, s
    assert len(s["workers"]) == 2 and s["chunks"] == (n_lines + 15) // 16, s
    assert all(w["load_seconds"] > 0 for w in s["workers"].values()), s
    assert not os.path.exists(out + ".chunks"), "the work directory is removed after success"
    assert "done: " in p.stderr and "lines/s" in p.stderr, p.stderr


# ---------------------------------------------------------------------------------------
# a cluster started here, used with --scheduler


def test_worker_killed(n_lines):
    addr, client = cluster()
    pids = client.run(os.getpid)
    assert len(pids) == 2, pids
    out = os.path.join(TMP, "out2.txt")
    st = os.path.join(TMP, "stats2.json")
    wd = out + ".chunks"
    proc = subprocess.Popen(dask_cmd("-m", MODEL, "--greedy", "--scheduler", addr, "--chunk-lines", "4",
                                     "--stats", st, IN, out),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=TMP)
    victim_addr, victim = sorted(pids.items())[0]
    t_end = time.time() + TIMEOUT
    while not chunk_files(wd) and proc.poll() is None and time.time() < t_end:
        time.sleep(0.02)
    assigned = client.processing(workers=[victim_addr]).get(victim_addr, [])  # chunks it holds
    done_at_kill = len(chunk_files(wd))
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    total = (n_lines + 3) // 4
    assert 1 <= done_at_kill < total, f"killed with {done_at_kill} of {total} chunks done"
    assert assigned, "the killed worker held no chunk"
    try:
        os.kill(victim, 0)
        raise AssertionError(f"worker {victim} still alive")
    except ProcessLookupError:
        pass
    assert read(out) == read(REF), "output differs after a worker was killed"
    s = stats(st)
    assert s["lines_translated"] == n_lines and s["chunks_translated"] == total, s
    print(f"     killed worker pid {victim} holding {len(assigned)} chunks, {done_at_kill}/{total} "
          f"chunks done; lines per "
          f"worker: {s['pids']}; workers lost as the driver saw it: {s['workers_lost']}")
    # the nanny started a new worker process in its place, which got the model plugin
    t_end = time.time() + 60
    while time.time() < t_end:
        now = client.run(os.getpid)
        if len(now) == 2 and victim not in now.values():
            break
        time.sleep(0.2)
    assert len(now) == 2 and victim not in now.values(), now


def test_interrupt_and_resume(n_lines):
    addr, _ = cluster()
    out = os.path.join(TMP, "out3.txt")
    st = os.path.join(TMP, "stats3.json")
    wd = out + ".chunks"
    args = ["-m", MODEL, "--greedy", "--scheduler", addr, "--chunk-lines", "4", IN, out]
    # SIGINT at its default in the child: started from a non-interactive shell's background
    # job (`make test &`), this process inherits it ignored, and so would the driver, which
    # then runs to the end (the test failed that way, never in a foreground run)
    proc = subprocess.Popen(dask_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=TMP,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t_end = time.time() + TIMEOUT
    while len(chunk_files(wd)) < 3 and proc.poll() is None and time.time() < t_end:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=TIMEOUT)
    total = (n_lines + 3) // 4
    assert proc.returncode == 130, (proc.returncode, err)
    assert "interrupted" in err and "rerun" in err and "Traceback" not in err, err
    assert not os.path.exists(out), "no output from an interrupted run"
    kept = chunk_files(wd)
    assert 3 <= len(kept) < total, (len(kept), total)
    p = run_dask(*args, "--stats", st)
    assert p.returncode == 0, p.stderr
    no_traceback(p)
    s = stats(st)
    kept_lines = sum(min(4, n_lines - 4 * int(n[:-4])) for n in kept)
    assert s["chunks_reused"] == len(kept) and s["chunks_translated"] == total - len(kept), s
    assert s["lines_translated"] == n_lines - kept_lines, s
    assert f"resuming: {len(kept)} of {total} chunks already done" in p.stderr, p.stderr
    assert read(out) == read(REF), "output differs after resuming"
    print(f"     interrupted with {len(kept)}/{total} chunks kept; the rerun translated "
          f"{s['chunks_translated']} chunks ({s['lines_translated']} lines)")


def test_max_chunks_and_invalidation(n_lines):
    addr, _ = cluster()
    src = os.path.join(TMP, "in4.txt")
    with open(src, "wb") as f:
        f.write(read(IN)[:2000])
    out = os.path.join(TMP, "out4.txt")
    st = os.path.join(TMP, "stats4.json")
    wd = out + ".chunks"
    args = ["-m", MODEL, "--scheduler", addr, "--chunk-lines", "5", "--stats", st, src, out]
    p = run_dask(*args, "--greedy", "--max-chunks", "2")
    assert p.returncode == 75 and "rerun" in p.stderr, (p.returncode, p.stderr)
    assert len(chunk_files(wd)) == 2 and not os.path.exists(out)
    p = run_dask(*args, "--greedy", "--max-chunks", "1")            # resumes: 3 chunks now
    assert p.returncode == 75 and stats(st)["chunks_reused"] == 2, p.stderr
    assert len(chunk_files(wd)) == 3
    p = run_dask(*args, "--beam", "2", "--max-chunks", "1")         # other options: cleared
    s = stats(st)
    assert p.returncode == 75 and s["cleared_old_chunks"] and s["chunks_reused"] == 0, (p.stderr, s)
    assert "cleared" in p.stderr and len(chunk_files(wd)) == 1, p.stderr
    with open(src, "ab") as f:                                       # another input: cleared
        f.write(b"\nNoch ein Satz.\n")
    p = run_dask(*args, "--beam", "2", "--max-chunks", "1")
    s = stats(st)
    assert p.returncode == 75 and s["cleared_old_chunks"] and s["chunks_reused"] == 0, (p.stderr, s)
    p = run_dask(*args, "--beam", "2")                               # finish it
    assert p.returncode == 0 and stats(st)["chunks_reused"] == 1, p.stderr
    ref = subprocess.run([T.ATTEND, "translate", "-m", MODEL, "--beam", "2", "-t", "1"],
                         stdin=open(src, "rb"), capture_output=True, timeout=TIMEOUT)
    assert read(out) == ref.stdout


def test_nbest_and_alignment():
    addr, _ = cluster()
    src = os.path.join(TMP, "in5.txt")
    data = read(IN)
    with open(src, "wb") as f:  # the first 12 lines and the odd ones
        f.write(b"\n".join(data.split(b"\n")[:12] + data.split(b"\n")[100:109]) + b"\n")
    for opts in (["--beam", "3", "--n-best", "2"], ["--greedy", "--alignment"],
                 ["--greedy", "--alignment=penultimate:avg"],
                 ["--sample", "--seed", "7", "--top-k", "10", "--n-best", "2"],
                 ["--beam", "3", "--n-best", "2", "--alignment"]):
        out = os.path.join(TMP, "out5.txt")
        p = run_dask("-m", MODEL, "--scheduler", addr, "--chunk-lines", "3", *opts, src, out)
        assert p.returncode == 0, (opts, p.stderr)
        ref = subprocess.run([T.ATTEND, "translate", "-m", MODEL, "-t", "1", *opts],
                             stdin=open(src, "rb"), capture_output=True, timeout=TIMEOUT)
        assert ref.returncode == 0, ref.stderr
        assert read(out) == ref.stdout, opts


# ---------------------------------------------------------------------------------------
# errors


def test_errors():
    out = os.path.join(TMP, "err.txt")
    addr, _ = cluster()
    cases = [
        (["-m", "/nonexistent/model.gguf", IN, out], 3, "/nonexistent/model.gguf: No such file"),
        (["-m", MODEL, "/nonexistent/in.txt", out], 4, "reading /nonexistent/in.txt: No such file"),
        (["-m", MODEL, IN], 2, "the following arguments are required"),
        (["-m", MODEL, "--bogus", IN, out], 2, "unrecognized arguments: --bogus"),
        (["-m", MODEL, "--chunk-lines", "0", IN, out], 2, "--chunk-lines must be at least 1"),
        (["-m", MODEL, "--workers", "x", IN, out], 2, "invalid int value"),
        (["-m", MODEL, "--scheduler", addr, "--workers", "2", IN, out], 2, "not with --scheduler"),
        (["-m", MODEL, IN, os.path.join(TMP, "no", "dir", "o.txt")], 4, "does not exist"),
        (["-m", MODEL, "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "2", IN, out], 1,
         "cannot connect to the scheduler tcp://127.0.0.1:9"),
        # refused by the workers (the probe before any work)
        (["-m", os.path.join(T.REPO, "README.md"), "--scheduler", addr, IN, out], 3, "not a GGUF file"),
        (["-m", "/nonexistent/model.gguf", "--scheduler", addr, IN, out], 3, "No such file"),
        (["-m", MODEL, "--scheduler", addr, "--greedy", "--n-best", "3", IN, out], 2, "n-best 3: must be"),
        (["-m", MODEL, "--scheduler", addr, "--alignment=nonsense", IN, out], 2, "nonsense"),
    ]
    for args, status, text in cases:
        p = run_dask(*args, timeout=60)
        no_traceback(p)
        assert p.returncode == status, (args, p.returncode, p.stderr)
        assert text in p.stderr, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert lines[-1].startswith("attend.dask: "), p.stderr
        assert not os.path.exists(out)
    p = run_dask("--help")
    assert p.returncode == 0 and "--scheduler" in p.stdout and "--chunk-lines" in p.stdout


def main():
    run = T.Runner()
    if HAVE_DISTRIBUTED:
        run.check("python3-distributed importable", lambda: (_ for _ in ()).throw(
            AssertionError(HAVE_DISTRIBUTED)))
        run.finish()
    t0 = time.time()
    n_lines = make_input()
    run.check("lines and chunks read as attend translate reads them", test_lines_and_chunks)
    run.check("manifest: same input/options resume, others clear", test_manifest_invalidation)
    run.check("local cluster of 2 workers: output identical to attend translate",
              test_local_cluster_identical, n_lines)
    try:
        run.check("--scheduler: a worker killed mid-run loses nothing", test_worker_killed, n_lines)
        run.check("interrupted run (SIGINT) resumes: only missing chunks translated",
                  test_interrupt_and_resume, n_lines)
        run.check("--max-chunks stops and resumes; changed options or input clear chunks",
                  test_max_chunks_and_invalidation, n_lines)
        run.check("--n-best and --alignment identical to attend translate", test_nbest_and_alignment)
        run.check("errors: one line, exit status, no traceback", test_errors)
    finally:
        if CLUSTER is not None:
            CLUSTER[1].close()
            CLUSTER[0].close()
    print(f"     ({time.time() - t0:.1f} s)")
    shutil.rmtree(TMP, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
