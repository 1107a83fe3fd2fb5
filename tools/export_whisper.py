#!/usr/bin/python3
"""export_whisper.py HF_DIR OUT.gguf [--dtype ...]: a Whisper directory.
The code is the attend package's module attend.export.whisper (python/attend/export/whisper.py;
installed: `python -m attend.export` or `attend-export`). Run, this script is that
exporter's command line; imported (tools/ on sys.path), it is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import whisper as _module

if __name__ == "__main__":
    sys.exit(_module.main())
sys.modules[__name__] = _module
