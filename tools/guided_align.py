#!/usr/bin/python3
"""Guided alignment (Garg et al. 2019; Marian's --guided-alignment): fine-tune a model so that
one cross-attention head follows statistical word links, while it keeps translating.

  guided_align.py train [-m MODEL] LABELS.npz --head L:H [--weight 0.1] [--minutes 5] -o DELTA.npz
  guided_align.py apply MODEL DELTA.npz -o OUT.gguf [--view VIEW]

train: LABELS.npz is tools/guided_labels.py's (the training pairs as MODEL encodes them, with
  piece links). Each step is one token-based batch (train.py's batching): the translation loss
  (label-smoothed cross-entropy per target token, as train.py) plus --weight times the
  alignment loss: for every target piece with links, the cross-entropy between the uniform
  distribution over its linked source pieces and head H of decoder layer L, read one step later
  (the row of the position whose input is that piece, as a view's `shift` reads it; --no-shift:
  the row that predicts it). The encoder and the embeddings stay frozen, and so do the decoder
  layers below L (--train-from); the rest learns with Adam, the learning rate rising over
  --warmup steps to --lr and falling linearly to zero at the end of --minutes. Dropout as in
  training. DELTA.npz holds the tensors that changed, under the .gguf's names, as f16 (the
  shipped file's matrix type; vectors f32), and the settings.
apply: MODEL with DELTA's tensors in place (same names, shapes and types), the CRC-32s
  recomputed, and --view recorded as attend.alignment.view when given.

Runs on a GPU in minutes (tools/gpu_align_job.sh); on CPU only as a smoke test."""
import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_io as G  # noqa: E402

VIEW_KEY = "attend.alignment.view"


def log(msg):
    print(f"guided_align: {msg}", file=sys.stderr, flush=True)


def load_model(path, work, dropout):
    """reference.Marian with MODEL's weights (f16 widened), its tokenizer, in training mode."""
    import reference
    import train
    dims, pieces, weights = train.read_init(argparse.Namespace(init_from=path), work)
    vocab = {p: i for i, p in enumerate(pieces)}
    cfg = train.build_config(argparse.Namespace(dropout=dropout, num_beams=1, **dims), vocab)
    m = reference.Marian(cfg)
    train.load_init_weights(m, weights)
    m.tok = reference.MarianTok(os.path.join(work, "source.spm"), os.path.join(work, "target.spm"), vocab)
    return m, weights


def read_labels(path, tok, max_len):
    """[(source ids, target ids)] of the training pairs (word_align.training_pairs(), encoded as
    train.py encodes them) and, per pair, an int array [n, 2] of (target, source) pieces."""
    import guided_labels
    import train
    import word_align
    z = np.load(path)
    pairs = word_align.training_pairs()
    pairs = [pairs[i] for i in z["index"]]
    if str(z["pairs"]) != guided_labels.pairs_digest(pairs):
        raise SystemExit(f"guided_align: {path} labels other pairs than word_align.training_pairs() "
                         f"gives here (another data folder, or --max-pairs)")
    enc = train.encode_pairs(tok, pairs)
    links = np.split(z["links"].astype(np.int64), np.cumsum(z["links_len"])[:-1])
    keep = [k for k, (s, t) in enumerate(enc) if len(s) <= max_len and len(t) <= max_len]
    for k in keep:  # links past a pair's pieces (another SentencePiece version's encoding) are dropped
        l = links[k]
        links[k] = l[(l[:, 0] + 1 < len(enc[k][1])) & (l[:, 1] < len(enc[k][0]))] if len(l) else l
    return [enc[k] for k in keep], [links[k] for k in keep]


def label_matrix(links, ids, T, S, shift, device):
    """[B, T, S] target distributions (uniform over each target piece's linked source pieces,
    on the row that reads it) and the number of rows that have one."""
    G_ = torch.zeros(len(ids), T, S)
    for b, k in enumerate(ids):
        l = links[k]
        if len(l) == 0:
            continue
        rows = l[:, 0] + (1 if shift else 0)
        G_[b, rows, l[:, 1]] = 1.0
    n = G_.sum(-1, keepdim=True)
    G_ = G_ / n.clamp(min=1.0)
    return G_.to(device), int((n > 0).sum())


