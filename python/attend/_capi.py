"""ctypes mirrors of model/attend.h and model/align.h, and loading libattend.so.

Every structure here has the fields of its C declaration in the same order and with the
same types; tests/test_python.py compiles a small C program and checks each size and
offset against these mirrors.

The library is opened with ``ctypes.CDLL`` (never ``PyDLL``): ctypes then releases the GIL
for the duration of every call, so several Python threads may translate at once (the
library is thread-safe per model, see attend.h).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import List, Optional

# ---------------------------------------------------------------------------------------
# Structures (field order and types exactly as in the headers)

ATTEND_VIEW_MAX = 64
ATTEND_DEFAULT_VIEW = "last:0"

# attend_params.early_stopping
ATTEND_EARLY_MODEL, ATTEND_EARLY_FALSE, ATTEND_EARLY_TRUE, ATTEND_EARLY_NEVER = 0, 1, 2, 3
# align.h
ATTEND_LAYER_LAST, ATTEND_LAYER_PENULTIMATE, ATTEND_LAYER_ALL = -1, -2, -3
ATTEND_HEAD_AVG = -1
# bytes of a line the tokenizer reads per position (MARIAN_BYTES_PER_POSITION, README)
BYTES_PER_POSITION = 32

c_int_p = ctypes.POINTER(ctypes.c_int)
c_float_p = ctypes.POINTER(ctypes.c_float)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)


class attend_config(ctypes.Structure):
    """``attend_config`` (attend.h): a loaded model's configuration."""

    _fields_ = [
        ("vocab_size", ctypes.c_int),
        ("decoder_vocab_size", ctypes.c_int),
        ("d_model", ctypes.c_int),
        ("encoder_layers", ctypes.c_int),
        ("decoder_layers", ctypes.c_int),
        ("encoder_heads", ctypes.c_int),
        ("decoder_heads", ctypes.c_int),
        ("encoder_ffn_dim", ctypes.c_int),
        ("decoder_ffn_dim", ctypes.c_int),
        ("max_position_embeddings", ctypes.c_int),
        ("max_length", ctypes.c_int),
        ("activation", ctypes.c_char_p),
        ("scale_embedding", ctypes.c_int),
        ("shared_embeddings", ctypes.c_int),
        ("tied_output", ctypes.c_int),
        ("forced_eos", ctypes.c_int),
        ("pad_id", ctypes.c_int),
        ("eos_id", ctypes.c_int),
        ("unk_id", ctypes.c_int),
        ("decoder_start_id", ctypes.c_int),
        ("dtype", ctypes.c_char_p),
        ("tensor_count", ctypes.c_longlong),
        ("file_bytes", ctypes.c_longlong),
        ("metadata_checksum", ctypes.c_int),
        ("model_max_length", ctypes.c_int),
        ("generation_recorded", ctypes.c_int),
        ("num_beams", ctypes.c_int),
        ("early_stopping", ctypes.c_int),
        ("min_length", ctypes.c_int),
        ("no_repeat_ngram_size", ctypes.c_int),
        ("renormalize_logits", ctypes.c_int),
        ("length_penalty", ctypes.c_float),
        ("repetition_penalty", ctypes.c_float),
    ]


class attend_params(ctypes.Structure):
    """``attend_params`` (attend.h): one attend_translate call's settings; zero = defaults."""

    _fields_ = [
        ("threads", ctypes.c_int),
        ("max_length", ctypes.c_int),
        ("want_scores", ctypes.c_int),
        ("want_logits", ctypes.c_int),
        ("want_attention", ctypes.c_int),
        ("num_beams", ctypes.c_int),
        ("n_best", ctypes.c_int),
        ("early_stopping", ctypes.c_int),
        ("set_length_penalty", ctypes.c_int),
        ("length_penalty", ctypes.c_float),
        ("set_min_length", ctypes.c_int),
        ("min_length", ctypes.c_int),
        ("set_no_repeat_ngram_size", ctypes.c_int),
        ("no_repeat_ngram_size", ctypes.c_int),
        ("repetition_penalty", ctypes.c_float),
        ("sample", ctypes.c_int),
        ("top_k", ctypes.c_int),
        ("top_p", ctypes.c_float),
        ("temperature", ctypes.c_float),
        ("seed", ctypes.c_ulonglong),
    ]


