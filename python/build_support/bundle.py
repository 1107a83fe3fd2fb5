"""Make libattend.so self-contained, as auditwheel does: every library it needs outside the
manylinux set is copied beside it under a name with a hash of its bytes (so it can never be
taken for, or clash with, another copy of that library in the same process), and every
object finds the copies through an $ORIGIN run path. Needs Debian's patchelf."""
import hashlib
import os
import shutil
import subprocess

from . import elf

# sonames every manylinux system provides (PEP 600 / auditwheel's policies, the C and C++
# runtimes); everything else is bundled
MANYLINUX_SONAMES = frozenset((
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
    "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"))


def hashed_name(soname, path):
    """libfoo.so.0 -> libfoo-1a2b3c4d.so.0 (the first 8 hex digits of the file's sha256)."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, dot, rest = soname.partition(".so")
    return stem + "-" + digest + dot + rest


def patchelf(*args):
    try:
        p = subprocess.run(["patchelf"] + list(args), capture_output=True, text=True)
    except FileNotFoundError:
        raise SystemExit("attend: patchelf is not installed (Debian: sudo apt-get install "
                         "patchelf); it is needed to bundle libattend.so's dependencies")
    if p.returncode != 0:
        raise SystemExit("attend: patchelf " + " ".join(args) + " failed: " + p.stderr.strip())


def to_bundle(library):
    """soname -> system file of every library that library needs, directly or through
    another, outside the manylinux set."""
    found = elf.resolved_paths(library)
    todo, out = [library], {}
    while todo:
        for soname in elf.needed(todo.pop()):
            if soname in MANYLINUX_SONAMES or soname in out:
                continue
            if soname not in found:
                raise SystemExit("attend: " + library + " needs " + soname + ", which the "
                                 "dynamic loader does not find on this machine")
            out[soname] = os.path.realpath(found[soname])
            todo.append(out[soname])
    return out


def bundle(library):
    """Copy what library needs outside the manylinux set beside it, renamed, and point every
    object at the copies; returns the copies' file names."""
    folder = os.path.dirname(library)
    wanted = to_bundle(library)
    renamed = {soname: hashed_name(soname, path) for soname, path in wanted.items()}
    objects = [library]
    for soname, name in renamed.items():
        copy = os.path.join(folder, name)
        shutil.copyfile(wanted[soname], copy)
        os.chmod(copy, 0o755)
        patchelf("--set-soname", name, copy)
        objects.append(copy)
    for obj in objects:
        for soname in elf.needed(obj):
            if soname in renamed:
                patchelf("--replace-needed", soname, renamed[soname], obj)
        patchelf("--set-rpath", "$ORIGIN", obj)
    return sorted(renamed.values())

