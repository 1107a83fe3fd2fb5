#!/usr/bin/python3
"""attend bench reports what it measured, consistently: the tokens it decoded, a triad and a
read-only bandwidth above zero, and step fractions that are the step rate over each of them.
Timings themselves are not asserted (BENCHMARKS.md holds them)."""
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
    r.finish()


if __name__ == "__main__":
    main()
