#!/usr/bin/python3
"""The wheel any Linux Python installs (issue 36): `make wheel` from the checkout and pip on
`make sdist`'s source package (alone, away from the checkout) each build
attend-VERSION-py3-none-manylinux_X_Y_ARCH.whl; X.Y is the highest glibc symbol version its
objects need; every shared object in it NEEDs only the manylinux libraries or a copy bundled
beside it under a hashed name (found through $ORIGIN), and nothing of sentencepiece, gumbo,
zlib or protobuf from the system. Then a bare venv of another Python than Debian's (pyenv's,
no system packages, no numpy, no network) installs each wheel with --no-index and translates
models/de-en.gguf as the CLI does, from the bundled libraries; arrays raise ImportError
saying to install numpy. Without a second Python the venv checks are skipped, said so.
Needs `make` first (the CLI to compare with). Run: /usr/bin/python3 tests/test_wheel.py"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

# sonames a manylinux wheel may NEED without shipping them (the C and C++ runtimes)
ALLOWED = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
           "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# the system's own sonames of what the wheel must carry (hashed) or link in, never NEED
SYSTEM_SONAME = re.compile(r"(libsentencepiece|libgumbo|libz|libprotobuf(-lite)?)\.so")
# gumbo and zlib are linked in: none of their functions is left for the loader to find
STATIC_SYMBOL = re.compile(r"\b(gumbo_\w+|deflate\w*|inflate\w*|crc32)\b")
MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
SENTENCES = ["Wo ist der Bahnhof?", "Ich habe Hunger.", "Das Wetter ist heute schön."]
TMP = T.tempdir()
WHEELS = {}  # "checkout" / "sdist" -> path of the wheel built that way


# run in the venv: the library's path, the translations, then what works or asks for numpy
TRANSLATE = """
import sys, attend
m = attend.Model(sys.argv[1], threads=1)
print(attend.library_path())
rs = m.translate(sys.argv[2:])
for r in rs:
    print(r.text)
try:
    import numpy
    print("numpy importable")
except ImportError:
    pass
blank, = m.translate([" "])
r = m.translate(sys.argv[2], beam=3, n_best=2)
assert blank.text == "" and list(blank.src_ids) == [], blank
assert len(r.logprob) == len(r.tgt_ids) == len(r.tgt_tokens) > 0, r.logprob
assert all(isinstance(x, float) and x <= 0 for x in r.logprob) and len(r.nbest) == 2, r.logprob
assert [x.text for x in m.translate_iter(sys.argv[2:])] == [x.text for x in rs]
for what, call in (("attention", lambda: m.translate(sys.argv[2], attention=True)),
                   ("logits", lambda: m.translate(sys.argv[2], logits=True)),
                   ("save_npz", lambda: attend.save_npz(rs, "x.npz"))):
    try:
        call()
        print(what, "without numpy: no error")
    except ImportError as e:
        print("ImportError:", e)
"""


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ATTEND_", "PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # run under make test: a make of its own
        env.pop(k, None)
    return env


def run(cmd, timeout=300, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=clean_env(), **kw)
    assert p.returncode == 0, (cmd, p.stdout[-3000:] + p.stderr[-3000:])
    return p.stdout


def other_pythons():
    """Up to two CPythons 3.8+ other than Debian's /usr/bin/python3 that can make venvs
    (pyenv's newest and oldest, else python3 on PATH); [] when this machine has none."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", "3.*", "bin", "python3")),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p.split("/versions/")[1])[:3]],
                   reverse=True)
    if not found:
        found.append(shutil.which("python3") or "")
    debian = os.path.realpath("/usr/bin/python3")
    usable = []
    for py in filter(None, found):
        if os.path.realpath(py) == debian or os.path.realpath(py) in map(os.path.realpath, usable):
            continue
        p = subprocess.run([py, "-c", "import sys, venv, ensurepip; print(sys.version_info >= (3, 8))"],
                           capture_output=True, text=True, timeout=60)
        if p.returncode == 0 and p.stdout.strip() == "True":
            usable.append(py)
    return usable[:1] + usable[-1:] if len(usable) > 1 else usable


