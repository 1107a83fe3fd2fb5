#!/usr/bin/python3
"""tools/similarity_align.py: hand-made states whose target pieces copy known source pieces
give back that permutation under every position rule and link rule; the two softmaxes; and
on a tiny random model, the states it keeps are the reference model's own (the encoder's
output, the decoder's last layer giving the reference's log-probabilities).
Run: /usr/bin/python3 tests/test_similarity_align.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402
import similarity_align as SA  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

PERM = [2, 0, 3, 1]  # target word t copies source word PERM[t]


def copied_states(pos):
    """Source pieces a..d (b in two pieces) and target pieces w..z, states in which target
    piece t (at the position the rule reads) equals a state of source word PERM[t]."""
    rng = np.random.default_rng(0)
    src = ["▁a", "▁b", "b", "▁c", "▁d", "</s>"]
    tgt = ["▁w", "▁x", "▁y", "▁z", "</s>"]
    first = {0: 0, 1: 1, 2: 3, 3: 4}  # the first piece of each source word
    enc = rng.standard_normal((1, len(src), 16))
    dec = rng.standard_normal((1, len(tgt), 16))
    tenc = rng.standard_normal((1, len(tgt), 16))
    for t, w in enumerate(PERM):
        where = {"shift": (dec, t + 1), "predict": (dec, t), "encoder": (tenc, t)}[pos]
        where[0][0, where[1]] = enc[0, first[w]]
    return dict(src=src, tgt=tgt, enc=enc, dec=dec, tenc=tenc)


def permutation_found():
    want = {(w, t) for t, w in enumerate(PERM)}
    for pos in ("shift", "predict", "encoder"):
        x = copied_states(pos)
        for links, c in (("threshold", 0.3), ("prod-argmax", 0), ("prod-mutual", 0), ("prod-grow", 0)):
            got = SA.links_of(x, 0, 0, pos, 0.1, links, c)
            assert got == want, (pos, links, sorted(got))
    sim, rows, cols = SA.similarity(copied_states("shift"), 0, 0, "shift")
    assert rows == [0, 1, 2, 3] and cols == [0, 1, 2, 3, 4] and sim.shape == (4, 5)  # </s> on neither side
    assert np.all(np.abs(sim) <= 1 + 1e-12)


def softmaxes():
    sim = np.random.default_rng(1).uniform(-1, 1, (3, 5))
    p_ts, p_st = SA.softmaxes(sim, 0.1)
    assert np.allclose(p_ts.sum(1), 1) and np.allclose(p_st.sum(0), 1)
    assert np.array_equal(p_ts.argmax(1), sim.argmax(1)) and np.array_equal(p_st.argmax(0), sim.argmax(0))


def reference_states():
    pieces = ["</s>", "<unk>"] + [f"▁s{i}" for i in range(8)] + [f"▁t{i}" for i in range(8)] + ["<pad>"]
    pad = len(pieces) - 1
    cfg = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=20,
               vocab_size=len(pieces), decoder_vocab_size=len(pieces), pad_token_id=pad,
               decoder_start_token_id=pad, bad_words_ids=[[pad]])
    model = R.random_model(cfg, seed=3, gain=0.5).eval()

    class Tok:  # whitespace "SentencePiece": every word one piece
        src_vocab = tgt_vocab = {p: i for i, p in enumerate(pieces)}
        tgt_pieces = dict(enumerate(pieces))
        unk, eos = 1, 0
        encode = staticmethod(lambda text: [Tok.src_vocab["▁" + w] for w in text.split()] + [0])

        class tgt_sp:
            encode = staticmethod(lambda text, out_type: ["▁" + w for w in text.split()])
    model.tok = Tok
    x = SA.pair_states(model, "s1 s4 s2", "t4 t1 t2 t7")
    assert x["src"] == ["▁s1", "▁s4", "▁s2", "</s>"] and x["tgt"] == ["▁t4", "▁t1", "▁t2", "▁t7", "</s>"]
    assert x["enc"].shape == (3, 4, 32) and x["dec"].shape == (3, 5, 32) and x["tenc"].shape == (3, 5, 32)
    src = [Tok.src_vocab[p] for p in x["src"]]
    tgt = [Tok.src_vocab[p] for p in x["tgt"]]
    with torch.no_grad():
        mem, _ = model.encode(torch.tensor([src]))
        logits, _, _ = model.decode(torch.tensor([[pad] + tgt[:-1]]), mem)
    assert np.allclose(x["enc"][-1], mem[0].numpy(), atol=1e-6)
    with torch.no_grad():
        again = model.lm_head(torch.tensor(x["dec"][-1])) + model.final_logits_bias
    assert np.allclose(again.numpy(), logits[0].numpy(), atol=1e-5)


def main():
    run = T.Runner()
    run.check("target states copied from known source pieces: the permutation, every rule", permutation_found)
    run.check("the two softmaxes: rows over source pieces, columns over target pieces", softmaxes)
    run.check("the states are the reference model's own (encoder output, decoder logits)", reference_states)
    run.finish()


if __name__ == "__main__":
    main()
