"""attend.dask's constants and its Failure exception."""
from __future__ import annotations

import re




PROG = "attend.dask"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
CHUNK_RE = re.compile(r"^(\d{6,})\.txt$")
TMP_RE = re.compile(r"^(\d{6,}\.txt|manifest\.json)\.tmp\.\d+$")  # an interrupted write_atomic

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_MODEL, EXIT_IO = 0, 1, 2, 3, 4
EXIT_INCOMPLETE = 75  # EX_TEMPFAIL: --max-chunks stopped the run, chunks are left
EXIT_INTERRUPTED = 130


class Failure(Exception):
    """An error to report as one line and an exit status."""

    def __init__(self, message: str, status: int = EXIT_FAIL) -> None:
        super().__init__(message)
        self.status = status
