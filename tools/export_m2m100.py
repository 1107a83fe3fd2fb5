#!/usr/bin/python3
"""export_m2m100.py HF_DIR OUT.gguf [--dtype ...] [--languages CODES]: an M2M-100 or
NLLB-200 directory.
The code is the attend package's module attend.export.m2m100 (python/attend/export/m2m100.py;
installed: `python -m attend.export` or `attend-export`). Run, this script is that
exporter's command line; imported (tools/ on sys.path), it is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import m2m100 as _module

if __name__ == "__main__":
    sys.exit(_module.main())
sys.modules[__name__] = _module
