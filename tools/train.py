#!/usr/bin/python3
"""Train attend's small German->English MarianMT model from scratch (--reverse: English->German,
the same data and held-out slices the other way round).

Data (read from the shared data directory, never copied into the repo), --corpora:
  * multi30k: Multi30k train (29,000 image captions), three times per epoch (--multi30k-repeat);
  * tatoeba: the Tatoeba deu-eng training part (15,871 pairs);
  * anki: the Anki / manythings.org Tatoeba export (168,767 everyday pairs);
  * news: WMT news test sets not used for evaluation (32,540 pairs);
  * wmt10k: the OpenNMT-py WMT excerpt (10,000 pairs, Moses-tokenized: detokenize() undoes it);
  * dev = Multi30k val (greedy dev BLEU at each checkpoint, its first --dev-size sentences).

HELD-OUT RULE. The Tatoeba, Anki and news corpora are each shuffled with
random.Random(seed) (indices 0..N-1, random.shuffle); the first --heldout (1,000),
--heldout-anki (2,000) and --heldout-news (500) pairs of that order are held out before
anything is trained. Every other pair is a training candidate. A candidate is dropped when
its German side is identical (after stripping surrounding whitespace) to any German
sentence, or its English side identical to any English sentence, of a held-out slice, of
Multi30k val or of Multi30k test_2016_flickr, and when the identical pair was already kept
(Anki repeats 5,166 Tatoeba pairs). So no held-out, dev or test sentence, on either side,
occurs in training. Counts are logged; the slices are written to WORK/data/NAME-heldout.{de,en}.

Model: reference.Marian (tools/reference.py), trained with dropout, label smoothing, Adam
with linear warm-up, inverse-square-root decay and a linear cool-down to zero over the
time budget's last minutes, token-based batches of similar-length sentences, bf16 autocast
(on a GPU with --device cuda, the default where PyTorch sees one; on CPU through oneDNN/AMX),
fixed seeds. The encoder's residual branches start scaled down
(init_weights). One SentencePiece unigram model is trained on both languages
(--joint-vocab; or separate German and English models); its pieces form one joint
vocab.json through reference.build_vocab (</s>=0, <unk>=1, pieces, <pad> last; decoder
start = pad), with shared, tied embeddings as opus-mt has. config.json records num_beams
(--num-beams 4), so the exported file decodes with beams by default.

Fine-tuning: --init-from MODEL (an attend .gguf or an HF-style MarianMT directory) starts
from that model's weights and keeps its SentencePiece models and vocabulary instead of
training new ones; the data, held-out rule and everything else are as above.

Resumable: a checkpoint (model, optimizer, RNG states, epoch, position in the epoch, step,
history) is written to WORK every --save-every steps and at each epoch's end; a restart with
the same WORK continues from the latest one. Training stops at --epochs or when the time
budget (--max-train-minutes, summed over restarts) is spent. At the end the parameters of
the last --average checkpoints are averaged, the better of averaged/last on the full dev
set is kept, and written as an HF-style MarianMT directory to --out. The cool-down follows
training time, so a run on another machine takes a different number of steps.

The defaults are the shipped model's recipe (models/README.md): 6+5 layers x 320, joint 8k
vocabulary, 12,000-token batches, an 18-minute budget with a 6-minute cool-down, which ran on
one H100 (tools/train_gpu.sh). On a CPU the same budget buys far fewer steps: give it a larger
--max-train-minutes (the previous shipped model, 6+3 x 256, trained 100 minutes on 2 cores).
"""
import argparse
import copy
import gzip
import hashlib
import json
import math
import os
import random
import re
import sys
import time

# Sleep rather than spin while waiting at OpenMP barriers: with other processes busy on the
# same cores, spinning threads (the default) made training steps up to 6x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bleu  # noqa: E402
import data_paths as D  # noqa: E402
import reference  # noqa: E402

T0 = time.time()


def device_of(model):
    return model.lm_head.weight.device


def log(msg):
    line = f"[{time.strftime('%H:%M:%S')} +{(time.time() - T0) / 60:5.1f}m] {msg}"
    print(line, flush=True)


# --------------------------------------------------------------------------------------
# Data

