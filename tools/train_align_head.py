#!/usr/bin/python3
"""Train an alignment head on top of a frozen model (Zenkel et al. 2020; the loss of Garg et
al. 2019): one attention head of width --width whose query projects the decoder's output at
layer --layer (read one step later, as Shift-Att reads attention) and whose key projects the
encoder's output, trained towards tools/word_align.py's symmetrised links.

  train_align_head.py [-m MODEL] [--work DIR] [--pairs 3000] [--layer 3] [--width 64]
                      [--steps 3000] [--max-pairs 60000] [-o HEAD.npz]

1. --pairs training pairs of tools/train.py (a fixed random subset of short ones), the news
   held-out sentences align_recipe.py uses as silver links (--silver of them) and the
   development set's text are split into words (word_align.split_words, case kept) and
   aligned by word_align.py (trained also on --max-pairs training pairs): WORK/links.json.
2. The model (frozen, torch, no gradients) force-decodes every pair once: the encoder's
   output and each decoder layer's output are kept (WORK/states-*.pt).
3. The head: q = Wq h[t+1] + bq (h at the decoder position whose input is target token t),
   k = Wk m + bk, A[t] = softmax_s(q.k / sqrt(width)). Loss per target piece whose word is
   linked: cross-entropy against the uniform distribution over the pieces of the linked
   source words. Adam, batches of --batch pairs; the silver AER is printed as it goes.
The settings (layer, width, steps) are chosen on the silver links; the development set's gold
links are only read to report its AER (at the end; with --dev also at every report).

With --signal DIR (tools/align_signal.py's work folder) the labels are --labels gdfa
(word_align.py's grow-diag-final-and) or vote (the links two of three hold: the model's own
view and the aligner's two directions; tools/align_vote.py), and the step is chosen by the
mean AER over that folder's dev, devcased and silver sets; --mix L:H scores (and chooses) the
head averaged with cross-attention head H of layer L read one step later. The labels' sources
are cached in WORK/label-sources.json (one --pairs / --max-pairs per WORK).
With --reverse (and --signal) the model is English->German (tools/train.py --reverse): the same
training pairs and the aligner's same two directions, every side and link swapped, the model's
own view read on English sources, and the sets' gold read j-i (one WORK per direction).

Speed: step 2 is a few minutes on one thread with an optimised BLAS. Debian's python3-torch
calls the reference BLAS (libblas.so.3, about 1 GFLOP/s: hours here); an OpenBLAS library
for this process alone is enough, without installing it:
  apt-get download libopenblas0-pthread && dpkg-deb -x libopenblas0-pthread_*.deb ob
  export OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH=$PWD/ob/usr/lib/x86_64-linux-gnu/openblas-pthread
  tools/train_align_head.py ..."""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import aer as AER  # noqa: E402
import data_paths as D  # noqa: E402
import word_align as W  # noqa: E402
from align_vote import view_links, vote  # noqa: E402

SIGNAL_SETS = ("dev", "devcased", "silver")  # tools/align_signal.py's


def log(msg):
    print(f"train_align_head: {msg}", file=sys.stderr, flush=True)


def load_model(path, work):
    import train
    import reference
    a = argparse.Namespace(init_from=path)
    dims, pieces, weights = train.read_init(a, work)
    vocab = {p: i for i, p in enumerate(pieces)}
    cfg = train.build_config(argparse.Namespace(dropout=0.0, num_beams=1, **dims), vocab)
    m = reference.Marian(cfg)
    train.load_init_weights(m, weights)
    m.eval()
    m.tok = reference.MarianTok(os.path.join(work, "source.spm"), os.path.join(work, "target.spm"), vocab)
    return m


