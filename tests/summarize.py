#!/usr/bin/python3
"""The closing line of make test: the checks of every part added up.

Usage: summarize.py LOG STATUS. Counts each 'N passed, M failed' line of LOG once: a C
test binary's, a test script's run on its own (make sanitize), and run_python_tests.py's
total ('python: ...'); the per-script lines that run_python_tests.py repeats (each followed
by its '   (T s)' timing line) are inside that total and skipped. A non-zero STATUS with no
failed check still counts one failure, so the line never hides a broken step."""
import re
import sys

LINE = re.compile(r"^(\w+: )?(\d+) passed, (\d+) failed")
TIMING = re.compile(r"^\s+\(\d+(\.\d+)? s\)$")


def main():
    lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
    status = int(sys.argv[2])
    passed = failed = 0
    for i, line in enumerate(lines):
        m = LINE.match(line.strip())
        if not m or (i + 1 < len(lines) and TIMING.match(lines[i + 1])):
            continue
        passed += int(m.group(2))
        failed += int(m.group(3))
    if status and not failed:
        failed = 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if status or failed else 0)


if __name__ == "__main__":
    main()