def step_losses(model, src, dec_in, labels, G_, n_rows, layer, head, eps, pad):
    """(summed translation loss, its token count, mean alignment cross-entropy per labelled row)."""
    import train
    src_mask = src != pad
    with torch.no_grad():
        memory, _ = model.encode(src, src_mask)
    dec = model.model.decoder
    y = dec.embed_tokens(dec_in) * model.embed_scale + model.positions[: dec_in.shape[1]]
    y = torch.nn.functional.dropout(y, model.config["dropout"], model.training)
    A = None
    for l, lay in enumerate(dec.layers):
        y, _, cross = lay(y, memory, src_mask, None)
        if l == layer:
            A = cross[:, head].float()
    keep = labels != -100
    chunk = 512 if y.device.type == "cpu" else 16384
    ce = train.SmoothedCE.apply(y[keep], model.lm_head.weight, model.final_logits_bias[0].float(),
                                labels[keep], eps, chunk)
    align = -(G_ * torch.log(A + 1e-9)).sum() / max(n_rows, 1)
    return ce, int(keep.sum()), align


def trainable(model, train_from):
    """Freeze all but decoder layers >= train_from; the parameters left to learn."""
    for p in model.parameters():
        p.requires_grad_(False)
    out = []
    for l, lay in enumerate(model.model.decoder.layers):
        if l >= train_from:
            for p in lay.parameters():
                p.requires_grad_(True)
                out.append(p)
    return out


def lr_factor(step, elapsed, a):
    """Linear warm-up over --warmup steps, then linear decay to zero at --minutes."""
    return min(1.0, step / max(a.warmup, 1)) * max(0.0, 1.0 - elapsed / (a.minutes * 60))


def dev_scores(model, gold_dir, layer, head, shift):
    """(AER of the head read as words with argmax links, on the development set's gold) or None
    without gold_dir: a progress signal only, nothing is chosen by it."""
    if not gold_dir:
        return None
    import aer as AER
    src = AER.read_lines(os.path.join(gold_dir, "test.de"))
    tgt = AER.read_lines(os.path.join(gold_dir, "test.en"))
    gold = AER.read_gold(os.path.join(gold_dir, "de-en.wa"), False, False)
    model.eval()
    hyp = []
    with torch.no_grad():
        for s, t in zip(src, tgt):
            ids = model.tok.encode(s)
            tids = [model.tok.tgt_vocab.get(p, model.tok.unk) for p in model.tok.tgt_sp.encode(t, out_type=str)]
            tids.append(model.tok.eos)
            dev = model.positions.device
            memory, _ = model.encode(torch.tensor([ids], device=dev))
            inp = [model.config["decoder_start_token_id"]] + tids[:-1]
            _, _, cross = model.decode(torch.tensor([inp], device=dev), memory)
            A = cross[layer][0, head].float().cpu().numpy()
            A = np.concatenate([A[1:], np.zeros_like(A[:1])]) if shift else A
            inv = model.tok.tgt_pieces
            hyp.append(AER.hard_links(A, [inv[i] for i in ids], [inv[i] for i in tids], words=True))
    model.train()
    return AER.aer(gold, hyp)


def dev_bleu(model, n):
    """Greedy BLEU of the first n Multi30k validation sentences (bf16 on a GPU), or None."""
    if not n:
        return None
    import data_paths as D
    import train
    de, en = (train.read_gz(D.corpus(f"multi30k/val.{x}.gz")) for x in ("de", "en"))
    score, _, _ = train.dev_bleu(model, model.tok, list(zip(de, en))[:n], model.positions.is_cuda)
    model.train()
    return round(score, 2)


def delta(model, weights):
    """{.gguf name: array} of every tensor that differs from the file's, in the file's type."""
    import export_marian
    cfg = dict(model.config, shared=True, tied=True)
    sd = {k: v.detach().float().cpu().numpy() for k, v in model.hf_state_dict(with_duplicates=False).items()}
    out = {}
    for name, arr in export_marian.map_tensors(cfg, sd):
        old = weights.tensors[name]
        new = arr.reshape(old.shape).astype(old.dtype)
        if not np.array_equal(new, old):
            out[name] = new
    return out


