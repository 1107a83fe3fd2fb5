"""Build step of the attend package: compile libattend.so and ship it inside the package.

The metadata is in pyproject.toml; this file only adds the C build. `pip install ./python`
from a checkout runs the repository's Makefile for the shared library into the build
directory's temp folder (not the checkout's build/, so a user's own build is left alone)
and copies the library to attend/libattend.so, which the package loads first
(attend/_capi.py find_library; $ATTEND_LIBRARY still overrides).

Outside a checkout (an sdist, a copy of python/ alone) there is nothing to compile: a
libattend.so already lying in attend/ is shipped as it is, else the build stops and says
what to do. An editable install (pip install -e) compiles nothing: run from the checkout,
the package loads <repo>/build/libattend.so, which `make` builds.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LIB_NAME = "libattend.so"
BUILD_PKGS = "g++ make libsentencepiece-dev libgumbo-dev zlib1g-dev"


def in_checkout():
    """Whether this package sits in an attend checkout (<repo>/python), so make can build."""
    return all(os.path.isfile(os.path.join(REPO, f)) for f in ("Makefile", "model/attend.h"))


def make_library(build_dir):
    """Run the checkout's make for libattend.so into build_dir; returns the library's path.
    Raises SystemExit with make's last lines and the packages to install when it fails."""
    jobs = str(max(1, min(os.cpu_count() or 1, 8)))
    cmd = ["make", "-C", REPO, "-j" + jobs, "BUILD=" + build_dir, build_dir + "/" + LIB_NAME]
    print("attend: building " + LIB_NAME + ": " + " ".join(cmd), flush=True)
    # pip run under make (make test) must not hand the outer make's variables to this build
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env)
    except FileNotFoundError:
        raise SystemExit("attend: cannot build " + LIB_NAME + ": `make` is not installed. "
                         "Install the build packages (Debian: sudo apt-get install " + BUILD_PKGS
                         + ", or `make build-deps` in the checkout), then run pip again.")
    if p.returncode != 0:
        tail = "\n".join(p.stdout.rstrip().splitlines()[-15:])
        raise SystemExit(tail + "\nattend: building " + LIB_NAME + " failed (make's last lines "
                         "above). Missing a compiler or a header? Install the build packages "
                         "(Debian: sudo apt-get install " + BUILD_PKGS + ", or `make build-deps` "
                         "in the checkout), then run pip again.")
    return os.path.join(build_dir, LIB_NAME)


class BuildPyWithLibrary(build_py):
    """build_py, then libattend.so compiled by the checkout's Makefile into the package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        shipped = os.path.join(HERE, "attend", LIB_NAME)
        dest = os.path.join(self.build_lib, "attend", LIB_NAME)
        if not in_checkout():
            if os.path.isfile(shipped):
                return  # a prebuilt copy in attend/: package data, already copied
            raise SystemExit("attend: no " + LIB_NAME + " to ship: this package is not inside "
                             "an attend checkout (" + REPO + " has no Makefile and "
                             "model/attend.h), so the C library cannot be built. Install from a "
                             "checkout: git clone the repository, install the build packages "
                             "(Debian: sudo apt-get install " + BUILD_PKGS + "), then pip "
                             "install ./python from its root.")
        build_temp = os.path.abspath(self.get_finalized_command("build").build_temp)
        built = make_library(os.path.join(build_temp, "attend-c"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)
        os.chmod(dest, 0o755)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: tag it for this platform, not as pure Python."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
