#!/usr/bin/python3
"""tests/summarize.py, make test's closing line, on log excerpts as make test writes them: a
passing run, failing scripts inside run_python_tests.py (their own count lines are in its
total and must not be added again), a failed stage that printed no count line (it counts
one), the scripts make sanitize runs on their own (counted), make's status with nothing
counted, a log that ends inside a stage. Run: /usr/bin/python3 tests/test_summarize.py"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

SUMMARIZE = os.path.join(T.REPO, "tests", "summarize.py")

# --- log excerpts (make's directory lines name a neutral path) -------------------------------
ALL_OK = """\
== stage all
make[1]: Entering directory '/src/attend'
make[1]: Nothing to be done for 'all'.
make[1]: Leaving directory '/src/attend'
== stage all: ok
"""

TEST_C_OK = """\
== stage test-c
make[1]: Entering directory '/src/attend'
== build/tests/test_kernels
412 passed, 0 failed
== build/tests/test_align
124 passed, 0 failed
make[1]: Leaving directory '/src/attend'
== stage test-c: ok
"""

TEST_PY_OK = """\
== stage test-py
/usr/bin/python3 tests/run_python_tests.py
== test_aer.py
    ok   one-based and side-order flags
    ok   bad input is refused
    ok   sweep over layer x head x shift
    4 passed, 0 failed
   (5.2 s)
== test_layout.py
    ok   only tools/data_paths.py builds the path of the shared corpora
    ok   tools/data_paths.py: ../shared/data or $ATTEND_DATA; a missing file named with where it looked
    4 passed, 0 failed
   (6.5 s)
python: 8 passed, 0 failed
== stage test-py: ok
"""

# run_python_tests.py with two failing scripts: test_bench.py's NLLB section without the
# corpora (its last line its count), and a script that printed its count and then crashed
# (the count line is not its last), as run_python_tests.py echoes them: indented, all of it.
TEST_PY_FAILING = """\
== stage test-py
/usr/bin/python3 tests/run_python_tests.py
== test_bench.py
    ok   bench --json: tokens, triad and read-only bandwidth, step fractions
    ok   bench --no-bandwidth: no bandwidth figures
    ok   bench --beam 4 --json: beam field, T tokens per sentence, T steps
    ok   bench on a multilingual (m2m_100) model: T tokens per sentence
    ok   bench --json: multiply-add peaks, the linear layers' rate and fraction; --no-peak
    FAIL tools/bench.py NLLB section (tiny shape): the PyTorch decoder's tokens, the report section: \
missing corpus /srv-x/shared/data/tatoeba-deu-eng/tatoeba-deu-eng.train.en.gz: looked in /srv-x/shared/data
    5 passed, 1 failed
   (16.1 s)
== test_export.py
    ok   export_f32
    ok   export_f16
    2 passed, 0 failed
    Traceback (most recent call last):
      File "tests/test_export.py", line 890, in <module>
        sys.exit(main())
    OSError: [Errno 28] No space left on device
   (41.0 s)
