#!/usr/bin/python3
"""Tests of tools/bleu.py against hand-computed 13a tokenizations and BLEU scores.

Run: /usr/bin/python3 tests/test_bleu.py   (exit status 1 if any test fails)
"""
import math
import os
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(HERE), "tools")
sys.path.insert(0, TOOLS)
import bleu  # noqa: E402


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


# --------------------------------------------------------------------------------------
# 13a tokenization

def test_tok_comma_and_final_punctuation():
    # "," preceded by a letter is split; "!" is in the always-split set.
    assert bleu.tokenize_13a("Hello, world!") == "Hello , world !"


def test_tok_entities_unescaped():
    # &quot; -> '"' and &amp; -> '&', then both are split off as punctuation.
    assert bleu.tokenize_13a('He said &quot;hi&quot; &amp; left.') == 'He said " hi " & left .'
    # &lt; and &gt; too
    assert bleu.tokenize_13a("a &lt;b&gt; c") == "a < b > c"


def test_tok_entity_order():
    # &amp; is replaced after &quot;, so "&amp;quot;" becomes "&quot;" and stays that way;
    # then "&" and ";" are split off: "& quot ;".
    assert bleu.tokenize_13a("x &amp;quot; y") == "x & quot ; y"


def test_tok_numbers():
    # "$" split; "3.50" and "3,000" kept (period/comma between digits);
    # "50," -> "50 ," (comma followed by a space); "1990." -> "1990 ." (the line is padded
    # with a space, so the final period is followed by a non-digit).
    assert (bleu.tokenize_13a("It costs $3.50, or 3,000 in 1990.")
            == "It costs $ 3.50 , or 3,000 in 1990 .")


def test_tok_dash_and_apostrophe():
    # dash split only after a digit; apostrophes, and hyphens between letters, are kept;
    # "(" ")" "/" are split.
    assert (bleu.tokenize_13a("pages 10-20 of a well-known (don't) a/b")
            == "pages 10 - 20 of a well-known ( don't ) a / b")


def test_tok_abbreviation_and_ellipsis():
    # "Mr." -> "Mr ." (period after a letter); "..." -> ". . ."
    assert bleu.tokenize_13a("Mr. Smith waits...") == "Mr . Smith waits . . ."


def test_tok_whitespace_and_skipped():
    # runs of spaces/tabs collapse; "<skipped>" is removed before splitting "<" ">".
    assert bleu.tokenize_13a("  a \t b <skipped> c  ") == "a b c"


# --------------------------------------------------------------------------------------
# BLEU scores

def test_perfect_match_is_100():
    # 6 tokens, every n-gram matches: p = 100/100/100/100, BP = 1.
    s, d = bleu.corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"])
    assert close(s, 100.0), s
    assert d["correct"] == [6, 5, 4, 3] and d["total"] == [6, 5, 4, 3]


def test_no_overlap_is_0():
    # no unigram matches: sacreBLEU stops early with score 0 (no smoothing applied)
    s, d = bleu.corpus_bleu(["a b c d"], ["w x y z"])
    assert s == 0.0 and d["precisions"] == [0.0] * 4


def test_case_sensitive():
    # hyp "The Cat sat down" vs ref "the cat sat down": cased, so only "sat", "down" and
    # "sat down" match: 2/4, 1/3, 0/2, 0/1; exp smoothing p3 = 100/(2*2), p4 = 100/(4*1)
    # BLEU = (50 * 33.33 * 25 * 25)^(1/4) = 1041666.7^(1/4) = 31.95
    s, d = bleu.corpus_bleu(["The Cat sat down"], ["the cat sat down"])
    assert d["correct"] == [2, 1, 0, 0], d["correct"]
    assert f"{s:.2f}" == "31.95", s
    s2, _ = bleu.corpus_bleu(["THE CAT"], ["the cat"])
    assert s2 == 0.0


def test_two_sentence_corpus_exact_50():
    # hyp1 "A man, in a red hat."  -> A man , in a red hat .   (8 tokens)
    # ref1 "A man in a red hat."   -> A man in a red hat .     (7 tokens)
    #   1-grams: all but "," match           -> 7/8
    #   2-grams: A man, in a, a red, red hat, hat .  match; "man ,", ", in" not -> 5/7
    #   3-grams: in a red, a red hat, red hat .  -> 3/6
    #   4-grams: in a red hat, a red hat .       -> 2/5
    # hyp2 "Two dogs play."        -> Two dogs play .          (4 tokens)
    # ref2 "Two dogs are playing." -> Two dogs are playing .   (5 tokens)
    #   1-grams: Two, dogs, . -> 3/4; 2-grams: Two dogs -> 1/3; 3-grams 0/2; 4-grams 0/1
    # corpus: correct 10/6/3/2, total 12/10/8/6, hyp_len 12 = ref_len 12 -> BP 1
    # p = 83.33, 60, 37.5, 33.33; product 83.33*60*37.5*33.33 = 6,250,000 = 50^4 -> BLEU 50
    hyps = ["A man, in a red hat.", "Two dogs play."]
    refs = ["A man in a red hat.", "Two dogs are playing."]
    s, d = bleu.corpus_bleu(hyps, refs)
    assert d["correct"] == [10, 6, 3, 2], d["correct"]
    assert d["total"] == [12, 10, 8, 6], d["total"]
    assert d["sys_len"] == 12 and d["ref_len"] == 12
    assert close(s, 50.0), s
    assert bleu.format_bleu(d) == ("BLEU = 50.00 83.3/60.0/37.5/33.3 (BP = 1.000 ratio = 1.000 "
                                   "hyp_len = 12 ref_len = 12)"), bleu.format_bleu(d)


