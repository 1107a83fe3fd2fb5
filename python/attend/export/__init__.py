"""attend.export: convert a checkpoint into one attend .gguf file.

The exporters are modules of this package, one per family (``marian``, ``m2m100`` for
M2M-100 and NLLB-200, ``mbart``, ``marian_npz`` for Marian's own releases; ``families``
says which takes what), with the writers they share (``gguf_io``, ``safetensors_np``).
From a shell: ``python -m attend.export SOURCE OUT.gguf [--dtype ...]`` or the console
script ``attend-export`` (cli.py); the scripts ``tools/export_*.py`` of a checkout run the
same code.

This module is also callable: ``attend.export(src, out, dtype="f16")`` is export() below,
which runs the exporter in a subprocess with this interpreter: the file ``__main__.py`` of
this package (find_exporter(); ``$ATTEND_EXPORTER`` names another script to run instead).
"""
from __future__ import annotations

import os
import subprocess
import sys
import types
import warnings
from typing import Any, Optional, Sequence, Union

from .._common import AttendError, AttendWarning

PathLike = Union[str, "os.PathLike[str]"]
DTYPES = ("f16", "f32", "int8")
ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


def find_exporter() -> str:
    """The script export() runs: $ATTEND_EXPORTER when set (it must exist), else this
    package's ``attend/export/__main__.py``."""
    env = os.environ.get("ATTEND_EXPORTER")
    if env:
        if not os.path.isfile(env):
            raise AttendError(f"$ATTEND_EXPORTER={env}: no such file")
        return env
    return ENTRY


def export(src_dir: PathLike, out_path: PathLike, dtype: str = "f16", name: Optional[str] = None,
           python: Optional[str] = None, languages: Union[None, str, Sequence[str]] = None) -> str:
    """Convert a checkpoint into one .gguf file: a Hugging Face directory (MarianMT /
    OPUS-MT, M2M-100, NLLB-200, mBART-50: config.json, model.safetensors or
    pytorch_model.bin, the tokenizer files) or a Marian release (.zip, or its directory):
    ``python -m attend.export SRC OUT --dtype DTYPE [--name NAME] [--languages CODES]`` run
    with this interpreter (or ``python``). Multilingual families (M2M-100, NLLB-200) take
    the checkpoint's languages from its tokenizer files; ``languages`` (the codes in the
    tokenizer's order, a list or one comma-separated str) is for a directory without them.

    ``dtype``: "f16" (default), "f32" or "int8" (per-row scales; what ``attend quantize``
    writes). ``name`` is recorded as general.name (default: the directory's name). The
    exporter needs numpy for safetensors and torch for pytorch_model.bin. Returns
    ``out_path``; raises AttendError with the exporter's message when it refuses the
    directory (an unsupported configuration, a Git LFS pointer, a missing file); its
    warnings become AttendWarning."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype is one of {', '.join(DTYPES)}, not {dtype!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if languages is not None and not isinstance(languages, str):
        if not all(isinstance(x, str) for x in languages):
            raise TypeError("languages must be a str or a sequence of str (language codes)")
        languages = ",".join(languages)
    src, out = os.fspath(src_dir), os.fspath(out_path)
    if not os.path.exists(src):
        raise AttendError(f"{src}: no such directory (a Hugging Face model directory or a "
                          "Marian release)")
    cmd = [python or sys.executable, find_exporter(), src, out, "--dtype", dtype]
    if name is not None:
        cmd += ["--name", name]
    if languages is not None:
        cmd += ["--languages", languages]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace")
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    if p.returncode != 0:
        msg = lines[-1] if lines else f"exit status {p.returncode}"
        e = AttendError(f"export {src}: {msg}")
        e.returncode = p.returncode  # type: ignore[attr-defined]
        e.stderr = p.stderr  # type: ignore[attr-defined]
        raise e
    for ln in lines:
        warnings.warn(f"export {src}: {ln}", AttendWarning, stacklevel=2)
    return out


class _CallableModule(types.ModuleType):
    """attend.export is this package and, called, export(): the package keeps the name
    ``python -m attend.export`` runs, and ``attend.export(src, out)`` keeps working."""

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
