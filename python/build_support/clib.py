"""Compile libattend.so with the C tree's Makefile, linked for a wheel.

Third-party C libraries with a static archive on the build machine (gumbo, zlib: Debian's
libgumbo-dev and zlib1g-dev ship PIC .a files) are linked into libattend.so, so the wheel
carries no copy of them; the rest (libsentencepiece, C++, no .a in Debian) stay dynamic and
bundle.py copies them beside the library."""
import os
import subprocess

LIB_NAME = "libattend.so"
BUILD_PKGS = "g++ make libsentencepiece-dev libgumbo-dev zlib1g-dev patchelf"
# linked from their .a when the compiler finds one: C libraries that need only libc
STATIC_WHEN_FOUND = ("gumbo", "z")


def clean_env():
    """os.environ without an outer make's variables (pip run under make test)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def makefile_ldlibs(tree):
    """The Makefile's LDLIBS as make expands them (a rule fed on stdin prints them)."""
    p = subprocess.run(["make", "-s", "--no-print-directory", "-C", tree, "-f", "Makefile",
                        "-f", "-", "attend-wheel-ldlibs"],
                       input="attend-wheel-ldlibs:\n\t@echo $(LDLIBS)\n", capture_output=True,
                       text=True, env=clean_env())
    if p.returncode != 0:
        raise SystemExit("attend: cannot read LDLIBS from " + tree + "/Makefile: " + p.stderr)
    return p.stdout.split()


def static_archive(name):
    """The path of libNAME.a as the compiler finds it, or None."""
    cc = os.environ.get("CC", "cc")
    try:
        p = subprocess.run([cc, "-print-file-name=lib" + name + ".a"], capture_output=True,
                           text=True)
    except FileNotFoundError:
        return None
    path = p.stdout.strip()
    return path if os.path.isabs(path) and os.path.isfile(path) else None


def wheel_ldlibs(tree):
    """LDLIBS for the wheel's library: static archives where found, and no undefined symbol
    left for the loader to find (a wrong static set fails here, not at import)."""
    out = []
    for flag in makefile_ldlibs(tree):
        archive = static_archive(flag[2:]) if flag[2:] in STATIC_WHEN_FOUND else None
        out.append(archive if flag.startswith("-l") and archive else flag)
    return out + ["-Wl,--no-undefined"]


def run_make(cmd):
    print("attend: building " + LIB_NAME + ": " + " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=clean_env())
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


def make_library(tree, build_dir):
    """Run make in tree for build_dir/libattend.so, linked as wheel_ldlibs says; returns the
    library's path. Raises SystemExit with make's last lines and the packages to install."""
    jobs = str(max(1, min(os.cpu_count() or 1, 8)))
    ldlibs = " ".join(wheel_ldlibs(tree))
    library = os.path.join(build_dir, LIB_NAME)
    if os.path.exists(library):
        os.remove(library)  # relinked every time: make does not see a change of LDLIBS
    run_make(["make", "-C", tree, "-j" + jobs, "BUILD=" + build_dir, "LDLIBS=" + ldlibs,
              library])
    return library