def wheel_from_checkout():
    out = os.path.join(TMP, "checkout")
    run(["make", "--no-print-directory", "-C", T.REPO, "wheel", "WHEEL_DIR=" + out], timeout=600)
    WHEELS["checkout"] = one_wheel(out)


def one_wheel(folder):
    wheels = glob.glob(os.path.join(folder, "*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def makefile_library_sources():
    """The Makefile's LIB_C and LIB_CXX, as make expands them."""
    return run(["make", "-s", "--no-print-directory", "-C", T.REPO, "-f", "Makefile", "-f", "-",
                "print-lib-sources"], input="print-lib-sources:\n\t@echo $(LIB_C) $(LIB_CXX)\n").split()


def sdist_carries_the_c_sources():
    """make sdist, unpacked away from the checkout: csrc/ holds the Makefile, attend.map and
    every library source the Makefile names."""
    run(["make", "--no-print-directory", "-C", T.REPO, "sdist", "WHEEL_DIR=" + TMP])
    sdists = glob.glob(os.path.join(TMP, "attend-*.tar.gz"))
    assert len(sdists) == 1, sdists
    with tarfile.open(sdists[0]) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    inside = {n[len(top) + 1:] for n in names}
    want = ["Makefile", "model/attend.map", "model/attend.h"] + makefile_library_sources()
    missing = [f for f in want if "csrc/" + f not in inside]
    assert not missing, f"the sdist lacks {missing}"
    assert {"setup.py", "pyproject.toml", "build_support/bundle.py"} <= inside, sorted(inside)
    WHEELS["sdist-file"] = sdists[0]
    print(f"   {len(want)} C files of the library in csrc/")


def wheel_from_sdist():
    """pip wheel on the sdist, from a folder with no checkout around it."""
    elsewhere = os.path.join(TMP, "elsewhere")
    os.makedirs(elsewhere)
    out = os.path.join(TMP, "from-sdist")
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps",
         "-w", out, WHEELS["sdist-file"]], timeout=600, cwd=elsewhere)
    WHEELS["sdist"] = one_wheel(out)


def readelf(args, path):
    return subprocess.run(["readelf", "-W"] + args + [path], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def highest(versions, prefix):
    vs = [tuple(int(n) for n in v[len(prefix) + 1:].split(".")) for v in versions
          if v.startswith(prefix + "_")]
    return max(vs, default=())


def shared_objects(how):
    """The wheel unpacked; its .so files (path -> NEEDED list, RUNPATH, version needs)."""
    folder = os.path.join(TMP, "unpacked-" + how)
    with zipfile.ZipFile(WHEELS[how]) as z:
        z.extractall(folder)
    out = {}
    for path in glob.glob(os.path.join(folder, "attend", "*.so*")):
        dyn = readelf(["-d"], path)
        versions = readelf(["-V"], path).split("Version needs section")[-1]
        out[path] = (re.findall(r"\(NEEDED\).*\[(.+)\]", dyn), re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.+)\]", dyn),
                     set(re.findall(r"Name: ([A-Z_]+_[0-9][0-9.]*)", versions)))
    return out


def self_contained(how):
    """The tag (py3-none-manylinux_X_Y_ARCH, X.Y the highest GLIBC needed); each object
    NEEDs only ALLOWED or a bundled copy with a hashed name, found through $ORIGIN."""
    objects = shared_objects(how)
    names = {os.path.basename(p) for p in objects}
    assert "libattend.so" in names, names
    glibc = max(highest(v, "GLIBC") for _, _, v in objects.values())
    arch = os.uname().machine
    want = f"attend-{attend_version()}-py3-none-manylinux_{glibc[0]}_{glibc[1]}_{arch}.whl"
    assert os.path.basename(WHEELS[how]) == want, (os.path.basename(WHEELS[how]), want)
    for path, (needed, runpath, versions) in objects.items():
        name = os.path.basename(path)
        outside = [n for n in needed if n not in ALLOWED and n not in names]
        assert not outside, f"{name} needs {outside}, neither manylinux nor in the wheel"
        assert not [n for n in needed if SYSTEM_SONAME.match(n)], (name, needed)
        if any(n in names for n in needed):
            assert runpath == ["$ORIGIN"], (name, runpath)
        if name == "libattend.so":
            undefined = [ln for ln in readelf(["--dyn-syms"], path).splitlines() if " UND " in ln]
            left = [m.group(1) for ln in undefined for m in [STATIC_SYMBOL.search(ln)] if m]
            assert not left, f"libattend.so leaves {left} to the loader: not linked in"
        else:
            assert re.search(r"-[0-9a-f]{8}\.so", name), f"{name}: no hash in the bundled name"
        shown = ", ".join("%s_%s" % (p, ".".join(map(str, highest(versions, p))))
                          for p in ("GLIBC", "GLIBCXX", "CXXABI") if highest(versions, p))
        print(f"   {name}: needs {', '.join(needed)}; at most {shown}")
    print(f"   {os.path.basename(WHEELS[how])}")


