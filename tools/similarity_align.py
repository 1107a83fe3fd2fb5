#!/usr/bin/python3
"""Word alignments from the similarity of the translation model's own hidden states (the idea
of awesome-align, Dou & Neubig 2021, and SimAlign, Jalili Sabet et al. 2020, with the
translation model's encoder and decoder in place of multilingual BERT): no training.

  similarity_align.py [-m MODEL] [--work DIR] [--sets dev,devcased,silver] sweep [--top 30]
  similarity_align.py ... write --enc E --dec K [--pos shift|predict] [--temp T] [--links L]
                          [--threshold C] PREFIX          (PREFIX.{set}.wa, for align_signal.py)

The pair is force-decoded with the PyTorch reference model (tools/reference.py, weights read
from the .gguf). Source piece j is represented by the output of encoder layer E at j (0: the
embeddings with positions, 1..: each layer's output); target piece t by the output of decoder
layer K (0: embeddings with positions) either at the position where t is the decoder's input
(pos "shift", position t+1, as Shift-Att reads attention) or at the one that predicts it
(pos "predict", position t), or, as awesome-align reads both sentences with one network, by
the output of encoder layer K when the target sentence is run through the encoder too (pos
"encoder"; the vocabulary and the embeddings are shared). </s> is on neither side.

  sim[t, j]  = cos(h_t, h_j) / T (--temp)
  P_ts, P_st = softmax of sim over the source pieces (each row), over the target pieces (each
               column)
Links (--links):
  threshold  awesome-align's rule: (t, j) when P_ts[t, j] > C and P_st[t, j] > C (piece
             level); two words are linked if any of their pieces are
  prod-*     the matrix P_ts * P_st summed over both words' pieces to a word grid (as a
             view's ",words" sums attention), links read as attend reads a view: argmax (each
             target word's largest), mutual (mutual argmaxes) or grow (model/align_links.c)
The sets are tools/align_signal.py's (run it first): WORK holds their text and gold links
(dev: the 100 hand-aligned pairs; devcased: the same truecased; silver: statistical sure and
possible links on held-out cased news and Tatoeba pairs). The states are cached in
WORK/states-MODELNAME.pt."""
import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import aer as AER  # noqa: E402