class attend_hypothesis(ctypes.Structure):
    """``attend_hypothesis`` (attend.h): one entry of an n-best list."""

    _fields_ = [
        ("text", ctypes.c_char_p),
        ("ids", c_int_p),
        ("n", ctypes.c_int),
        ("score", ctypes.c_float),
    ]


class attend_result(ctypes.Structure):
    """``attend_result`` (attend.h): one translated sentence, owned by the library until
    attend_result_free."""

    _fields_ = [
        ("text", ctypes.c_char_p),
        ("n_src", ctypes.c_int),
        ("n_tgt", ctypes.c_int),
        ("src_ids", c_int_p),
        ("tgt_ids", c_int_p),
        ("src_pieces", c_char_pp),
        ("tgt_pieces", c_char_pp),
        ("truncated", ctypes.c_int),
        ("logprob", c_float_p),
        ("logits", c_float_p),
        ("enc_self", c_float_p),
        ("dec_self", c_float_p),
        ("cross", c_float_p),
        ("score", ctypes.c_float),
        ("n_best", ctypes.c_int),
        ("nbest", ctypes.POINTER(attend_hypothesis)),
    ]


class attend_view(ctypes.Structure):
    """``attend_view`` (align.h): which decoder layers and heads a view averages."""

    _fields_ = [
        ("n", ctypes.c_int),
        ("layer", ctypes.c_int * ATTEND_VIEW_MAX),
        ("head", ctypes.c_int * ATTEND_VIEW_MAX),
        ("shift", ctypes.c_int),
    ]


class attend_words(ctypes.Structure):
    """``attend_words`` (align.h): pieces merged into words at the ``▁`` marker."""

    _fields_ = [
        ("n_pieces", ctypes.c_int),
        ("n_words", ctypes.c_int),
        ("word_of", c_int_p),
        ("words", c_char_pp),
    ]


# the structures the tests compare with the C compiler, by their C names
STRUCTS = {c.__name__: c for c in (attend_config, attend_params, attend_hypothesis, attend_result,
                                   attend_view, attend_words)}

# ---------------------------------------------------------------------------------------
# Finding and opening the library

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "libattend.so"


def _in_site_packages() -> bool:
    return os.path.basename(os.path.dirname(PACKAGE_DIR)) in ("site-packages", "dist-packages")


def library_candidates() -> List[str]:
    """The paths tried for libattend.so, in order (see find_library)."""
    out = [os.path.join(PACKAGE_DIR, LIB_NAME)]
    # the build tree: <repo>/python/attend -> <repo>/build/libattend.so
    out.append(os.path.normpath(os.path.join(PACKAGE_DIR, "..", "..", "build", LIB_NAME)))
    if _in_site_packages():
        # an install under PREFIX: PREFIX/lib/python3.X/site-packages/attend -> PREFIX/lib
        out.append(os.path.normpath(os.path.join(PACKAGE_DIR, "..", "..", "..", LIB_NAME)))
    return out


