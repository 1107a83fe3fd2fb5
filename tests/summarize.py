#!/usr/bin/python3
"""The closing line of make test: the checks of every part added up, each once.

Usage: summarize.py LOG STATUS. Counts each 'N passed, M failed' line of LOG that starts at
the beginning of its line: a C test binary's, a test script's run on its own (make sanitize),
and run_python_tests.py's total ('python: ...'). run_python_tests.py indents the output of the
scripts it runs, so their own count lines, already in its total, are not added again.

make test-all marks its stages ('== stage NAME', then '== stage NAME: ok' or '== stage NAME:
FAILED (exit N)'): a failed stage none of whose count lines has a failure (a sanitizer
report, a valgrind error, a command that failed before any test printed) counts one failure,
and the failed stages are listed above the closing line. A non-zero STATUS with no failure
counted still counts one, so the line never hides a broken step."""
import re
import sys

LINE = re.compile(r"^(\w+: )?(\d+) passed, (\d+) failed")
STAGE = re.compile(r"^== stage (\S+)(: (ok|FAILED.*))?\s*$")


def summarize(lines, status):
    """(passed, failed, [failed stages]) of the log's lines and make's exit status."""
    passed = failed = 0
    stage, counted, failed_stages = None, 0, []

    def end(name, ok):
        nonlocal failed
        if not ok:
            failed_stages.append(name)
            if counted == 0:
                failed += 1

    for line in lines:
        s = STAGE.match(line)
        if s:
            name, ok = s.group(1), s.group(3)
            if stage is not None and name != stage:  # a stage that never said how it ended
                end(stage, False)
                stage = None
            if ok is None:
                stage, counted = name, 0
            else:
                if stage is None:
                    counted = 0
                end(name, ok == "ok")
                stage = None
            continue
        m = LINE.match(line.rstrip())
        if not m:
            continue
        passed += int(m.group(2))
        failed += int(m.group(3))
        counted += int(m.group(3))
    if stage is not None:  # the log ends inside a stage: it did not finish
        end(stage, False)
    if status and not failed:
        failed = 1
    return passed, failed, failed_stages


def main():
    lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
    status = int(sys.argv[2])
    passed, failed, stages = summarize(lines, status)
    if stages:
        print("failed stages: " + " ".join(stages))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if status or failed else 0)


if __name__ == "__main__":
    main()
