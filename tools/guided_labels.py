#!/usr/bin/python3
"""Labels for guided alignment (Garg et al. 2019): every training pair of tools/train.py,
encoded as the model encodes it, with tools/word_align.py's grow-diag-final-and links
carried from words to pieces.

  guided_labels.py [-m MODEL] [-o OUT.npz] [--max-pairs N]

1. word_align.py (IBM 1 -> 2 -> HMM, both directions, grow-diag-final-and) is trained on every
   training pair (or a fixed random --max-pairs of them) and aligns them all (lowercased words,
   as its own tests and the silver links use).
2. Each pair is encoded with MODEL's SentencePiece models (train.encode_pairs: source ids and
   target ids, each ending in </s>). A piece belongs to the word its characters overlap most
   (the pieces' character offsets from SentencePiece, the words' from word_align.split_words'
   pattern); a piece of no word (a lone word-start mark) is in no link.
3. A link (source word i, target word j) becomes every (target piece of j, source piece of i)
   pair: OUT holds, per pair, those (target piece, source piece) index pairs. Training turns
   them into a distribution per target piece (uniform over its linked source pieces).

OUT.npz: links (uint16 [n, 2]: target piece, source piece, every pair's in turn), links_len
(per pair), index (which of word_align.training_pairs() they are: all, or the --max-pairs
subset), pairs (the sha256 of those pairs' text: guided_align.py reads the pairs again and
checks it) and the model's name. A pair whose words do not split the same way cased and
lowercased keeps no links.

Takes a few minutes and some GB of memory (word_align.py holds every candidate link of the
corpus at once)."""
import argparse
import hashlib
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import word_align as W  # noqa: E402


def log(msg):
    print(f"guided_labels: {msg}", file=sys.stderr, flush=True)


def word_spans(text):
    """[(first character, end character)] of each of word_align.split_words(text)'s words."""
    return [m.span() for m in W.WORD.finditer(text)]


def piece_spans(proto, text):
    """[(first character, end character)] of each piece of text. SentencePiece's Python module
    gives character offsets (0.1.97 here); a build that gives UTF-8 byte offsets is
    told apart by the pieces' surfaces and converted."""
    spans = [(p.begin, p.end) for p in proto.pieces]
    if all(text[b:e] == p.surface for (b, e), p in zip(spans, proto.pieces)):
        return spans
    raw = text.encode("utf-8")
    char_at = {len(text[:i].encode("utf-8")): i for i in range(len(text) + 1)}
    if all(raw[b:e].decode("utf-8", "replace") == p.surface for (b, e), p in zip(spans, proto.pieces)):
        return [(char_at.get(b, b), char_at.get(e, e)) for b, e in spans]
    raise SystemExit(f"guided_labels: SentencePiece's piece offsets fit neither characters nor bytes: {text!r}")


def piece_words(sp, text, spans):
    """The piece strings of text and, per piece, the index of the word it overlaps most (-1: none)."""
    proto = sp.encode(text, out_type="immutable_proto")
    pieces, owner = [], []
    for p, (pb, pe) in zip(proto.pieces, piece_spans(proto, text)):
        pieces.append(p.piece)
        best, where = 0, -1
        for w, (b, e) in enumerate(spans):
            if e <= pb:
                continue
            if b >= pe:
                break
            over = min(e, pe) - max(b, pb)
            if over > best:
                best, where = over, w
        owner.append(where)
    return pieces, owner


def piece_links(word_links, src_owner, tgt_owner):
    """[(target piece, source piece)] of every piece pair whose words are linked."""
    by_src = {}
    for k, w in enumerate(src_owner):
        by_src.setdefault(w, []).append(k)
    linked = {}
    for i, j in word_links:
        linked.setdefault(j, []).extend(by_src.get(i, ()))
    return [(t, s) for t, w in enumerate(tgt_owner) if w >= 0 for s in sorted(set(linked.get(w, ())))]


def encode_all(tok, pairs, links):
    """Per pair: (source ids, target ids, [(target piece, source piece)])."""
    out = []
    bad = 0
    for (de, en), wl in zip(pairs, links):
        ss, ts = word_spans(de), word_spans(en)
        sp_src, so = piece_words(tok.src_sp, de, ss)
        sp_tgt, to = piece_words(tok.tgt_sp, en, ts)
        src = [tok.src_vocab.get(p, tok.unk) for p in sp_src] + [tok.eos]
        tgt = [tok.tgt_vocab.get(p, tok.unk) for p in sp_tgt] + [tok.eos]
        assert src == tok.encode(de), de  # the ids training and inference give
        if len(ss) != len(W.split_words(de)) or len(ts) != len(W.split_words(en)):
            bad += 1
            wl = ()
        out.append((src, tgt, piece_links(wl, so, to)))
    log(f"{bad} pairs whose cased and lowercased words differ: no links")
    return out


def pairs_digest(pairs):
    """sha256 of the pairs' text, so that the labels are only used with the pairs they label."""
    h = hashlib.sha256()
    for de, en in pairs:
        h.update(de.encode() + b"\0" + en.encode() + b"\0")
    return h.hexdigest()


def save(path, rows, pairs, index, name):
    links = np.array([l for r in rows for l in r[2]], dtype=np.uint16).reshape(-1, 2)
    np.savez_compressed(path + ".tmp.npz", links=links, links_len=np.array([len(r[2]) for r in rows], dtype=np.int32),
                        pairs=np.array(pairs_digest(pairs)), index=index.astype(np.uint32),
                        model=np.array(name))
    os.replace(path + ".tmp.npz", path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("-o", "--output", default=os.path.join(REPO, "build", "guided", "labels.npz"))
    p.add_argument("--max-pairs", type=int, default=0, help="align only a fixed random subset (0: all)")
    a = p.parse_args(argv)
    import train_align_head
    t0 = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    model = train_align_head.load_model(a.model, os.path.dirname(os.path.abspath(a.output)))
    pairs = W.training_pairs()
    keep = np.arange(len(pairs))
    if a.max_pairs and a.max_pairs < len(pairs):
        keep = np.sort(np.random.default_rng(0).choice(len(pairs), a.max_pairs, replace=False))
        pairs = [pairs[i] for i in keep]
    log(f"{len(pairs)} training pairs")
    links = W.align([W.split_words(x) for x, _ in pairs], [W.split_words(y) for _, y in pairs], len(pairs), log=log)
    log(f"aligned in {time.time() - t0:.0f} s")
    rows = encode_all(model.tok, pairs, links)
    save(a.output, rows, pairs, keep, os.path.basename(a.model))
    n = sum(len(r[2]) for r in rows)
    log(f"{a.output}: {len(rows)} pairs, {n} piece links ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