def find_library() -> str:
    """Where libattend.so is loaded from.

    Order: ``$ATTEND_LIBRARY`` when set (it must exist: it is never silently passed over);
    ``attend/libattend.so`` next to this package (a wheel that bundles it); the build tree
    ``<repo>/build/libattend.so`` (this package run from ``<repo>/python``); for a package
    installed under a prefix, ``PREFIX/lib/libattend.so`` (where ``make install`` puts the
    library); last, ``libattend.so`` on the dynamic loader's search path.
    """
    env = os.environ.get("ATTEND_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise OSError(f"$ATTEND_LIBRARY={env}: no such file")
        return os.path.abspath(env)
    for c in library_candidates():
        if os.path.exists(c):
            return c
    found = ctypes.util.find_library("attend")
    if found:
        return found
    return LIB_NAME  # dlopen's own search (LD_LIBRARY_PATH, ld.so.cache)


def _prepare_openmp() -> None:
    # libgomp reads its wait policy when it is loaded, which is when libattend.so is opened
    # (unless something else loaded it first). Its default long spin-wait makes decoding on
    # shared cores very slow; the attend binary sets the same (README, "Library").
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "3000"


def _declare(lib: ctypes.CDLL) -> None:
    f = lib.attend_load
    f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    f.restype = ctypes.c_void_p
    lib.attend_free.argtypes = [ctypes.c_void_p]
    lib.attend_free.restype = None
    lib.attend_get_config.argtypes = [ctypes.c_void_p]
    lib.attend_get_config.restype = ctypes.POINTER(attend_config)
    lib.attend_verify.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_verify.restype = ctypes.c_int
    lib.attend_default_params.argtypes = []
    lib.attend_default_params.restype = attend_params
    lib.attend_translate.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(attend_params),
        ctypes.POINTER(attend_result), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_translate.restype = ctypes.c_int
    lib.attend_result_free.argtypes = [ctypes.POINTER(attend_result)]
    lib.attend_result_free.restype = None
    lib.attend_count_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_count_tokens.restype = ctypes.c_int
    for name in ("attend_isa", "attend_isa_available"):
        getattr(lib, name).argtypes = []
        getattr(lib, name).restype = ctypes.c_char_p
    lib.attend_default_threads.argtypes = []
    lib.attend_default_threads.restype = ctypes.c_int
    if hasattr(lib, "attend_version"):  # absent from libraries older than 0.4.0
        lib.attend_version.argtypes = []
        lib.attend_version.restype = ctypes.c_char_p
    # align.h
    lib.attend_view_parse.argtypes = [ctypes.c_char_p, ctypes.POINTER(attend_view), ctypes.c_char_p,
                                      ctypes.c_size_t]
    lib.attend_view_parse.restype = ctypes.c_int
    lib.attend_view_name.argtypes = [ctypes.POINTER(attend_view), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_view_name.restype = None
    lib.attend_view_check.argtypes = [ctypes.POINTER(attend_view), ctypes.c_int, ctypes.c_int,
                                      ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_view_check.restype = ctypes.c_int
    lib.attend_view_reduce.argtypes = [ctypes.POINTER(attend_view), c_float_p, ctypes.c_int,
                                       ctypes.c_int, ctypes.c_int, ctypes.c_int, c_float_p,
                                       ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_view_reduce.restype = ctypes.c_int
    lib.attend_words_from_pieces.argtypes = [c_char_pp, ctypes.c_int, ctypes.POINTER(attend_words)]
    lib.attend_words_from_pieces.restype = ctypes.c_int
    lib.attend_words_free.argtypes = [ctypes.POINTER(attend_words)]
    lib.attend_words_free.restype = None
    # returns a malloc'd string: kept as a raw pointer so that it can be freed
    lib.attend_alignment.argtypes = [ctypes.POINTER(attend_result), ctypes.POINTER(attend_config),
                                     ctypes.POINTER(attend_view), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_alignment.restype = ctypes.c_void_p


_lib: Optional[ctypes.CDLL] = None
_libc: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The opened library (opened on first use)."""
    global _lib
    if _lib is None:
        path = find_library()
        _prepare_openmp()
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise OSError(
                f"attend: cannot load {path}: {e}. Build it with `make` in the attend "
                "repository, or set $ATTEND_LIBRARY to the path of libattend.so") from None
        _declare(handle)
        _lib = handle
    return _lib


def libc_free(ptr: int) -> None:
    """free() a pointer the library malloc'd (the process's one C allocator)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _libc.free.argtypes = [ctypes.c_void_p]
        _libc.free.restype = None
    _libc.free(ptr)


def library_path() -> str:
    """The file the library was loaded from."""
    return lib()._name


ERR_LEN = 1024


def err_buffer() -> ctypes.Array:
    return ctypes.create_string_buffer(ERR_LEN)


def decode(b: Optional[bytes]) -> str:
    """C text to str (UTF-8; undecodable bytes, which a vocabulary may hold, become U+FFFD)."""
    return "" if b is None else b.decode("utf-8", errors="replace")