def read_gz(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [l.strip() for l in lines]


def write_lines(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for l in lines:
            f.write(l + "\n")
    os.replace(tmp, path)


# &amp; and friends as Moses' escaper writes them, and its tokenized spacing undone
MOSES_ENTITIES = [("&apos;", "'"), ("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"),
                  ("&#91;", "["), ("&#93;", "]"), ("&#124;", "|"), ("&amp;", "&")]


def detokenize(line):
    """Moses-tokenized, XML-escaped text (wmt-ende-10k-onmt) back to plain text: entities
    unescaped, no space before closing punctuation or English clitics, none inside brackets,
    straight double quotes attached to the words they enclose (alternating open/close)."""
    for ent, ch in MOSES_ENTITIES:
        line = line.replace(ent, ch)
    line = line.replace(" @-@ ", "-").replace(" @/@ ", "/")
    line = re.sub(r" ([.,!?:;%)\]}])", r"\1", line)
    line = re.sub(r"([(\[{]) ", r"\1", line)
    line = re.sub(r" (n't|'t|'s|'re|'ve|'ll|'m|'d)\b", r"\1", line)
    out, opening = [], True
    for part in re.split(r'( ?" ?)', line):
        if part.strip() == '"':
            out.append((" " if part.startswith(" ") and opening else "") + '"' +
                       (" " if part.endswith(" ") and not opening else ""))
            opening = not opening
        else:
            out.append(part)
    return "".join(out).strip()


# Training corpora in ../shared/data: name -> (German file, English file, held out, how read).
# The held-out counts are carved out of each corpus before anything is trained (HELD-OUT RULE).
CORPORA = {
    "multi30k": ("multi30k/train.de.gz", "multi30k/train.en.gz"),
    "tatoeba": ("tatoeba-deu-eng/tatoeba-deu-eng.train.de.gz",
                "tatoeba-deu-eng/tatoeba-deu-eng.train.en.gz"),
    "anki": ("tatoeba-anki-deu-eng/train.de.gz", "tatoeba-anki-deu-eng/train.en.gz"),
    "news": ("wmt-newstest-extra-deen/train.de.gz", "wmt-newstest-extra-deen/train.en.gz"),
    "wmt10k": ("wmt-ende-10k-onmt/train.de.gz", "wmt-ende-10k-onmt/train.en.gz"),
}
HELDOUT_SETS = ("tatoeba", "anki", "news")


def prepare_data(a):
    """Returns dict with train/dev/test pairs and one held-out slice per HELDOUT_SETS corpus
    (lists of (de, en)). a: data_dir, seed, heldout (Tatoeba), and optionally corpora,
    heldout_anki, heldout_news, multi30k_repeat."""
    d = a.data_dir
    corpora = getattr(a, "corpora", "multi30k,tatoeba").split(",")
    counts = {"tatoeba": a.heldout, "anki": getattr(a, "heldout_anki", 2000),
              "news": getattr(a, "heldout_news", 500)}
    def gz(rel):  # a missing file stops here with its name and where it was looked for
        return read_gz(D.corpus(rel, base=d))
    v_de, v_en = gz("multi30k/val.de.gz"), gz("multi30k/val.en.gz")
    s_de = gz("multi30k/test_2016_flickr.de.gz")
    s_en = gz("multi30k/test_2016_flickr.en.gz")
    assert len(v_de) == len(v_en) and len(s_de) == len(s_en)
    raw, held = {}, {}
    for name in dict.fromkeys(corpora + list(HELDOUT_SETS)):
        de_path, en_path = CORPORA[name]
        if name not in corpora and not os.path.exists(f"{d}/{de_path}"):
            continue              # a held-out set of a corpus that is neither used nor here
        de, en = gz(de_path), gz(en_path)
        assert len(de) == len(en), name
        if name == "wmt10k":
            de, en = [detokenize(x) for x in de], [detokenize(x) for x in en]
        pairs = list(zip(de, en))
        if name in HELDOUT_SETS:
            order = list(range(len(pairs)))
            random.Random(a.seed).shuffle(order)
            held[name] = [pairs[i] for i in order[: counts[name]]]
            pairs = [pairs[i] for i in order[counts[name]:]]
        raw[name] = pairs
    prot_de = set(v_de) | set(s_de)
    prot_en = set(v_en) | set(s_en)
    for pairs in held.values():
        prot_de |= {p[0] for p in pairs}
        prot_en |= {p[1] for p in pairs}
    train, stats, seen, per = [], {}, set(), {}
    for name in corpora:
        pairs = raw[name]
        kept = []
        for p in pairs:
            if not (p[0] and p[1]) or p[0] in prot_de or p[1] in prot_en or p in seen:
                continue
            seen.add(p)         # one copy of a pair shared by two corpora (Anki and Tatoeba)
            kept.append(p)
        stats[name] = (len(pairs), len(kept))
        per[name] = kept
        train += kept
    return {"train": train, "per_corpus": per, "tatoeba_train": per.get("tatoeba", []),
            "dev": list(zip(v_de, v_en)), "test": list(zip(s_de, s_en)),
            "heldout": held["tatoeba"], "heldout_sets": held, "stats": stats}


def reverse_data(data):
    """--reverse: every pair (de, en) as (en, de), the held-out rule unchanged (the same pairs
    are held out, dropped and kept), for an English->German model of the same recipe."""
    flip = lambda pairs: [(en, de) for de, en in pairs]  # noqa: E731
    out = dict(data)
    for k in ("train", "tatoeba_train", "dev", "test", "heldout"):
        out[k] = flip(data[k])
    out["per_corpus"] = {k: flip(v) for k, v in data["per_corpus"].items()}
    out["heldout_sets"] = {k: flip(v) for k, v in data["heldout_sets"].items()}
    return out


def train_spm(a, data, work):
    """SentencePiece unigram models for German (source) and English (target), or with
    --joint-vocab one model trained on both sides, written as both source and target."""
    import sentencepiece as spm
    if a.joint_vocab:
        sides = (("joint", (0, 1), a.joint_vocab),)
    else:
        sides = (("source", (0,), a.src_vocab), ("target", (1,), a.tgt_vocab))
    paths = {}
    for side, idx, size in sides:
        prefix = os.path.join(work, f"{side}")
        paths[side] = prefix + ".spm"
        if os.path.exists(paths[side]):
            continue
        txt = os.path.join(work, "data", f"spm-{side}.txt")
        write_lines(txt, [p[i] for p in data["train"] for i in idx])
        spm.set_random_generator_seed(a.seed)
        spm.SentencePieceTrainer.train(
            input=txt, model_prefix=prefix + ".tmp", vocab_size=size, model_type="unigram",
            character_coverage=1.0, num_threads=1, input_sentence_size=0,
            shuffle_input_sentence=False, minloglevel=2)
        os.replace(prefix + ".tmp.model", paths[side])
        os.remove(prefix + ".tmp.vocab")
    if a.joint_vocab:
        return paths["joint"], paths["joint"]
    return paths["source"], paths["target"]


def encode_pairs(tok, pairs):
    """(src ids + </s>, tgt ids + </s>) with the same piece->id mapping as inference."""
    out = []
    tv = tok.tgt_vocab
    for de, en in pairs:
        src = tok.encode(de)
        tgt = [tv.get(p, tok.unk) for p in tok.tgt_sp.encode(en, out_type=str)] + [tok.eos]
        out.append((src, tgt))
    return out


def encoded_corpora(tok, per_corpus, spm_paths, work):
    """{corpus: encode_pairs(tok, its pairs)}, cached in WORK/data/encoded.npz under a hash
    of the SentencePiece models and every pair (a run on another machine, e.g. a GPU lent
    for minutes, then skips the encoding)."""
    h = hashlib.sha256()
    for path in spm_paths:
        with open(path, "rb") as f:
            h.update(f.read())
    for name, pairs in per_corpus.items():
        h.update(name.encode() + b"\0")
        for de, en in pairs:
            h.update(de.encode() + b"\0" + en.encode() + b"\0")
    key = h.hexdigest()
    path = os.path.join(work, "data", "encoded.npz")
    if os.path.exists(path):
        z = np.load(path)
        if str(z["key"]) == key:
            out = {}
            for name in per_corpus:
                cols = []
                for side in ("src", "tgt"):
                    ends = np.cumsum(z[f"{name}.{side}.len"])
                    flat = z[f"{name}.{side}"].tolist()
                    cols.append([flat[e - n: e] for e, n in zip(ends.tolist(), z[f"{name}.{side}.len"].tolist())])
                out[name] = list(zip(*cols))
            log(f"data: encoded corpora read from {path}")
            return out
    out = {name: encode_pairs(tok, pairs) for name, pairs in per_corpus.items()}
    arrays = {"key": np.array(key)}
    for name, exs in out.items():
        for i, side in enumerate(("src", "tgt")):
            arrays[f"{name}.{side}.len"] = np.array([len(e[i]) for e in exs], dtype=np.int32)
            arrays[f"{name}.{side}"] = np.array([t for e in exs for t in e[i]], dtype=np.int32)
    np.savez_compressed(path + ".tmp.npz", **arrays)
    os.replace(path + ".tmp.npz", path)
    return out


def make_batches(examples, max_tokens, rng):
    """Token-based batches of length-sorted examples; batch order shuffled by rng.
    A batch's cost is (#sentences) x (longest source or target), padding included."""
    idx = list(range(len(examples)))
    rng.shuffle(idx)  # random tie-break among equal lengths
    idx.sort(key=lambda i: (len(examples[i][0]), len(examples[i][1])))
    batches, cur, cur_max = [], [], 0
    for i in idx:
        L = max(len(examples[i][0]), len(examples[i][1]))
        if cur and max(cur_max, L) * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, L)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(examples, ids, pad, device="cpu"):
    src = [examples[i][0] for i in ids]
    tgt = [examples[i][1] for i in ids]
    S, T = max(map(len, src)), max(map(len, tgt))
    s = torch.full((len(ids), S), pad, dtype=torch.long)
    dec_in = torch.full((len(ids), T), pad, dtype=torch.long)
    labels = torch.full((len(ids), T), -100, dtype=torch.long)
    for b, (x, y) in enumerate(zip(src, tgt)):
        s[b, : len(x)] = torch.tensor(x)
        dec_in[b, 1: len(y)] = torch.tensor(y[:-1])   # dec_in[:, 0] = pad = decoder start
        labels[b, : len(y)] = torch.tensor(y)
    return s.to(device), dec_in.to(device), labels.to(device)


# --------------------------------------------------------------------------------------
# Training forward: reference.Marian's encode, its decoder layers, and the output layer
# fused with the loss (so the [tokens, vocab] logits never exist whole in memory)

def decoder_hidden(model, tgt, memory, src_mask):
    """reference.Marian.decode without the output layer: the last decoder states [B,T,d].
    logits = hidden @ lm_head.weight.T + final_logits_bias (checked by check_forward)."""
    y = model.model.decoder.embed_tokens(tgt) * model.embed_scale
    y = y + model.positions[: tgt.shape[1]]
    y = F.dropout(y, model.config.get("dropout", 0.0), model.training)
    for layer in model.model.decoder.layers:
        y, _, _ = layer(y, memory, src_mask, None)
    return y


class SmoothedCE(torch.autograd.Function):
    """Sum over rows of label-smoothed cross-entropy of logits = h @ W.T + bias, as
    F.cross_entropy(..., label_smoothing=eps, reduction="sum"): (1-eps) * NLL + eps * mean
    over the vocabulary of -log p. Computed in row chunks with bf16 matmuls and f32
    softmax; the gradients are formed chunk by chunk during the forward pass."""

    @staticmethod
    def forward(ctx, h, W, bias, labels, eps, chunk):
        Wb = W.detach().to(torch.bfloat16)
        hb = h.detach().to(torch.bfloat16)
        gh = torch.empty(h.shape, dtype=torch.float32, device=h.device)
        gW = torch.zeros(W.shape, dtype=torch.float32, device=h.device)
        V = W.shape[0]
        total = torch.zeros((), dtype=torch.float64, device=h.device)
        for r in range(0, h.shape[0], chunk):
            hc, y = hb[r: r + chunk], labels[r: r + chunk]
            x = torch.mm(hc, Wb.t()).float()
            x += bias
            lse = torch.logsumexp(x, 1)
            tgt = x.gather(1, y[:, None])[:, 0]
            loss = lse - (1 - eps) * tgt - (eps / V) * x.sum(1)
            total += loss.double().sum()
            x -= lse[:, None]
            x.exp_()
            x -= eps / V
            x.scatter_add_(1, y[:, None], torch.full((len(y), 1), -(1 - eps), device=x.device))
            g = x.to(torch.bfloat16)
            gh[r: r + chunk] = torch.mm(g, Wb).float()
            gW += torch.mm(g.t(), hc).float()
        ctx.save_for_backward(gh, gW)
        ctx.h_dtype = h.dtype
        return total.float()

    @staticmethod
    def backward(ctx, grad):
        gh, gW = ctx.saved_tensors
        return (gh * grad).to(ctx.h_dtype), gW * grad, None, None, None, None


def train_loss(model, src, dec_in, labels, eps, pad):
    """Summed label-smoothed loss over the non-padding target tokens, and their number."""
    src_mask = src != pad
    memory, _ = model.encode(src, src_mask)
    h = decoder_hidden(model, dec_in, memory, src_mask)
    keep = labels != -100
    hk = h[keep]
    chunk = 512 if h.device.type == "cpu" else 16384    # rows of logits alive at once
    loss = SmoothedCE.apply(hk, model.lm_head.weight, model.final_logits_bias[0].float(),
                            labels[keep], eps, chunk)
    return loss, int(keep.sum())


def check_forward(model, examples, pad, eps):
    """The training path must compute what reference.Marian.decode computes: compare the
    logits and the loss (float32, eval mode) with F.cross_entropy on a small batch."""
    was = model.training
    model.eval()
    src, dec_in, labels = collate(examples, list(range(8)), pad, device_of(model))
    with torch.no_grad():
        memory, _ = model.encode(src, src != pad)
        ref_logits, _, _ = model.decode(dec_in, memory, src != pad, None)
        h = decoder_hidden(model, dec_in, memory, src != pad)
        mine = h @ model.lm_head.weight.t() + model.final_logits_bias
        V = ref_logits.shape[-1]
        ref_loss = F.cross_entropy(ref_logits.view(-1, V), labels.view(-1), ignore_index=-100,
                                   label_smoothing=eps, reduction="sum")
        loss, _ = train_loss(model, src, dec_in, labels, eps, pad)
    model.train(was)
    d_logits = float((mine - ref_logits).abs().max())
    d_loss = abs(float(loss) - float(ref_loss)) / float(ref_loss)
    assert d_logits < 1e-3, f"decoder path differs from reference.decode: {d_logits}"
    assert d_loss < 2e-2, f"fused loss differs from F.cross_entropy: {float(loss)} vs {float(ref_loss)}"
    return d_logits, d_loss


# --------------------------------------------------------------------------------------
# Fast batched greedy decoding for the dev estimate (same layer math as reference.Marian,
# computing only the newest position each step)

@torch.no_grad()
def greedy_batch(model, srcs, max_len):
    c = model.config
    pad, eos = c["pad_token_id"], c["eos_token_id"]
    B, S = len(srcs), max(map(len, srcs))
    src = torch.full((B, S), pad, dtype=torch.long)
    for b, x in enumerate(srcs):
        src[b, : len(x)] = torch.tensor(x)
    dev = device_of(model)
    src = src.to(dev)
    mask = src != pad
    memory, _ = model.encode(src, mask)
    dec = model.model.decoder
    caches = [None] * len(dec.layers)
    tok = torch.full((B,), c["decoder_start_token_id"], dtype=torch.long, device=dev)
    out = []
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    limit = min(max_len, c["max_length"] - 1)
    for t in range(limit):
        y = dec.embed_tokens(tok)[:, None] * model.embed_scale + model.positions[t]
        for l, layer in enumerate(dec.layers):
            caches[l] = y if caches[l] is None else torch.cat([caches[l], y], 1)
            a, _ = layer.self_attn(y, caches[l])
            y = layer.self_attn_layer_norm(y + a)
            a, _ = layer.encoder_attn(y, memory, key_mask=mask)
            y = layer.encoder_attn_layer_norm(y + a)
            y = layer.final_layer_norm(y + layer.fc2(layer.act(layer.fc1(y))))
        scores = (model.lm_head(y[:, 0]) + model.final_logits_bias).float()
        scores[:, pad] = float("-inf")
        if t == c["max_length"] - 2:           # forced EOS at the last allowed step
            scores[:, :] = float("-inf")
            scores[:, eos] = 0.0
        tok = scores.argmax(-1)
        tok = torch.where(done, torch.full_like(tok, eos), tok)
        out.append(tok)
        done |= tok == eos
        if bool(done.all()):
            break
    ids = torch.stack(out, 1).tolist()
    res = []
    for row in ids:
        res.append(row[: row.index(eos) + 1] if eos in row else row)
    return res


def translate(model, tok, sentences, bf16=True, batch_sents=128):
    model.eval()
    enc = [tok.encode(s)[: model.config["max_position_embeddings"]] for s in sentences]
    order = sorted(range(len(enc)), key=lambda i: len(enc[i]))
    hyps = [None] * len(enc)
    with torch.autocast(device_of(model).type, dtype=torch.bfloat16, enabled=bf16):
        for k in range(0, len(order), batch_sents):
            ids = order[k: k + batch_sents]
            srcs = [enc[i] for i in ids]
            outs = greedy_batch(model, srcs, max_len=2 * max(map(len, srcs)) + 10)
            for i, o in zip(ids, outs):
                hyps[i] = tok.decode(o)
    return hyps


@torch.no_grad()
def encoder_spread(model, tok, sentences):
    """Mean over sentences of (std over positions / std overall) of the encoder output: near
    0 means the encoder has collapsed (every position the same, cross-attention useless)."""
    model.eval()
    r = []
    for s in sentences:
        mem, _ = model.encode(torch.tensor([tok.encode(s)], device=device_of(model)))
        r.append(float(mem[0].std(0).mean() / mem.std()))
    return sum(r) / len(r)


def dev_bleu(model, tok, pairs, bf16=True):
    hyps = translate(model, tok, [p[0] for p in pairs], bf16)
    score, d = bleu.corpus_bleu(hyps, [p[1] for p in pairs])
    return score, d, hyps


# --------------------------------------------------------------------------------------
# Model, schedule, checkpoints

def build_config(a, vocab):
    pad = vocab["<pad>"]
    return {
        "vocab_size": len(vocab), "decoder_vocab_size": len(vocab),
        "d_model": a.d_model, "encoder_layers": a.enc_layers, "decoder_layers": a.dec_layers,
        "encoder_attention_heads": a.heads, "decoder_attention_heads": a.heads,
        "encoder_ffn_dim": a.ffn, "decoder_ffn_dim": a.ffn,
        "activation_function": "swish", "scale_embedding": True,
        "max_position_embeddings": a.max_positions, "max_length": a.max_length,
        "pad_token_id": pad, "eos_token_id": 0, "decoder_start_token_id": pad,
        "forced_eos_token_id": 0, "bad_words_ids": [[pad]], "num_beams": a.num_beams,
        "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
        "dropout": a.dropout, "attention_dropout": 0.0, "activation_dropout": 0.0,
        "init_std": 0.02,
    }


# The encoder's residual branches start smaller by this factor, (8 x layers)^-1/4 (DeepNet's
# beta, Wang et al. 2022): in a post-LayerNorm stack each branch at full Xavier scale mixes
# the positions (attention starts near uniform), and six such layers left the encoder's
# output almost the same at every position (std over positions / std overall: 0.18 at
# initialisation, 0.03 after 500 steps; 0.85 with the smaller start).
RESIDUAL_BRANCHES = ("v_proj.weight", "out_proj.weight", "fc1.weight", "fc2.weight")


def init_weights(model, d, enc_layers=None):
    """Xavier-uniform matrices, zero biases, N(0, d^-1/2) embeddings (x sqrt(d) on input);
    with enc_layers, the encoder's residual branches scaled by (8 enc_layers)^-1/4."""
    beta = (8 * enc_layers) ** -0.25 if enc_layers else 1.0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "model.shared.weight":
                p.normal_(0.0, d ** -0.5)
            elif p.dim() == 2:
                torch.nn.init.xavier_uniform_(p)
                if name.startswith("model.encoder.") and name.endswith(RESIDUAL_BRANCHES):
                    p.mul_(beta)
            elif "norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()


def read_init(a, work):
    """--init-from: the model dimensions, joint vocabulary (as a list of pieces) and weights
    of an attend .gguf or an HF-style MarianMT directory. Its SentencePiece models are
    written to WORK, where train_spm then finds them, so the tokenization stays the same."""
    path = a.init_from
    if os.path.isdir(path):
        m = reference.load_hf_dir(path)
        c = m.config
        blobs = []
        for side in ("source", "target"):
            with open(os.path.join(path, f"{side}.spm"), "rb") as f:
                blobs.append(f.read())
        pieces = list(m.tok.vocab)
        weights = m.state_dict()
        dims = {"d_model": c["d_model"], "enc_layers": c["encoder_layers"],
                "dec_layers": c["decoder_layers"], "heads": c["encoder_attention_heads"],
                "ffn": c["encoder_ffn_dim"], "max_positions": c["max_position_embeddings"],
                "max_length": c["max_length"]}
        same = (c["decoder_attention_heads"], c["decoder_ffn_dim"], c["activation_function"],
                c["scale_embedding"], c["share_encoder_decoder_embeddings"], c["tie_word_embeddings"])
    else:
        import gguf_io
        f = gguf_io.GGUFFile(path)
        md = f.metadata
        blobs = [md["tokenizer.source_spm"].tobytes(), md["tokenizer.target_spm"].tobytes()]
        pieces = md["tokenizer.source_pieces"]
        weights = f
        dims = {"d_model": md["marian.d_model"], "enc_layers": md["marian.encoder_layers"],
                "dec_layers": md["marian.decoder_layers"], "heads": md["marian.encoder_heads"],
                "ffn": md["marian.encoder_ffn_dim"],
                "max_positions": md["marian.max_position_embeddings"],
                "max_length": md["marian.max_length"]}
        same = (md["marian.decoder_heads"], md["marian.decoder_ffn_dim"], md["marian.activation"],
                md["marian.scale_embedding"], md["marian.shared_embeddings"], md["marian.tied_output"])
    if same != (dims["heads"], dims["ffn"], "swish", True, True, True):
        raise SystemExit(f"--init-from {path}: train.py trains only swish models with scaled, "
                         f"shared and tied embeddings and equal encoder/decoder heads and ffn")
    for side, blob in zip(("source", "target"), blobs):
        out = os.path.join(work, f"{side}.spm")
        with open(out + ".tmp", "wb") as fo:
            fo.write(blob)
        os.replace(out + ".tmp", out)
    return dims, pieces, weights


def load_init_weights(model, weights):
    """Copy --init-from weights into model: an HF state dict as is; a .gguf through
    export_marian's name map (numpy views of the parameters receive the file's tensors),
    then checked by mapping the model back and comparing with every tensor of the file."""
    if isinstance(weights, dict):
        model.load_state_dict(weights)
        return
    import export_marian
    cfg = dict(model.config, shared=True, tied=True)
    views = {k: v.numpy() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for name, dst in export_marian.map_tensors(cfg, views):
            dst[...] = weights.tensors[name].astype(np.float32).reshape(dst.shape)
    back = export_marian.map_tensors(cfg, {k: v.numpy() for k, v in
                                           model.hf_state_dict(with_duplicates=False).items()})
    model_tensors = [n for n in weights.tensors if not n.startswith("align_head.")]  # not the model's
    assert sorted(n for n, _ in back) == sorted(model_tensors), "tensor names differ"
    for name, arr in back:
        want = weights.tensors[name].astype(np.float32).reshape(arr.shape)
        assert np.array_equal(arr, want), f"--init-from: {name} not loaded"


def lr_at(step, a):
    step = max(step, 1)
    return a.lr * min(step / a.warmup, math.sqrt(a.warmup / step))


def cooldown(train_secs, a):
    """With --cooldown-minutes C and a time budget: the learning rate falls linearly to zero
    over the budget's last C minutes (1 before them)."""
    if not (a.cooldown_minutes and a.max_train_minutes):
        return 1.0
    left = a.max_train_minutes * 60 - train_secs
    return max(0.0, min(1.0, left / (a.cooldown_minutes * 60)))


def ckpt_path(work, step):
    return os.path.join(work, f"checkpoint-{step:07d}.pt")


def checkpoint_steps(work):
    """Steps of the checkpoints in WORK, oldest first."""
    return sorted(int(f[11:18]) for f in os.listdir(work)
                  if f.startswith("checkpoint-") and f.endswith(".pt") and len(f) == 21)


def save_ckpt(work, step, model, opt, state):
    path = ckpt_path(work, step)
    blob = {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
            "torch_rng": torch.get_rng_state(), "py_rng": random.getstate(),
            "np_rng": np.random.get_state(), **state}
    if torch.cuda.is_available() and device_of(model).type == "cuda":
        blob["cuda_rng"] = torch.cuda.get_rng_state()
    torch.save(blob, path + ".tmp")
    os.replace(path + ".tmp", path)


def average_checkpoints(work, steps):
    avg = None
    for s in steps:
        sd = torch.load(ckpt_path(work, s), map_location="cpu", weights_only=False)["model"]
        if avg is None:
            avg = {k: v.clone().double() for k, v in sd.items()}
        else:
            for k in avg:
                avg[k] += sd[k].double()
    return {k: (v / len(steps)).float() for k, v in avg.items()}


# --------------------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("paths")
    g.add_argument("--data-dir", default=D.data_dir(),
                   help="the shared corpora (default ../shared/data beside the checkout, or $ATTEND_DATA)")
    g.add_argument("--work", default=os.path.join(REPO, "build", "train-de-en", "work"),
                   help="checkpoints, spm models, prepared data (default build/train-de-en/work)")
    g.add_argument("--out", default=os.path.join(REPO, "build", "train-de-en", "hf"),
                   help="HF-style output directory (default build/train-de-en/hf)")
    g.add_argument("--init-from", metavar="MODEL",
                   help="continue training from this .gguf or HF-style directory: its "
                        "weights, SentencePiece models and vocabulary (the model options are "
                        "taken from it; the held-out rule is unchanged)")
    g = p.add_argument_group("data")
    g.add_argument("--corpora", default="multi30k,tatoeba,anki,news,wmt10k",
                   help="training corpora, a comma list of " + ",".join(CORPORA) + " (all)")
    g.add_argument("--reverse", action="store_true",
                   help="English->German: every pair the other way round (the same pairs held out)")
    g.add_argument("--heldout", type=int, default=1000, help="Tatoeba pairs held out (1000)")
    g.add_argument("--heldout-anki", type=int, default=2000, help="Anki pairs held out (2000)")
    g.add_argument("--heldout-news", type=int, default=500, help="news pairs held out (500)")
    g.add_argument("--joint-vocab", type=int, default=8000,
                   help="pieces of one SentencePiece model trained on both languages "
                        "(8000; 0 = separate German and English models, --src/--tgt-vocab)")
    g.add_argument("--src-vocab", type=int, default=5000, help="German spm pieces (5000)")
    g.add_argument("--tgt-vocab", type=int, default=4000, help="English spm pieces (4000)")
    g.add_argument("--tatoeba-repeat", type=int, default=1,
                   help="Tatoeba training pairs appear this many times per epoch (1)")
    g.add_argument("--multi30k-repeat", type=int, default=3,
                   help="Multi30k training pairs appear this many times per epoch (3)")
    g.add_argument("--max-train-len", type=int, default=100,
                   help="drop training pairs longer than this many tokens (100)")
    g = p.add_argument_group("model")
    g.add_argument("--d-model", type=int, default=320)
    g.add_argument("--enc-layers", type=int, default=6)
    g.add_argument("--dec-layers", type=int, default=5)
    g.add_argument("--heads", type=int, default=5)
    g.add_argument("--ffn", type=int, default=1280)
    g.add_argument("--dropout", type=float, default=0.1)
    g.add_argument("--no-deep-init", dest="deep_init", action="store_false",
                   help="plain Xavier initialisation of the encoder's residual branches (the "
                        "default scales them by (8 x encoder layers)^-1/4, see init_weights)")
    g.add_argument("--max-positions", type=int, default=256)
    g.add_argument("--max-length", type=int, default=256, help="generation max_length")
    g.add_argument("--num-beams", type=int, default=4,
                   help="generation num_beams recorded in config.json: the file's default "
                        "decoding (4)")
    g = p.add_argument_group("training")
    g.add_argument("--epochs", type=int, default=100)
    g.add_argument("--max-train-minutes", type=float, default=18,
                   help="stop (with a checkpoint) once training time, summed over restarts, "
                        "exceeds this (18, the shipped model's budget on one H100; 0 = no "
                        "limit); a rerun with a larger value goes on")
    g.add_argument("--cooldown-minutes", type=float, default=6,
                   help="with --max-train-minutes: bring the learning rate linearly to zero over "
                        "the last this many minutes of the budget (6; 0 = off)")
    g.add_argument("--save-every", type=int, default=500,
                   help="checkpoint (and dev BLEU) every N steps, and at each epoch's end (500)")
    g.add_argument("--max-steps", type=int, default=0, help="stop an epoch after this many "
                   "steps (for timing runs; 0 = full epochs)")
    g.add_argument("--max-tokens", type=int, default=12000,
                   help="padded tokens per batch (12000)")
    g.add_argument("--lr", type=float, default=7e-4,
                   help="peak learning rate (7e-4; with 1e-3, 4096-token batches and plain "
                        "Xavier the 6-layer post-LayerNorm encoder once collapsed: every "
                        "position the same output)")
    g.add_argument("--warmup", type=int, default=2000, help="warm-up steps (2000)")
    g.add_argument("--label-smoothing", type=float, default=0.1)
    g.add_argument("--clip-norm", type=float, default=1.0, help="0 = off")
    g.add_argument("--average", type=int, default=4, help="average the last N checkpoints (4)")
    g.add_argument("--dev-size", type=int, default=200,
                   help="Multi30k val sentences scored at each checkpoint (200; 0 = all)")
    g.add_argument("--log-every", type=int, default=50, help="progress line every N steps")
    g.add_argument("--seed", type=int, default=1234)
    g.add_argument("--threads", type=int, default=2)
    g.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cuda where PyTorch sees a GPU, else cpu")
    g.add_argument("--prepare-only", action="store_true",
                   help="train the SentencePiece models and encode the corpora into WORK, "
                        "then stop (to train elsewhere from the same WORK)")
    g.add_argument("--no-bf16", action="store_true", help="train in float32 (slow here)")
    a = p.parse_args(argv)

    torch.set_num_threads(a.threads)
    bf16 = not a.no_bf16
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False   # float32 checks stay float32
    work = a.work
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    log(f"args: {json.dumps(vars(a))}")

    data = prepare_data(a)
    if a.reverse:
        data = reverse_data(data)
    for name, (n, k) in data["stats"].items():
        log(f"data: {name}: {n} candidate pairs, {k} kept ({n - k} dropped: overlap with "
            f"held-out/dev/test sentences or empty)")
    log(f"data: train {len(data['train'])} pairs, dev {len(data['dev'])}, "
        f"tatoeba held-out {len(data['heldout'])}")
    for name, pairs in data["heldout_sets"].items():
        for side, i in ((("en", 0), ("de", 1)) if a.reverse else (("de", 0), ("en", 1))):
            write_lines(os.path.join(work, "data", f"{name}-heldout.{side}"), [x[i] for x in pairs])
        log(f"data: {name} held-out slice: {len(pairs)} pairs")

    init = None
    if a.init_from:
        dims, pieces, init = read_init(a, work)
        vars(a).update(dims)
        log(f"init: from {a.init_from}: {json.dumps(dims)}")
    src_spm, tgt_spm = train_spm(a, data, work)
    vocab = reference.build_vocab(src_spm, tgt_spm)
    if init is not None and list(vocab) != list(pieces):
        raise SystemExit(f"--init-from {a.init_from}: its vocabulary is not the one its "
                         f"SentencePiece models give (reference.build_vocab)")
    tok = reference.MarianTok(src_spm, tgt_spm, vocab)
    log(f"vocab: {len(vocab)} entries (" + (f"joint spm {a.joint_vocab}" if a.joint_vocab else
        f"source spm {a.src_vocab}, target spm {a.tgt_vocab}") + ")")

    # SentencePiece saw each pair once; the model sees Tatoeba's everyday sentences
    # --tatoeba-repeat times per epoch (they are outnumbered by image captions otherwise)
    enc = encoded_corpora(tok, data["per_corpus"], (src_spm, tgt_spm), work)
    if a.prepare_only:
        log(f"prepared {work}: SentencePiece models and the encoded corpora; stopping")
        return 0
    pairs = ([e for name in data["per_corpus"] for e in enc[name]]
             + enc.get("tatoeba", []) * (a.tatoeba_repeat - 1)
             + enc.get("multi30k", []) * (a.multi30k_repeat - 1))
    train = [e for e in pairs if len(e[0]) <= a.max_train_len and len(e[1]) <= a.max_train_len]
    ntok = sum(len(e[1]) for e in train)
    log(f"train: {len(train)} pairs, {sum(len(e[0]) for e in train)} source / {ntok} target tokens")
    dev = data["dev"][: a.dev_size] if a.dev_size else data["dev"]

    config = build_config(a, vocab)
    torch.manual_seed(a.seed)
    model = reference.Marian(config)
    init_weights(model, a.d_model, a.enc_layers if a.deep_init else None)
    if init is not None:
        load_init_weights(model, init)
    model.to(device)
    model.positions = model.positions.to(device)   # a plain attribute, not a buffer
    nparam = sum(p.numel() for p in model.parameters())
    log(f"model: {nparam / 1e6:.2f}M parameters (f16 ~{2 * nparam / 1e6:.1f} MB)")
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.98), eps=1e-9)

    steps = checkpoint_steps(work)
    step, epoch, next_batch, history, train_secs = 0, 1, 0, [], 0.0
    random.seed(a.seed)
    np.random.seed(a.seed)
    if steps:
        ck = torch.load(ckpt_path(work, steps[-1]), map_location="cpu", weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        torch.set_rng_state(ck["torch_rng"])
        if device.type == "cuda" and "cuda_rng" in ck:
            torch.cuda.set_rng_state(ck["cuda_rng"])
        random.setstate(ck["py_rng"])
        np.random.set_state(ck["np_rng"])
        step, history, train_secs = ck["step"], ck["history"], ck["train_secs"]
        epoch, next_batch = ck["epoch"], ck["next_batch"]
        log(f"resumed from {ckpt_path(work, step)} (step {step}, epoch {epoch} at batch "
            f"{next_batch}, {train_secs / 60:.1f} min trained)")
    elif init is not None:
        score, _, _ = dev_bleu(model, tok, dev, bf16)
        log(f"init: dev BLEU {score:.2f} before training (bf16 greedy, python)")

    pad = config["pad_token_id"]
    d_logits, d_loss = check_forward(model, train, pad, a.label_smoothing)
    log(f"check: training forward vs reference.decode: max |logit diff| {d_logits:.1e}, "
        f"relative loss diff {d_loss:.1e} (bf16 matmuls in the fused loss)")

    def checkpoint(epoch, next_batch, loss):
        """Dev BLEU, then a checkpoint; only the last --average + 1 are kept."""
        t_dev = time.time()
        score, _, _ = dev_bleu(model, tok, dev, bf16)
        spread = encoder_spread(model, tok, [p[0] for p in dev[:20]])
        model.train()
        history.append({"step": step, "epoch": epoch, "loss": loss, "dev_bleu": score,
                        "enc_spread": spread, "train_secs": train_secs,
                        "dev_secs": time.time() - t_dev})
        save_ckpt(work, step, model, opt, {"epoch": epoch, "next_batch": next_batch,
                                           "history": history, "train_secs": train_secs})
        for old in checkpoint_steps(work)[: -(max(a.average, 1) + 1)]:
            os.remove(ckpt_path(work, old))
        log(f"checkpoint: step {step:6d}  lr {lr_at(step, a) * cooldown(train_secs, a):.2e}  train loss {loss:.4f}  "
            f"dev BLEU {score:5.2f}  enc spread {spread:.2f}  ({train_secs / 60:.1f} min "
            f"trained, dev {time.time() - t_dev:.0f} s, total {(time.time() - T0) / 60:.1f} min)")

    out_of_time = False
    while epoch <= a.epochs and not out_of_time:
        model.train()
        batches = make_batches(train, a.max_tokens, random.Random(a.seed * 1000 + epoch))
        tot_loss = tot_tok = 0.0
        t_ep = time.time()
        t_last = time.time()
        for bi in range(next_batch, len(batches)):
            if a.max_steps and bi >= a.max_steps:
                break
            src, dec_in, labels = collate(train, batches[bi], pad, device)
            step += 1
            for gr in opt.param_groups:
                gr["lr"] = lr_at(step, a) * cooldown(train_secs, a)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss, n = train_loss(model, src, dec_in, labels, a.label_smoothing, pad)
            opt.zero_grad(set_to_none=True)
            (loss / n).backward()
            if a.clip_norm:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_norm)
            opt.step()
            tot_loss += float(loss)
            tot_tok += n
            now = time.time()
            train_secs += now - t_last
            t_last = now
            done = bi - next_batch + 1
            if (a.max_steps and bi % 10 == 0) or (a.log_every and done % a.log_every == 0):
                log(f"  step {step} ({bi + 1}/{len(batches)} of epoch {epoch}) loss "
                    f"{tot_loss / tot_tok:.3f} {(now - t_ep) / done:.3f} s/step")
            out_of_time = bool(a.max_train_minutes) and train_secs > a.max_train_minutes * 60
            if out_of_time or (a.save_every and step % a.save_every == 0):
                at_end = bi + 1 == len(batches)
                checkpoint(epoch + at_end, 0 if at_end else bi + 1, tot_loss / tot_tok)
                t_last = time.time()
                if out_of_time:
                    log(f"time budget: {train_secs / 60:.1f} min trained; the model is made "
                        f"now, and a rerun with a larger --max-train-minutes goes on")
                    break
        else:
            if not (a.save_every and step % a.save_every == 0) and tot_tok:
                checkpoint(epoch + 1, 0, tot_loss / tot_tok)
            log(f"epoch {epoch} done: step {step}, {(time.time() - t_ep) / 60:.1f} min")
        if a.max_steps and not out_of_time and (not history or history[-1]["step"] != step):
            checkpoint(epoch + 1, 0, tot_loss / max(tot_tok, 1))
        epoch, next_batch = epoch + 1, 0

    # ---- final model: average of the last checkpoints, or the last one if better on dev
    steps = checkpoint_steps(work)
    if not steps:
        log("no checkpoint: nothing to export")
        return 1
    last = steps[-1]
    avg = steps[-a.average:]
    model.load_state_dict(torch.load(ckpt_path(work, last), map_location=device,
                                     weights_only=False)["model"])
    best_score, _, _ = dev_bleu(model, tok, data["dev"], bf16)
    best_name, best_sd = f"step {last}", {k: v.clone() for k, v in model.state_dict().items()}
    log(f"final: step {last} alone: dev BLEU {best_score:.2f} (full val)")
    if len(avg) > 1:
        model.load_state_dict(average_checkpoints(work, avg))
        s_avg, _, _ = dev_bleu(model, tok, data["dev"], bf16)
        log(f"final: average of the checkpoints of steps {', '.join(map(str, avg))}: dev BLEU "
            f"{s_avg:.2f} (full val)")
        if s_avg >= best_score:
            best_score, best_name = s_avg, f"average of steps {', '.join(map(str, avg))}"
            best_sd = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_sd)
    model.eval()
    with open(src_spm, "rb") as f:
        ssp = f.read()
    with open(tgt_spm, "rb") as f:
        tsp = f.read()
    reference.save_hf_dir(copy.deepcopy(model).to("cpu"), a.out, ssp, tsp, vocab)
    info = {"selected": best_name, "dev_bleu_bf16_greedy": best_score, "history": history,
            "args": vars(a), "data_stats": data["stats"]}
    with open(os.path.join(os.path.dirname(os.path.abspath(a.out)), "train-info.json"), "w") as f:
        json.dump(info, f, indent=1)
    log(f"wrote {a.out} ({best_name}, dev BLEU {best_score:.2f})")
    s_test, d_test, _ = dev_bleu(model, tok, data["test"], bf16)
    log(f"info: test_2016_flickr greedy bf16 (python): {bleu.format_bleu(d_test)}")
    log(f"done in {(time.time() - T0) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
