"""What a shared object needs, read with binutils' readelf (installed with gcc)."""
import re
import subprocess


def readelf(args, path):
    try:
        p = subprocess.run(["readelf", "-W"] + args + [path], capture_output=True, text=True)
    except FileNotFoundError:
        raise SystemExit("attend: readelf is not installed (Debian: sudo apt-get install "
                         "binutils; it comes with gcc)")
    if p.returncode != 0:
        raise RuntimeError("readelf " + " ".join(args) + " " + path + ": " + p.stderr.strip())
    return p.stdout


def needed(path):
    """The sonames path's dynamic section NEEDs, in order."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path))


def version_needs(path):
    """The symbol versions path requires of other objects (GLIBC_2.34, GLIBCXX_3.4.29 ...)."""
    text = readelf(["-V"], path)
    part = text.split("Version needs section", 1)
    return set(re.findall(r"Name: ([A-Z_]+_[0-9][0-9.]*)", part[1])) if len(part) == 2 else set()


def highest(versions, prefix):
    """The highest of versions named prefix_X.Y.Z as a tuple of ints; () when none is."""
    found = [tuple(int(n) for n in v[len(prefix) + 1:].split("."))
             for v in versions if v.startswith(prefix + "_")]
    return max(found, default=())


def resolved_paths(path):
    """soname -> file for every library the dynamic loader finds for path (ldd)."""
    p = subprocess.run(["ldd", path], capture_output=True, text=True)
    return dict(re.findall(r"^\s*(\S+) => (/\S+)", p.stdout, re.M))
