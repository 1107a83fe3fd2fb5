#!/usr/bin/python3
"""Tests of the Python package in python/attend (ctypes over build/libattend.so).

Run as `/usr/bin/python3 tests/test_python.py`. The ctypes mirrors are checked against the
C compiler; on the shipped model models/de-en.gguf the package's results are compared with
the CLI's (`attend translate --dump-attention`, `attend align --target`, `--alignment`):
text, scores, ids, pieces and every attention matrix bit for bit. Then errors, blank lines,
threads (and that the GIL is released), the Jupyter HTML, plotting, export, and an
offline pip install into a temporary directory."""
import ctypes
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

PYDIR = os.path.join(T.REPO, "python")
sys.path.insert(0, PYDIR)
import attend  # noqa: E402
from attend import _capi as C  # noqa: E402
from attend import _speech as S  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
LIBRARY = os.path.join(T.REPO, "build", "libattend.so")
SENTS = ["Ich habe Hunger.", "", "Wo ist der Bahnhof?",
         "Ein Mann fährt mit dem Fahrrad durch die Stadt.", "Zwei Kinder spielen im Schnee."]
TMP = T.tempdir()
M = None  # the shipped model, loaded once


def model():
    global M
    if M is None:
        M = attend.Model(MODEL, threads=1)
    return M


def cli_args(cmd, *rest):
    return [cmd, "-m", MODEL, "-t", "1", *rest]


def run_cli(cmd, *rest, input_text=None):
    return T.run_attend(cli_args(cmd, *rest), input_text=input_text, timeout=120).stdout


def npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def same_as_dump(r, z, i, logits=False):
    """Result r equals sentence i of an --dump-attention archive, bit for bit."""
    k = f"s{i}/"
    assert r.text == str(z[k + "text"][0]), (r.text, z[k + "text"])
    assert np.array_equal(r.src_ids, z[k + "src_ids"]) and r.src_ids.dtype == np.int32
    assert np.array_equal(r.tgt_ids, z[k + "tgt_ids"])
    assert r.src_tokens == [str(x) for x in z[k + "src_pieces"]]
    assert r.tgt_tokens == [str(x) for x in z[k + "tgt_pieces"]]
    assert np.float32(r.score) == z[k + "score"][0], (r.score, z[k + "score"])
    assert np.array_equal(r.logprob, z[k + "logprob"]) and r.logprob.dtype == np.float32
    for name in ("enc_self", "dec_self", "cross"):
        a = getattr(r, name)
        assert a.dtype == np.float32 and a.flags.c_contiguous
        layers = sorted(int(x.rsplit("/l", 1)[1]) for x in z if x.startswith(f"{k}{name}/"))
        assert layers == list(range(a.shape[0])), (name, layers, a.shape)
        for layer in layers:
            assert np.array_equal(a[layer], z[f"{k}{name}/l{layer}"]), (name, layer)
    if logits:
        assert np.array_equal(r.logits, z[k + "logits"])


# ---------------------------------------------------------------------------------------
# The ctypes mirrors against the C compiler

C_TYPES = {  # what _Generic names, for each ctypes field type
    ctypes.c_int: "int", ctypes.c_float: "float", ctypes.c_longlong: "long long",
    ctypes.c_ulonglong: "unsigned long long", ctypes.c_char_p: "char*", ctypes.c_void_p: "void*",
    C.c_int_p: "int*", C.c_float_p: "float*", C.c_char_pp: "char**",
    ctypes.POINTER(C.attend_hypothesis): "attend_hypothesis*", C.ON_BATCH: "on_batch",
    ctypes.POINTER(C.attend_stats): "attend_stats*", ctypes.c_double: "double",
    ctypes.c_int * C.ATTEND_VIEW_MAX: "int*",  # an array decays to a pointer in _Generic
    ctypes.POINTER(C.c_int_p): "int**",
    ctypes.POINTER(C.attend_sentence): "attend_sentence*", C.ON_TOKEN: "on_token",
    ctypes.POINTER(S.attend_segment): "attend_segment*", ctypes.POINTER(S.attend_word): "attend_word*",
}
# every struct the package mirrors: the translation API's and the speech API's
MIRRORS = {**C.STRUCTS, **{c.__name__: c for c in (S.attend_speech_params, S.attend_segment, S.attend_word,
                                                    S.attend_transcript)}}


