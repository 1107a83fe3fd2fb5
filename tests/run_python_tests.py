#!/usr/bin/python3
"""Run every tests/test_*.py (each a plain script that prints 'N passed, M failed' last and
exits non-zero on failure) and print the combined count. Usage: run_python_tests.py [NAME...]

Each script's output is echoed indented (all of it when the script fails, else its last
lines), so that only the total, 'python: N passed, M failed', starts a line: make test's
tests/summarize.py adds up the count lines that start a line, and counts each check once.
Runs from any directory: the scripts find the checkout from their own path."""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def indent(text):
    """text with each line indented: a script's own count line is inside the total."""
    return "\n".join("    " + line if line else line for line in text.rstrip("\n").splitlines())


def main():
    names = sys.argv[1:] or sorted(f for f in os.listdir(HERE)
                                   if f.startswith("test_") and f.endswith(".py"))
    passed = failed = 0
    broken = []
    for name in names:
        path = os.path.join(HERE, name if name.endswith(".py") else name + ".py")
        t0 = time.time()
        print(f"== {os.path.basename(path)}", flush=True)
        proc = subprocess.run([sys.executable, path], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")
        out = proc.stdout
        m = None
        for line in out.strip().splitlines()[::-1]:
            m = re.match(r"^(\w+: )?(\d+) passed, (\d+) failed", line.strip())
            if m:
                break
        p, f = (int(m.group(2)), int(m.group(3))) if m else (0, 0)
        ok = proc.returncode == 0 and m is not None and f == 0
        if not ok:
            print(indent(out))
            broken.append(os.path.basename(path))
            f = max(f, 1)
        else:
            print(indent("\n".join(out.strip().splitlines()[-3:])))
        print(f"   ({time.time() - t0:.1f} s)", flush=True)
        passed += p
        failed += f
    if broken:
        print("failing scripts: " + ", ".join(broken))
    print(f"python: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
