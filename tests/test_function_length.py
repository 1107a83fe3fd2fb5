#!/usr/bin/python3
"""Every function of the library and the CLI reads in one sitting: none longer than LIMIT (80)
lines (signature to closing brace). Scans the tracked C/C++ sources of engine/, weights/,
tokenizer/, model/, cli/ and text/ with a small brace counter that skips comments, strings and
character literals; a definition is a top-level '{' whose preceding text has a parameter list
and is not a struct, enum, union or an initializer ('= {')."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FOLDERS = ("engine", "weights", "tokenizer", "model", "cli", "text")
LIMIT = 80


def strip_code(text):
    """text with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def signature_start(code, lo, hi):
    """Offset of the first line in code[lo:hi] that is neither blank nor a preprocessor line."""
    pos = lo
    for line in code[lo:hi].split("\n"):
        if line.strip() and not line.lstrip().startswith("#"):
            return pos + len(line) - len(line.lstrip())
        pos += len(line) + 1
    return lo


def functions(text):
    """(name, first line, line count) of each function definition in C source text."""
    code = strip_code(text)
    found, depth, head_start, start = [], 0, 0, None
    name = None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[head_start:i]
                if "#" in head:  # preprocessor lines before the definition
                    head = "\n".join(l for l in head.split("\n") if not l.lstrip().startswith("#"))
                m = re.search(r"(\w+)\s*\([^;]*\)\s*$", head, re.S)
                bad = re.search(r"\b(struct|enum|union)\b[^(]*$|=\s*$", head.strip())
                if m and not bad:
                    name = m.group(1)
                    start = signature_start(code, head_start, i)
                else:
                    start = None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if start is not None:
                    first = code.count("\n", 0, start) + 1
                    last = code.count("\n", 0, i) + 1
                    found.append((name, first, last - first + 1))
                start = None
                head_start = i + 1
        elif c == ";" and depth == 0:
            head_start = i + 1
    return found


def sources():
    out = subprocess.run(["git", "-C", REPO, "ls-files", "--"] + list(FOLDERS),
                         capture_output=True, text=True, check=True).stdout.split()
    return [p for p in out if p.endswith((".c", ".cc", ".h"))]


def main():
    passed = failed = 0
    # the scanner itself: a known text gives known lengths
    sample = ('static const int T[] = {1, 2};\nstruct s { int a; };\n'
              'int f(int a,\n      int b) {\n    if (a) { return "}"[0]; }\n    return b; /* } */\n}\n'
              '#define X 1\nstatic void g(void)\n{\n}\n')
    got = functions(sample)
    if got == [("f", 3, 5), ("g", 9, 3)]:
        passed += 1
    else:
        failed += 1
        print(f"FAIL scanner: {got}")
    long_ones = []
    n_funcs = 0
    for path in sources():
        with open(os.path.join(REPO, path), encoding="utf-8", errors="replace") as f:
            for name, line, n in functions(f.read()):
                n_funcs += 1
                if n > LIMIT:
                    long_ones.append(f"{path}:{line}: {name} is {n} lines")
    if n_funcs < 200:  # the scan found the code at all
        failed += 1
        print(f"FAIL only {n_funcs} functions found in {', '.join(FOLDERS)}")
    else:
        passed += 1
    for m in long_ones:
        print(f"FAIL {m} (at most {LIMIT}: split it)")
    failed += len(long_ones)
    passed += n_funcs - len(long_ones)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
