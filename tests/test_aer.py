#!/usr/bin/python3
"""tools/aer.py: AER on a hand-made gold file with a hand-computed answer, the index-base and
side-order flags, and --sweep on a random model (its table agrees with attend's own
alignments for the same views). Run: /usr/bin/python3 tests/test_aer.py"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402
import aer as AER  # noqa: E402

AER_PY = os.path.join(T.TOOLS, "aer.py")

# Two sentences. Sentence 1: sure 0-0 2-2, possible 1p1; hypothesis 0-0 1-1 2-1.
#   |A|=3 |S|=2 |A&S|=1 (0-0) |A&P|=2 (0-0, 1-1)
# Sentence 2: sure 0-1 1-0 1-2, hypothesis 0-1 1-0 (attend-style 'text ||| links' line).
#   |A|=2 |S|=3 |A&S|=2 |A&P|=2
# Corpus: AER = 1 - (3 + 4) / (5 + 5) = 0.3; precision |A&P|/|A| = 4/5, recall |A&S|/|S| = 3/5
GOLD = "0-0 1p1 2-2\n0-1 1-0 1-2\n"
HYP = "0-0 1-1 2-1\nsome text ||| 0-1 1-0\n"
# The same gold 1-based and target-first.
GOLD_1_TS = "1-1 2p2 3-3\n2-1 1-2 3-2\n"


def write(d, name, text):
    p = os.path.join(d, name)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


def run(args, check=True):
    p = subprocess.run([T.PYTHON, AER_PY] + args, capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def hand_computed(d):
    g, h = write(d, "gold", GOLD), write(d, "hyp", HYP)
    out = run([g, h]).stdout
    assert out == "AER 0.3000 (2 sentences); precision 0.8000, recall 0.6000\n", out
    gold = AER.read_gold(g, False, False)
    assert gold[0] == ({(0, 0), (2, 2)}, {(0, 0), (1, 1), (2, 2)})
    assert abs(AER.aer(gold, [{(0, 0), (1, 1), (2, 1)}, {(0, 1), (1, 0)}]) - 0.3) < 1e-12
    # perfect = 0; only possible links hit: 1 - (0 + 1) / (1 + 2) on sentence 1 alone
    assert AER.aer(gold[:1], [{(0, 0), (2, 2)}]) == 0.0
    assert abs(AER.aer(gold[:1], [{(1, 1)}]) - (1 - 1 / 3)) < 1e-12


def flags(d):
    g = write(d, "gold1", GOLD_1_TS)
    h = write(d, "hyp", HYP)
    out = run([g, h, "--one-based", "--gold-order", "tgt-src"]).stdout
    assert out.startswith("AER 0.3000"), out
    out = run([g, h]).stdout  # read wrongly: a different score
    assert not out.startswith("AER 0.3000"), out
    # hypothesis target-first
    ht = write(d, "hyp_ts", "0-0 1-1 1-2\n1-0 0-1\n")
    assert run([write(d, "gold", GOLD), ht, "--hyp-order", "tgt-src"]).stdout.startswith("AER 0.3000")


def errors(d):
    g = write(d, "gold", GOLD)
    p = run([g, write(d, "short", "0-0\n")], check=False)
    assert p.returncode != 0 and "2 gold lines but 1" in p.stderr, p.stderr
    p = run([write(d, "bad", "0-x\n"), write(d, "h1", "0-0\n")], check=False)
    assert p.returncode != 0 and "not a link" in p.stderr, p.stderr
    p = run([write(d, "zero", "0-0\n"), write(d, "h1", "0-0\n"), "--one-based"], check=False)
    assert p.returncode != 0 and "negative" in p.stderr, p.stderr


def sweep(d):
    """--sweep on a random model: every layer x head (+avg, all:avg) x shift x words x link
    rule is scored, and the rows of seven views equal the AER of attend's own alignments."""
    src_lines = T.corpus_lines("tatoeba", "de", 2000)
    tgt_lines = T.corpus_lines("tatoeba", "en", 2000)
    sspm = T.train_spm(d, "src", src_lines, 600)
    tspm = T.train_spm(d, "tgt", tgt_lines, 600)
    vocab = R.build_vocab(sspm, tspm)
    pad = vocab["<pad>"]
    cfg = dict(d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=20,
               vocab_size=len(vocab), decoder_vocab_size=len(vocab), pad_token_id=pad,
               decoder_start_token_id=pad, bad_words_ids=[[pad]])
    m = R.random_model(cfg, seed=5, bias_std=0.5, gain=1.5)
    hf = os.path.join(d, "m")
    R.save_hf_dir(m, hf, open(sspm, "rb").read(), open(tspm, "rb").read(), vocab)
    gguf = T.export(hf, hf + ".gguf")
    # tokenised pairs and a diagonal-ish gold
    srcs = ["Wo ist der Bahnhof ?", "Ich habe Hunger .", "Das ist mein Haus ."]
    tgts = ["Where is the station ?", "I am hungry .", "That is my house ."]
    gold = "0-0 1-1 2-2 3-3 4-4\n0-0 1p1 2-2 1-1 3-3\n0-0 1-1 2-2 3-3 4-4\n"
    s, t, g = write(d, "s", "\n".join(srcs) + "\n"), write(d, "t", "\n".join(tgts) + "\n"), write(d, "g", gold)
    out = run([g, "-m", gguf, "--source", s, "--target", t, "--sweep"]).stdout.strip().split("\n")
    assert out[0].split() == ["view", "AER"] and out[-1].startswith("best: ")
    table = {l.split()[0]: float(l.split()[1]) for l in out[1:-1]}
    want = {f"{l}:{h}" for l in range(2) for h in range(2)} | {"0:avg", "1:avg", "all:avg"}
    want |= {w + ",shift" for w in want}
    want |= {w + ",words" for w in want}
    want |= {w + m for w in want for m in (",mutual", ",grow")}
    assert set(table) == want, sorted(table)
    assert all(0.0 <= v <= 1.0 for v in table.values())
    best = out[-1].split()[1]
    assert table[best] == min(table.values())
    for preset, row in (("last:0", "1:0"), ("1:avg,shift", "1:avg,shift"), ("all:avg", "all:avg"),
                        ("0:1,shift,words", "0:1,shift,words"), ("all:avg,words", "all:avg,words"),
                        ("1:1,shift,words,grow", "1:1,shift,words,grow"), ("0:avg,mutual", "0:avg,mutual")):
        one = run([g, "-m", gguf, "--source", s, "--target", t, "--preset", preset]).stdout
        assert one.startswith(f"AER {table[row]:.4f}"), (preset, one, table[row])
    print(f"   sweep: best {best} {table[best]:.4f} of {len(table)} views")


def main():
    run_ = T.Runner()
    d = T.tempdir()
    run_.check("AER by hand", hand_computed, d)
    run_.check("one-based and side-order flags", flags, d)
    run_.check("bad input is refused", errors, d)
    run_.check("sweep over layer x head x shift", sweep, d)
    run_.finish()


if __name__ == "__main__":
    main()