def corpus(a):
    """Word lists of (train, silver, dev) pairs and their links."""
    import align_recipe
    cache = os.path.join(a.work, "links.json")
    if os.path.exists(cache):
        with open(cache) as f:
            return json.load(f)
    pool = W.training_pairs()
    train = label_pairs(pool, a.pairs)
    silver = [(W.split_words(x, True), W.split_words(y, True)) for x, y in align_recipe.news_heldout(a.silver)]
    base = os.path.dirname(D.corpus("align-deen-bicici", "test.de"))
    dev = [(s.split(), t.split()) for s, t in zip(W.read_lines(os.path.join(base, "test.de")),
                                                   W.read_lines(os.path.join(base, "test.en")))]
    extra = pool
    if a.max_pairs and len(pool) > a.max_pairs:
        extra = [pool[i] for i in sorted(np.random.default_rng(0).choice(len(pool), a.max_pairs, False))]
    pairs = train + silver + dev
    src = [W.split_words(x) for x, _ in extra] + [[w.lower() for w in s] for s, _ in pairs]
    tgt = [W.split_words(y) for _, y in extra] + [[w.lower() for w in t] for _, t in pairs]
    links = W.align(src, tgt, len(pairs), log=log, hmm=a.hmm)
    n1, n2 = len(train), len(train) + len(silver)
    out = {"train": [[s, t, l] for (s, t), l in zip(train, links[:n1])],
           "silver": [[s, t, l] for (s, t), l in zip(silver, links[n1:n2])],
           "dev": [[s, t, l] for (s, t), l in zip(dev, links[n2:])]}
    with open(cache, "w") as f:
        json.dump(out, f)
    return out


def label_pairs(pool, n):
    """n training pairs of 3..30 words a side (a fixed random choice, each German side once)."""
    rng = np.random.default_rng(7)
    train, seen = [], set()
    for i in rng.permutation(len(pool)):
        s, t = W.split_words(pool[i][0], True), W.split_words(pool[i][1], True)
        if 3 <= len(s) <= 30 and 3 <= len(t) <= 30 and pool[i][0] not in seen:
            seen.add(pool[i][0])
            train.append((s, t))
        if len(train) == n:
            break
    return train


def signal_corpus(a):
    """--signal: --pairs training pairs labelled by a.labels (word_align.py trained on every
    training pair, or on --max-pairs of them: 'gdfa' its grow-diag-final-and links, 'vote'
    the links at least two of three agree on: its two directions and the model's own view),
    and tools/align_signal.py's three sets to score on (their gold read from a.signal)."""
    cache = os.path.join(a.work, "label-sources.json")  # both directions and the view: every --labels
    if os.path.exists(cache):
        with open(cache) as f:
            out = json.load(f)
    else:
        pool = W.training_pairs()
        train = label_pairs(pool, a.pairs)
        extra = pool
        if a.max_pairs and len(pool) > a.max_pairs:
            extra = [pool[i] for i in sorted(np.random.default_rng(0).choice(len(pool), a.max_pairs, False))]
        src = [W.split_words(x) for x, _ in extra] + [[w.lower() for w in s] for s, _ in train]
        tgt = [W.split_words(y) for _, y in extra] + [[w.lower() for w in t] for _, t in train]
        fwd, rev = W.align(src, tgt, len(train), log=log, hmm=a.hmm, directed_only=True)
        if a.reverse:  # English->German: the same pairs and the aligner's links, sides swapped
            train = [(t, s) for s, t in train]
            fwd, rev = [transposed(l) for l in rev], [transposed(l) for l in fwd]
        view = view_links(a.model, [" ".join(s) for s, _ in train], [" ".join(t) for _, t in train])
        out = {"train": [[s, t, []] for s, t in train], "sources": [[sorted(x) for x in d] for d in (fwd, rev, view)]}
        for name in SIGNAL_SETS:
            src, tgt = (AER.read_lines(os.path.join(a.signal, f"{name}.{x}")) for x in sides(a))
            out[name] = [[x.split(), y.split(), []] for x, y in zip(src, tgt)]
        with open(cache, "w") as f:
            json.dump(out, f)
    fwd, rev, view = ([set(map(tuple, l)) for l in d] for d in out["sources"])
    if a.labels == "vote":
        links = [vote(v, f, r) for v, f, r in zip(view, fwd, rev)]
    else:
        links = [W.grow_diag_final_and(f, r, 0, 0) for f, r in zip(fwd, rev)]
    for x, l in zip(out["train"], links):
        x[2] = sorted(l)
    return out


def sides(a):
    """The file extensions of the source and target side of align_signal.py's sets."""
    return ("en", "de") if a.reverse else ("de", "en")


def transposed(links):
    """(source, target) links read the other way round."""
    return {(j, i) for i, j in links}