def struct_mirrors_match_c():
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "attend.h"', '#include "align.h"',
             'typedef int (*on_batch_fn)(void *, const int *, int);',
             'typedef void (*on_token_fn)(void *, int, int, int, float);',
             '#define KIND(x) _Generic((x), int: "int", float: "float", long long: "long long", \\',
             '  unsigned long long: "unsigned long long", char *: "char*", const char *: "char*", \\',
             '  void *: "void*", int *: "int*", float *: "float*", char **: "char**", \\',
             '  attend_hypothesis *: "attend_hypothesis*", on_batch_fn: "on_batch", \\',
             '  on_token_fn: "on_token", \\',
             '  unsigned long: "unsigned long long", /* size_t: ctypes has one type for both */ \\',
             '  attend_sentence *: "attend_sentence*", \\',
             '  attend_stats *: "attend_stats*", double: "double", const int *: "int*", \\',
             '  attend_segment *: "attend_segment*", attend_word *: "attend_word*", const float *: "float*", \\',
             '  const volatile int *: "int*", \\',
             '  const char *const *: "char**", const int *const *: "int**", default: "other")',
             "int main(void) {"]
    expect = []
    for name, cls in MIRRORS.items():
        lines.append(f'  printf("{name} %zu\\n", sizeof({name}));')
        expect.append(f"{name} {ctypes.sizeof(cls)}")
        for field, ftype in cls._fields_:
            lines.append(f'  printf("{name}.{field} %zu %zu %s\\n", offsetof({name}, {field}), '
                         f'sizeof((({name} *)0)->{field}), KIND((({name} *)0)->{field}));')
            expect.append(f"{name}.{field} {getattr(cls, field).offset} {ctypes.sizeof(ftype)} "
                          f"{C_TYPES[ftype]}")
    for const in ("ATTEND_SPLIT_SENTENCES", "ATTEND_SPLIT_NONE", "ATTEND_VIEW_MAX", "ATTEND_EARLY_MODEL", "ATTEND_EARLY_FALSE", "ATTEND_EARLY_TRUE",
                  "ATTEND_EARLY_NEVER", "ATTEND_LAYER_LAST", "ATTEND_LAYER_PENULTIMATE",
                  "ATTEND_LAYER_ALL", "ATTEND_HEAD_AVG"):
        lines.append(f'  printf("{const} %d\\n", (int){const});')
        expect.append(f"{const} {getattr(C, const)}")
    lines.append('  printf("view key %s\\n", ATTEND_ALIGNMENT_VIEW_KEY);')
    expect.append(f"view key {C.ATTEND_ALIGNMENT_VIEW_KEY}")
    lines.append('  printf("abi %d\\n", ATTEND_ABI);')
    expect.append(f"abi {C.ABI}")
    lines.append('  printf("version %s\\n", ATTEND_VERSION);')
    expect.append(f"version {attend.__version__}")
    lines += ["  return 0;", "}"]
    src, exe = os.path.join(TMP, "mirrors.c"), os.path.join(TMP, "mirrors")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-I", os.path.join(T.REPO, "model"), "-o",
                    exe, src], check=True, capture_output=True, text=True)
    got = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines()
    bad = [f"C: {g}  Python: {e}" for g, e in zip(got, expect) if g != e]
    assert len(got) == len(expect) and not bad, "\n".join(bad)
    # and the mirrors have every field the headers declare, in order (a field added in
    # padding would change no offset and no size)
    for name, cls in MIRRORS.items():
        want = header_fields(name)
        assert [f for f, _ in cls._fields_] == want, (name, want)
    assert [f.name for f in dataclasses.fields(attend.Config)] == header_fields("attend_config")


