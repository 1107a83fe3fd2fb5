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
import threading
from typing import List, Optional

# ---------------------------------------------------------------------------------------
# Structures (field order and types exactly as in the headers)

# the struct layout mirrored here (model/attend.h ATTEND_ABI); the library must report it
ABI = 15
ATTEND_VIEW_MAX = 64
# the metadata key a model file records its alignment view under (align.h)
ATTEND_ALIGNMENT_VIEW_KEY = "attend.alignment.view"

# attend_params.early_stopping
ATTEND_EARLY_MODEL, ATTEND_EARLY_FALSE, ATTEND_EARLY_TRUE, ATTEND_EARLY_NEVER = 0, 1, 2, 3
# align.h
ATTEND_LAYER_LAST, ATTEND_LAYER_PENULTIMATE, ATTEND_LAYER_ALL = -1, -2, -3
ATTEND_HEAD_AVG = -1

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
        ("max_line_bytes", ctypes.c_longlong),
        ("architecture", ctypes.c_char_p),
        ("n_languages", ctypes.c_int),
        ("languages", ctypes.POINTER(ctypes.c_char_p)),
        ("language_ids", c_int_p),
        ("alignment_view", ctypes.c_char_p),
        ("alignment_view_recorded", ctypes.c_int),
        ("n_tasks", ctypes.c_int),
        ("tasks", ctypes.POINTER(ctypes.c_char_p)),
        ("task_prefixes", ctypes.POINTER(ctypes.c_char_p)),
        ("encoder_head_dim", ctypes.c_int),
        ("decoder_head_dim", ctypes.c_int),
        ("relative_buckets", ctypes.c_int),
        ("relative_max_distance", ctypes.c_int),
        ("audio", ctypes.c_int),  # a speech model (Whisper): its log-mel bins and window frames
        ("n_mels", ctypes.c_int),
        ("audio_frames", ctypes.c_int),
        ("n_alignment_heads", ctypes.c_int),
        ("alignment_heads", ctypes.POINTER(ctypes.c_int)),
        ("align_head_layer", ctypes.c_int),
        ("align_head_width", ctypes.c_int),
    ]


# int (*on_batch)(void *user, const int *index, int n)
ON_BATCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, c_int_p, ctypes.c_int)
ON_TOKEN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float)