def attend_version():
    with open(os.path.join(T.REPO, "python", "pyproject.toml")) as f:
        return re.search(r'^version = "(.+)"', f.read(), re.M).group(1)


def same_files():
    names = [sorted(zipfile.ZipFile(WHEELS[h]).namelist()) for h in ("checkout", "sdist")]
    assert names[0] == names[1], set(names[0]) ^ set(names[1])


def cli_translations():
    out = T.run_attend(["translate", "-m", MODEL], input_text="\n".join(SENTENCES) + "\n").stdout
    return out.rstrip("\n").split("\n")


def venv_translates(how, python):
    """A bare venv of python installs the wheel offline and translates as the CLI, with
    libattend.so and libsentencepiece from the wheel; attention asks for numpy."""
    venv = os.path.join(TMP, "venv-" + how)
    vpy = os.path.join(venv, "bin", "python")
    run([python, "-m", "venv", venv], timeout=120)
    run([vpy, "-m", "pip", "install", "--no-index", WHEELS[how]], timeout=120)
    out = run([vpy, "-c", TRANSLATE, MODEL] + SENTENCES, cwd=TMP, timeout=120).splitlines()
    library, texts, rest = out[0], out[1:1 + len(SENTENCES)], out[1 + len(SENTENCES):]
    assert library.startswith(venv) and library.endswith("/attend/libattend.so"), library
    assert texts == cli_translations(), (texts, cli_translations())
    assert len(rest) == 3 and all(x.startswith("ImportError:") and "pip install numpy" in x
                                  for x in rest), rest
    ldd = run(["ldd", library])
    spm = re.search(r"libsentencepiece\S* => (\S+)", ldd)
    assert spm and spm.group(1).startswith(os.path.dirname(library)), ldd
    version = run([vpy, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()
    print(f"   Python {version}: {texts[0]!r} as the CLI, {os.path.basename(spm.group(1))} from the wheel")


def main():
    r = T.Runner()
    for path, what in ((T.ATTEND, "run make first"), (MODEL, "the shipped model is missing")):
        if not os.path.exists(path):
            print(f"FAIL {path}: {what}")
            r.failed += 1
            r.finish()
    r.check("make wheel builds one wheel from the checkout", wheel_from_checkout)
    r.check("make sdist carries the Makefile and every C source of the library",
            sdist_carries_the_c_sources)
    r.check("pip wheel on the sdist alone builds the wheel", wheel_from_sdist)
    for how in ("checkout", "sdist"):
        r.check(f"wheel from the {how}: py3-none-manylinux tag of its glibc, only manylinux "
                "sonames or hashed copies in the wheel ($ORIGIN)", self_contained, how)
    r.check("both wheels hold the same files", same_files)
    pythons = other_pythons()
    if not pythons:
        print("skip: no Python besides /usr/bin/python3 on this machine (none in "
              "~/.pyenv/versions, python3 on PATH is Debian's): the bare-venv install is untested")
        shutil.rmtree(TMP, ignore_errors=True)
        r.finish()
    for how, py in zip(("checkout", "sdist"), pythons * 2):
        r.check(f"a bare venv of {py} installs the {how}'s wheel offline, translates as the CLI "
                "without numpy", venv_translates, how, py)
    shutil.rmtree(TMP, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
