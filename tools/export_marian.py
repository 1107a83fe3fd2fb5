#!/usr/bin/python3
"""export_marian.py HF_DIR OUT.gguf [--dtype f32|f16|int8] [--name NAME]: a Hugging Face
MarianMT directory (M2M-100, NLLB-200 and mBART-50 directories go to their own exporters).
The code is the attend package's module attend.export.marian (python/attend/export/marian.py;
installed: `python -m attend.export` or `attend-export`). Run, this script is that
exporter's command line; imported (tools/ on sys.path), it is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import marian as _module

if __name__ == "__main__":
    sys.exit(_module.main())
sys.modules[__name__] = _module
