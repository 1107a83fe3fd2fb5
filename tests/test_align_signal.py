#!/usr/bin/python3
"""tools/align_signal.py: truecasing on hand-made text, the silver sure/possible links on
hand-made directions, and one small end-to-end run (word_align.py on 3,000 training pairs, 40
held-out pairs) whose sets hold what the tool says and whose table scores the shipped model's
own view on the development set as models/README.md reports it (AER 0.1795); --reverse scores
the English->German model on the same sets read the other way round (both directions' links
and word_align.py's score as the German->English run's).
Run: /usr/bin/python3 tests/test_align_signal.py"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import aer as AER  # noqa: E402
import align_signal as S  # noqa: E402

TOOL = os.path.join(T.TOOLS, "align_signal.py")
ENDE = os.path.join(T.REPO, "models", "en-de.gguf")
ENDE_DEV_AER = 0.1895  # its own view (with its alignment head) on the development set reversed


def truecasing():
    pairs = [("Der Hund bellt .", "The dog barks ."), ("Ich sehe den Hund im EU-Haushalt .", "I see the dog ."),
             ("Wir sehen den Hund .", "We see the EU dog .")]
    table = S.casing_table(pairs)
    assert table["hund"] == "Hund" and table["dog"] == "dog" and table["eu"] == "EU", table
    # "der" only starts a sentence: away from the start it is unknown, so stays as it is
    assert S.truecase("der hund bellt .", table) == "Der Hund bellt ."
    # a token the table lacks whole: its word parts one by one; the first letter capitalised
    assert S.truecase("„ hund im eu-haushalt", table) == "„ Hund im EU-Haushalt"
    assert S.truecase("ein hund", table) == "Ein Hund"


def silver_links():
    # intersection 0-0; nothing around it in the union; final-and adds 2-2 (both words free),
    # not 0-2 (source word 0 taken): that one stays possible
    assert S.sure_possible({(0, 0), (2, 2)}, {(0, 0), (0, 2)}) == "0-0 2-2 0p2"
    sure, possible = AER.parse_links(S.sure_possible({(0, 0), (2, 2)}, {(0, 0), (0, 2)}))
    assert sure == {(0, 0), (2, 2)} and possible == sure | {(0, 2)}


def end_to_end():
    with tempfile.TemporaryDirectory(prefix="signal-") as d:
        out = os.path.join(d, "table.json")
        p = subprocess.run([T.PYTHON, TOOL, "--work", d, "--max-pairs", "3000", "--news", "20", "--tatoeba", "20",
                            "--preset", "1:2,shift,words,grow", "--reverse-model", ENDE, "--json", out],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        base = os.path.dirname(T.data_path("align-deen-bicici", "de-en.wa"))
        read = lambda name: AER.read_lines(os.path.join(d, name))  # noqa: E731
        assert read("dev.wa") == read("devcased.wa") == AER.read_lines(os.path.join(base, "de-en.wa"))
        for side in ("de", "en"):  # truecasing keeps the tokens: the hand links still hold
            dev, cased = read(f"dev.{side}"), read(f"devcased.{side}")
            assert [x.lower().split() for x in cased] == [x.split() for x in dev]
            assert sum(x != y for x, y in zip(cased, dev)) > 90
        src, tgt, gold = read("silver.de"), read("silver.en"), AER.read_gold(os.path.join(d, "silver.wa"), False, False)
        assert len(src) == len(tgt) == len(gold) == 40
        assert sum(s != s.lower() for s in src) > 30  # cased text
        for s, t, (sure, possible) in zip(src, tgt, gold):
            assert sure <= possible and sure
            assert all(i < len(s.split()) and j < len(t.split()) for i, j in possible)
        with open(out) as f:
            rows = json.load(f)
        own = rows[0]
        # the shipped file's view: its trained alignment head with head 2 of layer 1; then that head alone
        assert own["method"].startswith("1:2,align,shift,words,grow (the model's own view)"), own
        assert round(own["dev"]["aer"], 4) == 0.1563, own["dev"]
        assert rows[1]["method"] == "1:2,shift,words,grow" and round(rows[1]["dev"]["aer"], 4) == 0.1795, rows[1]
        assert own["seconds_per_sentence"] > 0 and "silver" in own and "silver" not in rows[-1]
        print(f"    dev {own['dev']['aer']:.4f}, devcased {own['devcased']['aer']:.4f}, "
              f"silver (40 pairs) {own['silver']['aer']:.4f}")
        reverse(d, rows)


def reverse(d, forward):
    """The same sets, English->German: the model's own view, then the links both directions
    agree on and word_align.py's, which read the other way round score as before."""
    out = os.path.join(d, "reverse.json")
    p = subprocess.run([T.PYTHON, TOOL, "--work", d, "--reverse", "-m", ENDE, "--reverse-model",
                        os.path.join(T.REPO, "models", "de-en.gguf"), "--json", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        rows = json.load(f)
    own, both, aligner = rows
    assert own["method"].endswith("(the model's own view)") and own["method"].startswith("0:4,"), own
    assert round(own["dev"]["aer"], 4) == ENDE_DEV_AER, own["dev"]
    for s in S.SETS:
        assert both[s] == forward[2][s], (s, both[s], forward[2][s])
    assert both["dev"]["aer"] < own["dev"]["aer"]
    assert aligner["dev"] == forward[-1]["dev"] and aligner["devcased"] == forward[-1]["devcased"]


def main():
    run = T.Runner()
    run.check("truecasing: the training text's most frequent form, the first letter capitalised", truecasing)
    run.check("silver links: sure by grow-diag-final-and, possible in either direction", silver_links)
    run.check("a small end-to-end run: the three sets and the shipped model's scores", end_to_end)
    run.finish()


if __name__ == "__main__":
    main()
