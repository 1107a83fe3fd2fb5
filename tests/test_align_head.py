#!/usr/bin/python3
"""tools/train_align_head.py: the Garg et al. label distributions on hand-made pieces, the
head's shift (row t from the decoder position reading target token t), and training on a tiny
random model whose pairs have a known alignment (a dictionary with local swaps): the trained
head finds it on held-out pairs; and the engine's head (tools/add_align_head.py puts it in a
small random model file): its rows equal the PyTorch head's on the same pair, the view
`L:H,align,shift,words,grow` links as train_align_head.py's --mix reads them, translations stay
bit-identical, and a file whose keys and tensors disagree fails to load clearly.
Run: /usr/bin/python3 tests/test_align_head.py"""
import contextlib
import io
import os
import random
import tempfile
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402
import train_align_head as H  # noqa: E402

import torch  # noqa: E402
import numpy as np  # noqa: E402
import aer as AER  # noqa: E402
import add_align_head  # noqa: E402
import gguf_io as G  # noqa: E402
import attend_package  # noqa: E402,F401  (the checkout's python/ on sys.path)

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


PAIRS = [("Ich habe einen Hund und eine Katze.", "I have a dog and a cat."),
         ("Das Haus ist sehr alt.", "The house is very old."),
         ("Wo ist der Bahnhof?", "Where is the station?")]


def engine_files(d):
    """A random 2-layer model file, the same with a random head (width 16, decoder layer 1's
    cross-attention input: state index L + 1) and the head's .npz."""
    base = T.random_gguf(d, seed=4, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                         decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=40)
    rng = np.random.default_rng(1)
    npz = os.path.join(d, "head.npz")
    np.savez(npz, layer=np.int32(3), mix=np.str_("1:0"),
             **{k: rng.normal(0, s, shape).astype(np.float32) for k, s, shape in
                (("q_weight", 0.3, (16, 32)), ("q_bias", 0.2, (16,)), ("k_weight", 0.3, (16, 32)),
                 ("k_bias", 0.2, (16,)))})
    out = os.path.join(d, "head.gguf")
    layer, width, view = add_align_head.add_head(base, npz, out)
    assert (layer, width, view) == (1, 16, "1:0,align,shift,words,grow"), (layer, width, view)
    return base, out, npz


def engine_equals_torch():
    import attend
    with tempfile.TemporaryDirectory(prefix="attend-test-") as d:
        base, path, npz = engine_files(d)
        model = H.load_model(path, d)  # the model's own tensors (align_head.* left out)
        head = H.Head(32, 16)
        z = np.load(npz)
        head.load_state_dict({k: torch.from_numpy(z[k.replace(".", "_")]) for k in head.state_dict()})
        mix = H.Head(32, model.model.decoder.layers[1].encoder_attn.head_dim)
        H.init_from_cross(mix, model, 1, 0)
        eng = attend.Model(path)
        assert (eng.config.align_head_layer, eng.config.align_head_width) == (1, 16)
        plain = attend.Model(base)
        worst = 0.0
        for src, tgt in PAIRS:
            r = eng.score(src, tgt)
            mem, dec = H.forward_states(model, [int(i) for i in r.src_ids], [int(i) for i in r.tgt_ids])
            x = dict(src=r.src_tokens, tgt=r.tgt_tokens, mem=mem, dec=dec)
            with torch.no_grad():  # unshifted rows: position t's query, as the engine keeps them
                want = torch.softmax(head.q(dec[3]) @ head.k(mem).T / 4.0, -1).numpy()
            worst = max(worst, float(np.abs(r.align_head - want).max()))
            torch_links = H.head_links(head, [x], 3, "grow", (mix, 3))[0]
            assert set(r.alignment("1:0,align,shift,words,grow")) == set(torch_links), (src, torch_links)
            assert r.alignment() == r.alignment("1:0,align,shift,words,grow"), "the recorded view is the head's mix"
            # the head touches no translation: ids, scores and attention as without it
            a, b = eng.translate(src, attention=True, scores=True), plain.translate(src, attention=True, scores=True)
            assert a.text == b.text and list(a.tgt_ids) == list(b.tgt_ids) and a.score == b.score
            assert np.array_equal(a.cross, b.cross) and b.align_head is None and a.align_head is not None
        npz = os.path.join(d, "dump.npz")  # attend align's dump carries the head's rows too
        T.run_attend(["align", "-m", path, "--target", PAIRS[-1][1], "--dump-attention", npz], input_text=PAIRS[-1][0])
        assert np.array_equal(np.load(npz)["s0/align_head"], r.align_head)
        # each n-best hypothesis has its own rows: CLI and Python align every one alike
        nb = eng.translate(PAIRS[1][0], attention=True, beam=3, n_best=3)
        cli = T.run_attend(["translate", "-m", path, "--beam", "3", "--n-best", "3", "--alignment"],
                           input_text=PAIRS[1][0] + "\n").stdout.splitlines()
        for k, line in enumerate(cli):
            h = nb.hypothesis(k)
            assert h.align_head.shape == (len(h.tgt_ids), len(nb.src_ids)), (k, h.align_head.shape)
            assert line.split(" ||| ")[3] == h.pharaoh(), (k, line, h.pharaoh())
        q = os.path.join(d, "int8.gguf")  # attend quantize keeps the head f32
        T.run_attend(["quantize", path, q])
        rq = attend.Model(q).score(*PAIRS[0])
        assert rq.align_head is not None and np.allclose(rq.align_head.sum(1), 1.0, atol=1e-5)
        print(f"    engine head vs PyTorch: largest difference {worst:.2e}")
        assert worst < 1e-5, worst