def train_main(a):
    import train
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    os.makedirs(a.work, exist_ok=True)
    model, weights = load_model(a.model, a.work, a.dropout)
    model.to(device)
    model.positions = model.positions.to(device)
    layer, head = (int(v) for v in a.head.split(":"))
    params = trainable(model, layer if a.train_from is None else a.train_from)
    examples, links = read_labels(a.labels, model.tok, a.max_len)
    log(f"{len(examples)} pairs, {sum(len(l) for l in links)} piece links; "
        f"{sum(p.numel() for p in params) / 1e6:.2f}M parameters learn")
    log(f"start: dev AER {dev_scores(model, a.gold, layer, head, a.shift)}, val BLEU {dev_bleu(model, a.bleu)}")
    opt = torch.optim.Adam(params, lr=a.lr, betas=(0.9, 0.98), eps=1e-9)
    pad = model.config["pad_token_id"]
    t0, step, epoch = time.time(), 0, 0
    sums = np.zeros(3)
    while time.time() - t0 < a.minutes * 60 and (not a.max_steps or step < a.max_steps):
        epoch += 1
        for ids in train.make_batches(examples, a.max_tokens, random.Random(a.seed * 1000 + epoch)):
            elapsed = time.time() - t0
            if elapsed >= a.minutes * 60 or (a.max_steps and step >= a.max_steps):
                break
            step += 1
            src, dec_in, labels = train.collate(examples, ids, pad, device)
            G_, n_rows = label_matrix(links, ids, dec_in.shape[1], src.shape[1], a.shift, device)
            for g in opt.param_groups:
                g["lr"] = a.lr * lr_factor(step, elapsed, a)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                ce, n, al = step_losses(model, src, dec_in, labels, G_, n_rows, layer, head, a.eps, pad)
            opt.zero_grad(set_to_none=True)
            (ce / n + a.weight * al).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sums += (float(ce), n, float(al))
            if step % a.log_every == 0:
                log(f"step {step} epoch {epoch}: loss {sums[0] / sums[1]:.4f} align {float(al):.4f} "
                    f"lr {opt.param_groups[0]['lr']:.2e} ({time.time() - t0:.0f} s)")
                sums[:] = 0
    log(f"{step} steps in {time.time() - t0:.0f} s; end: dev AER {dev_scores(model, a.gold, layer, head, a.shift)}, "
        f"val BLEU {dev_bleu(model, a.bleu)}")
    changed = delta(model, weights)
    settings = {k: v for k, v in vars(a).items() if k != "func"}
    settings.update(steps=step, model_file=os.path.basename(a.model))
    np.savez(a.output, settings=np.array(json.dumps(settings)), **{"t:" + k: v for k, v in changed.items()})
    log(f"{a.output}: {len(changed)} tensors changed")
    return 0


def apply_main(a):
    z = np.load(a.delta)
    new = {k[2:]: z[k] for k in z.files if k.startswith("t:")}
    f = G.GGUFFile(a.model)
    metadata = f.metadata_to_write({VIEW_KEY} if a.view else ())
    if a.view:
        metadata.append((VIEW_KEY, G.STRING, a.view))
    tensors = []
    for t in f.tensor_infos:
        name, old = t["name"], f.tensors[t["name"]]
        arr = new.pop(name, old)
        if arr.shape != old.shape or arr.dtype != old.dtype:
            raise SystemExit(f"guided_align apply: {name}: {arr.dtype}{arr.shape} does not replace "
                             f"{old.dtype}{old.shape}")
        tensors.append((name, arr, t["ggml_type"]))
    if new:
        raise SystemExit(f"guided_align apply: {a.model} has no tensor {sorted(new)[0]}")
    G.write(a.output, metadata, tensors)
    print(f"{a.output}: {len(z.files) - 1} tensors replaced" + (f"; view {a.view}" if a.view else ""))
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="fine-tune; write the changed tensors")
    t.add_argument("labels", help="tools/guided_labels.py's .npz")
    t.add_argument("-m", "--model", default=os.path.join(os.path.dirname(HERE), "models", "de-en.gguf"))
    t.add_argument("--head", required=True, help="L:H, the decoder layer and cross-attention head to guide")
    t.add_argument("--no-shift", dest="shift", action="store_false",
                   help="guide the row that predicts a piece, not the one that reads it")
    t.add_argument("--weight", type=float, default=0.1, help="the alignment loss's weight (0.1)")
    t.add_argument("--train-from", type=int, help="the lowest decoder layer that learns (default: L)")
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--warmup", type=int, default=200)
    t.add_argument("--minutes", type=float, default=5.0)
    t.add_argument("--max-steps", type=int, default=0, help="stop after this many steps too (0: time only)")
    t.add_argument("--max-tokens", type=int, default=12000)
    t.add_argument("--max-len", type=int, default=100)
    t.add_argument("--dropout", type=float, default=0.1)
    t.add_argument("--eps", type=float, default=0.1, help="label smoothing (0.1, as training)")
    t.add_argument("--gold", help="a folder with test.de, test.en and de-en.wa (the development set): "
                                  "its AER is printed at the start and the end")
    t.add_argument("--bleu", type=int, default=0, metavar="N",
                   help="print the greedy BLEU of the first N Multi30k validation sentences at the start and the end")
    t.add_argument("--threads", type=int, default=4)
    t.add_argument("--work", default=os.path.join(os.path.dirname(HERE), "build", "guided", "work"))
    t.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--log-every", type=int, default=100)
    t.add_argument("-o", "--output", required=True)
    t.set_defaults(func=train_main)
    ap = sub.add_parser("apply", help="put a DELTA.npz's tensors into a model file")
    ap.add_argument("model")
    ap.add_argument("delta")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--view", help="record this alignment view (attend.alignment.view)")
    ap.set_defaults(func=apply_main)
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
