"""Which exporter converts which checkpoint. A Hugging Face directory is chosen by its
config.json's model_type (FAMILIES: model_type -> this package's module, each with
export() and main(argv)); a Marian release (a .zip, an .npz, or a directory holding an
.npz and no config.json) goes to marian_npz. One more family is one more FAMILIES entry
and its module."""
from __future__ import annotations

import glob
import importlib
import json
import os
from types import ModuleType
from typing import List, Optional

FAMILIES = {
    "marian": "marian",    # MarianMT / OPUS-MT
    "m2m_100": "m2m100",   # M2M-100 and NLLB-200
    "mbart": "mbart",      # mBART-50
    "t5": "t5",            # T5, flan-t5, MADLAD-400
    "mt5": "t5",           # mT5
    "whisper": "whisper",  # Whisper (speech)
}
RELEASE = "marian_npz"     # Marian's own releases (no config.json)

# options of the exporters that take a value (so that the value is not read as the source)
VALUE_OPTIONS = ("--dtype", "--name", "--languages")


def exporter_module(model_type: Optional[str]) -> Optional[ModuleType]:
    """The module exporting model_type's checkpoints, or None for one no exporter takes."""
    name = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    return importlib.import_module("." + name, __package__) if name else None


def model_type(hf_dir: str) -> Optional[str]:
    """config.json's model_type in hf_dir, or None (no file, not JSON, no key)."""
    try:
        with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
            value = json.load(f).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def is_marian_release(path: str) -> bool:
    """A Marian release: a .zip or .npz file, or a directory with an .npz and no config.json."""
    if os.path.isfile(path):
        return path.endswith((".zip", ".npz"))
    return (os.path.isdir(path) and not os.path.exists(os.path.join(path, "config.json"))
            and bool(glob.glob(os.path.join(glob.escape(path), "*.npz"))))


def source_argument(argv: List[str]) -> Optional[str]:
    """The first positional argument of an exporter's command line (its SOURCE)."""
    skip = False
    for x in argv:
        if skip:
            skip = False
        elif x in VALUE_OPTIONS:
            skip = True
        elif not x.startswith("-"):
            return x
    return None


def choose(argv: List[str]) -> ModuleType:
    """The exporter module for a command line: by the source's kind and model_type. A
    model_type no exporter takes goes to marian, which refuses it naming the value."""
    source = source_argument(argv)
    if source is not None and is_marian_release(source):
        return importlib.import_module("." + RELEASE, __package__)
    module = exporter_module(model_type(source)) if source is not None else None
    return module or importlib.import_module(".marian", __package__)
