#!/usr/bin/python3
"""The exporters as the package's attend.export (python/attend/export/): which exporter a
source goes to (families.choose: config.json's model_type, a Marian release by its .npz),
the command's usage and exit statuses, attend.export callable as before while being the
package, and tools/export_*.py being the package's modules. The exports themselves:
tests/test_export.py, test_export_npz.py, test_m2m100.py, test_mbart.py, test_nllb.py (through
the tools/ wrappers) and tests/test_python_install.py (the installed command).
Run: /usr/bin/python3 tests/test_export_package.py"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

PYDIR = os.path.join(T.REPO, "python")
sys.path.insert(0, PYDIR)
import attend  # noqa: E402
from attend.export import families  # noqa: E402

TMP = T.tempdir()


def hf(name, model_type):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": model_type} if model_type is not None else {}, f)
    return d


def chooses_by_model_type_and_release():
    want = {"marian": "marian", "m2m_100": "m2m100", "mbart": "mbart", "gpt2": "marian",
            None: "marian"}
    for mt, module in want.items():
        d = hf(f"hf-{mt}", mt)
        got = families.choose([d, "out.gguf"]).__name__
        assert got == "attend.export." + module, (mt, got)
        got = families.choose(["--dtype", "f16", d, "out.gguf", "--name", "x"]).__name__
        assert got == "attend.export." + module, ("after --dtype", mt, got)
    release = os.path.join(TMP, "release")
    os.makedirs(release)
    open(os.path.join(release, "opus.bt.npz"), "wb").close()
    for src in (release, os.path.join(TMP, "opus-2020.zip"), os.path.join(TMP, "model.npz")):
        if not os.path.exists(src):
            open(src, "wb").close()
        assert families.choose([src, "o.gguf"]).__name__ == "attend.export.marian_npz", src
    # a directory with an .npz *and* config.json is a Hugging Face directory
    open(os.path.join(hf("hf-npz", "mbart"), "x.npz"), "wb").close()
    assert families.choose([os.path.join(TMP, "hf-npz"), "o"]).__name__ == "attend.export.mbart"
    # a missing source: marian, which says the directory is missing
    assert families.choose([os.path.join(TMP, "nowhere"), "o"]).__name__ == "attend.export.marian"
    for t in ("t5", "mt5"):
        assert families.choose([hf("hf-" + t, t), "o"]).__name__ == "attend.export.t5", t
    assert families.choose([hf("hf-whisper", "whisper"), "o"]).__name__ == "attend.export.whisper"
    assert set(families.FAMILIES) == {"marian", "m2m_100", "mbart", "t5", "mt5", "whisper"}


def command_usage_and_statuses():
    env = dict(os.environ, PYTHONPATH=PYDIR)
    run = lambda *a: subprocess.run([sys.executable, "-m", "attend.export", *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, cwd=TMP, timeout=60)
    p = run("--help")
    assert p.returncode == 0 and "m2m_100" in p.stdout and "--dtype" in p.stdout, p
    p = run()
    assert p.returncode == 2 and "usage: attend-export" in p.stderr, p
    p = run(hf("hf-gpt2", "gpt2"), os.path.join(TMP, "o.gguf"))
    assert p.returncode == 2 and "model_type" in p.stderr and "gpt2" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = run(os.path.join(TMP, "nowhere"), os.path.join(TMP, "o.gguf"))
    assert p.returncode == 2 and "missing directory" in p.stderr, p.stderr
    # the file attend.export() runs, run by its path
    p = subprocess.run([sys.executable, attend.find_exporter(), "--help"], capture_output=True,
                       text=True, cwd=TMP, timeout=60, env={k: v for k, v in os.environ.items()
                                                            if k != "PYTHONPATH"})
    assert p.returncode == 0 and "usage: attend-export" in p.stdout, p


def export_is_callable_and_the_package():
    import attend.export.marian  # noqa: F401  (a submodule import keeps attend.export callable)
    assert callable(attend.export) and attend.export.__name__ == "attend.export"
    assert attend.export.find_exporter is attend.find_exporter
    try:
        attend.export(os.path.join(TMP, "nowhere"), os.path.join(TMP, "o.gguf"))
        raise AssertionError("exported nothing")
    except attend.AttendError as e:
        assert "nowhere" in str(e), e
    sys.path.insert(0, T.TOOLS)
    import export_marian
    import export_m2m100
    import gguf_io
    assert export_marian is attend.export.marian and export_m2m100.E is export_marian
    assert gguf_io is attend.export.gguf_io


def main():
    run = T.Runner()
    for name, fn in [("a source goes to its family's exporter (model_type, Marian release)",
                      chooses_by_model_type_and_release),
                     ("python -m attend.export: --help, usage, refusals exit 2 with one line",
                      command_usage_and_statuses),
                     ("attend.export is the package and callable; tools/ scripts are its modules",
                      export_is_callable_and_the_package)]:
        run.check(name, fn)
    run.finish()


if __name__ == "__main__":
    main()
