#!/usr/bin/python3
"""bf16 compute (--compute bf16, issue 37): the shipped model translating held-out lines close
to f32 on CPUs with AVX-512 BF16, and a clear refusal where the kernel set or the CPU lacks it,
for int8 files, and for unknown compute types. Python's Model(compute_type="bfloat16") gives
the CLI's --compute bf16 output (texts and n-best scores) on those CPUs and the same refusal
elsewhere; CTranslate2's other names are accepted ("default", "auto", "float32": f32) or
refused with a ValueError saying what to do (int8: quantize the file). `attend isa` says
whether bf16 compute runs and on what."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")


def has_bf16():
    """Does this CPU have avx512_bf16 (and attend's avx512 set)?"""
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return "avx512_bf16" in flags and "avx512" in T.available_isas()


def translate(lines, compute, *extra, env=None, per_line=1):
    p = T.run_attend(["translate", "-m", MODEL, "--compute", compute, "-t", "2", "-b", "32", *extra],
                     "\n".join(lines) + "\n", env=env, timeout=120)
    out = p.stdout.split("\n")[:-1]
    assert len(out) == per_line * len(lines), f"{len(out)} lines for {len(lines)}"
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


def test_bench_bf16_peak():
    """With --compute bf16 the linear layers are measured against vdpbf16ps's peak (about twice
    the f32 FMA peak's flops), with f32 against the FMA peak and no bf16 probe."""
    def bench(compute):
        p = T.run_attend(["bench", "-m", MODEL, "--compute", compute, "-r", "1", "-b", "2", "-s", "5", "-n", "3",
                          "--no-bandwidth", "--json"], timeout=60)
        return json.loads(p.stdout)
    b, f = bench("bf16"), bench("f32")
    assert b["peak_bf16_gflops"] > 0 and f["peak_bf16_gflops"] == 0, (b, f)
    assert abs(b["peak_fraction"] - b["linear_gops"] / b["peak_bf16_gflops"]) < 1e-3, b
    assert abs(f["peak_fraction"] - f["linear_gops"] / f["peak_f32_gflops"]) < 1e-3, f


def test_python_equals_cli():
    """Model(compute_type="bfloat16") runs the CLI's --compute bf16 arithmetic: the same lines
    (beams, the model's search, and greedy) and the same n-best scores to the printed digit."""
    lines = T.corpus_lines("multi30k", "de", 40, skip=25400)
    with attend.Model(MODEL, threads=2, compute_type="bfloat16") as m:
        assert m.compute_type == "bf16" and "compute bf16" in repr(m)
        assert [r.text for r in m.translate(lines)] == translate(lines, "bf16")
        assert [r.text for r in m.translate(lines, greedy=True)] == translate(lines, "bf16", "--greedy")
        nb = [f"{i} ||| {h.text} ||| {h.normalized_score:.6f}"
              for i, r in enumerate(m.translate(lines[:8], beam=3, n_best=2)) for h in r.nbest]
    assert nb == translate(lines[:8], "bf16", "--beam", "3", "--n-best", "2", per_line=2), nb


def test_python_refused_on_this_cpu():
    """A CPU without AVX-512 BF16: Model(compute_type="bfloat16") is refused as the CLI is."""
    try:
        attend.Model(MODEL, compute_type="bfloat16")
    except attend.AttendError as e:
        assert "compute type bf16" in str(e) and "AVX-512 BF16" in str(e), e
    else:
        raise AssertionError("bfloat16 loaded on a CPU without avx512_bf16")


def test_python_refused_below_avx512():
    """The same refusal in Python when $ATTEND_ISA picks a set without AVX-512 BF16."""
    isa = "avx2" if "avx2" in T.available_isas() else "generic"
    code = ("import attend\ntry:\n attend.Model(%r, compute_type='bfloat16')\nexcept attend.AttendError as e:\n"
            " print('refused:', e)\n" % MODEL)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, ATTEND_ISA=isa, PYTHONPATH=os.path.join(T.REPO, "python")))
    assert p.returncode == 0 and "refused:" in p.stdout and "compute type bf16" in p.stdout, (p.stdout, p.stderr)


def test_python_names():
    """CTranslate2's f32 names load the exact model; its int8, int16 and float16 types, and
    others, are a ValueError saying what to do."""
    line = "Zwei Hunde spielen im Schnee."
    with attend.Model(MODEL, threads=2) as m:
        want = m.translate(line, beam=2)
    for name in ("default", "auto", "float32", "f32"):
        with attend.Model(MODEL, threads=2, compute_type=name) as m:
            got = m.translate(line, beam=2)
            assert m.compute_type == "f32" and (got.text, got.score) == (want.text, want.score), name
    for name, words in (("int8", "attend.quantize"), ("int8_float16", "attend.quantize"), ("int16", "no int16"),
                        ("float16", "float16"), ("fp8", "'bfloat16'")):
        try:
            attend.Model(MODEL, compute_type=name)
        except ValueError as e:
            assert words in str(e) and repr(name) in str(e), e
        else:
            raise AssertionError(f"compute_type={name!r} accepted")


def test_isa_reports_bf16():
    """attend isa: a bf16 line saying whether --compute bf16 runs here and on what; the
    avx2 set says it cannot."""
    line = [l for l in T.run_attend(["isa"]).stdout.splitlines() if l.startswith("bf16: ")]
    assert len(line) == 1, line
    path, why = attend.isa_bf16()  # Python's answer: the same
    if has_bf16():
        assert line[0].startswith("bf16: avx512bf16 (vdpbf16ps") and "--compute bf16" in line[0], line
        assert (path, why) == ("avx512bf16", ""), (path, why)
    else:
        assert line[0].startswith("bf16: unavailable (") and "AVX-512 BF16" in line[0], line
        assert path is None and why in line[0], (path, why)
    if "avx2" in T.available_isas():
        low = T.run_attend(["isa"], env={"ATTEND_ISA": "avx2"}).stdout
        assert "bf16: unavailable (it needs the avx512 kernel set" in low, low


def main():
    r = T.Runner()
    if has_bf16():
        r.check("bf16 close to f32 on held-out lines", test_close_to_f32)
        r.check("bf16 scores differ slightly from f32", test_really_bf16)
        r.check("--compute auto is f32", test_auto_is_f32)
        r.check("bench --compute bf16", test_bench_reports_compute)
        r.check("bench --compute bf16: against vdpbf16ps's peak", test_bench_bf16_peak)
        r.check("Python compute_type='bfloat16' = the CLI's --compute bf16", test_python_equals_cli)
    else:
        print("no bf16 translation: this CPU lacks avx512_bf16; its refusal instead")
        r.check("Python compute_type='bfloat16' refused on this CPU", test_python_refused_on_this_cpu)
    r.check("Python compute_type='bfloat16' refused below the avx512 set", test_python_refused_below_avx512)
    r.check("Python compute_type: CTranslate2's names", test_python_names)
    r.check("attend isa reports bf16 compute", test_isa_reports_bf16)
    r.check("bf16 refused below the avx512 set", test_refused_below_avx512)
    r.check("bf16 refused for an int8 file", test_refused_for_int8)
    r.check("unknown --compute refused", test_unknown_compute)
    r.finish()


if __name__ == "__main__":
    main()
