#!/usr/bin/python3
"""Add a trained alignment head (tools/train_align_head.py -o HEAD.npz) to a model file.

  add_align_head.py MODEL HEAD.npz -o OUT [--view VIEW]

OUT is MODEL with four more f32 tensors, align_head.q.weight [width, d_model],
align_head.q.bias [width], align_head.k.weight, align_head.k.bias, the keys
attend.align_head.layer (the decoder layer whose cross-attention input the query reads) and
attend.align_head.width, and attend.alignment.view set to VIEW (default: the head averaged with
the file's recorded view's items, e.g. 1:2,shift,words,grow -> 1:2,align,shift,words,grow;
HEAD.npz's mix, when it names one, wins over the recorded view's items). Every other key and
tensor is copied as it is; the CRC-32s are recomputed (weights/FORMAT.md). The same inputs
give the same bytes.

HEAD.npz's `layer` is train_align_head.py's state index: L..2L-1 is decoder layer (i - L)'s
cross-attention input, the only kind of state the engine reads (0..L-1, a layer's output, is
refused)."""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io as G  # noqa: E402

VIEW_KEY = "attend.alignment.view"
PREFIX = "attend.align_head"


def read_head(path, d_model, n_layers):
    """(layer, width, {tensor name: f32 array}) of a train_align_head.py .npz."""
    z = np.load(path)
    state = int(z["layer"])
    if not n_layers <= state < 2 * n_layers:
        raise SystemExit(f"add_align_head: {path}: state {state} is not a cross-attention input "
                         f"({n_layers}..{2 * n_layers - 1} for {n_layers} decoder layers)")
    qw, kw = z["q_weight"], z["k_weight"]
    width = qw.shape[0]
    if qw.shape != (width, d_model) or kw.shape != (width, d_model) or z["q_bias"].shape != (width,) \
            or z["k_bias"].shape != (width,):
        raise SystemExit(f"add_align_head: {path}: shapes do not fit d_model {d_model}")
    tensors = {"align_head.q.weight": qw, "align_head.q.bias": z["q_bias"],
               "align_head.k.weight": kw, "align_head.k.bias": z["k_bias"]}
    mix = str(z["mix"]) if "mix" in z.files else None
    return state - n_layers, width, {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()}, mix


def default_view(recorded, mix):
    """The recorded view's items (or the head's mix L:H) with `align` after them, its flags kept."""
    parts = [p.strip() for p in (recorded or "shift,words,grow").split(",")]
    items = [p for p in parts if ":" in p]
    flags = [p for p in parts if ":" not in p and p != "align"]
    if mix:
        items = [mix]
    return ",".join(items + ["align"] + flags)


def add_head(model, head, out, view=None):
    f = G.GGUFFile(model)
    meta = f.metadata
    arch = meta["general.architecture"]
    d_model, n_layers = int(meta[f"{arch}.d_model"]), int(meta[f"{arch}.decoder_layers"])
    layer, width, tensors, mix = read_head(head, d_model, n_layers)
    view = view or default_view(meta.get(VIEW_KEY), mix)
    metadata = f.metadata_to_write({VIEW_KEY, PREFIX + ".layer", PREFIX + ".width"})
    metadata += [(VIEW_KEY, G.STRING, view), (PREFIX + ".layer", G.UINT32, layer),
                 (PREFIX + ".width", G.UINT32, width)]
    kept = [(t["name"], f.tensors[t["name"]], t["ggml_type"]) for t in f.tensor_infos
            if not t["name"].startswith("align_head.")]
    G.write(out, metadata, kept + [(k, v, G.GGML_F32) for k, v in tensors.items()])
    return layer, width, view


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("head", help="train_align_head.py -o's .npz")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--view", help="the view to record (default: the recorded view's items with align)")
    a = p.parse_args(argv)
    if os.path.abspath(a.output) == os.path.abspath(a.model):
        p.error("-o must differ from MODEL (the input is read while the output is written)")
    layer, width, view = add_head(a.model, a.head, a.output, a.view)
    print(f"{a.output}: alignment head of width {width} on decoder layer {layer}'s cross-attention input; "
          f"view {view}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
