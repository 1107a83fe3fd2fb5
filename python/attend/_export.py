"""attend.export: convert a Hugging Face MarianMT directory with the project's exporter.

The exporter, ``tools/export_marian.py`` (with its helpers ``gguf_io.py`` and
``safetensors_np.py`` beside it), is not copied into this package: it is run as a
subprocess with this interpreter. It is found as ``$ATTEND_EXPORTER``, else in the build
tree (``<repo>/tools``, this package being ``<repo>/python/attend``), else in
``share/attend/tools/`` of an install prefix (beside the library's ``lib/``, or above this
package's ``lib/python3.X/site-packages``). An installed package without either raises
AttendError saying where it looked.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from typing import List, Optional, Union

from . import _capi as C
from ._model import AttendError, AttendWarning

PathLike = Union[str, "os.PathLike[str]"]
DTYPES = ("f16", "f32", "int8")
EXPORTER = "export_marian.py"


def exporter_candidates() -> List[str]:
    """The paths tried for export_marian.py after $ATTEND_EXPORTER, in order."""
    out = []
    repo, prefix = C.repo_dir(), C.prefix_dir()
    share = os.path.join("share", "attend", "tools", EXPORTER)
    if repo:
        out.append(os.path.join(repo, "tools", EXPORTER))
    libdir = C.library_dir()
    if libdir:
        out.append(os.path.normpath(os.path.join(libdir, "..", share)))
    if prefix:
        out.append(os.path.join(prefix, share))
    return list(dict.fromkeys(out))


def find_exporter() -> str:
    """The exporter script export() runs (see the module's documentation for the order)."""
    env = os.environ.get("ATTEND_EXPORTER")
    if env:
        if not os.path.isfile(env):
            raise AttendError(f"$ATTEND_EXPORTER={env}: no such file")
        return env
    looked = exporter_candidates()
    for p in looked:
        if os.path.isfile(p):
            return p
    raise AttendError("the exporter tools/export_marian.py was not found (looked for "
                      + ", ".join(looked) + "): it ships with the attend repository, not with "
                      "this package; run from a checkout, or set ATTEND_EXPORTER to its path")


def export(src_dir: PathLike, out_path: PathLike, dtype: str = "f16", name: Optional[str] = None,
           python: Optional[str] = None) -> str:
    """Convert a Hugging Face MarianMT / OPUS-MT directory (config.json, model.safetensors
    or pytorch_model.bin, source.spm, target.spm, vocab.json, ...) into one .gguf file:
    ``tools/export_marian.py SRC OUT --dtype DTYPE [--name NAME]`` run with this
    interpreter (or ``python``).

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
    src, out = os.fspath(src_dir), os.fspath(out_path)
    if not os.path.isdir(src):
        raise AttendError(f"{src}: not a directory (a Hugging Face MarianMT model directory)")
    cmd = [python or sys.executable, find_exporter(), src, out, "--dtype", dtype]
    if name is not None:
        cmd += ["--name", name]
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
