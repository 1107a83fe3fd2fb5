#!/usr/bin/python3
"""`attend split`: sentences one per line, an empty line after each input line's sentences.

Run as `/usr/bin/python3 tests/test_split.py` (after `make`; $ATTEND_BIN picks another
binary, e.g. build-san/attend). Checks: hostile lines (1 MB without a stop, 100,000 stops in
a row, invalid UTF-8, NUL bytes, 1 MB of Chinese) finish in bounded time without a crash,
give one empty line per input line and lose no text; TEXT arguments; CRLF; --lang changes
the rules; a line over 16 MiB is cut with a warning; output comes line by line; --help and
the usage errors.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

REPO = os.path.dirname(HERE)
ATTEND = os.environ.get("ATTEND_BIN", os.path.join(REPO, "build", "attend"))
WHITESPACE = b" \t\r\n\v\f\0"


def split(data, *args, timeout=60):
    """Run attend split on data; (exit status, stdout, stderr, seconds)."""
    t0 = time.time()
    p = subprocess.run([ATTEND, "split"] + list(args), input=data, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace"), time.time() - t0


def squeeze(b):
    """b without whitespace: what the sentences must hold, in order."""
    return b.translate(None, WHITESPACE)


def groups(out):
    """The output as one list of sentences per input line."""
    assert out.endswith(b"\n\n") or out == b"", out[-40:]
    lines = out.split(b"\n")[:-1]
    result, cur = [], []
    for line in lines:
        if line == b"":
            result.append(cur)
            cur = []
        else:
            cur.append(line)
    assert cur == [], cur
    return result


def check_hostile(lines, *args, limit=10.0):
    """Split the lines; every check the hostile inputs share. Returns the groups."""
    data = b"\n".join(lines) + b"\n"
    rc, out, err, dt = split(data, *args)
    assert rc == 0, f"exit {rc}: {err}"
    assert dt < limit, f"{dt:.1f} s for {len(data)} bytes"
    g = groups(out)
    assert len(g) == len(lines), f"{len(g)} groups for {len(lines)} lines"
    for line, sentences in zip(lines, g):
        assert squeeze(b"".join(sentences)) == squeeze(line), "text lost or changed"
        for s in sentences:
            assert s == s.strip(WHITESPACE) and b"\0" not in s and b"\r" not in s, s[:60]
    return g


# --------------------------------------------------------------------------------------

def test_plain():
    rc, out, err, _ = split("Er kam am 3. Oktober. Dann ging er.\n\nHallo!\n".encode(), "--lang", "de")
    assert rc == 0 and err == "", err
    assert out == "Er kam am 3. Oktober.\nDann ging er.\n\n\nHallo!\n\n".encode(), out


def test_arguments():
    rc, out, err, _ = split(b"", "--lang", "en", "Hello world. How are you?", "", "Fine.")
    assert rc == 0, err
    assert out == b"Hello world.\nHow are you?\n\n\nFine.\n\n", out
    rc, out, _, _ = split(b"", "--", "--lang")
    assert rc == 0 and out == b"--lang\n\n", out


def test_lang_changes_the_rules():
    text = "Er kam am 3. Oktober.".encode()
    _, de, _, _ = split(text, "--lang", "de")
    _, en, _, _ = split(text, "--lang=en")
    assert groups(de) == [[text]], de
    assert groups(en) == [[b"Er kam am 3.", b"Oktober."]], en
    _, zh, _, _ = split("今天很好。明天见！".encode(), "--lang", "zh_CN")
    assert groups(zh) == [["今天很好。".encode(), "明天见！".encode()]], zh


def test_crlf_and_no_final_newline():
    rc, out, _, _ = split(b"Eins. Zwei.\r\nDrei.")
    assert rc == 0 and out == b"Eins.\nZwei.\n\nDrei.\n\n", out


def test_megabyte_without_stop():
    check_hostile([b"wort " * 200000])


def test_many_stops():
    g = check_hostile([b"a. " * 100000, b"." * 100000, b"A! " * 100000, b"Ab. " * 100000], "--lang", "de")
    assert len(g[2]) == 100000 and len(g[3]) == 100000, (len(g[2]), len(g[3]))


def test_invalid_utf8():
    bad = [b"\xff\xfe\xfd. \xc3\x28 Def.", b"\xe2\x82. \xf0\x9f\x98", b"\xed\xa0\x80. Surrogate",
           b"\xc0\xaf. Overlong", b"\x80" * 300, b"\xff" * (1 << 20)]
    check_hostile(bad)


def test_nul_bytes_and_controls():
    g = check_hostile([b"a\0bc. De\0f.", b"\0\0\0", b"Eins.\0Zwei.", b"\x01\x02. \x1b[31m Rot."])
    assert g[0] == [b"a bc.", b"De f."], g[0]
    assert g[1] == [], g[1]
    assert g[2] == [b"Eins.", b"Zwei."], g[2]


def test_megabyte_of_chinese():
    g = check_hostile(["今天很好。明天见！".encode() * 40000], "--lang", "zh")
    assert len(g[0]) == 80000, len(g[0])


def test_blank_lines():
    g = check_hostile([b"", b"   ", b"\t", b"Satz."])
    assert g == [[], [], [], [b"Satz."]], g


def test_line_over_16_mib_is_cut():
    line = b"Satz. " * (3 << 20)  # 18 MiB
    rc, out, err, dt = split(line + b"\nNoch einer.\n")
    assert rc == 0 and "longer than 16 MiB" in err, err
    g = groups(out)
    assert len(g) == 2 and g[1] == [b"Noch einer."], len(g)
    assert len(g[0]) == (16 << 20) // 6 + 1, len(g[0])


def test_line_by_line():
    p = subprocess.Popen([ATTEND, "split"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        p.stdin.write(b"Eins. Zwei.\n")
        p.stdin.flush()
        assert p.stdout.readline() == b"Eins.\n"
        assert p.stdout.readline() == b"Zwei.\n"
        assert p.stdout.readline() == b"\n"
        p.stdin.close()
        assert p.wait(timeout=10) == 0
    finally:
        p.kill()


def test_help_and_usage_errors():
    p = subprocess.run([ATTEND, "split", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--lang" in p.stdout and "--help" in p.stdout, p.stdout
    for args in (["--frobnicate"], ["-x", "text"], ["--lang"]):
        p = subprocess.run([ATTEND, "split"] + args, capture_output=True, text=True, input="")
        assert p.returncode == 2, (args, p.returncode)
        assert p.stderr.count("\n") == 1 and "attend split" in p.stderr, p.stderr
    p = subprocess.run([ATTEND, "--help"], capture_output=True, text=True)
    assert "split" in p.stdout, p.stdout


def main():
    run = T.Runner()
    if not os.path.exists(ATTEND):
        print(f"{ATTEND} missing: run make first")
        run.failed += 1
        run.finish()
    for name, t in sorted(globals().items()):
        if name.startswith("test_") and callable(t):
            run.check(name, t)
    run.finish()


if __name__ == "__main__":
    main()
