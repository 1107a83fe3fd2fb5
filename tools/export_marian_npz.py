#!/usr/bin/python3
"""export_marian_npz.py RELEASE OUT.gguf [--dtype ...] [--hf-half]: a Marian release (.zip
or its directory).
The code is the attend package's module attend.export.marian_npz (python/attend/export/marian_npz.py;
installed: `python -m attend.export` or `attend-export`). Run, this script is that
exporter's command line; imported (tools/ on sys.path), it is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import marian_npz as _module

if __name__ == "__main__":
    sys.exit(_module.main())
sys.modules[__name__] = _module
