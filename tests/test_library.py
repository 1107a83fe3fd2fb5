#!/usr/bin/python3
"""The installed library as a C user meets it: libattend.so exports attend_* and nothing
else, has a SONAME, and `make install` into a scratch root gives headers, the .so links
and attend.pc with which the header's own example compiles (pkg-config), links and
translates. Run: /usr/bin/python3 tests/test_library.py"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

SO = os.path.join(T.REPO, "build", "libattend.so")
TINY = os.path.join(T.REPO, "tests", "data", "tiny-v1.gguf")


def exported():
    out = subprocess.run(["nm", "-D", "--defined-only", SO], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def only_attend_symbols():
    names = exported()
    stray = [n for n in names if not n.startswith("attend_")]
    assert not stray, f"{len(stray)} symbols besides attend_*: {stray[:10]}"
    for want in ("attend_load", "attend_translate", "attend_result_free", "attend_alignment",
                 "attend_view_parse", "attend_version"):
        assert want in names, f"{want} is not exported"
    # every exported function is declared in an installed header
    headers = open(os.path.join(T.REPO, "model", "attend.h")).read() + open(
        os.path.join(T.REPO, "model", "align.h")).read()
    undeclared = [n for n in names if not re.search(rf"\b{n}\(", headers)]
    assert not undeclared, f"exported but not in attend.h/align.h: {undeclared}"
    print(f"   {len(names)} symbols, all attend_*")


def soname():
    out = subprocess.run(["readelf", "-d", SO], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libattend.so.0]" in out, out


def header_example_via_pkg_config(d):
    root = os.path.join(d, "root")
    prefix = "/usr/local"
    subprocess.run(["make", "-s", "install", f"DESTDIR={root}", f"PREFIX={prefix}"], cwd=T.REPO, check=True,
                   stdout=subprocess.DEVNULL)
    lib = root + prefix + "/lib"
    for name in ("libattend.so", "libattend.so.0", "libattend.a", "pkgconfig/attend.pc"):
        assert os.path.exists(os.path.join(lib, name)), name
    assert os.path.islink(os.path.join(lib, "libattend.so.0"))
    # the usage example at the top of attend.h, as a program
    head = open(os.path.join(T.REPO, "model", "attend.h")).read().split("*/")[0]
    body = [line[3:] if line.startswith(" *  ") else "" for line in head.splitlines()]
    body = "\n".join(body).split("Thread safety")[0]
    code = re.sub(r"\(the model's own search.*?\)|\(or override it\)", "", body)
    code = code.replace('"opus-mt-de-en.gguf"', "argv[1]").replace("#include <attend.h>", "")
    src = os.path.join(d, "example.c")
    with open(src, "w") as f:
        f.write("#include <stdio.h>\n#include <attend.h>\nint main(int argc, char **argv) {\n(void)argc;\n"
                + code + "\nreturn 0;\n}\n")
    env = dict(os.environ, PKG_CONFIG_PATH=lib + "/pkgconfig", PKG_CONFIG_SYSROOT_DIR=root)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "attend"], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    exe = os.path.join(d, "example")
    p = subprocess.run(["cc", "-Wall", "-Werror", "-o", exe, src] + flags, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([exe, TINY], capture_output=True, text=True, env=dict(os.environ, LD_LIBRARY_PATH=lib))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 3 and all(" ||| " in line for line in lines), p.stdout
    cli = T.run_attend(["translate", "-m", TINY, "--beam", "5", "--n-best", "3"], "Wo ist der Bahnhof?\n").stdout
    want = [line.split(" ||| ")[1] for line in cli.strip().splitlines()]  # "i ||| text ||| score"
    got = [line.rsplit(" ||| ", 1)[0] for line in lines]                    # "text ||| score"
    assert got == want, (got, want)
    print(f"   example: {lines[0]}")


def inspect_only_load():
    """attend_load_with(inspect_only): the configuration and verify work, translation is refused."""
    import ctypes
    lib = ctypes.CDLL(SO)

    class LoadParams(ctypes.Structure):
        _fields_ = [("inspect_only", ctypes.c_int)]
    lib.attend_load_with.restype = ctypes.c_void_p
    lib.attend_load_with.argtypes = [ctypes.c_char_p, ctypes.POINTER(LoadParams), ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_verify.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_translate.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_int,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.attend_free.argtypes = [ctypes.c_void_p]
    err = ctypes.create_string_buffer(512)
    m = lib.attend_load_with(TINY.encode(), ctypes.byref(LoadParams(1)), err, 512)
    assert m, err.value
    assert lib.attend_verify(m, err, 512) == 0, err.value
    line = (ctypes.c_char_p * 1)(b"Hallo Welt")
    out = ctypes.create_string_buffer(4096)  # room for one attend_result
    assert lib.attend_translate(m, line, None, 1, None, None, out, err, 512) == -1
    assert b"inspection only" in err.value, err.value
    lib.attend_free(m)


def cli_uses_public_headers():
    """The commands are clients of the library: cli/*.c include attend.h and align.h (and
    the CLI's own files, and audio/read.h: the audio file reader linked into the attend binary
    only), never engine/, model/ internals, weights/ or tokenizer/."""
    cli = os.path.join(T.REPO, "cli")
    own = {f for f in os.listdir(cli) if f.endswith(".h")}
    bad = []
    for f in sorted(os.listdir(cli)):
        if not f.endswith(".c"):
            continue
        with open(os.path.join(cli, f)) as fh:
            for line in fh:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and m.group(1) not in own and m.group(1) not in ("../model/attend.h", "../model/align.h",
                                                                         "../audio/read.h"):
                    bad.append(f"{f}: {m.group(1)}")
    assert not bad, f"internal headers in the CLI: {bad}"


def main():
    run = T.Runner()
    run.check("the CLI includes only the public headers", cli_uses_public_headers)
    d = T.tempdir()
    run.check("libattend.so exports attend_* only, each declared in a header", only_attend_symbols)
    run.check("libattend.so has SONAME libattend.so.0", soname)
    run.check("attend_load_with(inspect_only): verify works, translate refuses", inspect_only_load)
    run.check("make install + pkg-config: attend.h's example compiles, links and translates",
              header_example_via_pkg_config, d)
    shutil.rmtree(d, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
