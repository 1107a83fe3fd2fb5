#!/usr/bin/python3
"""Compare attend's sentence splitter with ICU's (Unicode's sentence break rules, UAX #29,
with the locale's abbreviation suppressions, "@ss=standard") on the case table of
tests/test_split.c. Prints how many cases each gets right; -v lists the cases ICU gets wrong.

    /usr/bin/python3 tools/compare_icu.py [-v]     (needs python3-icu and build/attend)

ICU is only measured here: libattend does not link it (docs/splitting.md says why)."""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTEND = os.environ.get("ATTEND_BIN", os.path.join(REPO, "build", "attend"))
CASE = re.compile(r'^\s*\{(NULL|"[^"]*"), ("(?:[^"\\]|\\.)*"), \{(.*)\}\},\s*$')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def c_string(body):
    """The bytes of a C string literal's body (the escapes the table uses), as text."""
    out, i = bytearray(), 0
    while i < len(body):
        if body[i] != "\\":
            out += body[i].encode()
            i += 1
            continue
        c = body[i + 1]
        if c == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            out.append(int(m.group(0), 16) & 0xFF)
            i += 2 + len(m.group(0))
        else:
            out += {"n": b"\n", "t": b"\t", "0": b"\0"}.get(c, c.encode())
            i += 2
    return out.decode("utf-8")


def cases():
    """(lang or None, text, expected sentences) from tests/test_split.c's table."""
    with open(os.path.join(REPO, "tests", "test_split.c"), encoding="utf-8") as f:
        for line in f:
            m = CASE.match(line)
            if m:
                lang = None if m.group(1) == "NULL" else m.group(1)[1:-1]
                want = [c_string(s) for s in LITERAL.findall(m.group(3))]
                yield lang, c_string(m.group(2)[1:-1]), want


def icu_split(text, lang):
    import icu
    loc = icu.Locale((lang.split("_")[0][:2] if lang else "root") + "@ss=standard")
    bi = icu.BreakIterator.createSentenceInstance(loc)
    bi.setText(text)
    us = icu.UnicodeString(text)  # boundaries are UTF-16 offsets
    out, start = [], 0
    for end in bi:
        s = str(us[start:end]).strip()
        if s:
            out.append(s)
        start = end
    return out


def attend_split(text, lang):
    args = [ATTEND, "split"] + (["--lang", lang] if lang else [])
    out = subprocess.run(args, input=text.encode() + b"\n", capture_output=True, check=True).stdout
    return [s.decode() for s in out.split(b"\n") if s]


def main():
    verbose = "-v" in sys.argv[1:]
    table = list(cases())
    right = {"attend": 0, "icu": 0}
    for lang, text, want in table:
        if attend_split(text, lang) == want:
            right["attend"] += 1
        got = icu_split(text, lang)
        if got == want:
            right["icu"] += 1
        elif verbose:
            print(f"ICU [{lang}] {text!r}\n    want {want}\n    got  {got}")
    n = len(table)
    for k in ("attend", "icu"):
        print(f"{k}: {right[k]} of {n} cases as the table says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