def header_fields(struct):
    """The field names of `typedef struct [tag] {...} struct;` in model/attend.h or align.h."""
    text = ""
    for h in ("attend.h", "align.h"):
        with open(os.path.join(T.REPO, "model", h)) as f:
            text += f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    m = re.search(r"typedef\s+struct\s*(?:\w+\s*)?\{([^{}]*)\}\s*" + struct + r"\s*;", text)
    assert m, f"typedef struct {{...}} {struct}; not found in the headers"
    names = []
    for decl in m.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fp = re.match(r"[^(]*\(\s*\*\s*(\w+)\s*\)\s*\(", decl)  # a function pointer
        if fp:
            names.append(fp.group(1))
            continue
        for part in decl.split(","):
            names.append(re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", part).group(1))
    return names


def library_loaded_with_cdll():
    lib = C.lib()
    assert isinstance(lib, ctypes.CDLL) and not isinstance(lib, ctypes.PyDLL)
    assert lib._func_flags_ & ctypes._FUNCFLAG_PYTHONAPI == 0  # calls release the GIL
    assert os.path.samefile(attend.library_path(), LIBRARY), attend.library_path()
    assert attend.library_version() == attend.__version__
    assert attend.isa() in attend.isa_available().split() or attend.isa() == "generic"
    assert attend.default_threads() >= 1


# ---------------------------------------------------------------------------------------
# Results against the CLI


def config_matches_info():
    c = model().config
    info = T.run_attend(["info", MODEL], timeout=60).stdout
    assert c.dtype == "f16" and f"dtype               {c.dtype}" in info
    assert f"activation          {c.activation}" in info and f"d_model             {c.d_model}" in info
    assert (f"encoder             {c.encoder_layers} layers, {c.encoder_heads} heads" in info and
            f"decoder             {c.decoder_layers} layers, {c.decoder_heads} heads" in info), info
    assert f"{c.file_bytes} bytes" in info
    assert c.as_dict()["vocab_size"] == c.vocab_size and f"source vocabulary   {c.vocab_size}" in info
    assert ("beam search, %d beams" % c.default_beams in info) if c.default_beams > 1 else ("greedy" in info)


def _compare_translate(cli_opts, py_opts, logits=False):
    dump = os.path.join(TMP, "cli.npz")
    extra = ["--dump-logits"] if logits else []
    out = run_cli("translate", *cli_opts, "--dump-attention", dump, *extra, "--", *SENTS).splitlines()
    z = npz(dump)
    rs = model().translate(SENTS, attention=True, logits=logits, **py_opts)
    assert isinstance(rs, list) and len(rs) == len(SENTS) == len(out)
    for i, (r, line) in enumerate(zip(rs, out)):
        assert r.text == line, (i, r.text, line)
        if SENTS[i]:
            same_as_dump(r, z, i, logits)
        else:
            assert not any(k.startswith(f"s{i}/") for k in z) and r.src_ids.size == 0


def greedy_equals_cli():
    _compare_translate(["--greedy"], {"greedy": True}, logits=True)


def beam4_equals_cli():
    _compare_translate(["--beam", "4"], {"beam": 4})


def nbest_and_sampling_equal_cli():
    for cli_opts, py_opts in ((["--beam", "4", "--n-best", "3", "--length-penalty", "0.6"],
                               {"beam": 4, "n_best": 3, "length_penalty": 0.6}),
                              (["--sample", "--top-k", "10", "--seed", "7", "--n-best", "3"],
                               {"sample": True, "top_k": 10, "seed": 7, "n_best": 3}),
                              (["--beam", "3", "--no-repeat-ngram-size", "2", "--min-length", "6",
                                "--repetition-penalty", "1.3", "--early-stopping", "never",
                                "--max-length", "12", "--n-best", "2"],
                               {"beam": 3, "no_repeat_ngram_size": 2, "min_length": 6,
                                "repetition_penalty": 1.3, "early_stopping": "never",
                                "max_length": 12, "n_best": 2})):
        out = run_cli("translate", *cli_opts, "--", *SENTS).splitlines()
        rs = model().translate(SENTS, **py_opts)
        k = py_opts["n_best"]
        want = [f"{i} ||| {h.text} ||| {h.normalized_score:.6f}" for i, r in enumerate(rs) for h in r.nbest]
        assert all(len(r.nbest) == k for r in rs), [len(r.nbest) for r in rs]
        assert want == out, (cli_opts, want, out)
        for r in rs:
            if r.tgt_ids.size:
                assert r.nbest[0].text == r.text and np.array_equal(r.nbest[0].ids, r.tgt_ids)


def score_equals_align_target():
    pairs = [("Ich habe Hunger.", "I am hungry."), ("Wo ist der Bahnhof?", "Where is the train station?"),
             ("Ich habe Hunger.", "")]
    for src, tgt in pairs:
        dump = os.path.join(TMP, "align.npz")
        run_cli("align", src, "--target", tgt, "--dump-attention", dump)
        r = model().score(src, tgt)
        assert r.forced and r.target == tgt and r.source == src
        same_as_dump(r, npz(dump), 0)
        assert np.float32(r.score) == np.float32(r.logprob.sum(dtype=np.float32)) or \
            abs(r.score - float(r.logprob.sum())) < 1e-4
    # lists, and forced decoding of the greedy output reproduces its attention
    g = model().translate(SENTS[2:4], greedy=True, attention=True)
    f = model().score(SENTS[2:4], [r.text for r in g])
    for a, b in zip(g, f):
        assert np.array_equal(a.tgt_ids, b.tgt_ids) and np.array_equal(a.cross, b.cross)
        assert np.array_equal(a.logprob, b.logprob)


VIEWS = ["last:0", "penultimate:avg", "1:avg,shift", "all:avg", "0:1,2:3", "-1:avg"]


def alignment_equals_cli():
    for view in VIEWS:
        out = run_cli("translate", "--greedy", f"--alignment={view}", "--", *SENTS).splitlines()
        rs = model().translate(SENTS, greedy=True, attention=True)
        for r, line in zip(rs, out):
            text, pharaoh = line.split(" ||| ")
            assert r.text == text and r.pharaoh(view) == pharaoh, (view, r.pharaoh(view), line)
            pairs = [tuple(int(x) for x in p.split("-")) for p in pharaoh.split()]
            assert r.alignment(view) == pairs
            for i, j in pairs:
                assert 0 <= i < len(r.src_words) and 0 <= j < len(r.tgt_words)
    r = model().translate("Wo ist der Bahnhof?", greedy=True, attention=True)
    assert r.src_words == ["Wo", "ist", "der", "Bahnhof?"], r.src_words
    cli = run_cli("translate", "--greedy", "--alignment=last:0", "--", "Wo ist der Bahnhof?")
    pairs = [tuple(int(x) for x in p.split("-")) for p in cli.split(" ||| ")[1].split()]
    assert r.alignment("last:0") == pairs and pairs, (r.alignment("last:0"), cli)
    # without a view: the model's own, as --alignment without one
    cli = run_cli("translate", "--greedy", "--alignment", "--", "Wo ist der Bahnhof?")
    pairs = [tuple(int(x) for x in p.split("-")) for p in cli.split(" ||| ")[1].split()]
    assert r.alignment() == r.alignment(r.default_view()) == pairs and pairs, (r.alignment(), cli)
    assert r.view("last:0").shape == (len(r.tgt_ids), len(r.src_ids))
    assert np.allclose(r.view("2:0"), r.cross[2, 0]) and np.allclose(r.view("0:avg"), r.cross[0].mean(0))
    assert attend.view_name("penultimate:avg") == "penultimate:avg"


def save_npz_matches_cli_layout():
    dump, mine = os.path.join(TMP, "cli2.npz"), os.path.join(TMP, "mine.npz")
    run_cli("translate", "--greedy", "--dump-attention", dump, "--", *SENTS)
    attend.save_npz(model().translate(SENTS, greedy=True, attention=True), mine)
    a, b = npz(dump), npz(mine)
    assert sorted(a) == sorted(b)
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    # n-best: the other hypotheses' keys as --n-best writes them
    run_cli("translate", "--beam", "4", "--n-best", "3", "--dump-attention", dump, "--", *SENTS)
    attend.save_npz(model().translate(SENTS, beam=4, n_best=3, attention=True), mine)
    a, b = npz(dump), npz(mine)
    assert sorted(a) == sorted(b) and any("/nbest2/cross/" in k for k in a), sorted(set(a) ^ set(b))[:6]
    for k in a:
        assert np.array_equal(a[k], b[k]), k


# ---------------------------------------------------------------------------------------
# Errors, blank lines, threads


def raises(exc, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        return str(e)
    raise AssertionError(f"{fn.__name__}{args}{kw} did not raise {exc.__name__}")


def errors_raise_never_crash():
    m = model()
    msg = raises(attend.AttendError, attend.Model, os.path.join(TMP, "missing.gguf"))
    assert "missing.gguf" in msg and "No such file" in msg, msg
    junk = os.path.join(TMP, "junk.gguf")
    with open(junk, "wb") as f:
        f.write(b"GGUF" + bytes(range(256)) * 4)
    assert "junk.gguf" in raises(attend.AttendError, attend.Model, junk)
    raises(TypeError, attend.Model, 42)
    raises(ValueError, attend.Model, MODEL, threads=-1)
    r = m.translate("Hallo", attention=True)
    assert "bogus" in raises(attend.AttendError, r.alignment, "bogus")
    assert "decoder layers" in raises(attend.AttendError, r.alignment, "9:0")
    raises(attend.AttendError, r.alignment, "0:7")
    raises(TypeError, r.alignment, 3)
    raises(ValueError, m.translate("Hallo").alignment)  # no attention captured
    for kw in ({"beam": -1}, {"beam": 0}, {"beam": 2000}, {"n_best": 0}, {"max_length": 1},
               {"top_p": 1.5, "sample": True}, {"temperature": 0, "sample": True}, {"top_k": 5},
               {"greedy": True, "beam": 4}, {"early_stopping": "sometimes"}, {"seed": -1, "sample": True},
               {"length_penalty": float("nan")}, {"batch_size": 0}, {"threads": 5000}):
        raises(ValueError, m.translate, "Hallo", **kw)
    raises(TypeError, m.translate, "Hallo", beam="4")
    raises(TypeError, m.translate, "Hallo", beam=True)
    # settings only the library refuses
    too_many = max(m.config.default_beams, 1) + 1  # more hypotheses than the default search keeps
    assert "n-best" in raises(attend.AttendError, m.translate, "Hallo", n_best=too_many)
    assert "n-best" in raises(attend.AttendError, m.translate, "", n_best=too_many)  # checked without lines too
    raises(attend.AttendError, m.translate, "Hallo", sample=True, beam=3)
    # bad input
    for bad in (None, 42, 3.5, [None], ["ok", 7], [b"\xff\xfe"], b"\xc3\x28", "\udc80 lone surrogate"):
        raises((TypeError, ValueError), m.translate, bad)
    assert m.translate(b"Wo ist der Bahnhof?", greedy=True).text == "Where's the station?"
    assert m.translate("Wo\0ist der Bahnhof?").text == m.translate("Wo ist der Bahnhof?").text
    raises(ValueError, m.score, ["a", "b"], ["a"])
    raises(ValueError, m.score, "a", ["a"])
    raises(TypeError, m.score, "a", None)
    # a closed model refuses politely; closing twice is fine; with-blocks close
    with attend.Model(MODEL, threads=1) as m2:
        assert m2.translate("Hallo").text
    assert "closed" in raises(attend.AttendError, m2.translate, "Hallo")
    m2.close()
    assert "closed" in raises(attend.AttendError, m2.score, "a", "b")
    # a process that does all of this, and more, exits normally
    code = ("import attend\nm = attend.Model(%r, threads=1)\n"
            "for x in (None, 1, b'\\xff', ['\\udcff'], object()):\n"
            "    try: m.translate(x)\n    except (TypeError, ValueError): pass\n"
            "r = m.translate('x' * 100000)\nassert r.truncated\nm.close(); del m\nprint('alive')\n" % MODEL)
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PYDIR), timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "alive", (p.returncode, p.stdout, p.stderr)


def truncation_warns():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = model().translate(["kurz", "Haus " * 400], split=False)
    assert not r[0].truncated and r[1].truncated and len(r[1].src_ids) == model().config.model_max_length
    msgs = [str(x.message) for x in w if issubclass(x.category, attend.AttendWarning)]
    assert len(msgs) == 1 and msgs[0].startswith("line 2: longer than"), msgs
    p = T.run_attend(cli_args("translate") + ["--split", "none"], input_text="kurz\n" + "Haus " * 400 + "\n")
    assert msgs[0] in p.stderr, (msgs, p.stderr)


def blank_lines_as_cli():
    lines = ["", "   ", "\t \r", "Hallo Welt!", "\f\v", "Wo ist der Bahnhof?", " \0 "]
    out = run_cli("translate", input_text="".join(x + "\n" for x in lines)).splitlines()
    rs = model().translate(lines, attention=True, n_best=1)
    assert [r.text for r in rs] == out, ([r.text for r in rs], out)
    for line, r in zip(lines, rs):
        if line.strip(" \t\r\f\v\0"):
            continue
        assert r.text == "" and r.score == 0.0 and r.src_ids.size == 0 and r.tgt_tokens == []
        c = model().config
        assert r.cross.shape == (c.decoder_layers, c.decoder_heads, 0, 0)
        assert r.enc_self.shape == (c.encoder_layers, c.encoder_heads, 0, 0)
        assert r.logprob.size == 0 and r.alignment() == [] and r.nbest[0].text == ""
        assert "source" in r._repr_html_()
    single = model().translate("")
    assert isinstance(single, attend.Result) and single.text == ""
    assert model().translate([]) == []
    # --n-best K gives K empty entries for a blank line, score 0
    out = run_cli("translate", "--beam", "2", "--n-best", "2", "--", "", "Hallo").splitlines()
    rs = model().translate(["", "Hallo"], beam=2, n_best=2)
    assert [f"{i} ||| {h.text} ||| {h.normalized_score:.6f}" for i, r in enumerate(rs) for h in r.nbest] == out, out


def threads_match_serial():
    m = model()
    lines = [f"{s} {t}" for s in SENTS if s for t in ("Heute", "Morgen", "Gestern", "Bitte")]
    serial = [m.translate(lines, beam=2, attention=True), m.translate(lines, greedy=True, attention=True)]
    got = [None, None]

    def work(k):
        got[k] = m.translate(lines, beam=2, attention=True) if k == 0 else \
            m.translate(lines, greedy=True, attention=True)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for a, b in zip(serial, got):
        for x, y in zip(a, b):
            assert x.text == y.text and x.score == y.score and np.array_equal(x.cross, y.cross)
            assert np.array_equal(x.enc_self, y.enc_self) and np.array_equal(x.dec_self, y.dec_self)
    # batching never changes a result
    for bs, bt in ((1, None), (3, None), (None, 20), (2, 30)):
        rs = m.translate(lines, beam=2, attention=True, batch_size=bs, batch_tokens=bt)
        assert [r.text for r in rs] == [r.text for r in serial[0]]
        assert all(np.array_equal(x.cross, y.cross) for x, y in zip(rs, serial[0]))


def gil_released_while_translating():
    """While one thread is inside attend_translate, another keeps running Python: with the
    GIL held (a PyDLL) it would make no progress at all during the call."""
    m = model()
    lines = [f"{s} {t}" for s in SENTS if s for t in ("Heute", "Morgen", "Gestern", "Bitte", "Hier", "Dort")]
    worst = []
    for _ in range(3):
        span = []

        def work():
            t0 = time.perf_counter()
            m.translate(lines, beam=4, batch_size=100)  # one library call
            span.extend((t0, time.perf_counter()))
        stamps = [time.perf_counter()]
        th = threading.Thread(target=work)
        th.start()
        while th.is_alive():
            stamps.append(time.perf_counter())
        th.join()
        t0, t1 = span
        inside = [t0] + [x for x in stamps if t0 < x < t1] + [t1]
        worst.append((max(b - a for a, b in zip(inside, inside[1:])), t1 - t0))
    gap, call = min(worst)
    assert call > 0.05, f"the call is too short to tell ({call:.3f} s)"
    assert gap < call / 2, f"the main thread stalled {gap:.3f} s during a {call:.3f} s call"


# ---------------------------------------------------------------------------------------
# Jupyter, plots


def repr_html_escapes():
    src = "<script>alert('x')</script> & \"Ich\" habe Hunger."
    r = model().translate(src, attention=True)
    h = r._repr_html_()
    assert "<script" not in h and "&lt;script&gt;" in h and "<svg" in h
    root = ET.fromstring("<root>" + h + "</root>")  # well-formed: nothing unescaped
    texts = "".join(root.itertext())
    assert src in texts and r.text in texts
    svg = [e for e in root.iter() if e.tag.endswith("svg")]
    rects = [e for e in svg[0].iter() if e.tag.endswith("rect")]
    assert len(rects) == len(r.tgt_ids) * len(r.src_ids) + 1 + 21  # cells, frame, legend (20 + frame)
    # without attention: the text, and a hint
    h2 = model().translate(src)._repr_html_()
    assert "<svg" not in h2 and "&lt;script&gt;" in h2 and "attention=True" in h2
    ET.fromstring("<root>" + h2 + "</root>")
    # a control character in a label still gives well-formed markup
    ET.fromstring("<root>" + attend.heatmap_svg(np.eye(2), ["a\x01", "<b>"], ["&", "\"'"]) + "</root>")


def plot_heatmap():
    r = model().translate("Wo ist der Bahnhof?", attention=True)
    saved = {k: sys.modules.get(k) for k in ("matplotlib", "matplotlib.pyplot")}
    try:  # without matplotlib: a clear ImportError
        sys.modules["matplotlib"] = sys.modules["matplotlib.pyplot"] = None
        msg = raises(ImportError, attend.plot, r)
        assert "matplotlib" in msg and "apt-get install python3-matplotlib" in msg, msg
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    try:
        import matplotlib
    except ImportError:
        print("     (matplotlib not installed: drawing not checked)")
        return
    matplotlib.use("Agg")
    ax = attend.plot(r, layer=-1, head=0)
    assert [t.get_text() for t in ax.get_xticklabels()] == [attend._display.clean_label(t) for t in r.src_tokens]
    assert [t.get_text() for t in ax.get_yticklabels()] == [attend._display.clean_label(t) for t in r.tgt_tokens]
    assert np.array_equal(ax.images[0].get_array(), r.cross[-1, 0])
    ax = attend.plot(r, layer=0, head="avg", kind="enc_self")
    assert np.allclose(ax.images[0].get_array(), r.enc_self[0].mean(0))
    ax = attend.plot(r, view="penultimate:avg")
    assert np.array_equal(ax.images[0].get_array(), r.view("penultimate:avg"))
    ax.figure.savefig(os.path.join(TMP, "plot.png"))
    raises(ValueError, attend.plot, r, kind="bogus")
    raises(ValueError, attend.plot, r, layer=r.cross.shape[0])   # one past the last layer
    raises(ValueError, attend.plot, model().translate("Hallo"))


# ---------------------------------------------------------------------------------------
# Export


def hf_dir(name, activation="swish"):
    """The config and tokenizer of a real OPUS-MT checkpoint (opus-mt-en-mg, from
    ../shared/data) shrunk to d_model 16, one layer each side, random weights."""
    import safetensors_np
    real = T.data_path("opus-mt-real-files", "opus-mt-en-mg")
    d = os.path.join(TMP, name)
    os.makedirs(d)
    for f in os.listdir(real):
        if f != "README.md":
            shutil.copyfile(os.path.join(real, f), os.path.join(d, f))
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    c.update(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
             decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
             max_position_embeddings=64, max_length=16, activation_function=activation)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)
    V, dm = c["vocab_size"], 16
    rng = np.random.default_rng(3)
    shapes = {"model.shared.weight": (V, dm), "final_logits_bias": (1, V)}
    for side, parts in (("encoder", ["self_attn"]), ("decoder", ["self_attn", "encoder_attn"])):
        p = f"model.{side}.layers.0"
        for a in parts:
            for q in ("q_proj", "k_proj", "v_proj", "out_proj"):
                shapes[f"{p}.{a}.{q}.weight"], shapes[f"{p}.{a}.{q}.bias"] = (dm, dm), (dm,)
            shapes[f"{p}.{a}_layer_norm.weight"] = shapes[f"{p}.{a}_layer_norm.bias"] = (dm,)
        shapes[f"{p}.fc1.weight"], shapes[f"{p}.fc1.bias"] = (32, dm), (32,)
        shapes[f"{p}.fc2.weight"], shapes[f"{p}.fc2.bias"] = (dm, 32), (dm,)
        shapes[f"{p}.final_layer_norm.weight"] = shapes[f"{p}.final_layer_norm.bias"] = (dm,)
    sd = {k: (rng.standard_normal(s) * 0.3).astype(np.float32) for k, s in shapes.items()}
    for k in sd:
        if "layer_norm.weight" in k:
            sd[k] = np.ones_like(sd[k])
    safetensors_np.save(sd, os.path.join(d, "model.safetensors"))
    return d


