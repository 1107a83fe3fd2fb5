"""Puts the attend Python package on sys.path for the scripts in tools/, whose exporters and
GGUF helpers are thin wrappers over it: the checkout's python/ (this file being
<repo>/tools/attend_package.py), or after `make install` PREFIX/lib/python3.X/dist-packages
(this file being PREFIX/share/attend/tools/attend_package.py). Importing it is enough."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_VERSION = "python%d.%d" % sys.version_info[:2]
for _d in (os.path.join(HERE, "..", "python"),
           os.path.join(HERE, "..", "..", "..", "lib", _VERSION, "dist-packages")):
    _d = os.path.normpath(_d)
    if os.path.isfile(os.path.join(_d, "attend", "export", "__init__.py")):
        if _d not in sys.path:
            sys.path.insert(0, _d)
        break
