#!/usr/bin/python3
"""gguf_io.py dump FILE: list a GGUF file's metadata and tensors; the GGUF writer and reader.
The code is the attend package's module attend.export.gguf_io (python/attend/export/gguf_io.py;
installed: `python -m attend.export` or `attend-export`). Run, this script is that
exporter's command line; imported (tools/ on sys.path), it is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import gguf_io as _module

if __name__ == "__main__":
    sys.exit(_module.main())
sys.modules[__name__] = _module
