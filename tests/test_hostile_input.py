#!/usr/bin/python3
"""Hostile input to `attend translate`: one line in, one line out, whatever the bytes.

Run as `/usr/bin/python3 tests/test_hostile_input.py` (after `make`). Uses the committed
tiny model tests/data/tiny-v1.gguf. Checks: blank and whitespace-only lines give empty
lines; invalid UTF-8, control characters and NUL bytes translate; a line longer than the
model's positions is cut with one warning; CRLF and a missing final newline; the same
output for every batch size; line-by-line streaming; `| head -1` ends quietly; a full disk
is an error; memory does not grow between 1,000 and 100,000 lines; exit statuses.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ATTEND = os.environ.get("ATTEND_BIN", os.path.join(REPO, "build", "attend"))
TINY = os.path.join(HERE, "data", "tiny-v1.gguf")
# one thread: the outputs do not depend on it, and busy machines make OpenMP waits slow
BASE = [ATTEND, "translate", "-m", TINY, "-t", "1"]


def translate(data, *args, timeout=120):
    p = subprocess.run(BASE + list(args), input=data, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def ok_lines(data, n, *args):
    rc, out, err = translate(data, *args)
    assert rc == 0, f"exit {rc}: {err}"
    assert out.endswith(b"\n") or n == 0, out[-50:]
    lines = out.split(b"\n")[:-1] if out else []
    assert len(lines) == n, f"{len(lines)} output lines for {n} input lines: {out[:300]!r}"
    return lines, err


# --------------------------------------------------------------------------------------

def test_blank_lines():
    lines, err = ok_lines(b"Hallo Welt\n\n   \n\t \r\n\0\0\nWo ist er?\n\n", 7)
    for i in (1, 2, 3, 4, 6):
        assert lines[i] == b"", (i, lines[i])
    alone, _ = ok_lines(b"Hallo Welt\nWo ist er?\n", 2)
    assert [lines[0], lines[5]] == alone, (lines, alone)
    assert err == "", err


def test_only_blank_lines():
    lines, _ = ok_lines(b"\n" * 50 + b" \n" * 50, 100)
    assert all(x == b"" for x in lines)


def test_empty_input():
    ok_lines(b"", 0)


def test_invalid_utf8():
    bad = [b"\xff\xfe\xfd", b"abc \xc3\x28 def", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80 surrogate",
           b"\xc0\xaf overlong", b"\xf8\x88\x80\x80\x80", b"\x80" * 300]
    lines, err = ok_lines(b"\n".join(bad) + b"\n", len(bad))
    assert err == "", err


def test_control_chars_and_nul():
    inp = [b"a\x00b", b"\x01\x02\x03 Hallo \x1b[31m rot \x1b[0m", b"\x7f\x08\x0b\x0c", b"\x00Hallo",
           b"Hallo\x00", b"tab\tin\tline", b"\x1c\x1d\x1e\x1f"]
    lines, err = ok_lines(b"\n".join(inp) + b"\n", len(inp))
    # NUL reads as a space: "a\0b" translates as "a b"
    same, _ = ok_lines(b"a b\n", 1)
    assert lines[0] == same[0], (lines[0], same[0])
    for x in lines:
        assert b"\r" not in x and b"\0" not in x


def test_long_line():
    long = b"Hallo Welt, " * 2000
    lines, err = ok_lines(b"kurz\n" + long + b"\nauch kurz\n", 3)
    warn = [x for x in err.splitlines() if x]
    assert len(warn) == 1 and "line 2" in warn[0] and "longer than" in warn[0], err
    # the cut line translates as its first max_positions tokens would
    assert lines[1], lines


def test_very_long_line():
    lines, err = ok_lines(b"x" * 3_000_000 + b"\n", 1)
    assert len(err.splitlines()) == 1


def test_crlf_and_no_final_newline():
    unix, _ = ok_lines(b"Hallo Welt\nWo ist der Bahnhof?\nja\n", 3)
    dos, _ = ok_lines(b"Hallo Welt\r\nWo ist der Bahnhof?\r\nja\r\n", 3)
    last, _ = ok_lines(b"Hallo Welt\nWo ist der Bahnhof?\nja", 3)
    assert unix == dos == last, (unix, dos, last)
    one, _ = ok_lines(b"ja", 1)
    assert one[0] == unix[2]


def test_argument_text():
    # arguments are lines too: one output line each, even one holding a newline
    p = subprocess.run(BASE + [b"a\xffb", b"", b"two\nlines", b"\x01 Hallo"], capture_output=True)
    assert p.returncode == 0 and p.stdout.count(b"\n") == 4, p


def test_batch_sizes_agree():
    inp = b"".join(x + b"\n" for x in [b"Hallo Welt", b"", b"\xff\xfe", b"Wo ist der Bahnhof?", b" ",
                                       b"x" * 500, b"ja", b"nein", b"a\x00b"] * 7)
    ref, _ = ok_lines(inp, 63)
    for b in ("1", "2", "5", "1000"):
        got, _ = ok_lines(inp, 63, "-b", b)
        assert got == ref, f"batch size {b} changes the output"


def test_streams_line_by_line():
    p = subprocess.Popen(BASE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for line in (b"Hallo Welt\n", b"\n", b"Wo ist der Bahnhof?\n"):
            p.stdin.write(line)
            p.stdin.flush()
            got = []
            t = threading.Thread(target=lambda: got.append(p.stdout.readline()))
            t.start()
            t.join(30)
            assert got and got[0].endswith(b"\n"), f"no output for {line!r} before the next line"
        p.stdin.close()
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_head_closes_pipe():
    """attend translate | head -1: the reader leaves; attend ends without a word."""
    for restore in (True, False):  # SIGPIPE default (a shell), or ignored (EPIPE)
        p = subprocess.Popen(BASE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             restore_signals=restore)

        def feed():
            try:
                for _ in range(200):
                    p.stdin.write(b"Hallo Welt\nja\n" * 500)
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        t = threading.Thread(target=feed)
        t.start()
        first = p.stdout.readline()
        p.stdout.close()
        rc = p.wait(120)
        t.join(30)
        err = p.stderr.read()
        p.stderr.close()
        assert first.endswith(b"\n")
        assert err == b"", f"stderr after the reader left: {err[:300]!r}"
        assert rc in (0, -signal.SIGPIPE, 4), rc


def test_full_disk():
    with open("/dev/full", "wb") as full:
        p = subprocess.run(BASE, input=b"Hallo Welt\nja\n\n", stdout=full, stderr=subprocess.PIPE)
    err = p.stderr.decode()
    assert p.returncode == 4, (p.returncode, err)
    assert err.count("\n") == 1 and "No space left" in err, err


def test_read_error():
    with tempfile.TemporaryDirectory() as d:
        fd = os.open(d, os.O_RDONLY)  # a directory: read() fails with EISDIR
        try:
            p = subprocess.run(BASE, stdin=fd, capture_output=True)
        finally:
            os.close(fd)
    err = p.stderr.decode()
    assert p.returncode == 4 and err.count("\n") == 1 and "reading input" in err, (p.returncode, err)


def test_exit_statuses():
    p = subprocess.run([ATTEND, "translate", "--bogus"], capture_output=True)
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1, p
    p = subprocess.run([ATTEND, "translate", "-m", "/nonexistent.gguf", "x"], capture_output=True)
    assert p.returncode == 3 and p.stderr.count(b"\n") == 1, p
    p = subprocess.run(BASE + ["--max-length", "zero", "x"], capture_output=True)
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1, p
    p = subprocess.run([ATTEND, "frobnicate"], capture_output=True)
    assert p.returncode == 2, p


def test_model_truncated_while_running():
    """The model is memory-mapped: a file cut short under a running attend ends it with the
    model status and one line that says what happened, not "Bus error"."""
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "m.gguf")
        with open(TINY, "rb") as src, open(model, "wb") as dst:
            dst.write(src.read())
        p = subprocess.Popen([ATTEND, "translate", "-m", model, "-t", "1"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(b"Hallo Welt\n")
        p.stdin.flush()
        first = p.stdout.readline()  # translated: the weights have been read once
        os.truncate(model, 4096)
        p.stdin.write(b"Wo ist der Bahnhof?\n")
        p.stdin.close()
        rest, err = p.stdout.read(), p.stderr.read()
        p.wait()
    err = err.decode()
    assert first.endswith(b"\n") and not rest, (first, rest)
    assert p.returncode == 3 and err.count("\n") == 1 and "shrank while in use" in err, (p.returncode, err)


def peak_rss_kb(path, extra=()):
    """Run attend on the file as stdin; (peak RSS of that child in KiB, output lines)."""
    with open(path, "rb") as fin:
        # under ASan (ATTEND_BIN=build-san/attend) freed memory waits in a quarantine
        env = dict(os.environ, ASAN_OPTIONS="quarantine_size_mb=0:detect_leaks=0")
        p = subprocess.Popen(BASE + ["--max-length", "3"] + list(extra), stdin=fin, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        n = 0
        for chunk in iter(lambda: p.stdout.read(1 << 16), b""):
            n += chunk.count(b"\n")
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, p.returncode
    return usage.ru_maxrss, n


def test_memory_does_not_grow():
    words = [b"Hallo Welt.", b"Wo ist der Bahnhof?", b"", b"Ich habe Hunger.", b"ja", b"\xff kaputt",
             b"Das ist ein etwas l\xc3\xa4ngerer Satz mit mehr W\xc3\xb6rtern."]
    with tempfile.TemporaryDirectory() as d:
        small, big = os.path.join(d, "1k"), os.path.join(d, "100k")
        with open(small, "wb") as f:
            f.write(b"".join(words[i % 7] + b"\n" for i in range(1000)))
        with open(big, "wb") as f:
            f.write(b"".join(words[i % 7] + b"\n" for i in range(100_000)))
        rss_small, n_small = peak_rss_kb(small)
        rss_big, n_big = peak_rss_kb(big)
    assert (n_small, n_big) == (1000, 100_000), (n_small, n_big)
    print(f"  peak RSS: {rss_small} KiB for 1,000 lines, {rss_big} KiB for 100,000 lines")
    assert rss_big <= rss_small + 2048, f"memory grows: {rss_small} KiB -> {rss_big} KiB"


TESTS = [v for k, v in sorted(globals().items()) if k.startswith("test_")]


def main():
    if not os.path.exists(ATTEND):
        print(f"{ATTEND} missing: run make first")
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    for t in TESTS:
        try:
            t()
            passed += 1
            print(f"ok   {t.__name__}")
        except Exception:
            failed += 1
            print(f"FAIL {t.__name__}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
