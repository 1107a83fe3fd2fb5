"""The safetensors reader and writer (numpy only): the attend package's module attend.export.safetensors_np
(python/attend/export/safetensors_np.py). Imported with tools/ on sys.path, this file is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import safetensors_np as _module

sys.modules[__name__] = _module