def log(msg):
    print(f"similarity_align: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# States

def load_model(path, work):
    import train_align_head
    return train_align_head.load_model(path, work)


def pair_states(model, src_text, tgt_text):
    """Pieces and hidden states of one force-decoded pair: enc [E+1, S, d] (embeddings, then
    each layer's output), dec [K+1, T, d] at decoder positions 0..T-1 (position p reads target
    token p-1, the start token at 0), tenc [E+1, T, d] the target pieces run through the
    encoder (the vocabulary and embeddings are shared)."""
    tok = model.tok
    src = tok.encode(src_text)
    tgt = [tok.tgt_vocab.get(p, tok.unk) for p in tok.tgt_sp.encode(tgt_text, out_type=str)] + [tok.eos]
    start = model.config["decoder_start_token_id"]
    with torch.no_grad():
        x = model.model.encoder.embed_tokens(torch.tensor([src])) * model.embed_scale
        x = x + model.positions[: len(src)]
        enc = [x[0]]
        for layer in model.model.encoder.layers:
            x, _ = layer(x, None)
            enc.append(x[0])
        y = model.model.decoder.embed_tokens(torch.tensor([[start] + tgt[:-1]])) * model.embed_scale
        y = y + model.positions[: len(tgt)]
        dec = [y[0]]
        for layer in model.model.decoder.layers:
            y, _, _ = layer(y, x, None)
            dec.append(y[0])
        z = model.model.encoder.embed_tokens(torch.tensor([tgt])) * model.embed_scale
        z = z + model.positions[: len(tgt)]
        tenc = [z[0]]
        for layer in model.model.encoder.layers:  # the target read by the encoder too
            z, _ = layer(z, None)
            tenc.append(z[0])
    ip = {v: k for k, v in tok.src_vocab.items()}
    return dict(src=[ip[i] for i in src], tgt=[tok.tgt_pieces[i] for i in tgt],
                enc=torch.stack(enc).numpy(), dec=torch.stack(dec).numpy(), tenc=torch.stack(tenc).numpy())


def set_states(model, work, name):
    src, tgt = AER.read_lines(os.path.join(work, f"{name}.de")), AER.read_lines(os.path.join(work, f"{name}.en"))
    return [pair_states(model, s, t) for s, t in zip(src, tgt)]


def all_states(a, sets):
    cache = os.path.join(a.work, f"states-{os.path.basename(a.model)}.pt")
    if os.path.exists(cache):
        got = torch.load(cache, weights_only=False)
        if all(s in got for s in sets):
            return got
    model = load_model(a.model, a.work)
    got = {}
    for s in sets:
        t0 = time.perf_counter()
        got[s] = set_states(model, a.work, s)
        log(f"{s}: {len(got[s])} pairs, {time.perf_counter() - t0:.1f} s")
    torch.save(got, cache)
    return got


# --------------------------------------------------------------------------------------
# The method

def similarity(x, enc, dec, pos):
    """Cosine similarities [T', S'] of the real target pieces (rows) and source pieces
    (columns), with the piece indices they stand for."""
    sw, tw = AER.words_of(x["src"]), AER.words_of(x["tgt"])
    cols = [j for j, w in enumerate(sw) if w >= 0]
    rows = [t for t, w in enumerate(tw) if w >= 0]
    hs = x["enc"][enc][cols].astype(np.float64)
    if pos == "encoder":
        ht = x["tenc"][dec][rows]
    else:
        D = x["dec"][dec]
        ht = D[[t + 1 for t in rows]] if pos == "shift" else D[rows]
    hs = hs / np.linalg.norm(hs, axis=1, keepdims=True)
    ht = ht.astype(np.float64)
    ht = ht / np.linalg.norm(ht, axis=1, keepdims=True)
    return ht @ hs.T, rows, cols


def softmaxes(sim, temp):
    z = sim / temp
    p_ts = np.exp(z - z.max(1, keepdims=True))
    p_ts /= p_ts.sum(1, keepdims=True)
    p_st = np.exp(z - z.max(0, keepdims=True))
    p_st /= p_st.sum(0, keepdims=True)
    return p_ts, p_st


def links_of(x, enc, dec, pos, temp, links, threshold):
    """The (source word, target word) links of one pair."""
    sim, rows, cols = similarity(x, enc, dec, pos)
    if not rows or not cols:
        return set()
    p_ts, p_st = softmaxes(sim, temp)
    sw, tw = AER.words_of(x["src"]), AER.words_of(x["tgt"])
    if links == "threshold":
        r, c = np.nonzero((p_ts > threshold) & (p_st > threshold))
        return {(sw[cols[j]], tw[rows[t]]) for t, j in zip(r, c)}
    M = np.zeros((len(x["tgt"]), len(x["src"])))
    M[np.ix_(rows, cols)] = p_ts * p_st
    return AER.hard_links(M, x["src"], x["tgt"], words=True, links=links.split("-", 1)[1])


def set_links(states, enc, dec, pos, temp, links, threshold):
    return [links_of(x, enc, dec, pos, temp, links, threshold) for x in states]


# --------------------------------------------------------------------------------------
# Sweeping and writing

def golds(work, sets):
    return {s: AER.read_gold(os.path.join(work, f"{s}.wa"), False, False) for s in sets}


def settings(n_enc, n_dec):
    for pos in ("shift", "predict", "encoder"):
        for enc in range(n_enc):
            for dec in range(n_enc if pos == "encoder" else n_dec):
                for temp in (0.05, 0.1):
                    for links in ("prod-argmax", "prod-mutual", "prod-grow"):
                        yield enc, dec, pos, temp, links, 0.0
                    for c in (0.05, 0.1, 0.2):
                        yield enc, dec, pos, temp, "threshold", c


def sweep(a, states, gold):
    """Every setting on the first set, best first; the --top best on every set."""
    x0 = next(iter(states.values()))[0]
    key = a.sets.split(",")[0]
    rows = [(st, AER.aer(gold[key], set_links(states[key], *st))) for st in settings(len(x0["enc"]), len(x0["dec"]))]
    rows.sort(key=lambda r: r[1])
    print(f"{'enc dec pos temp links threshold':<44} " + " ".join(f"{s:>9}" for s in states))
    for st, _ in rows[: a.top]:
        row = {s: AER.aer(gold[s], set_links(states[s], *st)) for s in states}
        print(f"{' '.join(map(str, st)):<44} " + " ".join(f"{row[s]:9.4f}" for s in states), flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--work", default=os.path.join(REPO, "build", "align-signal"))
    p.add_argument("--sets", default="dev,devcased,silver")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("--top", type=int, default=30)
    w = sub.add_parser("write")
    w.add_argument("prefix")
    w.add_argument("--enc", type=int, required=True)
    w.add_argument("--dec", type=int, required=True)
    w.add_argument("--pos", choices=["shift", "predict", "encoder"], default="shift")
    w.add_argument("--temp", type=float, default=0.1)
    w.add_argument("--links", default="threshold",
                   choices=["threshold", "prod-argmax", "prod-mutual", "prod-grow"])
    w.add_argument("--threshold", type=float, default=0.1)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    sets = a.sets.split(",")
    states = all_states(a, sets)
    gold = golds(a.work, sets)
    if a.cmd == "sweep":
        sweep(a, states, gold)
        return 0
    for s in sets:
        hyp = set_links(states[s], a.enc, a.dec, a.pos, a.temp, a.links, a.threshold)
        print(f"{s}: {AER.score_line(gold[s], hyp, f'{len(hyp)} sentences')}")
        with open(f"{a.prefix}.{s}.wa", "w") as f:
            f.write("".join(" ".join(f"{i}-{j}" for i, j in sorted(h)) + "\n" for h in hyp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
