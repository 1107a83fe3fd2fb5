"""The wheel's platform tag: manylinux_X_Y_ARCH (PEP 600), X.Y the highest glibc symbol
version any shipped object needs, so pip installs the wheel on every Linux with that glibc
or newer; linux_ARCH (this machine only) when the objects were not made self-contained."""
import platform

from . import elf


def glibc_needed(objects):
    """The highest GLIBC_X.Y any of objects needs, as (X, Y)."""
    return max((elf.highest(elf.version_needs(o), "GLIBC") for o in objects), default=())


def platform_tag(objects, self_contained):
    arch = platform.machine()
    glibc = glibc_needed(objects)
    if not self_contained or len(glibc) < 2:
        return "linux_" + arch
    return "manylinux_%d_%d_%s" % (glibc[0], glibc[1], arch)


def describe(objects):
    """One line per object: the highest GLIBC and GLIBCXX versions it needs (build log)."""
    lines = []
    for o in objects:
        v = elf.version_needs(o)
        shown = ["%s_%s" % (p, ".".join(map(str, elf.highest(v, p))))
                 for p in ("GLIBC", "GLIBCXX", "CXXABI") if elf.highest(v, p)]
        lines.append("attend:   %s needs %s" % (o.rsplit("/", 1)[-1], ", ".join(shown) or "-"))
    return "\n".join(lines)
