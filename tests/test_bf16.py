#!/usr/bin/python3
"""bf16 compute (--compute bf16, issue 37): the shipped model translating held-out lines close
to f32 on CPUs with AVX-512 BF16, and a clear refusal where the kernel set or the CPU lacks it,
for int8 files, and for unknown compute types."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")


def has_bf16():
    """Does this CPU have avx512_bf16 (and attend's avx512 set)?"""
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return "avx512_bf16" in flags and "avx512" in T.available_isas()


def translate(lines, compute, *extra, env=None):
    p = T.run_attend(["translate", "-m", MODEL, "--compute", compute, "-t", "2", "-b", "32", *extra],
                     "\n".join(lines) + "\n", env=env, timeout=120)
    out = p.stdout.split("\n")[:-1]
    assert len(out) == len(lines), f"{len(out)} lines for {len(lines)}"
    return out


def test_close_to_f32():
    """Held-out Multi30k lines: bf16 gives the f32 line for most of them (measured: 100% of these
    120, 97.6% of 500 test_2016_flickr lines greedy on Zen 4,
    see BENCHMARKS.md), and never an empty one."""
    lines = T.corpus_lines("multi30k", "de", 120, skip=25000)
    f32, bf16 = translate(lines, "f32"), translate(lines, "bf16")
    same = sum(a == b for a, b in zip(f32, bf16)) / len(lines)
    print(f"     identical lines: {same:.1%}")
    assert same >= 0.85, f"only {same:.1%} of bf16 lines equal f32's"
    assert all(b.strip() for b in bf16), "an empty bf16 translation"


def test_really_bf16():
    """The scores move in the last digits: bf16 arithmetic really ran (not f32 again)."""
    line = ["Ein Mann fährt Fahrrad auf der Straße."]
    f32 = translate(line, "f32", "--beam", "2", "--n-best", "1")[0].split(" ||| ")
    bf16 = translate(line, "bf16", "--beam", "2", "--n-best", "1")[0].split(" ||| ")
    assert f32[1] == bf16[1], (f32, bf16)
    assert f32[2] != bf16[2] and abs(float(f32[2]) - float(bf16[2])) < 0.01, (f32, bf16)


def test_auto_is_f32():
    lines = T.corpus_lines("multi30k", "de", 12, skip=25200)
    assert translate(lines, "auto") == translate(lines, "f32")


def test_refused_below_avx512():
    """A kernel set without AVX-512 BF16 (forced with ATTEND_ISA) refuses bf16, saying why."""
    isa = "avx2" if "avx2" in T.available_isas() else "generic"
    p = T.run_attend(["translate", "-m", MODEL, "--compute", "bf16"], "Hallo Welt.\n",
                     env={"ATTEND_ISA": isa}, check=False, timeout=60)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "compute type bf16" in p.stderr and "avx512" in p.stderr, p.stderr
    assert p.stdout == ""


def test_refused_for_int8():
    d = T.tempdir()
    q = os.path.join(d, "q.gguf")
    T.run_attend(["quantize", MODEL, q], timeout=120)
    p = T.run_attend(["translate", "-m", q, "--compute", "bf16"], "Hallo Welt.\n", check=False, timeout=60)
    assert p.returncode == 3 and "int8" in p.stderr, (p.returncode, p.stderr)


def test_unknown_compute():
    p = T.run_attend(["translate", "-m", MODEL, "--compute", "fp8"], "Hallo.\n", check=False, timeout=30)
    assert p.returncode == 2 and "--compute fp8" in p.stderr, (p.returncode, p.stderr)


def test_bench_reports_compute():
    p = T.run_attend(["bench", "-m", MODEL, "--compute", "bf16", "-r", "1", "-b", "2", "--no-bandwidth",
                      "--no-peak", "--json"], timeout=60)
    assert '"compute": "bf16"' in p.stdout, p.stdout


def main():
    r = T.Runner()
    if has_bf16():
        r.check("bf16 close to f32 on held-out lines", test_close_to_f32)
        r.check("bf16 scores differ slightly from f32", test_really_bf16)
        r.check("--compute auto is f32", test_auto_is_f32)
        r.check("bench --compute bf16", test_bench_reports_compute)
    else:
        print("skip bf16 translation: this CPU lacks avx512_bf16")
    r.check("bf16 refused below the avx512 set", test_refused_below_avx512)
    r.check("bf16 refused for an int8 file", test_refused_for_int8)
    r.check("unknown --compute refused", test_unknown_compute)
    r.finish()


if __name__ == "__main__":
    main()
