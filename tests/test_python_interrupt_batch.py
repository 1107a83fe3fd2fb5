#!/usr/bin/python3
"""Ctrl-C inside one long batch: a Python process translating 150 short lines as a single
batch, each held to 250 tokens by min_length (half a minute of decoder steps on the shipped
model, one thread), gets SIGINT 1 s after the call started. The library reads its stop flag before each decoder step (attend_params.stop),
so KeyboardInterrupt must come within about a second, not when the batch ends; the Model
then translates as before. Also checked on sampling, on a batch of 1,000 longer lines whose
encoder alone takes seconds (the flag is read before each encoder layer too: before, the
interrupt came 9-13 s late), and with the call in a thread of its own (no Ctrl-C handling
there: the call simply finishes). Run:
/usr/bin/python3 tests/test_python_interrupt_batch.py"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
from test_python_interrupt import read_line  # noqa: E402

PYDIR = os.path.join(T.REPO, "python")
MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
LIBRARY = os.path.join(T.REPO, "build", "libattend.so")
PAUSE = 1.0  # seconds into the batch
LIMIT = 1.5  # seconds from the signal to KeyboardInterrupt (the batch ends after minutes)

CHILD = r"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as an interactive session has it
sys.path.insert(0, sys.argv[1])
import attend
m = attend.Model(sys.argv[2], threads=1)
probe = "Wo ist der Bahnhof?"
fresh = m.translate(probe).text
lines = ["Hallo Welt %d." % i for i in range(150)]
# min_length keeps every sentence decoding for 250 steps: about a minute of steps
options = dict(sample=True, seed=1) if sys.argv[3] == "sample" else dict(beam=2)
options.update(min_length=250, max_length=256)
if sys.argv[3] == "encoder":  # the model's own search; seconds in the encoder first
    lines = ["Ein Mann fährt mit dem Fahrrad durch die Stadt %d." % i for i in range(1000)]
    options = {}
print("READY", flush=True)
try:
    m.translate(lines, batch_size=len(lines), **options)
    print("FINISHED", flush=True)
except KeyboardInterrupt:
    print("KI", flush=True)
except BaseException as e:
    print("OTHER", type(e).__name__, e, flush=True)
again = m.translate(probe).text
print("AGAIN", again == fresh, again, flush=True)
"""


def interrupt_in_batch(how):
    env = dict(os.environ, ATTEND_LIBRARY=LIBRARY)
    p = subprocess.Popen([T.PYTHON, "-c", CHILD, PYDIR, MODEL, how], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert read_line(p.stdout, time.monotonic() + 60) == "READY\n", "the child did not start"
        time.sleep(PAUSE)
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        first = read_line(p.stdout, t0 + 30)
        waited = time.monotonic() - t0
        assert first is not None, "no answer 30 s after SIGINT (still translating)"
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print(f"   {how}: KeyboardInterrupt {waited:.2f} s after SIGINT")
    assert first == "KI\n", f"expected KeyboardInterrupt, the child said {first.strip()!r}; {err[-2000:]}"
    assert waited < LIMIT, f"KeyboardInterrupt {waited:.2f} s after SIGINT (limit {LIMIT} s)"
    assert "Exception ignored" not in err and "Traceback" not in err, err[-2000:]
    assert out.startswith("AGAIN True "), f"the model after the interrupt: {out!r}; {err[-2000:]}"


def stop_flag_unset_finishes():
    """a call off the main thread has no stop flag set: it finishes with the same output"""
    import threading
    sys.path.insert(0, PYDIR)
    import attend
    with attend.Model(MODEL, threads=1) as m:
        lines = ["Ich habe Hunger.", "Wo ist der Bahnhof?"]
        here = [r.text for r in m.translate(lines, batch_size=2)]
        there = []
        t = threading.Thread(target=lambda: there.extend(r.text for r in m.translate(lines, batch_size=2)))
        t.start()
        t.join(60)
        assert there == here, (there, here)


def main():
    run = T.Runner()
    run.check("SIGINT 1 s into a 150-line batch (beams) -> KeyboardInterrupt within a step",
              interrupt_in_batch, "beam")
    run.check("SIGINT 1 s into a 150-line batch (sampling) -> KeyboardInterrupt within a step",
              interrupt_in_batch, "sample")
    run.check("SIGINT 1 s into a batch of 1,000 (its encoder) -> KeyboardInterrupt within a layer",
              interrupt_in_batch, "encoder")
    run.check("a call in another thread finishes as in the main thread", stop_flag_unset_finishes)
    run.finish()


if __name__ == "__main__":
    main()
