#!/usr/bin/python3
"""tools/train_align_head.py: the Garg et al. label distributions on hand-made pieces, the
head's shift (row t from the decoder position reading target token t), and training on a tiny
random model whose pairs have a known alignment (a dictionary with local swaps): the trained
head finds it on held-out pairs. Run: /usr/bin/python3 tests/test_align_head.py"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402
import train_align_head as H  # noqa: E402

import torch  # noqa: E402

N_WORDS = 12


def labels():
    """Target word 0 linked to source words 0 (two pieces) and 1: a third on each of their
    pieces; target word 1 to source word 1 alone; </s> and unlinked words get no labels."""
    x = dict(src=["▁a", "b", "▁c", "</s>"], tgt=["▁x", "▁y", "▁z", "</s>"], links=[(0, 0), (1, 0), (1, 1)],
             nw=(2, 3))
    Y = H.target_of(x).tolist()
    third = 1 / 3
    want = [[third, third, third, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0] * 4, [0.0] * 4]
    assert all(abs(a - b) < 1e-7 for r, w in zip(Y, want) for a, b in zip(r, w)), Y
    # pieces that do not split into the aligner's words: the pair is left out
    assert H.target_of(dict(x, nw=(3, 3))) is None


def shift():
    torch.manual_seed(0)
    head = H.Head(8, 4)
    h, mem = torch.randn(5, 8), torch.randn(3, 8)
    A = head(h, mem)
    assert A.shape == (5, 3)
    for t in range(4):
        want = torch.softmax(head.q(h[t + 1]) @ head.k(mem).T / 2.0, -1)
        assert torch.allclose(A[t], want, atol=1e-6), t
    assert float(A[4].abs().sum()) == 0.0 and torch.allclose(A[:4].sum(1), torch.ones(4))


def tiny_model():
    pieces = ["</s>", "<unk>"] + [f"▁s{i}" for i in range(N_WORDS)] + [f"▁t{i}" for i in range(N_WORDS)] + ["<pad>"]
    pad = len(pieces) - 1
    cfg = dict(d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=20,
               vocab_size=len(pieces), decoder_vocab_size=len(pieces), pad_token_id=pad,
               decoder_start_token_id=pad, bad_words_ids=[[pad]])
    return R.random_model(cfg, seed=3, gain=0.5), pieces


def pairs(model, pieces, n, seed):
    """n pairs: 3..8 distinct source words, each target word the source word's translation,
    adjacent target words swapped with probability 0.3; every link known."""
    rng, ids, out = random.Random(seed), {p: i for i, p in enumerate(pieces)}, []
    for _ in range(n):
        words = rng.sample(range(N_WORDS), rng.randint(3, 8))
        order = list(range(len(words)))
        for k in range(len(order) - 1):
            if rng.random() < 0.3:
                order[k], order[k + 1] = order[k + 1], order[k]
        src = [f"▁s{w}" for w in words] + ["</s>"]
        tgt = [f"▁t{words[i]}" for i in order] + ["</s>"]
        mem, dec = H.forward_states(model, [ids[p] for p in src], [ids[p] for p in tgt])
        out.append(dict(src=src, tgt=tgt, links=[(i, j) for j, i in enumerate(order)], mem=mem, dec=dec,
                        nw=(len(words), len(words))))
    return out


def learns_known_alignment():
    model, pieces = tiny_model()
    train = [(x, H.target_of(x)) for x in pairs(model, pieces, 200, 1)]
    held_out = pairs(model, pieces, 60, 2)
    head = H.Head(32, 16)
    before = H.evaluate(head, held_out, 1)
    best, losses = H.fit(head, train, 1, 200, 8, 1e-2, 0, every=100)
    head.load_state_dict(best[2])
    after = H.evaluate(head, held_out, 1)
    first, last = sum(losses[:30]) / 30, sum(losses[-30:]) / 30
    print(f"    held-out AER {before:.3f} untrained -> {after:.3f} trained; loss {first:.3f} -> {last:.3f}")
    assert after < 0.1 and before > 0.4, (before, after)
    assert last < first / 3, (first, last)


def main():
    run = T.Runner()
    run.check("Garg et al. label distributions over linked source pieces", labels)
    run.check("the head reads row t from the decoder position after target token t", shift)
    run.check("a tiny model's known alignment, learned by the head", learns_known_alignment)
    run.finish()


if __name__ == "__main__":
    main()