def test_brevity_penalty():
    # hyp "the cat sat on the" (5) vs ref "the cat sat on the red mat" (7):
    # all n-grams match (5/5, 4/4, 3/3, 2/2) so precision part = 100;
    # BP = exp(1 - 7/5) = exp(-0.4) = 0.670320 -> BLEU 67.03
    s, d = bleu.corpus_bleu(["the cat sat on the"], ["the cat sat on the red mat"])
    assert close(d["bp"], math.exp(-0.4))
    assert close(s, 100.0 * math.exp(-0.4)), s
    assert f"{s:.2f}" == "67.03"
    assert bleu.format_bleu(d).endswith("(BP = 0.670 ratio = 0.714 hyp_len = 5 ref_len = 7)")


def test_exp_smoothing_zero_4grams():
    # hyp "a b c d e" (5) vs ref "a b c x d e" (6)
    #   1-grams 5/5; 2-grams ab bc de -> 3/4; 3-grams abc -> 1/3; 4-grams 0/2
    #   exp smoothing: p4 = 100 / (2 * 2) = 25
    #   100 * 75 * 33.33 * 25 = 6,250,000 -> geometric mean 50
    #   BP = exp(1 - 6/5) = exp(-0.2) -> BLEU = 50 * 0.818731 = 40.94
    s, d = bleu.corpus_bleu(["a b c d e"], ["a b c x d e"])
    assert d["correct"] == [5, 3, 1, 0] and d["total"] == [5, 4, 3, 2]
    assert close(d["precisions"][3], 25.0)
    assert close(s, 50.0 * math.exp(-0.2)), s


def test_exp_smoothing_repeated_word():
    # hyp "the the the the the the the" (7) vs ref "the cat is on the mat" (6)
    #   1-grams: "the" x7 clipped to 2 -> 2/7; 2/3/4-grams: 0/6, 0/5, 0/4
    #   exp smoothing: p2 = 100/(2*6), p3 = 100/(4*5), p4 = 100/(8*4)
    #   BLEU = (28.571 * 8.333 * 5 * 3.125)^(1/4) = 3720.24^(1/4) = 7.81; BP = 1 (7 > 6)
    s, d = bleu.corpus_bleu(["the the the the the the the"], ["the cat is on the mat"])
    assert d["correct"] == [2, 0, 0, 0] and d["total"] == [7, 6, 5, 4]
    want = (200 / 7 * 100 / 12 * 100 / 20 * 100 / 32) ** 0.25
    assert close(s, want), (s, want)
    assert f"{s:.2f}" == "7.81"


def test_too_short_for_4grams_is_0():
    # hyp of 3 tokens has no 4-grams: total[3] = 0 -> p4 = 0 -> score 0 (as sacreBLEU)
    s, _ = bleu.corpus_bleu(["the cat sat"], ["the cat sat"])
    assert s == 0.0


def test_clipping_against_reference_counts():
    # hyp "a a b b" vs ref "a b a b": unigrams a:2<=2, b:2<=2 -> 4/4;
    # 2-grams hyp: "a a", "a b", "b b"; ref has "a b" x2, "b a" -> 1/3; 3-grams 0/2; 4-grams 0/1
    s, d = bleu.corpus_bleu(["a a b b"], ["a b a b"])
    assert d["correct"] == [4, 1, 0, 0] and d["total"] == [4, 3, 2, 1]
    want = (100 * (100 / 3) * (100 / 4) * (100 / 4)) ** 0.25   # p3 = 100/(2*2), p4 = 100/(4*1)
    assert close(s, want), (s, want)


def test_multi_reference_closest_length_tie():
    # hyp "a b c d" (4); references of 5 and 3 tokens are both 1 away -> the shorter (3) is
    # the effective length, so BP = 1; every hyp n-gram is in the first reference -> 100.
    s, d = bleu.corpus_bleu(["a b c d"], [["a b c d e"], ["a b c"]])
    assert d["ref_len"] == 3
    assert close(s, 100.0)


def test_trailing_whitespace_ignored():
    s, d = bleu.corpus_bleu(["the cat sat on the mat  \t"], ["the cat sat on the mat"])
    assert close(s, 100.0) and d["sys_len"] == 6


def test_cli_output_line():
    with tempfile.TemporaryDirectory() as tmp:
        hyp, ref = os.path.join(tmp, "hyp"), os.path.join(tmp, "ref")
        with open(hyp, "w") as f:
            f.write("A man, in a red hat.\nTwo dogs play.\n")
        with open(ref, "w") as f:
            f.write("A man in a red hat.\nTwo dogs are playing.\n")
        out = subprocess.run([sys.executable, os.path.join(TOOLS, "bleu.py"), hyp, ref],
                             capture_output=True, text=True, check=True).stdout
    assert out == ("BLEU = 50.00 83.3/60.0/37.5/33.3 (BP = 1.000 ratio = 1.000 "
                   "hyp_len = 12 ref_len = 12)\n"), out


def test_length_mismatch_raises():
    try:
        bleu.corpus_bleu(["a"], ["a", "b"])
    except ValueError:
        return
    raise AssertionError("no ValueError")


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
            print(f"ok   {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