def forward_states(model, src, tgt):
    """Force-decode ids tgt (ending in </s>) from src: the encoder's output [S,d] and [2L,T,d]:
    every decoder layer's output, then every layer's cross-attention input (the state after its
    self-attention); position t reads tgt[t-1] (the start token at 0)."""
    start = model.config["decoder_start_token_id"]
    with torch.no_grad():
        mem, _ = model.encode(torch.tensor([src]))
        y = model.model.decoder.embed_tokens(torch.tensor([[start] + list(tgt[:-1])])) * model.embed_scale
        y = y + model.positions[: len(tgt)]
        hs, qs = [], []
        for layer in model.model.decoder.layers:
            a, _ = layer.self_attn(y, y, causal=True)
            qs.append(layer.self_attn_layer_norm(y + a)[0])  # what its cross-attention queries read
            y, _, _ = layer(y, mem, None)
            hs.append(y[0])
    return mem[0], torch.stack(hs + qs)


def states(model, items, name, work):
    """Per pair: source/target pieces, encoder output [S,d], decoder states [2L,T,d] (cached in
    WORK unless work is None)."""
    cache = os.path.join(work, f"states2-{name}.pt") if work else None
    if cache and os.path.exists(cache):
        return torch.load(cache, weights_only=False)
    tok, out = model.tok, []
    ip = {v: k for k, v in tok.src_vocab.items()}
    for s, t, links in items:
        src = tok.encode(" ".join(s))
        tgt = [tok.tgt_vocab.get(p, tok.unk) for p in tok.tgt_sp.encode(" ".join(t), out_type=str)] + [tok.eos]
        mem, dec = forward_states(model, src, tgt)
        out.append(dict(src=[ip[i] for i in src], tgt=[tok.tgt_pieces[i] for i in tgt], links=links,
                        mem=mem.half(), dec=dec.half(), nw=(len(s), len(t))))
    if cache:
        torch.save(out, cache)
    return out


class Head(torch.nn.Module):
    def __init__(self, d, width):
        super().__init__()
        self.q, self.k = torch.nn.Linear(d, width), torch.nn.Linear(d, width)
        self.width = width

    def forward(self, h, mem):
        """h [T,d] decoder outputs (unshifted), mem [S,d] -> A [T,S], row t from h[t+1]."""
        q = self.q(h[1:])
        A = torch.softmax(q @ self.k(mem).T / self.width ** 0.5, -1)
        return torch.cat([A, torch.zeros(1, mem.shape[0])])


def target_of(x):
    """[T,S] label distributions (rows of unlinked target pieces all zero)."""
    sw, tw = AER.words_of(x["src"]), AER.words_of(x["tgt"])
    if max(sw) + 1 != x["nw"][0] or max(tw) + 1 != x["nw"][1]:
        return None  # the pieces do not split into the aligner's words
    by_t = {}
    for i, j in x["links"]:
        by_t.setdefault(j, set()).add(i)
    Y = torch.zeros(len(tw), len(sw))
    for t, w in enumerate(tw[:-1]):
        src = by_t.get(w, ())
        cols = [j for j, v in enumerate(sw) if v in src]
        if w >= 0 and cols:
            Y[t, cols] = 1.0 / len(cols)
    return Y


def init_from_cross(head, model, layer, h):
    """Start the head as cross-attention head h of decoder layer `layer` (its query and key
    rows; read on that layer's cross-attention input, this is the view layer:h,shift)."""
    att = model.model.decoder.layers[layer].encoder_attn
    w = att.head_dim
    rows = slice(h * w, (h + 1) * w)
    with torch.no_grad():
        head.q.weight.copy_(att.q_proj.weight[rows])
        head.q.bias.copy_(att.q_proj.bias[rows])
        head.k.weight.copy_(att.k_proj.weight[rows])
        head.k.bias.copy_(att.k_proj.bias[rows])


def fit(head, train, layer, steps, batch, lr, seed, every=500, report=None, score=None, init=None):
    """Adam on the Garg et al. loss over (pair, labels) items; every `every` steps (and at the
    end) report(step, loss, head) and, with score (lower is better), keep the best head.
    Returns (score, step, state_dict) of the best (the last without score) and the losses."""
    torch.manual_seed(seed)
    for p in head.parameters():  # the same start whatever was drawn before
        torch.nn.init.normal_(p, 0.0, 0.02)
    if init:
        init(head)
    if every and score:  # the start counts as step 0
        best = (score(head), 0, {k: v.detach().clone() for k, v in head.state_dict().items()})
        if report:
            report(0, float("nan"), head)
    else:
        best = None
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(1, steps + 1):
        loss = 0.0
        for k in rng.integers(0, len(train), batch):
            x, Y = train[k]
            A = head(x["dec"][layer].float(), x["mem"].float())
            loss = loss - (Y * torch.log(A + 1e-9)).sum() / max(1.0, float((Y.sum(1) > 0).sum()))
        opt.zero_grad()
        (loss / batch).backward()
        opt.step()
        losses.append(float(loss) / batch)
        if every and (step % every == 0 or step == steps):
            if report:
                report(step, losses[-1], head)
            sc = score(head) if score else 0.0
            if best is None or sc < best[0] or not score:
                best = (sc, step, {k: v.detach().clone() for k, v in head.state_dict().items()})
    return best, losses


