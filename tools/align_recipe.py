#!/usr/bin/python3
"""How the shipped model's alignment view was chosen, without any gold alignment: silver
links from tools/word_align.py on held-out news sentences, then `attend align --calibrate`
on them, which writes a copy of the model recording the best view.

  align_recipe.py [-m MODEL] [--work DIR] [-o OUT] [--sentences 300] [--max-pairs 120000]

1. The first --sentences pairs of tools/train.py's news held-out slice (never trained on),
   split into words and punctuation marks (word_align.split_words, case kept), are written
   to WORK/silver.{de,en}.
2. tools/word_align.py aligns them, training on --max-pairs of the model's training pairs
   (a fixed random subset: two shared CPU cores), the development set's text (unlabeled,
   when ../shared/data/align-deen-bicici is there) and the silver sentences themselves:
   WORK/silver.wa (and WORK/dev.wa, the aligner's own development-set output).
3. `attend align --calibrate WORK/silver.wa` scores every view on them and, with -o, writes
   OUT recording the best (WORK/calibration.txt holds the table).
The development set's gold links are read only to print the aligner's AER at the end."""
import argparse
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import aer as AER  # noqa: E402
import data_paths as D  # noqa: E402
import word_align as W  # noqa: E402


def news_heldout(n):
    import train
    a = types.SimpleNamespace(data_dir=D.data_dir(), corpora="multi30k,tatoeba,anki,news,wmt10k", seed=1234,
                              heldout=1000, heldout_anki=2000, heldout_news=500, multi30k_repeat=1)
    return train.prepare_data(a)["heldout_sets"]["news"][:n]


def write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--attend", default=os.path.join(REPO, "build", "attend"))
    p.add_argument("--work", default=os.path.join(REPO, "build", "align-recipe"))
    p.add_argument("-o", "--output", help="the copy of the model recording the best view")
    p.add_argument("--sentences", type=int, default=300)
    p.add_argument("--max-pairs", type=int, default=120000)
    a = p.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    pairs = news_heldout(a.sentences)
    sde = write(os.path.join(a.work, "silver.de"), [" ".join(W.split_words(x, True)) for x, _ in pairs])
    sen = write(os.path.join(a.work, "silver.en"), [" ".join(W.split_words(y, True)) for _, y in pairs])
    try:
        dev = D.corpus("align-deen-bicici", "test.de")
    except D.MissingData:  # the development set is optional here
        dev = None
    src, tgt = AER.read_lines(sde), AER.read_lines(sen)
    n_dev = 0
    if dev:
        base = os.path.dirname(dev)
        with open(dev, encoding="utf-8-sig") as f:
            dsrc = [l.rstrip("\n") for l in f]
        dtgt = AER.read_lines(os.path.join(base, "test.en"))
        src, tgt, n_dev = dsrc + src, dtgt + tgt, len(dsrc)
    both_s, both_t = write(os.path.join(a.work, "all.src"), src), write(os.path.join(a.work, "all.tgt"), tgt)
    out = os.path.join(a.work, "all.wa")
    W.main(["--source", both_s, "--target", both_t, "--train-corpus", "--max-pairs", str(a.max_pairs),
            "-o", out])
    links = AER.read_lines(out)
    silver = write(os.path.join(a.work, "silver.wa"), links[n_dev:])
    if n_dev:
        write(os.path.join(a.work, "dev.wa"), links[:n_dev])
    cmd = [a.attend, "align", "--calibrate", silver, "--source", sde, "--target", sen, "-m", a.model]
    if a.output:
        cmd += ["-o", a.output]
    cal = subprocess.run(cmd, capture_output=True, text=True)
    if cal.returncode:
        raise SystemExit(f"align_recipe.py: attend align --calibrate failed: {cal.stderr.strip()}")
    write(os.path.join(a.work, "calibration.txt"), cal.stdout.rstrip("\n").split("\n"))
    print("\n".join(cal.stdout.rstrip("\n").split("\n")[-2:]))
    if n_dev:
        gold = AER.read_gold(os.path.join(base, "de-en.wa"), False, False)
        hyp = [AER.parse_links(l)[1] for l in links[:n_dev]]
        print(f"word_align.py on the development set: AER {AER.aer(gold, hyp):.4f} ({n_dev} sentences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
