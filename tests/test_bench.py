#!/usr/bin/python3
"""attend bench reports what it measured, consistently: the tokens it decoded, a triad and a
read-only bandwidth above zero, step fractions that are the step rate over each of them, the
multiply-add peaks and the linear layers' rate against them, and with --beam a beam field and
every beam run to the limit. Timings themselves are not asserted
(BENCHMARKS.md holds them)."""
import json
import os

import testlib as T

TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tiny-v1.gguf")


def bench(*extra):
    p = T.run_attend(["bench", "-m", TINY, "-t", "1", "-s", "5", "-n", "3", "-r", "1", "--json", *extra])
    return json.loads(p.stdout)


def main():
    r = T.Runner()

    def with_bandwidth():
        j = bench("-b", "2")
        assert j["tokens"] == 2 * 3, j
        assert j["triad_gbps"] > 0 and j["read_gbps"] > 0, j
        assert abs(j["bw_fraction"] - j["step_gbps"] / j["triad_gbps"]) < 1e-3, j
        assert abs(j["read_fraction"] - j["step_gbps"] / j["read_gbps"]) < 1e-3, j
    r.check("bench --json: tokens, triad and read-only bandwidth, step fractions", with_bandwidth)

    def without_bandwidth():
        j = bench("--no-bandwidth")
        assert j["tokens"] == 3, j
        assert j["triad_gbps"] == 0 and j["read_gbps"] == 0 and j["read_fraction"] == 0, j
    r.check("bench --no-bandwidth: no bandwidth figures", without_bandwidth)

    def beam():
        j = bench("-b", "2", "--beam", "4", "--no-bandwidth")
        assert j["beam"] == 4 and j["batch"] == 2, j
        # every beam runs to the limit: T steps, T output tokens per sentence
        assert j["tokens"] == 2 * 3 and j["steps"] == 3, j
        g = bench("-b", "2", "--no-bandwidth")
        assert g["beam"] == 1 and g["tokens"] == 2 * 3 and g["steps"] == 3, g
    r.check("bench --beam 4 --json: beam field, T tokens per sentence, T steps", beam)

    def multilingual():
        m2m = os.path.join(os.path.dirname(TINY), "tiny-m2m.gguf")
        for beams in ("1", "3"):
            p = T.run_attend(["bench", "-m", m2m, "-t", "1", "-s", "6", "-n", "4", "-r", "1", "-b", "2",
                              "--beam", beams, "--no-bandwidth", "--no-peak", "--json"])
            j = json.loads(p.stdout)
            assert j["tokens"] == 2 * 4 and j["steps"] == 4, j
    r.check("bench on a multilingual (m2m_100) model: T tokens per sentence", multilingual)

    def peak():
        j = bench("-b", "2", "--no-bandwidth")
        assert j["linear_gop"] > 0 and j["linear_gops"] > 0 and j["decoder_linear_gops"] > 0, j
        if j["isa"] != "generic":  # the probes run with the kernel set's instructions
            assert j["peak_f32_gflops"] > 0 and j["peak_i8_gops"] > 0, j
            peak = j["peak_i8_gops"] if j["dtype"] == "int8" else j["peak_f32_gflops"]
            assert abs(j["peak_fraction"] - j["linear_gops"] / peak) < 1e-3, j
        n = bench("-b", "2", "--no-bandwidth", "--no-peak")
        assert n["peak_f32_gflops"] == 0 and n["peak_i8_gops"] == 0 and n["peak_fraction"] == 0, n
        assert abs(n["linear_gop"] - j["linear_gop"]) < 1e-9, (n, j)  # counted from the shapes
        g = T.run_attend(["bench", "-m", TINY, "-t", "1", "-s", "5", "-n", "3", "-r", "1", "--json", "-b", "2",
                          "--no-bandwidth"], env={"ATTEND_ISA": "generic"})
        assert json.loads(g.stdout)["peak_f32_gflops"] == 0, g.stdout
    r.check("bench --json: multiply-add peaks, the linear layers' rate and fraction; --no-peak", peak)

    def bad_beam():
        p = T.run_attend(["bench", "-m", TINY, "--beam", "0"], check=False)
        assert p.returncode == 2 and "--beam" in p.stderr, (p.returncode, p.stderr)
    r.check("bench --beam 0: usage error", bad_beam)
    r.finish()


if __name__ == "__main__":
    main()
