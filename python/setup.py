"""Build step of the attend package: compile libattend.so and ship it inside the package.

The metadata is in pyproject.toml; this file only adds the C build (helpers in
build_support/, not installed). `pip install ./python` or `pip wheel ./python` from a
checkout, or pip on the sdist (which carries the library's C sources and the Makefile in
csrc/), runs the Makefile for the shared library into the build's temp folder (never the
checkout's build/), with gumbo and zlib linked in statically, and copies it to
attend/libattend.so, which the package loads first (attend/_capi.py find_library;
$ATTEND_LIBRARY still overrides). What it still needs outside the manylinux set
(libsentencepiece) is copied beside it under a hashed name with an $ORIGIN run path, and the
wheel is tagged py3-none-manylinux_X_Y_ARCH: any CPython 3 on a Linux with glibc X.Y or newer.

Without C sources (a copy of python/ alone) a libattend.so already lying in attend/ is
shipped as it is, else the build stops and says what to do. An editable install (pip
install -e) compiles nothing: the package loads <repo>/build/libattend.so, which `make` builds.
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # no wheel package: an sdist or a plain install needs none
        bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build_support import bundle, clib, csources, tags  # noqa: E402

LIB_NAME = clib.LIB_NAME
# set by the build: the platform tag the shipped objects allow (tags.platform_tag)
PLATFORM_TAG = []


def strip_debug(path):
    """Drop the debug sections (the Makefile builds with -g): a smaller wheel, same code."""
    try:
        subprocess.run(["strip", "--strip-debug", path], check=False)
    except FileNotFoundError:
        pass


def self_contained(library):
    """Bundle library's dependencies beside it when patchelf is there; says whether it did."""
    if shutil.which("patchelf") is None:
        print("attend: patchelf is not installed: the library is not made self-contained and "
              "the wheel is tagged for this machine only (Debian: apt-get install patchelf)")
        return False
    bundle.bundle(library)
    return True


class BuildPyWithLibrary(build_py):
    """build_py, then libattend.so compiled by the C tree's Makefile into the package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        shipped = os.path.join(HERE, "attend", LIB_NAME)
        dest = os.path.join(self.build_lib, "attend", LIB_NAME)
        tree = csources.find_c_tree(HERE)
        if tree is None:
            if os.path.isfile(shipped):
                return  # a prebuilt copy in attend/: package data, already copied
            raise SystemExit("attend: no " + LIB_NAME + " to ship: this package is not inside "
                             "an attend checkout (" + os.path.dirname(HERE) + " has no Makefile "
                             "and model/attend.h) and has no csrc/ folder of an sdist, so the C "
                             "library cannot be built. Install from a checkout: git clone the "
                             "repository, install the build packages (Debian: sudo apt-get "
                             "install " + clib.BUILD_PKGS + "), then pip install ./python from "
                             "its root.")
        build_temp = os.path.abspath(self.get_finalized_command("build").build_temp)
        built = clib.make_library(tree, os.path.join(build_temp, "attend-c"))
        folder = os.path.dirname(dest)
        os.makedirs(folder, exist_ok=True)
        for old in os.listdir(folder):  # copies bundled by an earlier build
            if old.startswith("lib") and ".so" in old:
                os.remove(os.path.join(folder, old))
        shutil.copyfile(built, dest)
        os.chmod(dest, 0o755)
        strip_debug(dest)
        portable = self_contained(dest)
        objects = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if ".so" in f]
        print(tags.describe(objects))
        PLATFORM_TAG[:] = [tags.platform_tag(objects, portable)]


class SdistWithSources(sdist):
    """The sdist, plus the library's C sources and the Makefile in csrc/, so pip can build
    the wheel from it alone."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        tree = csources.find_c_tree(HERE)
        if tree is None:
            raise SystemExit("attend: an sdist needs the C sources: run it from a checkout")
        for rel in csources.library_files(tree):
            out = os.path.join(base_dir, csources.SDIST_DIR, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copyfile(os.path.join(tree, rel), out)


class ManylinuxWheel(bdist_wheel or object):
    """Tagged py3-none-PLATFORM: the package is pure Python over a C library it opens with
    ctypes, so any CPython 3 can use it; only the platform (the library's) matters."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", PLATFORM_TAG[0] if PLATFORM_TAG else "linux_" + os.uname().machine


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: not a pure-Python one."""

    def has_ext_modules(self):
        return True


COMMANDS = {"build_py": BuildPyWithLibrary, "sdist": SdistWithSources}
if bdist_wheel is not None:
    COMMANDS["bdist_wheel"] = ManylinuxWheel
setup(cmdclass=COMMANDS, distclass=BinaryDistribution)
