#!/usr/bin/python3
"""The Python package as a new user installs it (issue 27): a clean copy of the checkout
(its tracked files as they are in the working tree, no build/), a fresh venv, `pip install
--no-build-isolation --no-index <copy>/python`, which compiles libattend.so into the
package; then, from another
directory and with no ATTEND_* variable, the package loads its own library and translates
as the CLI does; $ATTEND_LIBRARY still overrides; Model() without a path says what to pass;
the exporters come with it (the `attend-export` console script, `python -m attend.export`
and attend.export() write the bytes tools/export_marian.py writes, and the venv translates
with the file as the CLI does); and pip run on python/ alone (no checkout to build from) stops with the packages to install.
Needs `make` first (the CLI to compare with). Run: /usr/bin/python3 tests/test_python_install.py"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

TINY = os.path.join(T.REPO, "tests", "data", "tiny-v1.gguf")
LIBRARY = os.path.join(T.REPO, "build", "libattend.so")
TMP = T.tempdir()
COPY = os.path.join(TMP, "checkout")
VENV = os.path.join(TMP, "venv")
ELSEWHERE = os.path.join(TMP, "elsewhere")
VPY = os.path.join(VENV, "bin", "python")
PIP = [VPY, "-m", "pip", "install", "--no-build-isolation", "--no-index"]
SENTENCE = "Hallo Welt"

CHECK = """
import sys, attend
print(attend.__file__)
print(attend.library_path())
m = attend.Model(sys.argv[1], threads=1)
print(m.translate(sys.argv[2]).text)
"""


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEND_")}
    env.pop("PYTHONPATH", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_check(env):
    return subprocess.run([VPY, "-c", CHECK, TINY, SENTENCE], capture_output=True, text=True,
                          cwd=ELSEWHERE, env=env, timeout=120)


def copy_checkout():
    """The checkout's tracked files (git ls-files) into COPY: no build/, nothing untracked."""
    files = subprocess.run(["git", "-C", T.REPO, "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = os.path.join(T.REPO, f)
        if not os.path.isfile(src):
            continue  # deleted in the working tree
        os.makedirs(os.path.dirname(os.path.join(COPY, f)), exist_ok=True)
        shutil.copy2(src, os.path.join(COPY, f))
    assert os.path.isfile(os.path.join(COPY, "python", "setup.py")), "python/setup.py not tracked"
    assert not os.path.exists(os.path.join(COPY, "build"))


def pip_install():
    copy_checkout()
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV], check=True,
                   timeout=300)
    p = subprocess.run(PIP + [os.path.join(COPY, "python")], capture_output=True, text=True,
                       cwd=TMP, env=clean_env(), timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    # built in pip's build temp folder, not in the checkout's own build/
    assert not os.path.exists(os.path.join(COPY, "build")), os.listdir(COPY)
    os.makedirs(ELSEWHERE)


def translates_with_own_library():
    p = run_check(clean_env())
    assert p.returncode == 0, p.stdout + p.stderr
    module, library, text = p.stdout.splitlines()[:3]
    package = os.path.dirname(module)
    assert package.startswith(VENV) and "-packages" in package, module
    assert library == os.path.join(package, "libattend.so"), (library, package)
    assert os.path.isfile(library)
    cli = T.run_attend(["translate", "-m", TINY, SENTENCE]).stdout.strip()
    assert text == cli, (text, cli)
    print(f"   {text!r} from {os.path.relpath(library, TMP)}, as the CLI")


def attend_library_overrides():
    env = clean_env()
    env["ATTEND_LIBRARY"] = LIBRARY
    p = run_check(env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[1] == LIBRARY, p.stdout
    env["ATTEND_LIBRARY"] = os.path.join(TMP, "nope.so")
    p = run_check(env)
    assert p.returncode != 0 and "nope.so" in p.stderr, p.stderr


def model_without_path_says_what_to_pass():
    code = ("import attend\ntry:\n    attend.Model()\nexcept attend.AttendError as e:\n"
            "    print(e)\nelse:\n    print('loaded')\n")
    p = subprocess.run([VPY, "-c", code], capture_output=True, text=True, cwd=ELSEWHERE,
                       env=clean_env(), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "pass a path" in p.stdout and "ATTEND_MODEL" in p.stdout, p.stdout


def exporters_come_with_the_package():
    """A small random MarianMT checkpoint (an HF directory, tools/export_marian.py's file
    beside it), exported three ways from ELSEWHERE with no ATTEND_* and no checkout on the
    path: byte-identical files, and the venv's package translates with one as the CLI."""
    work = os.path.join(TMP, "export")
    os.makedirs(work)
    ref = T.random_gguf(work, seed=4, d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=32, decoder_ffn_dim=32, max_length=12)
    hf = ref[:-len(".gguf")]
    outs = {"console": os.path.join(ELSEWHERE, "console.gguf"),
            "module": os.path.join(ELSEWHERE, "module.gguf"),
            "call": os.path.join(ELSEWHERE, "call.gguf")}
    script = os.path.join(VENV, "bin", "attend-export")
    assert os.access(script, os.X_OK), f"{script}: no console script"
    for cmd in ([script, hf, outs["console"], "--name", "test"],
                [VPY, "-m", "attend.export", hf, outs["module"], "--name", "test"],
                [VPY, "-c", "import sys, attend; attend.export(sys.argv[1], sys.argv[2], "
                            "dtype='f32', name='test'); print(attend.find_exporter())",
                 hf, outs["call"]]):
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ELSEWHERE, env=clean_env(),
                           timeout=300)
        assert p.returncode == 0, (cmd, p.stdout + p.stderr)
    assert p.stdout.strip().startswith(VENV), f"exporter not the venv's: {p.stdout}"
    want = open(ref, "rb").read()
    for how, path in outs.items():
        assert open(path, "rb").read() == want, f"{how}: differs from tools/export_marian.py's"
    p = subprocess.run([VPY, "-c", CHECK, outs["console"], SENTENCE], capture_output=True,
                       text=True, cwd=ELSEWHERE, env=clean_env(), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    cli = T.run_attend(["translate", "-m", ref, SENTENCE]).stdout.strip()
    assert p.stdout.splitlines()[2] == cli, (p.stdout, cli)
    # a refusal: exit status 2 and one line naming the key
    bad = os.path.join(TMP, "bad")
    shutil.copytree(hf, bad)
    with open(os.path.join(bad, "config.json")) as f:
        cfg = json.load(f)
    cfg["model_type"] = "gpt2"
    with open(os.path.join(bad, "config.json"), "w") as f:
        json.dump(cfg, f)
    p = subprocess.run([script, bad, os.path.join(ELSEWHERE, "x.gguf")], capture_output=True,
                       text=True, cwd=ELSEWHERE, env=clean_env(), timeout=120)
    assert p.returncode == 2 and "model_type" in p.stderr and "gpt2" in p.stderr, p.stderr
    print(f"   3 exports identical to tools/export_marian.py's; {cli!r} as the CLI")


def no_checkout_says_what_to_install():
    alone = os.path.join(TMP, "alone")
    shutil.copytree(os.path.join(COPY, "python"), alone,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    p = subprocess.run(PIP + ["--no-deps", "--target", os.path.join(TMP, "nowhere"), alone],
                       capture_output=True, text=True, cwd=TMP, env=clean_env(), timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "not inside an attend checkout" in out and "libsentencepiece-dev" in out, out


def main():
    r = T.Runner()
    if not os.path.exists(T.ATTEND):
        print(f"FAIL {T.ATTEND} missing: run make first")
        r.failed += 1
        r.finish()
    r.check("pip install of a clean checkout copy into a venv builds libattend.so", pip_install)
    r.check("from another directory, no ATTEND_*: the package's own library, as the CLI",
            translates_with_own_library)
    r.check("$ATTEND_LIBRARY overrides the package's copy (and must exist)", attend_library_overrides)
    r.check("Model() without a path: an AttendError naming what to pass",
            model_without_path_says_what_to_pass)
    r.check("attend-export, python -m attend.export, attend.export(): the exporter's bytes; "
            "the venv translates with them", exporters_come_with_the_package)
    r.check("pip on python/ alone (no checkout): fails naming the packages to install",
            no_checkout_says_what_to_install)
    shutil.rmtree(TMP, ignore_errors=True)
    r.finish()


if __name__ == "__main__":
    main()
