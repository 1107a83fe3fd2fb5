#!/usr/bin/python3
"""attend bench reports what it measured, consistently: the tokens it decoded, a triad and a
read-only bandwidth above zero, step fractions that are the step rate over each of them, the
multiply-add peaks and the linear layers' rate against them, and with --beam a beam field and
every beam run to the limit. Timings themselves are not asserted
(BENCHMARKS.md holds them). tools/bench.py's NLLB section runs end to end on a tiny shape: its
cached PyTorch decoder gives the M2M-100 reference's greedy tokens, and `--nllb only --md`
replaces just that section of the report."""
import json
import os
import shutil
import subprocess
import sys

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

    def nllb_section():
        sys.path.insert(0, T.TOOLS)
        import torch
        import bench as BT
        work = T.tempdir()
        try:
            # the cached decoder the NLLB section times is the reference's greedy search
            # (every prefix recomputed), </s> banned before the last step
            hf, paths = BT.build_nllb_model(work, "tiny")
            run = BT.M2MTorchRunner(hf)
            src, n = run.sources(3, 7), 6
            run.run(src, n)
            for b in range(src.shape[0]):
                with torch.no_grad():
                    memory, _ = run.m.encode(src[b:b + 1])
                    tgt = [run.m.config["decoder_start_token_id"]]
                    for t in range(n):
                        logits = run.m.decode(torch.tensor([tgt]), memory)[0][0, -1].clone()
                        if t < n - 1:
                            logits[run.eos] = float("-inf")
                        tgt.append(int(logits.argmax()))
                assert tgt[1:] == run.last_tokens[b].tolist(), (tgt, run.last_tokens[b])
            # --nllb only --md: that section replaced in place, the rest kept
            md = os.path.join(work, "B.md")
            with open(md, "w") as f:
                f.write("# Benchmarks\n\n## Results\n\nkept\n\n## NLLB-200-distilled-600M shape (issue 12)\n\n"
                        "old\n\n## Other measurements\n\nkept too\n")
            p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "bench.py"), "--attend", T.ATTEND, "--work", work,
                                "--nllb", "only", "--nllb-shape", "tiny", "--rounds", "1", "--per-round", "1",
                                "--threads", "1", "--no-bandwidth", "--md", md],
                               capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, p.stderr
            text = open(md).read()
            assert text.count("## NLLB-200-distilled-600M shape (issue 12)") == 1 and "\nold\n" not in text, text
            assert text.index("kept\n") < text.index("## NLLB") < text.index("## Other measurements") and "kept too" in text
            for row in ("| attend | int8 | 1 | 1 |", "| attend | f16 | 32 | 1 |", "| PyTorch reference | f32 | 1 | 1 |",
                        "| int8 (", "| warm |", "| cold |", "int8 batch-1 latency ≥ 8x",
                        "peak RSS, int8, batch 1", "load (process start → first token) ≤ 1 s, int8, page cache cold"):
                assert row in text, (row, text)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    r.check("tools/bench.py NLLB section (tiny shape): the PyTorch decoder's tokens, the report section", nllb_section)

    def bad_beam():
        p = T.run_attend(["bench", "-m", TINY, "--beam", "0"], check=False)
        assert p.returncode == 2 and "--beam" in p.stderr, (p.returncode, p.stderr)
    r.check("bench --beam 0: usage error", bad_beam)
    r.finish()


if __name__ == "__main__":
    main()
