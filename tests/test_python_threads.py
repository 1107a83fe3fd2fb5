#!/usr/bin/python3
"""Thread pool size follows each call's threads=: a Model.translate with threads=64 must not
leave 63 idle workers that every later job wakes. A one-word translate with threads=2 after a
threads=64 call takes about what it took before (the best of several tries, a generous ratio:
the leftover workers made it ~16x slower), and the process's thread count (/proc/self/task)
comes back down. Run: /usr/bin/python3 tests/test_python_threads.py"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
WORD = "Hallo"
TRIES = 7
RATIO = 4.0  # leftover workers cost ~16x; noise on shared cores stays well below this


def task_count():
    return len(os.listdir("/proc/self/task"))


def best_time(m, threads):
    """the fastest of TRIES one-word translations (the least disturbed by other processes)"""
    best = float("inf")
    for _ in range(TRIES):
        t0 = time.perf_counter()
        m.translate(WORD, threads=threads)
        best = min(best, time.perf_counter() - t0)
    return best


def check_pool_shrinks(m):
    m.translate(WORD, threads=2)  # warm: the model's pages, the 2-thread pool
    before_tasks = task_count()
    before = best_time(m, 2)
    m.translate("Ein Mann fährt mit dem Fahrrad durch die Stadt.", threads=64)
    after_tasks = task_count()
    after = best_time(m, 2)
    print(f"   threads=2: {before * 1e3:.1f} ms before, {after * 1e3:.1f} ms after threads=64; "
          f"{before_tasks} -> {after_tasks} threads")
    assert after_tasks <= before_tasks, f"{after_tasks} threads after threads=64, {before_tasks} before"
    assert after < before * RATIO, f"threads=2 took {after / before:.1f}x as long after threads=64"


def check_threads_come_back_down(m):
    base = task_count()
    m.translate(WORD, threads=16)
    assert task_count() <= base, f"{task_count()} threads after a threads=16 call, {base} before"
    m.translate(WORD, threads=1)
    assert task_count() <= base


def main():
    run = T.Runner()
    with attend.Model(MODEL, threads=2) as m:
        run.check("threads=2 after threads=64: as fast as before, thread count back down",
                  check_pool_shrinks, m)
        run.check("a large threads= call leaves no extra threads behind", check_threads_come_back_down, m)
    run.finish()


if __name__ == "__main__":
    main()
