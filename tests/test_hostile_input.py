#!/usr/bin/python3
"""Hostile input to `attend translate`: one line in, one line out, whatever the bytes.

Run as `/usr/bin/python3 tests/test_hostile_input.py` (after `make`). Uses the committed
tiny model tests/data/tiny-v1.gguf. Checks: blank and whitespace-only lines give empty
lines; invalid UTF-8, control characters and NUL bytes translate; a line longer than the
model's positions is cut with one warning, and a line of tens of MB is read in bounded
memory; CRLF and a missing final newline; the same output for every batch size; output
after each batch; line-by-line streaming; `| head -1` ends quietly; a full disk is an
error for every command; memory does not grow between 1,000 and 100,000 lines; exit
statuses, --help and unknown options for every command.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

import testlib as T

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
    # split into sentences (the default), the line is cut at its commas: all of it translated
    with tempfile.TemporaryDirectory() as d:
        npz = os.path.join(d, "long.npz")
        lines, err = ok_lines(b"kurz\n" + long + b"\nauch kurz\n", 3, "--dump-attention", npz)
        import numpy as np
        src = np.load(npz)["s1/src_ids"]
    assert err == "", err
    # every "Hallo Welt," went to the model: 3 pieces and </s> for each part, 64 positions a part
    assert len(src) >= 2000 * 3, len(src)
    # one sequence (--split none): cut to the model's positions, one warning
    lines, err = ok_lines(b"kurz\n" + long + b"\nauch kurz\n", 3, "--split", "none")
    warn = [x for x in err.splitlines() if x]
    assert len(warn) == 1 and "line 2" in warn[0] and "longer than" in warn[0], err
    # the cut line translates as its first max_positions tokens would
    assert lines[1], lines


def test_very_long_line():
    lines, err = ok_lines(b"x" * 3_000_000 + b"\n", 1)
    assert len(err.splitlines()) == 1


def huge_line_run(before, size, after, *args):
    """Pipe `before`, a line of `size` bytes and `after` into attend without ever holding the
    line in memory; (exit status, output lines, stderr, peak RSS of attend in KiB)."""
    env = dict(os.environ, ASAN_OPTIONS="quarantine_size_mb=0:detect_leaks=0")
    p = subprocess.Popen(BASE + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def feed():
        try:
            p.stdin.write(before)
            block = "Wo ist der Bahnhof? Hallo Welt, \u00e4\u00f6\u00fc ".encode() * 2048
            for _ in range(size // len(block)):
                p.stdin.write(block)
            p.stdin.write(block[:size % len(block)])
            p.stdin.write(after)
            p.stdin.close()
        except (BrokenPipeError, OSError):
            pass
    got = {}
    t = threading.Thread(target=feed)
    r = threading.Thread(target=lambda: got.update(err=p.stderr.read()))
    t.start()
    r.start()
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    t.join(60)
    r.join(60)
    return os.waitstatus_to_exitcode(status), out.split(b"\n"), got["err"].decode(), usage.ru_maxrss


def test_huge_line_bounded_memory():
    """A line of tens of MB is read, not kept: without splitting its first bytes are
    translated (one warning) and memory stays that of a short line (it was 3.4 GB for 30 MB)."""
    rc, lines, err, rss = huge_line_run(b"kurz\n", 40 << 20, b"\nauch kurz\n", "--split", "none")
    assert rc == 0, (rc, err)
    assert len(lines) == 4 and lines[3] == b"" and lines[1], lines[:4]
    alone, _ = ok_lines(b"kurz\nauch kurz\n", 2)
    assert [lines[0], lines[2]] == alone, (lines, alone)
    assert err == "attend: line 2: longer than the model's 64 positions; translated its first 64 tokens\n", err
    print(f"  peak RSS for a 40 MiB line: {rss} KiB")
    assert rss < 100 * 1024, f"peak RSS {rss} KiB for one long line"
    # the same as the line's first bytes alone: the rest is dropped, not translated
    first, _ = ok_lines(("Wo ist der Bahnhof? Hallo Welt, \u00e4\u00f6\u00fc " * 100).encode() + b"\n", 1,
                        "--split", "none")
    assert lines[1] == first[0], (lines[1], first[0])


def test_huge_line_split():
    """Split into sentences (the default), a line is read up to 1 MiB, every sentence of that
    translated, the rest dropped with one warning; memory stays bounded."""
    rc, lines, err, rss = huge_line_run(b"kurz\n", 8 << 20, b"\nauch kurz\n")
    assert rc == 0, (rc, err)
    assert len(lines) == 4 and lines[3] == b"" and lines[1], lines[:4]
    assert err == "attend: line 2: longer than 1048576 bytes; translated its first 1048576\n", err
    print(f"  peak RSS for an 8 MiB line split into sentences: {rss} KiB")
    assert rss < 400 * 1024, f"peak RSS {rss} KiB for one long line"
    # every sentence of the kept MiB translated, not the model's first 64 tokens of it
    first, _ = ok_lines(b"Wo ist der Bahnhof?\n", 1)
    assert lines[1].startswith(first[0] + b" ") and len(lines[1]) > 100_000, (len(lines[1]), lines[1][:200])
    # the last line, without a newline, cut inside a character
    rc, lines, err, rss = huge_line_run(b"", (20 << 20) + 1, b"", "--split", "none")
    assert rc == 0 and len(lines) == 2 and lines[0] and lines[1] == b"", (rc, lines[:3], err)
    assert err.count("\n") == 1 and "line 1: longer than" in err, err
    assert rss < 100 * 1024, f"peak RSS {rss} KiB for one long last line"


def test_long_line_of_few_tokens():
    """Bytes are cut too, where tokens are few (runs of spaces): still one warning (split
    into sentences, such a line is cut at its spaces instead: no warning)."""
    _, err = ok_lines((b"a" + b" " * 99) * 1000 + b"\nja\n", 2)
    assert err == "", err
    lines, err = ok_lines((b"a" + b" " * 99) * 1000 + b"\nja\n", 2, "--split", "none")
    assert err.count("\n") == 1 and "line 1: longer than 2048 bytes; translated its first 2048" in err, err


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


def test_output_follows_each_batch():
    """Lines already waiting are translated in batches; each batch's lines go out (in input
    order) before the next batch starts, not at the end of the chunk. stderr shares the pipe,
    so -v's "batch of" lines show where each output line was written."""
    inp = b"".join(b"Hallo Welt " * (i + 1) + b"\n" for i in range(6))  # sorted = input order
    p = subprocess.run(BASE + ["-b", "1", "-v"], input=inp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode == 0, p
    seq = ["batch" if x.startswith(b"attend: batch of") else "chunk" if x.startswith(b"attend: ") else "line"
           for x in p.stdout.splitlines()]
    assert seq == ["chunk"] + ["batch", "line"] * 6, seq
    # the longest line first: nothing can go out before its batch, the last
    inp = b"".join(b"Hallo Welt " * (6 - i) + b"\n" for i in range(6))
    p = subprocess.run(BASE + ["-b", "1", "-v"], input=inp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seq = ["batch" if x.startswith(b"attend: batch of") else "chunk" if x.startswith(b"attend: ") else "line"
           for x in p.stdout.splitlines()]
    assert p.returncode == 0 and seq == ["chunk"] + ["batch"] * 6 + ["line"] * 6, seq
    got = [x for x in p.stdout.splitlines() if not x.startswith(b"attend: ")]
    ref, _ = ok_lines(inp, 6)
    assert got == ref, (got, ref)


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


# each command with arguments it would accept
COMMANDS = {"translate": ["-m", TINY, "Hallo"], "info": [TINY], "verify": [TINY], "align": ["-m", TINY, "Hallo"],
            "quantize": [TINY, "out.gguf"], "bench": ["-m", TINY], "isa": []}


def test_help_and_unknown_options():
    """Every command: -h/--help anywhere prints its usage on stdout (exit 0); an unknown
    option anywhere is one line and exit 2."""
    for cmd, good in COMMANDS.items():
        for args in (["--help"], ["-h"], good + ["--help"], ["--bogus", "-h"], good + ["x", "-h"]):
            p = subprocess.run([ATTEND, cmd] + args, capture_output=True, timeout=60)
            assert p.returncode == 0 and p.stdout.startswith(b"usage: attend " + cmd.encode()) and not p.stderr, \
                (cmd, args, p)
        for args in (["--bogus"], good + ["--bogus"], ["--bogus"] + good):
            p = subprocess.run([ATTEND, cmd] + args, capture_output=True, timeout=60)
            want = f"attend {cmd}: unknown option --bogus (see --help)\n".encode()
            assert p.returncode == 2 and p.stderr == want and not p.stdout, (cmd, args, p)
    # "--" ends the options: what follows is a TEXT (or a file name), even "-h"
    p = subprocess.run(BASE + ["--", "-h", "--bogus"], capture_output=True)
    assert p.returncode == 0 and p.stdout.count(b"\n") == 2 and not p.stdout.startswith(b"usage"), p
    p = subprocess.run([ATTEND, "info", "--", "--bogus"], capture_output=True)
    assert p.returncode == 3 and b"--bogus" in p.stderr, p
    # options after TEXT arguments are options
    a = subprocess.run(BASE + ["Hallo Welt", "-b", "1"], capture_output=True)
    b = subprocess.run(BASE + ["-b", "1", "Hallo Welt"], capture_output=True)
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout.count(b"\n") == 1, (a, b)


def test_stdout_write_errors():
    """Standard output on a full disk: every command says so in one line and exits 4."""
    runs = [["translate", "-m", TINY, "-t", "1", "Hallo"], ["info", TINY], ["verify", TINY], ["isa"], ["--help"],
            ["info", "--help"], ["align", "-m", TINY, "-t", "1", "Hallo Welt"],
            ["bench", "-m", TINY, "-t", "1", "-s", "3", "-n", "2", "-r", "1", "--no-bandwidth"]]
    for args in runs:
        with open("/dev/full", "wb") as full:
            p = subprocess.run([ATTEND] + args, stdout=full, stderr=subprocess.PIPE, timeout=120)
        err = p.stderr.decode()
        assert p.returncode == 4, (args, p.returncode, err)
        assert err == "attend: writing standard output: No space left on device\n", (args, err)


def translate_then_truncate(source):
    """attend translate on a copy of source: one line, the file cut to 4 KiB, a second line.
    (first output line, the rest, stderr, exit status)."""
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "m.gguf")
        with open(source, "rb") as src, open(model, "wb") as dst:
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
    return first, rest, err.decode(), p.returncode


def test_model_truncated_while_running():
    """The model is memory-mapped. Loading copies out what translating reads (the matrices
    packed, the vectors), so with tied embeddings a file cut short under a running attend
    changes nothing. Untied input embeddings are read from the mapping, row by row: there the
    cut ends attend with the model status and one line that says what happened, not "Bus
    error"."""
    first, rest, err, rc = translate_then_truncate(TINY)
    want = subprocess.run([ATTEND, "translate", "-m", TINY, "-t", "1"], input=b"Hallo Welt\nWo ist der Bahnhof?\n",
                          capture_output=True, check=True).stdout
    assert rc == 0 and first + rest == want and not err, (rc, first, rest, err)
    with tempfile.TemporaryDirectory() as d:
        untied = T.random_gguf(d, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                               tie_word_embeddings=False, max_length=12)
        first, rest, err, rc = translate_then_truncate(untied)
    assert first.endswith(b"\n") and not rest, (first, rest)
    assert rc == 3 and err.count("\n") == 1 and "shrank while in use" in err, (rc, err)


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
