#!/usr/bin/python3
"""The CTranslate2 comparison tools behave without CTranslate2 (it is built by hand,
tools/build_ct2.sh, never by `make`): each prints --help; asked to convert or run with no
importable ctranslate2, they stop with one clear line and a non-zero status, no traceback;
tools/ct2_onednn2.py rewrites both oneDNN-3 convolution descriptors of a conv1d_cpu.cc into
oneDNN 2's form and refuses a file it does not know (such as one already rewritten).
Run: /usr/bin/python3 tests/test_ct2_tools.py"""
import os
import subprocess
import tempfile
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

TOOLS = ("ct2_convert.py", "ct2_run.py", "ct2_check.py", "bench_ct2.py", "ct2_onednn2.py")

# The shape of CTranslate2 4.8's src/ops/conv1d_cpu.cc where it builds the descriptor
CONV = """      if (bias) {{
        conv_pd = std::make_unique<dnnl::convolution_forward::primitive_desc>(
          engine,
          dnnl::prop_kind::forward_inference,
{bias}          padding,
          padding);
      }} else {{
        conv_pd = std::make_unique<dnnl::convolution_forward::primitive_desc>(
          engine,
          dnnl::prop_kind::forward_inference,
          padding,
          padding);
      }}
"""


def tool(name, *args):
    return subprocess.run([sys.executable, os.path.join(T.TOOLS, name), *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=""))


def helps():
    for name in TOOLS:
        p = tool(name, "--help")
        assert p.returncode == 0 and "usage" in (p.stdout + p.stderr).lower(), (name, p.stderr[-500:])


def ct2_importable():
    return subprocess.run([sys.executable, "-c", "import ctranslate2"], capture_output=True).returncode == 0


def clear_error_without_ct2():
    if ct2_importable():
        return  # installed here: nothing to check
    with tempfile.TemporaryDirectory() as d:
        for args in (("ct2_convert.py", "marian", os.path.join(T.REPO, "models", "de-en.gguf"), d),
                     ("ct2_run.py", "translate", d, "x.gguf", "--ct2", os.path.join(d, "none"))):
            p = tool(*args)
            assert p.returncode != 0, args
            assert "cannot import ctranslate2" in p.stderr and "Traceback" not in p.stderr, p.stderr[-800:]
        assert not os.listdir(d), os.listdir(d)


def rewrites_conv1d():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "conv1d_cpu.cc")
        with open(path, "w") as f:
            f.write(CONV.format(bias="          bias_md,\n"))
        assert tool("ct2_onednn2.py", path).returncode == 0
        s = open(path).read()
        assert s.count("dnnl::convolution_forward::desc(\n") == 2, s
        assert s.count("padding), engine);\n") == 2 and "          engine,\n" not in s, s
        again = tool("ct2_onednn2.py", path)
        assert again.returncode != 0 and "already patched" in again.stderr, again.stderr
        assert open(path).read() == s


def main():
    r = T.Runner()
    r.check("each CTranslate2 tool prints --help", helps)
    r.check("without ctranslate2: one clear error, non-zero exit, nothing written", clear_error_without_ct2)
    r.check("ct2_onednn2.py rewrites both descriptors to oneDNN 2's form, once", rewrites_conv1d)
    r.finish()


if __name__ == "__main__":
    main()
