"""Library-level helpers: version, sentence splitting, ISA, threads, attention views."""
from __future__ import annotations

import ctypes
import os
from typing import List, Optional, Tuple

from . import _capi as C
from ._args import _encode
from ._common import Text, AttendError


# ---------------------------------------------------------------------------------------
# Library-level helpers


def library_version() -> str:
    """The version of the loaded libattend.so (attend_version()); "unknown" for libraries
    older than 0.4.0, which lack the function."""
    lib = C.lib()
    return C.decode(lib.attend_version()) if hasattr(lib, "attend_version") else "unknown"


def split_sentences(text: Text, lang: Optional[str] = None) -> List[str]:
    """The sentences of text as attend_translate splits them (``attend split``; the rules:
    docs/splitting.md): lang a language code ("de", "en", ...; None: every language's rules
    together). Each sentence without the whitespace around it; [] for blank text."""
    src, raw = _encode(text, "text")
    spans = ctypes.POINTER(C.attend_span)()
    err = C.err_buffer()
    code = None if lang is None else _encode(lang, "lang")[1]
    n = C.lib().attend_split_sentences(raw, len(raw), code, ctypes.byref(spans), err, C.ERR_LEN)
    if n < 0:
        raise AttendError(C.decode(err.value))
    try:
        return [raw[spans[k].begin:spans[k].end].decode("utf-8") for k in range(n)]
    finally:
        if spans:
            C.libc_free(ctypes.cast(spans, ctypes.c_void_p))


_isa_selected = False


def isa() -> str:
    """The kernel set in use: "generic", "avx2" or "avx512" (the best one CPUID reports;
    $ATTEND_ISA forces one). AttendError when $ATTEND_ISA names a set this CPU lacks."""
    global _isa_selected
    lib = C.lib()
    if not _isa_selected:
        err = C.err_buffer()
        if lib.attend_select_isa(err, C.ERR_LEN):
            raise AttendError(C.decode(err.value))
        _isa_selected = True
    return C.decode(lib.attend_isa())


def isa_available() -> str:
    """The kernel sets this CPU supports."""
    return C.decode(C.lib().attend_isa_available())


def isa_bf16() -> Tuple[Optional[str], str]:
    """Whether Model(compute_type="bfloat16") can load here: ("avx512bf16", "") where bf16
    compute runs (vdpbf16ps, products summed in f32), else (None, what is missing), as
    ``attend isa`` prints it."""
    isa()  # the kernel set chosen, as a load would
    why = ctypes.c_char_p()
    path = C.lib().attend_isa_bf16(ctypes.byref(why))
    return (C.decode(path), "") if path else (None, C.decode(why.value or b""))


def default_threads() -> int:
    """Threads used when threads=0: $OMP_NUM_THREADS if set, else the physical cores."""
    return int(C.lib().attend_default_threads())


def default_model_path() -> str:
    """The model Model() loads without a path: $ATTEND_MODEL, else the shipped
    ``models/de-en.gguf`` of the build tree (``<repo>/models``, this package being
    ``<repo>/python/attend``), else ``share/attend/de-en.gguf`` beside the library's
    ``lib/`` directory (``make install``'s layout)."""
    env = os.environ.get("ATTEND_MODEL")
    if env:
        return env
    looked = []
    repo = C.repo_dir()
    if repo:
        looked.append(os.path.join(repo, "models", "de-en.gguf"))
    libdir = C.library_dir()
    if libdir:
        looked.append(os.path.normpath(os.path.join(libdir, "..", "share", "attend", "de-en.gguf")))
    if C.prefix_dir():
        looked.append(os.path.join(C.prefix_dir(), "share", "attend", "de-en.gguf"))
    looked = list(dict.fromkeys(looked))
    for p in looked:
        if os.path.exists(p):
            return p
    raise AttendError("no model given and no shipped model found (looked for "
                      + ", ".join(looked) + "): pass a path or set ATTEND_MODEL")


def _check_view_text(view: str) -> bytes:
    if not isinstance(view, str):
        raise TypeError(f"an attention view is a str such as 'last:0', not {type(view).__name__}")
    if "\0" in view:
        raise AttendError(f"attention view {view!r}: contains a NUL character")
    return view.encode("utf-8")


def parse_view(view: str) -> C.attend_view:
    """Parse an attention view ("last:0", "penultimate:avg", "3:avg,shift", "4:1,5:0",
    "all:avg") with the library's parser; AttendError when it does not parse."""
    v = C.attend_view()
    err = C.err_buffer()
    if C.lib().attend_view_parse(_check_view_text(view), ctypes.byref(v), err, C.ERR_LEN):
        raise AttendError(C.decode(err.value))
    return v


def default_view(decoder_layers: int) -> str:
    """The view of a model whose file records none (the library's attend_default_view)."""
    buf = ctypes.create_string_buffer(C.ATTEND_VIEW_MAX * 8)
    C.lib().attend_default_view(decoder_layers, buf, len(buf))
    return C.decode(buf.value)


def view_name(view: str) -> str:
    """The view written back by the library in its canonical form ("penultimate:avg")."""
    v = parse_view(view)
    buf = ctypes.create_string_buffer(512)
    C.lib().attend_view_name(ctypes.byref(v), buf, len(buf))
    return C.decode(buf.value)
