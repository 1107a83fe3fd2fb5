"""The export command: `python -m attend.export` and the `attend-export` console script.

SOURCE OUT.gguf [--dtype f32|f16|int8] [--name NAME] [family options]: the family is chosen
from SOURCE (families.choose): a Hugging Face directory by config.json's model_type, a
Marian release by its .npz. Each family's own options and messages are those of its
exporter (the scripts tools/export_*.py run the same code)."""
from __future__ import annotations

import sys
from typing import List, Optional

from . import families

USAGE = """usage: attend-export SOURCE OUT.gguf [--dtype {f32,f16,int8}] [--name NAME] [options]

Convert a checkpoint into one attend .gguf file. The exporter is chosen from SOURCE:
  a Hugging Face directory, by config.json's model_type:
    marian    MarianMT / OPUS-MT          (attend.export.marian)
    m2m_100   M2M-100 and NLLB-200        (attend.export.m2m100; --languages CODES)
    mbart     mBART-50                    (attend.export.mbart)
    t5, mt5   T5, flan-t5, mT5, MADLAD-400 (attend.export.t5; --task at translation)
  a Marian release (.zip, .npz, or its unpacked directory)
                                          (attend.export.marian_npz; --hf-half)

  --dtype    storage type of weight matrices: f32 (default), f16, int8 (per-row scales)
  --name     general.name to record (default: SOURCE's name)

`attend-export SOURCE OUT.gguf --help` shows the chosen exporter's own options.
Exit codes: 0 written, 2 refused (unsupported or broken input; one-line message on
stderr), 1 other errors.
"""


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 2
    return families.choose(argv).main(argv)
