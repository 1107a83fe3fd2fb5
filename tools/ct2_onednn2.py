#!/usr/bin/python3
"""ct2_onednn2.py CONV1D_CPU_CC: rewrite CTranslate2's src/ops/conv1d_cpu.cc for oneDNN 2.x
(tools/build_ct2.sh with Debian's libdnnl-dev 2.6.3). oneDNN 3.0 folded the operation
descriptor into the primitive descriptor; 2.x builds convolution_forward::desc(prop, algo,
src, weights, [bias,] dst, strides, dilates, padding_l, padding_r) and then its
primitive_desc(desc, engine). Same arguments, same convolution."""
import argparse
import sys

HEAD = "conv_pd = std::make_unique<dnnl::convolution_forward::primitive_desc>(\n          "
TAIL = "          padding,\n          padding);\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("file", help="CTranslate2's src/ops/conv1d_cpu.cc, rewritten in place")
    a = p.parse_args(argv)
    try:
        with open(a.file) as f:
            s = f.read()
    except OSError as e:
        p.error(str(e))
    if s.count(HEAD + "engine,\n") != 2 or s.count(TAIL) != 2:
        print(f"{a.file}: not the conv1d_cpu.cc this script knows (already patched?)", file=sys.stderr)
        return 1
    s = s.replace(HEAD + "engine,\n", HEAD + "dnnl::convolution_forward::desc(\n")
    s = s.replace(TAIL, "          padding,\n          padding), engine);\n")
    with open(a.file, "w") as f:
        f.write(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
