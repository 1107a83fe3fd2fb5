#!/usr/bin/python3
"""ct2_onednn2.py CONV1D_CPU_CC: rewrite CTranslate2's src/ops/conv1d_cpu.cc for oneDNN 2.x
(tools/build_ct2.sh with Debian's libdnnl-dev 2.6.3). oneDNN 3.0 folded the operation
descriptor into the primitive descriptor; 2.x builds convolution_forward::desc(prop, algo,
src, weights, [bias,] dst, strides, dilates, padding_l, padding_r) and then its
primitive_desc(desc, engine). Same arguments, same convolution."""
import sys

HEAD = "conv_pd = std::make_unique<dnnl::convolution_forward::primitive_desc>(\n          "
TAIL = "          padding,\n          padding);\n"


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n")[0], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        s = f.read()
    if s.count(HEAD + "engine,\n") != 2 or s.count(TAIL) != 2:
        print(f"{argv[1]}: not the conv1d_cpu.cc this script knows (already patched?)", file=sys.stderr)
        return 1
    s = s.replace(HEAD + "engine,\n", HEAD + "dnnl::convolution_forward::desc(\n")
    s = s.replace(TAIL, "          padding,\n          padding), engine);\n")
    with open(argv[1], "w") as f:
        f.write(s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
