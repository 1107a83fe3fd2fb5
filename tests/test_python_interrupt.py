#!/usr/bin/python3
"""Ctrl-C during Model.translate: a real Python process translating a long list with the
package (batches of 2 on the shipped model, verbose=True so that it says when a batch is
done) gets SIGINT a little after its first batch. It must raise KeyboardInterrupt (not AttendError)
within a few seconds, print no "Exception ignored" traceback, and then translate the next
line as a fresh Model would. Three tries (within one long batch: test_python_interrupt_batch.py).
Run: /usr/bin/python3 tests/test_python_interrupt.py"""
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

PYDIR = os.path.join(T.REPO, "python")
MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
LIBRARY = os.path.join(T.REPO, "build", "libattend.so")
# seconds from the first batch to the signal: a batch takes about 0.07 s, so the signal
# mostly comes while the library works with the GIL released (the case that used to fail)
PAUSES = (0.2, 0.5, 1.0)
LIMIT = 10.0  # seconds from the signal to KeyboardInterrupt

# the child: translate 2,000 lines in batches of 2 (minutes of work), report how it ended,
# then translate one more line and compare it with the same line translated before
CHILD = r"""
import signal, sys, time
# a shell that starts a job in the background (make test &) ignores SIGINT for it, and the
# ignore is inherited; put back Python's own handler, as an interactive session has it
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, sys.argv[1])
import attend
m = attend.Model(sys.argv[2], threads=1)
probe = "Wo ist der Bahnhof?"
fresh = m.translate(probe).text
lines = ["Ein Mann fährt mit dem Fahrrad durch die Stadt %d." % i for i in range(2000)]
print("READY", flush=True)
try:
    m.translate(lines, batch_size=2, verbose=True)
    print("FINISHED", flush=True)
except KeyboardInterrupt:
    print("KI", flush=True)
except BaseException as e:
    print("OTHER", type(e).__name__, e, flush=True)
again = m.translate(probe).text
print("AGAIN", again == fresh, again, flush=True)
"""


def read_line(stream, deadline):
    """One line of a pipe, or None when the deadline passes first."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([stream], [], [], left)[0]:
        return None
    return stream.readline()


def interrupt_once(pause):
    """Start the child, wait for its first batch (its verbose line on stderr) and pause
    seconds more, send SIGINT;
    KeyboardInterrupt within LIMIT seconds, no 'Exception ignored', the Model still right."""
    env = dict(os.environ, ATTEND_LIBRARY=LIBRARY)
    p = subprocess.Popen([T.PYTHON, "-c", CHILD, PYDIR, MODEL], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    err_seen = []
    try:
        deadline = time.monotonic() + 120
        assert read_line(p.stdout, deadline) == "READY\n", "the child did not start"
        while True:
            line = read_line(p.stderr, deadline)
            assert line, "no batch reported: " + "".join(err_seen)
            err_seen.append(line)
            if line.startswith("attend: batch of"):
                break
        time.sleep(pause)
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        first = read_line(p.stdout, t0 + LIMIT)
        waited = time.monotonic() - t0
        assert first is not None, f"no answer {LIMIT:.0f} s after SIGINT (still translating)"
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = "".join(err_seen) + err
    assert first == "KI\n", f"expected KeyboardInterrupt, the child said {first.strip()!r}; stderr: {err[-2000:]}"
    assert "Exception ignored" not in err and "Traceback" not in err, err[-2000:]
    assert out.startswith("AGAIN True "), f"the model after the interrupt: {out!r}; stderr: {err[-2000:]}"
    assert p.returncode == 0, (p.returncode, err[-2000:])
    print(f"   KeyboardInterrupt {waited:.2f} s after SIGINT")


def main():
    run = T.Runner()
    for pause in PAUSES:
        run.check(f"SIGINT {pause} s into translate -> KeyboardInterrupt, model usable",
                  interrupt_once, pause)
    run.finish()


if __name__ == "__main__":
    main()
