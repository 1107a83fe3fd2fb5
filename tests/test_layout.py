#!/usr/bin/python3
"""The checkout works wherever it is: no tracked file names an absolute path of a developer's
machine (the dev machines' work tree, a home or root directory, a mount point, a temporary
file used as data), and the tests and tools find the shared corpora through
tools/data_paths.py alone (../shared/data beside the checkout, or $ATTEND_DATA).
Run: /usr/bin/python3 tests/test_layout.py"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

# A path starts where the previous character cannot be part of a relative path or a word
# (a folder named work inside build/gpu or $G, "../shared") nor the "<" of a closing tag ("</root>").
START = rb"(?<![A-Za-z0-9_.~$/<>\\-])"
# Directories that exist on one developer's machine only. Legitimate absolute paths
# (/usr/bin/python3, /dev/null, /proc/cpuinfo, /etc/ld.so.conf.d, an install PREFIX such as
# /usr/local or /opt/attend) are not listed.
MACHINE = re.compile(START + rb"/(?:work|root|mnt|media|scratch)\b(?!-)"
                     rb"|" + START + rb"/(?:home|Users)/[A-Za-z0-9_.-]+")
# A temporary file as data, in code: a test or tool that reads or writes a fixed /tmp path
# depends on what the machine left there and collides with a second run. A mkstemp/mkdtemp
# template (...XXXXXX) is a fresh name each time. Documentation may show commands that put
# scratch files in /tmp.
TMP = re.compile(START + rb"/tmp/(?![A-Za-z0-9_.-]*XXXXXX)")
CODE = (".py", ".c", ".h", ".cc", ".sh", ".js", ".html", ".map", ".json", ".toml", ".cfg")
# .gitignore patterns that start with / are anchors to the repository's root, not paths.
ANCHORS = (".gitignore", ".gitattributes")
# this file: its samples of what is caught (test_detector checks them)
SELF = os.path.relpath(os.path.abspath(__file__), T.REPO)


def tracked_files():
    """The repository's tracked files (and those added to its index), relative to its root;
    without git (an exported tree), every file outside build folders and caches."""
    try:
        out = subprocess.run(["git", "-C", T.REPO, "ls-files", "-z"], capture_output=True,
                             check=True).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(T.REPO):
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build") and d != "__pycache__"]
            files += [os.path.relpath(os.path.join(root, n), T.REPO) for n in names]
        return files


def is_code(rel):
    name = os.path.basename(rel)
    return rel.endswith(CODE) or name == "Makefile" or name.startswith("Makefile.")


def findings(rel, data):
    """'path:line: text' for each machine path in data (the bytes of the tracked file rel)."""
    if os.path.basename(rel) in ANCHORS or rel == SELF:
        return []
    out = []
    hits = [m.start() for m in MACHINE.finditer(data)]
    if is_code(rel):
        hits += [m.start() for m in TMP.finditer(data)]
    for at in sorted(set(hits)):
        line = data.count(b"\n", 0, at) + 1
        begin = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        text = data[begin:end if end >= 0 else len(data)][:160]
        out.append(f"{rel}:{line}: {text.decode('utf-8', 'replace').strip()}")
    return out


# Code that builds the corpora's path itself instead of asking tools/data_paths.py:
# os.path.join(..., "shared", "data") or a literal "../shared/data".
OWN_DATA_PATH = re.compile(r"""["']shared["']\s*,\s*["']data["']|["'](?:\.\./)+shared/data""")
DATA_HELPERS = ("tools/data_paths.py",)


def test_detector():
    """The patterns catch what they are for and pass what is legitimate."""
    # the samples spell the development folder's name in two parts, so that this file does not
    # itself name a machine path (a project check greps the tree for one)
    w = b"/" + b"work"
    bad = [("tools/x.py", b'data = "' + w + b'/shared/data/tatoeba.gz"'),
           ("tests/x.py", b"HOME=/root python3"),
           ("docs/x.md", b"see /home/alice/corpora"),
           ("docs/x.md", b"cd /Users/bob/attend"),
           ("README.md", b"`" + w + b"/wt-x/build/attend`"),
           ("models/m.gguf", b"\x00\x11" + w + b"/shared/data/spm.txt\x00"),
           ("tools/x.py", b"open('/tmp/corpus.txt')"),
           ("Makefile", b"\tcp x /tmp/model.gguf"),
           ("tests/x.sh", b"ATTEND_DATA=/mnt/data sh run.sh")]
    good = [("tools/x.py", b"PYTHON = '/usr/bin/python3'"),
            ("tests/x.c", b'fopen("/dev/null", "w"); fopen("/proc/self/status", "r");'),
            ("tests/x.py", b"<root><a/></root>"),
            ("models/m.gguf", b"\x00build/gpu" + w + b"/data/spm-joint.txt\x00"),
            ("tools/x.sh", b'cp -r $G' + w + b'/. "$G/$name/"'),
            ("tools/x.py", b'os.path.join(REPO, "..", "shared", "data")'),
            ("tests/x.c", b'char path[] = "/tmp/attend-test-npz-XXXXXX";'),
            ("BENCHMARKS.md", b"attend quantize models/de-en.gguf /tmp/pool-int8.gguf"),
            ("README.md", b"PYTHONPATH=/opt/attend/python make install PREFIX=/usr/local"),
            (".gitignore", w + b"/\n/tmp/\n"),
            ("tools/x.py", b"--workers 4 /workers/ ./" + b"work/ my-work/ root/ /rootfs"),
            ("tools/x.py", b"import os  # /" + b"work-in-progress")]
    for rel, text in bad:
        assert findings(rel, text), f"not caught: {rel}: {text!r}"
    for rel, text in good:
        assert not findings(rel, text), f"caught: {findings(rel, text)}"
    assert OWN_DATA_PATH.search('p = os.path.join(REPO, "..", "shared", "data")')
    assert OWN_DATA_PATH.search("DATA = '../shared/data/multi30k'")
    assert not OWN_DATA_PATH.search('help="default ../shared/data beside the checkout"')


def test_no_machine_paths():
    found = []
    for rel in tracked_files():
        path = os.path.join(T.REPO, rel)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                found += findings(rel, f.read())
    assert not found, ("tracked files name paths of a developer's machine (make them relative "
                       "to the checkout; corpora through tools/data_paths.py):\n  " + "\n  ".join(found))


def test_one_data_helper():
    found = []
    for rel in tracked_files():
        if not rel.endswith(".py") or rel in DATA_HELPERS or rel == SELF:
            continue
        with open(os.path.join(T.REPO, rel), encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                if OWN_DATA_PATH.search(line.split("#", 1)[0]):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "build the corpora's path with tools/data_paths.py:\n  " + "\n  ".join(found)


def test_data_helper():
    """data_paths: ../shared/data beside the checkout by default, $ATTEND_DATA when set, and a
    missing file is one MissingData error (a SystemExit: a tool stops with its message) that
    names the file and where it looked."""
    import data_paths as D
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import data_paths as D; "
            "print(D.data_dir()); D.corpus('no-such-corpus', 'train.de.gz')")
    env = {k: v for k, v in os.environ.items() if k != D.ENV}
    p = subprocess.run([T.PYTHON, "-c", code, T.TOOLS], capture_output=True, text=True, env=env, cwd="/")
    want = os.path.normpath(os.path.join(T.REPO, "..", "shared", "data"))
    assert p.stdout.strip() == want, p.stdout
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert os.path.join(want, "no-such-corpus", "train.de.gz") in p.stderr, p.stderr
    assert "ATTEND_DATA" in p.stderr, p.stderr
    elsewhere = T.tempdir()
    os.makedirs(os.path.join(elsewhere, "no-such-corpus"))
    p = subprocess.run([T.PYTHON, "-c", code, T.TOOLS], capture_output=True, text=True,
                       env=dict(env, ATTEND_DATA=elsewhere), cwd="/")
    assert p.stdout.strip() == elsewhere and "from $ATTEND_DATA" in p.stderr, p.stdout + p.stderr
    with open(os.path.join(elsewhere, "no-such-corpus", "train.de.gz"), "wb"):
        pass
    p = subprocess.run([T.PYTHON, "-c", code, T.TOOLS], capture_output=True, text=True,
                       env=dict(env, ATTEND_DATA=elsewhere), cwd="/")
    assert p.returncode == 0, p.stderr
    assert issubclass(D.MissingData, SystemExit)


def main():
    r = T.Runner()
    r.check("the machine-path patterns catch the development folder, /home/USER, /root, /tmp data; pass /usr, /dev, anchors",
            test_detector)
    r.check("no tracked file names an absolute path of a developer's machine", test_no_machine_paths)
    r.check("only tools/data_paths.py builds the path of the shared corpora", test_one_data_helper)
    r.check("tools/data_paths.py: ../shared/data or $ATTEND_DATA; a missing file named with where it looked",
            test_data_helper)
    r.finish()


if __name__ == "__main__":
    main()
