"""NLLB-200's language codes in NllbTokenizer's order: the attend package's module attend.export.nllb_languages
(python/attend/export/nllb_languages.py). Imported with tools/ on sys.path, this file is that module."""
import sys

import attend_package  # noqa: F401  (puts the checkout's python/ on sys.path)
from attend.export import nllb_languages as _module

sys.modules[__name__] = _module