def bad_files_fail_clearly():
    with tempfile.TemporaryDirectory(prefix="attend-test-") as d:
        base, path, _ = engine_files(d)
        f = G.GGUFFile(path)
        meta = [(k, G.ARRAY, (t[1], f.metadata[k])) if isinstance(t, tuple) else (k, t, f.metadata[k])
                for k, t in f.types.items() if k not in (G.CRC_KEY, G.META_CRC_KEY)]
        tensors = [(t["name"], f.tensors[t["name"]], t["ggml_type"]) for t in f.tensor_infos]
        cases = {  # what an older attend sees too: tensors it does not know
            "no_keys": ([m for m in meta if not m[0].startswith("attend.align_head") and
                         m[0] != "attend.alignment.view"], tensors, "not part of this model's configuration"),
            "no_tensors": (meta, [t for t in tensors if not t[0].startswith("align_head.")],
                           "align_head.q.weight: missing"),
            "view_without_head": ([m for m in meta if not m[0].startswith("attend.align_head")],
                                  [t for t in tensors if not t[0].startswith("align_head.")],
                                  "names the alignment head, and the file has none"),
        }
        for name, (m, t, want) in cases.items():
            out = os.path.join(d, name + ".gguf")
            G.write(out, m, t)
            p = T.run_attend(["info", out], check=False)
            assert p.returncode != 0 and want in p.stderr, (name, p.returncode, p.stderr)
        p = T.run_attend(["align", "-m", base, "--preset", "1:0,align", "--target", PAIRS[0][1]],
                         input_text=PAIRS[0][0], check=False)
        assert p.returncode != 0 and "'align' names the trained alignment head" in p.stderr, p.stderr


def reverse_needs_signal():
    """--reverse swaps align_signal.py's sets; the other sets are German->English only."""
    a = H.parse_args(["--reverse", "--signal", "sig"])
    assert a.reverse and H.sides(a) == ("en", "de") and H.transposed({(0, 2), (1, 1)}) == {(2, 0), (1, 1)}
    assert H.sides(H.parse_args(["--signal", "sig"])) == ("de", "en")
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage message
            H.parse_args(["--reverse"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("--reverse without --signal was taken")


def main():
    run = T.Runner()
    run.check("--reverse reads English as the source, and only with --signal", reverse_needs_signal)
    run.check("Garg et al. label distributions over linked source pieces", labels)
    run.check("the head reads row t from the decoder position after target token t", shift)
    run.check("a tiny model's known alignment, learned by the head", learns_known_alignment)
    run.check("the engine's head equals PyTorch's; translations untouched", engine_equals_torch)
    run.check("files whose head keys and tensors disagree fail clearly", bad_files_fail_clearly)
    run.finish()


if __name__ == "__main__":
    main()