failing scripts: test_bench.py, test_export.py
python: 7 passed, 2 failed
make[1]: *** [Makefile:148: test-py] Error 1
== stage test-py: FAILED (exit 2)
"""

# make sanitize runs two test scripts on their own: their count lines are counted
SANITIZE_OK = """\
== stage sanitize
make[1]: Entering directory '/src/attend'
== build-san/tests/test_kernels (sanitized)
412 passed, 0 failed
== build-san/attend end to end (sanitized)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 build-san/attend info tests/data/tiny-v1.gguf >/dev/null
ATTEND_BIN=build-san/attend BROKEN_SAMPLE=3 /usr/bin/python3 tests/test_broken_files.py
1625 files: 135 expected any, 1473 expected info, 2 expected ok, 15 expected verify
1630 passed, 0 failed
ATTEND_BIN=build-san/attend /usr/bin/python3 tests/test_hostile_input.py
ok   control characters and broken UTF-8 pass through
21 passed, 0 failed
sanitize: ok
make[1]: Leaving directory '/src/attend'
== stage sanitize: ok
"""

# make sanitize failing inside a standalone script: that script's count says it
SANITIZE_SCRIPT_FAILS = """\
== stage sanitize
ATTEND_BIN=build-san/attend /usr/bin/python3 tests/test_hostile_input.py
FAIL a line of 3,000 letters
20 passed, 1 failed
make[2]: *** [Makefile:211: sanitize-run] Error 1
make[1]: *** [Makefile:164: sanitize] Error 2
== stage sanitize: FAILED (exit 2)
"""

TSAN_OK = """\
== stage tsan
TSAN_OPTIONS="halt_on_error=1 exitcode=66" build-tsan/tests/test_pool
37 passed, 0 failed
tsan: ok
== stage tsan: ok
"""

VALGRIND_OK = """\
== stage valgrind
valgrind -q --error-exitcode=9 --leak-check=full build/attend verify tests/data/tiny-v1.gguf >/dev/null
valgrind: ok
== stage valgrind: ok
"""

# a failed stage that printed no count line
VALGRIND_FAILS = """\
== stage valgrind
valgrind -q --error-exitcode=9 --leak-check=full build/attend verify tests/data/tiny-v1.gguf >/dev/null
==4242== 64 bytes in 1 blocks are definitely lost in loss record 1 of 1
==4242==    at 0x48407B4: malloc (vg_replace_malloc.c:381)
make[1]: *** [Makefile:224: valgrind] Error 9
== stage valgrind: FAILED (exit 2)
"""

FUZZ_OK = """\
== stage fuzz-smoke
== fuzz_gguf replays tests/data/fuzz/gguf
Done 30000 runs in 11 second(s)
== stage fuzz-smoke: ok
"""

PASSED_C = 412 + 124
PASSED_SAN = 412 + 1630 + 21


def summarize(log, status):
    """summarize.py's (exit status, its lines) on log and make's status."""
    d = T.tempdir()
    path = os.path.join(d, "test.log")
    with open(path, "w", encoding="utf-8") as f:
        f.write(log)
    p = subprocess.run([T.PYTHON, SUMMARIZE, path, str(status)], capture_output=True, text=True)
    assert not p.stderr, p.stderr
    return p.returncode, p.stdout.strip().splitlines()


def passing_run():
    log = ALL_OK + TEST_C_OK + TEST_PY_OK + SANITIZE_OK + TSAN_OK + VALGRIND_OK + FUZZ_OK + \
        "test-all: every stage passed\n"
    rc, out = summarize(log, 0)
    assert out == [f"{PASSED_C + 8 + PASSED_SAN + 37} passed, 0 failed"], out
    assert rc == 0


def failing_scripts():
    """The scripts' own count lines (one the last line, one above a traceback) are inside
    run_python_tests.py's total: 7 passed, 2 failed, counted once."""
    log = ALL_OK + TEST_C_OK + TEST_PY_FAILING + TSAN_OK + "test-all: failed stages: test-py\n"
    rc, out = summarize(log, 2)
    assert out == ["failed stages: test-py", f"{PASSED_C + 7 + 37} passed, 2 failed"], out
    assert rc == 1


def failed_stage_without_count():
    """valgrind printed no count: its failure counts one, on top of test-py's two."""
    log = ALL_OK + TEST_C_OK + TEST_PY_FAILING + VALGRIND_FAILS + FUZZ_OK + \
        "test-all: failed stages: test-py valgrind\n"
    rc, out = summarize(log, 2)
    assert out == ["failed stages: test-py valgrind", f"{PASSED_C + 7} passed, 3 failed"], out
    assert rc == 1
    rc, out = summarize(ALL_OK + TEST_C_OK + VALGRIND_FAILS, 2)
    assert out == ["failed stages: valgrind", f"{PASSED_C} passed, 1 failed"], out


def sanitize_scripts():
    """make sanitize's standalone scripts are counted; a failing one's count is the stage's."""
    rc, out = summarize(SANITIZE_OK, 0)
    assert out == [f"{PASSED_SAN} passed, 0 failed"] and rc == 0, out
    rc, out = summarize(SANITIZE_SCRIPT_FAILS + VALGRIND_OK, 2)
    assert out == ["failed stages: sanitize", "20 passed, 1 failed"] and rc == 1, out


def status_alone():
    """make failed before any stage (make deps): one failure; a log cut inside a stage: that
    stage failed."""
    rc, out = summarize("missing packages; run: sudo apt-get install -y valgrind\n", 2)
    assert out == ["0 passed, 1 failed"] and rc == 1, out
    rc, out = summarize(ALL_OK + "== stage test-c\n== build/tests/test_kernels\n", 2)
    assert out == ["failed stages: test-c", "0 passed, 1 failed"] and rc == 1, out


def main():
    r = T.Runner()
    r.check("a passing run: C tests, run_python_tests.py's total, sanitize's scripts, each once", passing_run)
    r.check("failing scripts: their own count lines are inside run_python_tests.py's total", failing_scripts)
    r.check("a failed stage with no count line counts one failure", failed_stage_without_count)
    r.check("sanitize's scripts run on their own are counted", sanitize_scripts)
    r.check("make's status alone, a log cut inside a stage", status_alone)
    r.finish()


if __name__ == "__main__":
    main()
