"""Where the shared corpora are, for every test and tool: ../shared/data beside this checkout
(whatever path the checkout is at), or the directory in $ATTEND_DATA. Never copied into the
repository, never replaced by made-up text: a missing file is one MissingData error that names
the file and where it was looked for.

    import data_paths as D
    D.data_dir()                                     # the directory
    D.corpus("multi30k", "test_2016_flickr.de.gz")   # a file in it; MissingData when absent
"""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = "ATTEND_DATA"
DEFAULT = os.path.normpath(os.path.join(REPO, "..", "shared", "data"))


class MissingData(SystemExit):
    """A corpus file or folder that is not there. A SystemExit: a tool stops with the message
    alone (exit status 1, no traceback); testlib.Runner counts it as one failed check."""


def data_dir():
    """The corpora's directory: $ATTEND_DATA when set, else ../shared/data beside the checkout."""
    d = os.environ.get(ENV)
    return os.path.abspath(d) if d else DEFAULT


def where():
    """How data_dir() was chosen, for messages."""
    if os.environ.get(ENV):
        return f"{data_dir()} (from ${ENV})"
    return f"{DEFAULT} (../shared/data beside the checkout {REPO}; set ${ENV}=DIR to look elsewhere)"


def missing(path, base=None):
    """The MissingData error for path, a file or folder under base (default data_dir())."""
    same = base is None or os.path.abspath(base) == data_dir()
    looked = where() if same else os.path.abspath(base)
    return MissingData(f"missing corpus {path}: looked in {looked}")


def corpus(*parts, base=None):
    """The path of parts (e.g. "tatoeba-deu-eng", "tatoeba-deu-eng.train.de.gz") under base
    (default data_dir()); raises MissingData when it does not exist."""
    path = os.path.join(base if base is not None else data_dir(), *parts)
    if not os.path.exists(path):
        raise missing(path, base)
    return path