def agreed(train, head, model, layer, init_head):
    """Keep only the labels of links that the starting head (cross-attention head init_head,
    read as a words view) also draws: (pair, labels) items rebuilt on those links."""
    init_from_cross(head, model, layer - len(model.model.decoder.layers), init_head)
    out = []
    with torch.no_grad():
        for x, _ in train:
            A = head(x["dec"][layer].float(), x["mem"].float()).numpy()
            mine = AER.hard_links(A, x["src"], x["tgt"], words=True)
            y = dict(x, links=[l for l in map(tuple, x["links"]) if l in mine])
            out.append((y, target_of(y)))
    log(f"--agree: {sum(len(y['links']) for y, _ in out)} of {sum(len(x['links']) for x, _ in train)} links kept")
    return out


def head_links(head, data, layer, links="argmax", mix=None):
    """The head's word links of each pair (read as links says). mix = (other head, its state):
    the equal average of both heads' matrices, as a view that names two items averages them."""
    hyp = []
    with torch.no_grad():
        for x in data:
            A = head(x["dec"][layer].float(), x["mem"].float())
            if mix:
                A = (A + mix[0](x["dec"][mix[1]].float(), x["mem"].float())) / 2
            hyp.append(AER.hard_links(A.numpy(), x["src"], x["tgt"], words=True, links=links))
    return hyp


def evaluate(head, data, layer, gold=None, links="argmax", mix=None):
    """AER of head_links against gold (None: each pair's own links)."""
    hyp = head_links(head, data, layer, links, mix)
    if gold is None:
        gold = [(set(map(tuple, x["links"])),) * 2 for x in data]
    return AER.aer(gold, hyp)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", default=os.path.join(REPO, "models", "de-en.gguf"))
    p.add_argument("--work", default=os.path.join(REPO, "build", "align-head"))
    p.add_argument("--pairs", type=int, default=3000)
    p.add_argument("--silver", type=int, default=300)
    p.add_argument("--max-pairs", type=int, default=60000, help="word_align.py's training pairs (0: all)")
    p.add_argument("--hmm", type=int, default=0,
                   help="word_align.py's HMM iterations for the labels (0: Model 2's links, as the "
                        "table in models/README.md was made; the links are cached in WORK/links.json)")
    p.add_argument("--signal", metavar="DIR",
                   help="tools/align_signal.py's work folder: label --pairs pairs by --labels and score on "
                        "its dev, devcased and silver sets (the step is chosen by their mean AER)")
    p.add_argument("--labels", choices=["gdfa", "vote"], default="gdfa",
                   help="with --signal: word_align.py's grow-diag-final-and links, or the links two of "
                        "three agree on (its two directions and the model's own view)")
    p.add_argument("--reverse", action="store_true",
                   help="with --signal: the model translates English->German (tools/train.py --reverse): "
                        "the pairs, the aligner's links and the sets' gold (i-j -> j-i) read sides swapped")
    p.add_argument("--links", choices=["argmax", "mutual", "grow"], default="argmax",
                   help="how the head's word matrix is read (as a view's ',words[,mutual|,grow]')")
    p.add_argument("--layer", type=int, nargs="+", default=[3],
                   help="decoder state(s) to try: 0..L-1 a layer's output, L..2L-1 layer (i-L)'s "
                        "cross-attention input")
    p.add_argument("--init-head", type=int, help="with a state L+i: start from cross-attention head "
                                                    "INIT_HEAD of layer i (the view i:INIT_HEAD,shift)")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--agree", action="store_true",
                   help="with --init-head: train only on the links the starting head also draws")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--every", type=int, default=500, help="score on the silver links every N steps")
    p.add_argument("-o", "--output", help="write the trained head (npz: layer, q_weight, q_bias, k_weight, k_bias "
                                             "and --mix; tools/add_align_head.py puts it in a model file)")
    p.add_argument("--dev", action="store_true", help="also print the development set's gold AER")
    p.add_argument("--write-links", nargs=3, metavar=("SRC", "TGT", "OUT"),
                   help="align SRC/TGT (whitespace-tokenised) with the chosen head (with --mix, averaged) "
                        "and write Pharaoh lines to OUT, for tools/aer.py")
    p.add_argument("--mix", metavar="L:H", help="score (and choose) the head averaged with cross-attention "
                                                  "head H of decoder layer L, read one step later (the view "
                                                  "'L:H,align,shift,...' of a file that holds the head)")
    a = p.parse_args(argv)
    if a.reverse and not a.signal:
        p.error("--reverse needs --signal (the other sets are German->English only)")
    return a


