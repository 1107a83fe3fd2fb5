#!/usr/bin/python3
"""The shipped models: German->English (the default) and English->German (issue 38) load, pass
`attend verify`, and translate a fixed list of sentences to the recorded outputs (a regression
test, not a quality claim; tests/data/shipped-de-en.tsv and shipped-en-de.tsv are rewritten
only when a model is retrained: `tests/test_shipped_model.py --record`); de-en is the default
model, and `make install` installs both."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
CASES = os.path.join(T.REPO, "tests", "data", "shipped-de-en.tsv")
EN_DE = os.path.join(T.REPO, "models", "en-de.gguf")
EN_DE_CASES = os.path.join(T.REPO, "tests", "data", "shipped-en-de.tsv")
# English sentences of our own for the English->German model
EN_SOURCES = [
    "A man is riding a bicycle through the city.",
    "Two dogs are playing in the snow.",
    "I am hungry.",
    "Where is the train station?",
    "Can you help me, please?",
    "The weather is nice today.",
    "I drink a coffee every morning.",
    "My sister lives in a small apartment.",
    "The bus comes in five minutes.",
    "We are going to Berlin tomorrow.",
]

SOURCES = [
    "Ein Mann fährt mit dem Fahrrad durch die Stadt.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank.",
    "Ich habe Hunger.",
    "Wo ist der Bahnhof?",
    "Kannst du mir bitte helfen?",
    "Das Wetter ist heute schön.",
    "Ich weiß es nicht.",
    "Tom liest ein Buch.",
    "Wie spät ist es?",
    # everyday sentences (chosen for this list, not taken from a corpus)
    "Ich trinke jeden Morgen einen Kaffee.",
    "Meine Schwester wohnt in einer kleinen Wohnung.",
    "Kannst du bitte das Fenster aufmachen?",
    "Der Bus kommt in fünf Minuten.",
    "Wir haben heute keine Schule.",
    "Ich suche meinen Schlüssel.",
    "Das Essen war sehr lecker.",
    "Wann fängt der Film an?",
    "Er hat gestern seinen Vater angerufen.",
    "Wir fahren morgen nach Berlin.",
]


def read_cases(path=CASES):
    with open(path, encoding="utf-8") as f:
        return [tuple(l.rstrip("\n").split("\t")) for l in f if l.strip()]


def readme_demo_is_real():
    """The output the README shows under its quick start is what tools/demo.sh prints (piped)."""
    with open(os.path.join(T.REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    at = readme.index("Its real output")
    start = readme.index("```\n", at) + 4
    shown = readme[start:readme.index("```\n", start)]
    p = subprocess.run(["sh", os.path.join(T.REPO, "tools", "demo.sh")], capture_output=True, text=True,
                       env=dict(os.environ, ATTEND=T.ATTEND, MODEL=MODEL))
    assert p.returncode == 0, p.stderr
    assert p.stdout == shown, "README's demo block differs from tools/demo.sh's output:\n" + p.stdout


def main():
    if "--record" in sys.argv:
        for model, sources, cases in ((MODEL, SOURCES, CASES), (EN_DE, EN_SOURCES, EN_DE_CASES)):
            out = T.run_attend(["translate", "-m", model] + sources).stdout.split("\n")[:-1]
            with open(cases, "w", encoding="utf-8") as f:
                for s, t in zip(sources, out):
                    f.write(f"{s}\t{t}\n")
            print(f"recorded {len(out)} cases in {cases}")
        return
    run = T.Runner()

    def loads_and_verifies(model):
        assert os.path.exists(model), f"{model} is missing"
        size = os.path.getsize(model)
        assert size <= 40 * 1000 * 1000, f"shipped model is {size} bytes, over 40 MB"
        info = T.run_attend(["info", model]).stdout
        assert "marian" in info
        T.run_attend(["verify", model])

    def translates_as_recorded(model, path, n):
        cases = read_cases(path)
        assert len(cases) >= n
        out = T.run_attend(["translate", "-m", model] + [c[0] for c in cases]).stdout.split("\n")[:-1]
        bad = [(c[0], c[1], o) for c, o in zip(cases, out) if c[1] != o]
        assert len(out) == len(cases) and not bad, f"changed translations: {bad}"

    def is_the_default_model():
        """No -m and no $ATTEND_MODEL: the binary finds models/de-en.gguf from its own
        location, also when run from another directory or installed elsewhere."""
        env = {k: v for k, v in os.environ.items() if k != "ATTEND_MODEL"}
        cases = read_cases()[:2]
        p = subprocess.run([T.ATTEND, "translate", cases[0][0]], capture_output=True, text=True,
                           env=env, cwd="/")
        assert p.returncode == 0 and p.stdout == cases[0][1] + "\n", p.stderr
        prefix = T.tempdir()
        subprocess.run(["make", "-s", "-C", T.REPO, "install", f"PREFIX={prefix}"], check=True,
                       capture_output=True)
        p = subprocess.run([os.path.join(prefix, "bin", "attend"), "translate", cases[1][0]],
                           capture_output=True, text=True, env=env, cwd="/")
        installed_en_de = os.path.join(prefix, "share", "attend", "en-de.gguf")
        assert os.path.exists(installed_en_de), "make install left out en-de.gguf"
        shutil.rmtree(prefix, ignore_errors=True)
        assert p.returncode == 0 and p.stdout == cases[1][1] + "\n", p.stderr
        p = subprocess.run([T.ATTEND, "translate", "x"], capture_output=True, text=True,
                           env=dict(env, ATTEND_MODEL="/nonexistent.gguf"))
        assert p.returncode == 3 and "nonexistent" in p.stderr, "ATTEND_MODEL must win"

    run.check("shipped model loads and verifies", loads_and_verifies, MODEL)
    run.check("shipped model translates as recorded", translates_as_recorded, MODEL, CASES, 20)
    run.check("English->German model loads and verifies", loads_and_verifies, EN_DE)
    run.check("English->German model translates as recorded", translates_as_recorded, EN_DE, EN_DE_CASES, 10)
    run.check("shipped model is the default", is_the_default_model)
    run.check("README's demo output is make demo's", readme_demo_is_real)
    run.finish()


if __name__ == "__main__":
    main()
