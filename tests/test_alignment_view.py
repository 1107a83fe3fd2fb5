#!/usr/bin/python3
"""The alignment view a model file records (key attend.alignment.view): the default rule for
files without one, the round trip through `attend align --calibrate -o` (the key written,
everything else byte for byte, translations unchanged), every entry point using the file's
view by default (attend align, translate --alignment, attend explore, the library's
attend_alignment with no view, Python's Result.alignment(), tools/aer.py without --preset)
while an explicit view still wins, and bad values refused when the file loads.
Run: /usr/bin/python3 tests/test_alignment_view.py"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402
from attend import _capi as C  # noqa: E402
import gguf_io as G  # noqa: E402
import test_broken_files as broken_files  # noqa: E402  (parts(): a model as gguf_io.write takes it)

SHIPPED = os.path.join(T.REPO, "models", "de-en.gguf")
TINY = os.path.join(HERE, "data", "tiny-v1.gguf")  # 1 decoder layer, 2 heads
KEY = "attend.alignment.view"
EXIT_USAGE, EXIT_MODEL = 2, 3
# a view no default would choose: every entry point must show that it was read from the file
ODD_VIEW = "3:4"
SOURCES = ["Ein Mann fährt mit dem Fahrrad durch die Stadt.", "Wo ist der Bahnhof?",
           "Zwei Kinder spielen im Schnee.", "Kannst du mir bitte helfen?"]


def write(d, name, lines):
    p = os.path.join(d, name)
    with open(p, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))
    return p


def dev_set(d, n):
    """The first n sentences of the development gold set (BOM dropped), as three files."""
    base = T.data_path("align-deen-bicici")
    src = open(os.path.join(base, "test.de"), encoding="utf-8-sig").read().split("\n")[:n]
    tgt = open(os.path.join(base, "test.en"), encoding="utf-8").read().split("\n")[:n]
    gold = open(os.path.join(base, "de-en.wa"), encoding="utf-8").read().split("\n")[:n]
    return write(d, "gold", gold), write(d, "src", src), write(d, "tgt", tgt)


def record(src, dst, view):
    """attend_record_view through the library: 0 or its ATTEND_E_* status."""
    err = C.err_buffer()
    return C.lib().attend_record_view(src.encode(), dst.encode(), view.encode(), err, C.ERR_LEN), \
        C.decode(err.value)


# --------------------------------------------------------------------------------------

def default_rule():
    """all:avg,grow whatever the depth; attend info and Python show it."""
    want = {1: "all:avg,grow", 2: "all:avg,grow", 5: "all:avg,grow", 12: "all:avg,grow"}
    for L, v in want.items():
        buf = ctypes.create_string_buffer(64)
        C.lib().attend_default_view(L, buf, len(buf))
        assert buf.value.decode() == v, (L, buf.value, v)
    info = T.run_attend(["info", TINY]).stdout
    assert re.search(r"^alignment view +all:avg,grow \(the default", info, re.M), info
    cfg = attend.Model(TINY, threads=1).config
    assert cfg.alignment_view == "all:avg,grow" and cfg.alignment_view_recorded == 0


def shipped_records_its_view():
    """models/de-en.gguf records the view tools/align_recipe.py chose with its trained alignment
    head (tools/add_align_head.py; models/README.md)."""
    info = T.run_attend(["info", SHIPPED]).stdout
    assert re.search(r"^alignment view +1:2,align,shift,words,grow \(recorded in the file\)", info, re.M), info
    assert re.search(r"^alignment head +width 64 on decoder layer 4's cross-attention input", info, re.M), info


def without_head(path, out):
    """A copy of path without its trained alignment head tensors and keys (its view without align)."""
    f = G.GGUFFile(path)
    meta = f.metadata_to_write(skip={KEY, "attend.align_head.layer", "attend.align_head.width"})
    tensors = [(t["name"], f.tensors[t["name"]], t["ggml_type"]) for t in f.tensor_infos
               if not t["name"].startswith("align_head.")]
    G.write(out, meta + [(KEY, G.STRING, "1:2,shift,words,grow")], tensors)
    return out


def calibrate_round_trip(d):
    """--calibrate -o: the table equals tools/aer.py --sweep's (the views with the file's trained
    alignment head included); the copy records the best view and nothing else changes;
    calibrating the copy again replaces the key."""
    gold, src, tgt = dev_set(d, 12)
    out = os.path.join(d, "calibrated.gguf")
    p = T.run_attend(["align", "--calibrate", gold, "--source", src, "--target", tgt, "-m", SHIPPED, "-o", out])
    lines = p.stdout.strip().split("\n")
    best = re.match(r"best: (\S+) \(AER ([0-9.]+);", lines[-2]).groups()
    assert lines[-1] == f"wrote {out}: {KEY} = {best[0]}", lines[-1]
    sweep = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "aer.py"), gold, "-m", SHIPPED, "--source", src,
                            "--target", tgt, "--sweep"], capture_output=True, text=True, check=True).stdout
    assert [l.split() for l in lines[:-2]] == [l.split() for l in sweep.strip().split("\n")[:-1]], \
        (lines[:5], sweep[:200])
    # every layer x head, each layer's avg, all:avg, each also with the file's alignment head, and
    # the head alone; x shift x words x argmax/mutual/grow
    assert len(lines) - 3 == 12 * (2 * (5 * 6 + 1) + 1)
    assert any(",align," in l for l in lines[1:-2]) and any(l.startswith("align,") for l in lines[1:-2])
    # a file without the head (the shipped one, its head taken out): no such views
    plain = T.run_attend(["align", "--calibrate", gold, "--source", src, "--target", tgt, "-m",
                          without_head(SHIPPED, os.path.join(d, "plain.gguf"))]).stdout.strip().split("\n")
    assert len(plain) - 2 == 12 * (5 * 6 + 1) and not any("align" in l for l in plain), plain[:3]
    meta, tens = G.load(out)
    meta0, tens0 = G.load(SHIPPED)
    assert meta[KEY] == best[0]
    skip = {KEY, G.META_CRC_KEY}
    assert [k for k in meta if k not in skip] == [k for k in meta0 if k not in skip]
    for k in meta0:
        if k not in skip:
            assert np.array_equal(np.asarray(meta[k]), np.asarray(meta0[k])), k
    assert list(tens) == list(tens0) and all(np.array_equal(tens[k], tens0[k]) for k in tens)
    info = T.run_attend(["info", out]).stdout
    assert re.search(rf"^alignment view +{re.escape(best[0])} \(recorded in the file\)", info, re.M), info
    T.run_attend(["verify", out])
    text = "\n".join(SOURCES) + "\n"
    assert T.run_attend(["translate", "-m", out], text).stdout == T.run_attend(["translate", "-m", SHIPPED],
                                                                               text).stdout
    # the AER it reports is what aer.py scores for the copy by default
    one = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "aer.py"), gold, "-m", out, "--source", src,
                          "--target", tgt], capture_output=True, text=True, check=True).stdout
    assert one.startswith(f"AER {best[1]} (12 sentences, view {best[0]})"), (one, best)
    # recording again replaces the key (one key, the new value)
    again = os.path.join(d, "again.gguf")
    assert record(out, again, "penultimate:avg") == (0, "")
    f = G.GGUFFile(again)
    assert f.metadata[KEY] == "penultimate:avg" and list(f.metadata).count(KEY) == 1
    print(f"   calibrated on 12 sentences: {best[0]} (AER {best[1]})")


def library_alignment(r, cfg):
    """attend_alignment with a NULL view (the model's own), from a Python Result."""
    cross = np.ascontiguousarray(r.cross, dtype=np.float32)
    res = C.attend_result()
    res.n_src, res.n_tgt = cross.shape[3], cross.shape[2]
    src = (ctypes.c_char_p * len(r._src_raw))(*r._src_raw)
    tgt = (ctypes.c_char_p * len(r._tgt_raw))(*r._tgt_raw)
    res.src_pieces = ctypes.cast(src, C.c_char_pp)
    res.tgt_pieces = ctypes.cast(tgt, C.c_char_pp)
    res.cross = cross.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    err = C.err_buffer()
    ptr = C.lib().attend_alignment(ctypes.byref(res), ctypes.byref(cfg), None, err, C.ERR_LEN)
    assert ptr, err.value
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        C.libc_free(ptr)


def every_entry_point(d):
    """A file recording ODD_VIEW: each entry point aligns with it unless told otherwise."""
    odd = os.path.join(d, "odd.gguf")
    assert record(SHIPPED, odd, ODD_VIEW) == (0, "")
    text = "\n".join(SOURCES) + "\n"
    plain = T.run_attend(["translate", "-m", odd, "--greedy", "--alignment"], text).stdout.split("\n")[:-1]
    named = T.run_attend(["translate", "-m", odd, "--greedy", f"--alignment={ODD_VIEW}"], text).stdout
    assert plain == named.split("\n")[:-1]
    last0 = T.run_attend(["translate", "-m", odd, "--greedy", "--alignment=last:0"], text).stdout
    assert last0.split("\n")[:-1] != plain, "an explicit view must win"
    own = T.run_attend(["translate", "-m", SHIPPED, "--greedy", "--alignment"], text).stdout
    assert own.split("\n")[:-1] != plain, "the shipped model's default must differ from ODD_VIEW's"
    m = attend.Model(odd, threads=1)
    assert m.config.alignment_view == ODD_VIEW and m.config.alignment_view_recorded == 1
    cfg = m.config._to_c()
    for src, line in zip(SOURCES, plain):
        translation, pharaoh = line.split(" ||| ")
        js = json.loads(T.run_attend(["align", "-m", odd, "--greedy", "--format", "json", src]).stdout)
        assert js["view"] == ODD_VIEW and js["alignment"] == pharaoh, (js["view"], js["alignment"], pharaoh)
        r = m.translate(src, beam=1, attention=True)
        assert r.text == translation
        assert r.pharaoh() == pharaoh and r.alignment() == [tuple(x) for x in js["links"]]
        assert r.default_view() == ODD_VIEW
        assert library_alignment(r, cfg) == pharaoh
        assert r.pharaoh("last:0") != pharaoh or src != SOURCES[0]
    page = os.path.join(d, "page.html")
    T.run_attend(["explore", "-m", odd, "--greedy", SOURCES[1], "-o", page])
    data = json.loads(re.search(r'id="attend-data">(.*?)</script>', open(page, encoding="utf-8").read(),
                                re.S).group(1))
    assert data["presets"][0] == ODD_VIEW, data["presets"]
    want = plain[1].split(" ||| ")[1]
    assert " ".join(f"{i}-{j}" for i, j in data["sentences"][0]["align"][ODD_VIEW]) == want
    page_py = json.loads(re.search(r'id="attend-data">(.*?)</script>',
                                   attend.explore(m.translate([SOURCES[1]], beam=1, attention=True)).html,
                                   re.S).group(1))
    assert page_py["presets"] == data["presets"], (page_py["presets"], data["presets"])
    assert page_py["sentences"][0]["align"][ODD_VIEW] == data["sentences"][0]["align"][ODD_VIEW]
    T.run_attend(["explore", "-m", odd, "--preset", "all:avg", SOURCES[1], "-o", page])
    data = json.loads(re.search(r'id="attend-data">(.*?)</script>', open(page, encoding="utf-8").read(),
                                re.S).group(1))
    assert data["presets"][:2] == ["all:avg", ODD_VIEW], data["presets"]
    js = json.loads(T.run_attend(["align", "-m", odd, "--preset", "last:0", "--format", "json",
                                  SOURCES[1]]).stdout)
    assert js["view"] == "last:0"


def refused(d):
    """Bad values of the key: attend refuses the file (exit 3), naming the key; good ones load."""
    _, meta, tens = broken_files.parts(TINY)
    cases = [("1:0", "1 decoder layers"), ("0:2", "head 2 does not exist"), ("nonsense", "expected items"),
             ("", "empty attention view"), (",".join(["last:0"] * 65), "attention view 'last:0,last:0"),
             ("0:0" + ",0:1" * 200, "is not an attention view"), ("penultimate:avg", "no penultimate")]
    for i, (value, why) in enumerate(cases + [(7, "expected string")]):
        path = os.path.join(d, f"bad{i}.gguf")
        G.write(path, meta + [(KEY, G.UINT32 if isinstance(value, int) else G.STRING, value)], tens)
        for cmd in (["info", path], ["translate", "-m", path, "x"], ["align", "-m", path, "x"]):
            p = T.run_attend(cmd, check=False)
            assert p.returncode == EXIT_MODEL and KEY in p.stderr and why in p.stderr, (value, cmd, p.stderr)
    good = os.path.join(d, "good.gguf")
    G.write(good, meta + [(KEY, G.STRING, "0:1,shift")], tens)
    assert "0:1,shift (recorded in the file)" in T.run_attend(["info", good]).stdout
    # the writer refuses what the loader would
    assert record(TINY, os.path.join(d, "no.gguf"), "0:5")[0] == -2  # ATTEND_E_USAGE
    assert record(TINY, os.path.join(d, "no.gguf"), "x:y")[0] == -2  # ATTEND_E_USAGE
    assert not os.path.exists(os.path.join(d, "no.gguf"))


def calibrate_usage(d):
    """--calibrate's bad input: exit 2 with one line."""
    gold, src, tgt = dev_set(d, 3)
    short = write(d, "short", ["a b"])
    badlink = write(d, "badlink", ["0-0 1x2", "0-0", "0-0"])
    base = ["align", "-m", TINY, "--source", src, "--target", tgt]
    for args, why in ((base + ["--calibrate", short], "3 source, 3 target and 1 gold lines"),
                      (base + ["--calibrate", badlink], "'1x2' is not a link"),
                      (["align", "-m", TINY, "--calibrate", gold, "--source", src], "needs --calibrate GOLD"),
                      (base + ["--calibrate", gold, "--preset", "last:0"], "takes no sentence"),
                      (base + ["--calibrate", os.path.join(d, "missing")], "cannot read")):
        p = T.run_attend(args, check=False)
        assert p.returncode == EXIT_USAGE and why in p.stderr and p.stderr.count("\n") == 1, (args, p.stderr)


def align_prefix(d):
    """attend align --prefix and attend explore --prefix: the translation and alignment of
    translate --prefix --alignment (the shipped model's own view); with --target they are
    refused (exit 2, one line)."""
    for src, pre in ((SOURCES[0], "A woman"), (SOURCES[1], "Where")):
        js = json.loads(T.run_attend(["align", "-m", SHIPPED, "--prefix", pre, "--format", "json", src]).stdout)
        line = T.run_attend(["translate", "-m", SHIPPED, "--prefix", pre, "--alignment"], src + "\n").stdout
        text, links = line.rstrip("\n").split(" ||| ")
        assert js["translation"] == text and text.startswith(pre), (js["translation"], text)
        assert js["alignment"] == links, (js["alignment"], links)
        page = os.path.join(d, "prefix.html")
        T.run_attend(["explore", "-m", SHIPPED, "--prefix", pre, src, "-o", page])
        data = json.loads(re.search(r'id="attend-data">(.*?)</script>', open(page, encoding="utf-8").read(),
                                    re.S).group(1))
        one = data["sentences"][0]
        assert one["translation"] == text, (one["translation"], text)
        assert " ".join(f"{i}-{j}" for i, j in one["align"][js["view"]]) == links
    for cmd in ("align", "explore"):
        p = T.run_attend([cmd, "-m", SHIPPED, "--prefix", "A", "--target", "A man.", SOURCES[0]], check=False)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--prefix" in p.stderr, p


def main():
    run = T.Runner()
    d = T.tempdir()
    run.check("the default view for files without one", default_rule)
    run.check("the shipped model records its view", shipped_records_its_view)
    run.check("calibrate, record, read back", calibrate_round_trip, d)
    run.check("every entry point uses the file's view", every_entry_point, d)
    run.check("bad recorded views are refused", refused, d)
    run.check("calibration's usage errors", calibrate_usage, d)
    run.check("attend align and explore --prefix", align_prefix, d)
    shutil.rmtree(d, ignore_errors=True)  # three copies of the shipped model
    run.finish()


if __name__ == "__main__":
    main()