def load_sets(a, model):
    """(states of every set, {set: gold or None (its own links)}, the sets the step is chosen
    on, the sets reported)."""
    data = signal_corpus(a) if a.signal else corpus(a)
    names = ("train",) + (SIGNAL_SETS if a.signal else ("silver", "dev"))
    sets = {k: states(model, data[k], k, a.work) for k in names}
    for k in sets:  # the links of the cache (the cached states were computed with the same pairs)
        for x, (s, t, links) in zip(sets[k], data[k]):
            assert x["nw"] == (len(s), len(t))
            x["links"] = links
    if a.signal:
        gold = {k: AER.read_gold(os.path.join(a.signal, f"{k}.wa"), False, a.reverse) for k in SIGNAL_SETS}
        return sets, gold, SIGNAL_SETS, SIGNAL_SETS
    dev = AER.read_gold(os.path.join(os.path.dirname(D.corpus("align-deen-bicici", "test.de")), "de-en.wa"),
                        False, False)
    return sets, {"silver": None, "dev": dev}, ("silver",), ("silver", "dev") if a.dev else ("silver",)


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(1)
    os.makedirs(a.work, exist_ok=True)
    model = load_model(a.model, a.work)
    sets, gold, chosen_on, shown = load_sets(a, model)
    train = [(x, Y) for x in sets["train"] for Y in [target_of(x)] if Y is not None]
    log(f"{len(train)} of {len(sets['train'])} training pairs usable")
    mix = None
    if a.mix:
        ml, mh = (int(v) for v in a.mix.split(":"))
        mix = (Head(model.config["d_model"], model.model.decoder.layers[ml].encoder_attn.head_dim),
               len(model.model.decoder.layers) + ml)
        init_from_cross(mix[0], model, ml, mh)
    aers = lambda h, layer, names: {k: evaluate(h, sets[k], layer, gold[k], a.links, mix)  # noqa: E731
                                    for k in names}
    results = []
    for layer in a.layer:
        head = Head(model.config["d_model"], a.width)
        if a.agree:
            train = agreed(train, head, model, layer, a.init_head)
        report = lambda step, loss, h: log(f"layer {layer} step {step}: loss {loss:.3f} " + " ".join(
            f"{k} AER {v:.4f}" for k, v in aers(h, layer, shown).items()))
        best = fit(head, train, layer, a.steps, a.batch, a.lr, a.seed, every=a.every, report=report,
                   score=lambda h: float(np.mean(list(aers(h, layer, chosen_on).values()))),
                   init=None if a.init_head is None else
                   lambda h: init_from_cross(h, model, layer - len(model.model.decoder.layers), a.init_head))
        results.append((best[0][0], layer, best[0][1], best[0][2]))
    results.sort(key=lambda r: r[0])
    sc, layer, step, sd = results[0]
    head = Head(model.config["d_model"], a.width)
    head.load_state_dict(sd)
    final = aers(head, layer, [k for k in gold if gold[k] is not None or k in chosen_on])
    print(f"best on {'+'.join(chosen_on)} ({sc:.4f}): layer {layer}, step {step}: "
          + ", ".join(f"{k} AER {v:.4f}" for k, v in final.items()))
    if a.output:
        extra = {"mix": np.str_(a.mix)} if a.mix else {}  # tools/add_align_head.py reads it
        np.savez(a.output, layer=np.int32(layer), **extra, **{k.replace(".", "_"): v.numpy() for k, v in sd.items()})
    if a.write_links:
        src, tgt = AER.read_lines(a.write_links[0]), AER.read_lines(a.write_links[1])
        pairs = states(model, [(x.split(), y.split(), []) for x, y in zip(src, tgt)], "", None)
        with open(a.write_links[2], "w", encoding="utf-8") as f:
            f.write("".join(" ".join(f"{i}-{j}" for i, j in sorted(h)) + "\n"
                            for h in head_links(head, pairs, layer, a.links, mix)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
