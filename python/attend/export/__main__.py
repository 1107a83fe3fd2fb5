"""`python -m attend.export SOURCE OUT.gguf ...` (see cli.py). attend.export() runs this file
by its path (find_exporter), so it also works run as a script: it then puts the package's
parent directory, instead of its own, first on sys.path."""
import os
import sys

if not __package__:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from attend.export.cli import main
else:
    from .cli import main

sys.exit(main())
