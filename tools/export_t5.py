#!/usr/bin/python3
"""export_t5.py HF_DIR OUT.gguf [--dtype ...] [--name NAME]: a T5 or mT5 directory (t5-small/base,
flan-t5, mT5, MADLAD-400).
The code is the attend package's module attend.export.t5 (python/attend/export/t5.py;
installed: `python -m attend.export` or `attend-export`). Run, this script is that
exporter's command line; imported (tools/ on sys.path), it is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import t5 as _module

if __name__ == "__main__":
    sys.exit(_module.main())
sys.modules[__name__] = _module