def export_runs_the_exporter():
    d = hf_dir("opus-mt-tiny")
    out = attend.export(d, os.path.join(TMP, "tiny-f16.gguf"), dtype="f16", name="tiny")
    ref = os.path.join(TMP, "tiny-ref.gguf")
    subprocess.run([sys.executable, os.path.join(T.TOOLS, "export_marian.py"), d, ref, "--dtype", "f16",
                    "--name", "tiny"], check=True, capture_output=True)
    with open(out, "rb") as a, open(ref, "rb") as b:
        assert a.read() == b.read(), "export() differs from running the exporter"
    q = attend.export(d, os.path.join(TMP, "tiny-int8.gguf"), dtype="int8")
    with attend.Model(q, threads=1) as m:
        assert m.config.dtype == "int8" and m.config.d_model == 16 and m.config.num_beams == 4
        r = m.translate("Hello, how are you?", max_length=6, attention=True)
        assert len(r.tgt_ids) <= 5 and r.cross.shape[:2] == (1, 2)
    raises(ValueError, attend.export, d, os.path.join(TMP, "x.gguf"), dtype="bf16")
    raises(attend.AttendError, attend.export, os.path.join(TMP, "nowhere"), os.path.join(TMP, "x.gguf"))
    bad = hf_dir("opus-mt-tanh", activation="tanh")
    try:
        attend.export(bad, os.path.join(TMP, "tanh.gguf"))
        raise AssertionError("a tanh model was exported")
    except attend.AttendError as e:
        assert "activation_function" in str(e) and "tanh" in str(e) and e.returncode == 2, e
    assert os.path.samefile(attend.find_exporter(), os.path.join(PYDIR, "attend", "export", "__main__.py"))


