#!/usr/bin/python3
"""Score a German->English .gguf with attend on the project's test sets (cased BLEU, 13a);
--reverse: an English->German one on the same sets the other way round.

Sets: Multi30k val and test_2016_flickr, and the held-out slices that tools/train.py carves
out of the Tatoeba (1,000 pairs), Anki (2,000) and news (500) corpora before training (rebuilt
here by the same rule and seed, so nothing needs to be kept on disk). Translation runs through
build/attend translate as a user would: greedy by default, or with --decoding model (the
file's own generation settings) or --decoding beam4. Besides BLEU each set reports the share of
outputs that loop: some 3-word phrase (lower-cased words) occurs three or more times.

    tools/evaluate.py models/de-en.gguf [--sets test,val,tatoeba,anki,news] [-t 2] [--save-dir DIR]
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bleu  # noqa: E402
import data_paths as D  # noqa: E402
import train  # noqa: E402


def load_sets(data_dir, seed, heldout, reverse=False):
    a = argparse.Namespace(data_dir=data_dir, seed=seed, heldout=heldout, corpora="multi30k")
    d = train.prepare_data(a)
    if reverse:
        d = train.reverse_data(d)
    h = d["heldout_sets"]
    return {"test": d["test"], "val": d["dev"], "tatoeba": h["tatoeba"], "anki": h.get("anki", []),
            "news": h.get("news", [])}


def loops(line, n=3, times=3):
    """Does some n-word phrase occur `times` or more times in line (words lower-cased)?"""
    w = line.lower().split()
    seen = {}
    for i in range(len(w) - n + 1):
        k = tuple(w[i: i + n])
        seen[k] = seen.get(k, 0) + 1
        if seen[k] >= times:
            return True
    return False


def translate(attend, model, lines, threads, extra):
    p = subprocess.run([attend, "translate", "-m", model, "-t", str(threads)] + extra,
                       input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"attend failed ({p.returncode}): {p.stderr.strip()}")
    out = p.stdout.split("\n")[:-1]
    if len(out) != len(lines):
        raise SystemExit(f"attend returned {len(out)} lines for {len(lines)}")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--sets", default="test,val,tatoeba,anki,news",
                   help="comma list of test,val,tatoeba,anki,news (all)")
    p.add_argument("--decoding", default="greedy", choices=("greedy", "model", "beam4"),
                   help="greedy (default), the file's own settings, or 4 beams")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--attend", default=os.path.join(REPO, "build", "attend"))
    p.add_argument("--data-dir", default=D.data_dir(),
                   help="the shared corpora (default ../shared/data beside the checkout, or $ATTEND_DATA)")
    p.add_argument("--seed", type=int, default=1234, help="train.py's --seed (1234)")
    p.add_argument("--heldout", type=int, default=1000, help="train.py's --heldout (1000)")
    p.add_argument("--reverse", action="store_true", help="an English->German model: English sources, "
                   "German references")
    p.add_argument("--save-dir", help="write each set's hypotheses to DIR/SET.hyp")
    p.add_argument("--compare", help="second model (e.g. int8): also report BLEU and the share "
                   "of identical output lines")
    a = p.parse_args()
    sets = load_sets(a.data_dir, a.seed, a.heldout, a.reverse)
    for name in a.sets.split(","):
        pairs = sets[name]
        src, ref = [x[0] for x in pairs], [x[1] for x in pairs]
        t0 = time.time()
        extra = {"greedy": ["--greedy"], "model": [], "beam4": ["--beam", "4"]}[a.decoding]
        hyp = translate(a.attend, a.model, src, a.threads, extra)
        secs = time.time() - t0
        score, det = bleu.corpus_bleu(hyp, [ref])
        looping = 100 * sum(map(loops, hyp)) / len(hyp)
        line = (f"{name:8s} {len(src):5d} sentences  BLEU {score:5.2f}  looping {looping:4.1f}%  "
                f"({a.decoding}, {secs:.1f} s)")
        if a.compare:
            hyp2 = translate(a.attend, a.compare, src, a.threads, extra)
            score2, _ = bleu.corpus_bleu(hyp2, [ref])
            same = sum(x == y for x, y in zip(hyp, hyp2)) / len(hyp)
            line += f"  | {os.path.basename(a.compare)}: BLEU {score2:5.2f}, identical lines {100 * same:.1f}%"
        print(line, flush=True)
        if a.save_dir:
            os.makedirs(a.save_dir, exist_ok=True)
            with open(os.path.join(a.save_dir, name + ".hyp"), "w", encoding="utf-8") as f:
                f.write("\n".join(hyp) + "\n")


if __name__ == "__main__":
    main()