class attend_stats(ctypes.Structure):
    """``attend_stats`` (attend.h): where one call's time went (attend_params.stats)."""

    _fields_ = [
        ("encode_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
        ("steps", ctypes.c_longlong),
        ("encoder_passes", ctypes.c_longlong),
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
        ("batch_size", ctypes.c_int),
        ("batch_tokens", ctypes.c_int),
        ("on_batch", ON_BATCH),
        ("user", ctypes.c_void_p),
        ("src_lang", ctypes.c_char_p),
        ("tgt_lang", ctypes.c_char_p),
        ("stats", ctypes.POINTER(attend_stats)),
        ("target_prefix", ctypes.POINTER(ctypes.c_char_p)),
        ("target_prefix_ids", ctypes.POINTER(c_int_p)),
        ("target_prefix_lens", c_int_p),
        ("task", ctypes.c_char_p),
        ("split", ctypes.c_int),
        ("split_lang", ctypes.c_char_p),
        ("stop", ctypes.POINTER(ctypes.c_int)),  # checked between decoder steps
        ("suppress_ids", ctypes.POINTER(c_int_p)),
        ("suppress_lens", c_int_p),
        ("n_suppress", ctypes.c_int),
        ("disable_unk", ctypes.c_int),
        ("on_token", ON_TOKEN),
        ("token_user", ctypes.c_void_p),
        ("cross_heads", ctypes.POINTER(ctypes.c_int)),
        ("n_cross_heads", ctypes.c_int),
    ]


# attend_params.split
ATTEND_SPLIT_SENTENCES, ATTEND_SPLIT_NONE = 0, 1


class attend_span(ctypes.Structure):
    """``attend_span`` (attend.h): bytes [begin, end) of a text."""

    _fields_ = [("begin", ctypes.c_size_t), ("end", ctypes.c_size_t)]


class attend_sentence(ctypes.Structure):
    """``attend_sentence`` (attend.h): where one sentence of a split line is."""

    _fields_ = [
        ("src_begin", ctypes.c_size_t),
        ("src_end", ctypes.c_size_t),
        ("text_begin", ctypes.c_size_t),
        ("text_end", ctypes.c_size_t),
        ("src_token", ctypes.c_int),
        ("n_src", ctypes.c_int),
        ("tgt_token", ctypes.c_int),
        ("n_tgt", ctypes.c_int),
        ("truncated", ctypes.c_int),
        ("score", ctypes.c_float),
        ("normalized_score", ctypes.c_float),
    ]


class attend_hypothesis(ctypes.Structure):
    """``attend_hypothesis`` (attend.h): one entry of an n-best list."""

    _fields_ = [
        ("text", ctypes.c_char_p),
        ("ids", c_int_p),
        ("n", ctypes.c_int),
        ("score", ctypes.c_float),
        ("normalized_score", ctypes.c_float),
        ("logprob", ctypes.POINTER(ctypes.c_float)),
        ("dec_self", ctypes.POINTER(ctypes.c_float)),
        ("cross", ctypes.POINTER(ctypes.c_float)),
        ("pieces", c_char_pp),
        ("align_head", ctypes.POINTER(ctypes.c_float)),
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
        ("normalized_score", ctypes.c_float),
        ("n_best", ctypes.c_int),
        ("nbest", ctypes.POINTER(attend_hypothesis)),
        ("status", ctypes.c_int),
        ("message", ctypes.c_char_p),
        ("n_sentences", ctypes.c_int),
        ("sentences", ctypes.POINTER(attend_sentence)),
        ("head_cross", ctypes.POINTER(ctypes.c_float)),
        ("align_head", c_float_p),
    ]


class attend_load_params(ctypes.Structure):
    """``attend_load_params`` (attend.h): attend_load_with's options."""

    _fields_ = [
        ("inspect_only", ctypes.c_int),
        ("compute_type", ctypes.c_char_p),
    ]


class attend_view(ctypes.Structure):
    """``attend_view`` (align.h): which decoder layers and heads a view averages."""

    _fields_ = [
        ("n", ctypes.c_int),
        ("layer", ctypes.c_int * ATTEND_VIEW_MAX),
        ("head", ctypes.c_int * ATTEND_VIEW_MAX),
        ("shift", ctypes.c_int),
        ("words", ctypes.c_int),
        ("links", ctypes.c_int),
        ("align", ctypes.c_int),
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
STRUCTS = {c.__name__: c for c in (attend_config, attend_stats, attend_params, attend_hypothesis, attend_result,
                                   attend_load_params, attend_view, attend_words, attend_sentence, attend_span)}

# ---------------------------------------------------------------------------------------
# Finding and opening the library

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "libattend.so"


def _in_site_packages() -> bool:
    return os.path.basename(os.path.dirname(PACKAGE_DIR)) in ("site-packages", "dist-packages")


def repo_dir() -> Optional[str]:
    """The attend checkout this package runs from (``<repo>/python/attend``), or None when
    it is installed elsewhere."""
    repo = os.path.normpath(os.path.join(PACKAGE_DIR, "..", ".."))
    return repo if os.path.isfile(os.path.join(repo, "model", "attend.h")) else None


def prefix_dir() -> Optional[str]:
    """PREFIX of a package installed as PREFIX/lib/python3.X/{site,dist}-packages/attend
    (``make install``'s layout), else None."""
    if not _in_site_packages():
        return None
    return os.path.normpath(os.path.join(PACKAGE_DIR, "..", "..", "..", ".."))


def library_candidates() -> List[str]:
    """The paths tried for libattend.so after $ATTEND_LIBRARY, in order (see find_library)."""
    out = [os.path.join(PACKAGE_DIR, LIB_NAME)]
    repo, prefix = repo_dir(), prefix_dir()
    if repo:
        out.append(os.path.join(repo, "build", LIB_NAME))
    if prefix:
        out.append(os.path.join(prefix, "lib", LIB_NAME))
    return out


def find_library() -> str:
    """Where libattend.so is loaded from.

    Order: ``$ATTEND_LIBRARY`` when set (it must exist: it is never silently passed over);
    ``attend/libattend.so`` next to this package (where pip install puts it, python/setup.py);
    the build tree ``<repo>/build/libattend.so`` (this package run from ``<repo>/python``); for a package
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


def library_dir() -> Optional[str]:
    """The directory libattend.so is (or would be) loaded from, when a path names it."""
    try:
        path = find_library()
    except OSError:
        return None
    return os.path.dirname(os.path.abspath(path)) if os.sep in path and os.path.exists(path) else None


# name: (argtypes, restype, required). Functions marked optional are declared when the
# library has them (older builds lack them); the Python calls that need them say so.
_FUNCTIONS = {
    "attend_version": ([], ctypes.c_char_p, False),
    "attend_abi": ([], ctypes.c_int, True),
    "attend_mem_free": ([ctypes.c_void_p], None, True),
    "attend_load": ([ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_void_p, True),
    "attend_default_load_params": ([], attend_load_params, True),
    "attend_load_with": ([ctypes.c_char_p, ctypes.POINTER(attend_load_params), ctypes.c_char_p,
                          ctypes.c_size_t], ctypes.c_void_p, True),
    "attend_free": ([ctypes.c_void_p], None, True),
    "attend_get_config": ([ctypes.c_void_p], ctypes.POINTER(attend_config), True),
    "attend_verify": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int, True),
    "attend_default_params": ([], attend_params, True),
    "attend_translate_html": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t),
                               ctypes.c_int, ctypes.c_int, ctypes.POINTER(attend_params),
                               ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                               ctypes.c_size_t], ctypes.c_int, True),
    "attend_translate": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                          ctypes.POINTER(ctypes.c_size_t), ctypes.c_int,
                          ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(attend_params),
                          ctypes.POINTER(attend_result), ctypes.c_char_p, ctypes.c_size_t],
                         ctypes.c_int, True),
    "attend_result_free": ([ctypes.POINTER(attend_result)], None, True),
    "attend_tokenize": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_int_p),
                         c_int_p, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int, False),
    # malloc'd string: a raw pointer, so that it can be freed
    "attend_detokenize": ([ctypes.c_void_p, c_int_p, ctypes.c_int], ctypes.c_void_p, False),
    "attend_translate_ids": ([ctypes.c_void_p, ctypes.POINTER(c_int_p), c_int_p, ctypes.c_int,
                              ctypes.POINTER(c_int_p), c_int_p, ctypes.POINTER(attend_params),
                              ctypes.POINTER(attend_result), ctypes.c_char_p, ctypes.c_size_t],
                             ctypes.c_int, False),
    "attend_split_sentences": ([ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                ctypes.POINTER(ctypes.POINTER(attend_span)), ctypes.c_char_p, ctypes.c_size_t],
                               ctypes.c_int, True),
    "attend_count_tokens": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                             ctypes.c_size_t], ctypes.c_int, True),
    "attend_select_isa": ([ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int, True),
    "attend_vocab_size": ([ctypes.c_void_p, ctypes.c_int], ctypes.c_int, False),
    "attend_id_to_piece": ([ctypes.c_void_p, ctypes.c_int, ctypes.c_int], ctypes.c_char_p, False),
    "attend_piece_to_id": ([ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t],
                           ctypes.c_int, False),
    "attend_quantize": ([ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
                        ctypes.c_int, False),
    "attend_isa": ([], ctypes.c_char_p, True),
    "attend_isa_available": ([], ctypes.c_char_p, True),
    "attend_isa_bf16": ([ctypes.POINTER(ctypes.c_char_p)], ctypes.c_char_p, True),
    "attend_default_threads": ([], ctypes.c_int, True),
    # align.h
    "attend_view_parse": ([ctypes.c_char_p, ctypes.POINTER(attend_view), ctypes.c_char_p,
                           ctypes.c_size_t], ctypes.c_int, True),
    "attend_view_name": ([ctypes.POINTER(attend_view), ctypes.c_char_p, ctypes.c_size_t], None, True),
    "attend_view_check": ([ctypes.POINTER(attend_view), ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_size_t], ctypes.c_int, True),
    "attend_view_reduce": ([ctypes.POINTER(attend_view), c_float_p, ctypes.c_int, ctypes.c_int,
                            ctypes.c_int, ctypes.c_int, c_float_p, ctypes.c_char_p, ctypes.c_size_t],
                           ctypes.c_int, True),
    "attend_view_reduce_head": ([ctypes.POINTER(attend_view), c_float_p, c_float_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_int, ctypes.c_int, c_float_p, ctypes.c_char_p, ctypes.c_size_t],
                                ctypes.c_int, True),
    "attend_words_from_pieces": ([c_char_pp, ctypes.c_int, ctypes.POINTER(attend_words)],
                                 ctypes.c_int, True),
    "attend_words_free": ([ctypes.POINTER(attend_words)], None, True),
    # malloc'd string: a raw pointer, so that it can be freed
    "attend_alignment": ([ctypes.POINTER(attend_result), ctypes.POINTER(attend_config),
                          ctypes.POINTER(attend_view), ctypes.c_char_p, ctypes.c_size_t],
                         ctypes.c_void_p, True),
    "attend_alignment_both": ([ctypes.POINTER(attend_result), ctypes.POINTER(attend_config), ctypes.POINTER(attend_view),
                               ctypes.POINTER(attend_result), ctypes.POINTER(attend_config), ctypes.POINTER(attend_view),
                               ctypes.c_char_p, ctypes.c_size_t], ctypes.c_void_p, True),
    "attend_default_view": ([ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t], None, True),
    "attend_record_view": ([ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                            ctypes.c_size_t], ctypes.c_int, True),
}


def _declare(lib: ctypes.CDLL, path: str) -> None:
    missing = []
    for name, (args, res, required) in _FUNCTIONS.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            if required:
                missing.append(name)
            continue
        f.argtypes = args
        f.restype = res
    if missing:
        raise OSError(f"attend: {path} lacks {', '.join(missing)}: not a libattend.so this "
                      "package can use (rebuild it with make)")


def has(name: str) -> bool:
    """Whether the loaded library exports the function."""
    return hasattr(lib(), name)


_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def lib() -> ctypes.CDLL:
    """The opened library (opened on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = find_library()
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise OSError(
                f"attend: cannot load {path}: {e}. Build it with `make` in the attend "
                "repository, or set $ATTEND_LIBRARY to the path of libattend.so") from None
        _declare(handle, path)
        if handle.attend_abi() != ABI:
            raise OSError(f"attend: {path} has struct layout {handle.attend_abi()}, this package "
                          f"mirrors layout {ABI} (model/attend.h ATTEND_ABI): rebuild the library "
                          "or use the package of its version")
        _lib = handle
    return _lib


def libc_free(ptr: int) -> None:
    """Free a pointer the library malloc'd (attend_mem_free: the library's own allocator)."""
    lib().attend_mem_free(ptr)


def library_path() -> str:
    """The file the library was loaded from."""
    return lib()._name


ERR_LEN = 1024


def err_buffer() -> ctypes.Array:
    return ctypes.create_string_buffer(ERR_LEN)


def decode(b: Optional[bytes]) -> str:
    """C text to str (UTF-8; undecodable bytes, which a vocabulary may hold, become U+FFFD)."""
    return "" if b is None else b.decode("utf-8", errors="replace")