# ---------------------------------------------------------------------------------------
# Installing


def copy_package(dst):
    shutil.copytree(PYDIR, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__",
                                                              "libattend.so", "dist"))
    return dst


CHECK_INSTALLED = """
import os, sys, attend
assert attend.__file__.startswith(sys.argv[1]), attend.__file__
print(attend.library_path())
print(attend.default_model_path() if not os.environ.get("NO_MODEL_CHECK") else "-")
m = attend.Model(sys.argv[2], threads=1)
print(m.translate("Wo ist der Bahnhof?", greedy=True).text)
print(m.translate(["Ich habe Hunger."], greedy=True, attention=True)[0].alignment())
"""


def pip_install_offline():
    """python/ alone (no checkout around it to compile in) with a prebuilt libattend.so in
    attend/: pip ships that copy as it is (python/setup.py); tests/test_python_install.py
    installs from a whole checkout, which compiles the library."""
    src = copy_package(os.path.join(TMP, "pkgsrc"))
    shutil.copyfile(LIBRARY, os.path.join(src, "attend", "libattend.so"))
    target = os.path.join(TMP, "site")
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
           "--target", target, src]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.isfile(os.path.join(target, "attend", "py.typed"))
    assert os.path.isfile(os.path.join(target, "attend", "libattend.so"))
    assert any(x.startswith("attend-") and x.endswith(".dist-info") for x in os.listdir(target))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEND_")}
    env.update(PYTHONPATH=target, ATTEND_LIBRARY=LIBRARY, NO_MODEL_CHECK="1")
    p = subprocess.run([sys.executable, "-c", CHECK_INSTALLED, os.path.join(target, "attend"), MODEL],
                       capture_output=True, text=True, cwd=TMP, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout.splitlines()
    assert out[0] == LIBRARY and out[2] == "Where's the station?", out
    # without it, the package's own copy
    del env["ATTEND_LIBRARY"]
    p = subprocess.run([sys.executable, "-c", CHECK_INSTALLED, os.path.join(target, "attend"), MODEL],
                       capture_output=True, text=True, cwd=TMP, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == os.path.join(target, "attend", "libattend.so"), p.stdout
    # $ATTEND_LIBRARY wins, and must exist
    env["ATTEND_LIBRARY"] = os.path.join(TMP, "nope.so")
    p = subprocess.run([sys.executable, "-c", CHECK_INSTALLED, os.path.join(target, "attend"), MODEL],
                       capture_output=True, text=True, cwd=TMP, env=env, timeout=120)
    assert p.returncode != 0 and "ATTEND_LIBRARY" in p.stderr and "nope.so" in p.stderr, p.stderr


def prefix_install_layout():
    """`make install`'s layout (see the package README): PREFIX/lib/libattend.so,
    PREFIX/lib/python3.X/dist-packages/attend, PREFIX/share/attend/de-en.gguf and
    share/attend/tools/: the package finds the library, the model and its own exporter
    without any environment variable."""
    prefix = os.path.join(TMP, "prefix")
    site = os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2], "dist-packages")
    copy_package(os.path.join(TMP, "pfx"))
    shutil.copytree(os.path.join(TMP, "pfx", "attend"), os.path.join(site, "attend"))
    shutil.copyfile(LIBRARY, os.path.join(prefix, "lib", "libattend.so"))
    os.makedirs(os.path.join(prefix, "share", "attend"))
    os.symlink(MODEL, os.path.join(prefix, "share", "attend", "de-en.gguf"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEND_")}
    env["PYTHONPATH"] = site
    code = CHECK_INSTALLED + "print(attend.find_exporter())\n"
    p = subprocess.run([sys.executable, "-c", code, os.path.join(site, "attend"),
                        os.path.join(prefix, "share", "attend", "de-en.gguf")],
                       capture_output=True, text=True, cwd=TMP, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout.splitlines()
    assert out[0] == os.path.join(prefix, "lib", "libattend.so"), out
    assert out[1] == os.path.join(prefix, "share", "attend", "de-en.gguf"), out
    assert out[2] == "Where's the station?", out
    assert out[4] == os.path.join(site, "attend", "export", "__main__.py"), out


def page_json(path):
    text = open(path, encoding="utf-8").read()
    return json.loads(text.split('id="attend-data">')[1].split("</script>")[0])


def explore_page_equals_cli():
    """attend.explore fills the page attend explore writes with the same data: translated
    (greedy, a blank line included) and forced; Page shows inline as an iframe."""
    import attend
    m = model()
    lines = ["Ich habe Hunger.", "", "Wo ist der <b>Bahnhof</b>?"]
    cli = os.path.join(TMP, "cli.html")
    T.run_attend(["explore", "-m", MODEL, "--greedy", "-t", "1", "-o", cli], input_text="\n".join(lines) + "\n")
    rs = m.translate(lines, greedy=True, attention=True)
    page = attend.explore(rs, os.path.join(TMP, "py.html"), model="de-en.gguf", settings="greedy search")
    assert page_json(os.path.join(TMP, "py.html")) == page_json(cli), "page data differ from the CLI's"
    # the page around the data is the same file
    strip = lambda t: t.split('id="attend-data">')[0] + t.split("</script>", 1)[1].split("</script>", 1)[1]  # noqa: E731
    assert strip(page.html) == strip(open(cli, encoding="utf-8").read())
    T.run_attend(["explore", "-m", MODEL, "-t", "1", "-o", cli, "Ich habe Hunger.", "--target", "I am hungry."])
    attend.explore(m.score("Ich habe Hunger.", "I am hungry.", attention=True), os.path.join(TMP, "f.html"),
                   model="de-en.gguf", settings="forced decoding of the given target")
    assert page_json(os.path.join(TMP, "f.html")) == page_json(cli), "forced page data differ from the CLI's"
    inline = page._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and "<script" not in inline.split('srcdoc="')[1][:200]


def default_model_found():
    env = {k: v for k, v in os.environ.items() if k != "ATTEND_MODEL"}
    p = subprocess.run([sys.executable, "-c", "import attend; print(attend.default_model_path()); "
                        "print(attend.Model(threads=1).translate('Hallo').text)"],
                       capture_output=True, text=True, env=dict(env, PYTHONPATH=PYDIR), timeout=120)
    assert p.returncode == 0 and p.stdout.splitlines()[0] == MODEL, p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-c", "import attend; print(attend.default_model_path())"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(env, PYTHONPATH=PYDIR, ATTEND_MODEL="/x/y.gguf"))
    assert p.stdout.strip() == "/x/y.gguf", p.stdout + p.stderr


def main():
    run = T.Runner()
    t0 = time.time()
    for name, fn in [("ctypes mirrors match the C headers (sizes, offsets, types)", struct_mirrors_match_c),
                     ("library opened with CDLL (GIL released), found in the build tree",
                      library_loaded_with_cdll),
                     ("Model.config equals attend info", config_matches_info),
                     ("greedy: text, scores, logits, all attention = attend translate --dump-attention",
                      greedy_equals_cli),
                     ("beam 4: text, scores, all attention = attend translate --dump-attention",
                      beam4_equals_cli),
                     ("n-best, sampling and search options = attend translate --n-best",
                      nbest_and_sampling_equal_cli),
                     ("score() = attend align --target --dump-attention", score_equals_align_target),
                     ("alignment(view) = attend translate --alignment=VIEW", alignment_equals_cli),
                     ("save_npz writes the --dump-attention archive", save_npz_matches_cli_layout),
                     ("errors raise AttendError / TypeError / ValueError, never crash",
                      errors_raise_never_crash),
                     ("a cut source warns as attend translate does", truncation_warns),
                     ("blank lines: empty results without the model, as the CLI", blank_lines_as_cli),
                     ("two threads at once = serial; batching changes nothing", threads_match_serial),
                     ("the GIL is released during translation", gil_released_while_translating),
                     ("_repr_html_: escaped text and an SVG heatmap", repr_html_escapes),
                     ("attend.explore: the CLI's page with the same data; inline in Jupyter",
                      explore_page_equals_cli),
                     ("plot: labelled heatmap; ImportError without matplotlib", plot_heatmap),
                     ("export: the package's exporter = tools/export_marian.py (f16 identical, int8 loads, refusals)",
                      export_runs_the_exporter),
                     ("default model: $ATTEND_MODEL, else models/de-en.gguf", default_model_found),
                     ("pip install offline into a directory; its own library, or ATTEND_LIBRARY's",
                      pip_install_offline),
                     ("make-install layout: library, model and exporter found under PREFIX",
                      prefix_install_layout)]:
        run.check(name, fn)
    if M is not None:
        M.close()
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"({time.time() - t0:.1f} s)")
    run.finish()


if __name__ == "__main__":
    main()
