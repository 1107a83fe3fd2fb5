#!/usr/bin/python3
"""The guided-alignment tools (issue 38): tools/guided_labels.py carries word links to the
pieces a model reads (checked by hand on sentences of the shipped model's SentencePiece
model); tools/guided_align.py builds the shifted label rows, fine-tunes only the decoder layers
from the guided one upwards (a small random model, two CPU steps), and `apply` puts exactly the
changed tensors into a copy that attend verifies and translates with; labels of other pairs
are refused.
Run: /usr/bin/python3 tests/test_guided_align.py"""
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

sys.path.insert(0, T.TOOLS)
import gguf_io as G  # noqa: E402
import guided_align as GA  # noqa: E402
import guided_labels as GL  # noqa: E402

SHIPPED = os.path.join(T.REPO, "models", "de-en.gguf")


def pieces_to_words():
    import sentencepiece as spm
    d = T.tempdir()
    blob = G.GGUFFile(SHIPPED).metadata["tokenizer.source_spm"].tobytes()
    path = os.path.join(d, "s.spm")
    open(path, "wb").write(blob)
    sp = spm.SentencePieceProcessor(model_file=path)
    text = "Hallo, Welt. Grüße aus Köln!"
    spans = GL.word_spans(text)
    words = [text[b:e] for b, e in spans]
    assert words == ["Hallo", ",", "Welt", ".", "Grüße", "aus", "Köln", "!"], words
    pieces, owner = GL.piece_words(sp, text, spans)
    by_word = {}
    for p, w in zip(pieces, owner):
        by_word.setdefault(w, []).append(p)
    # every word's pieces spell it (the word-start mark aside), in order
    for w, word in enumerate(words):
        assert "".join(by_word[w]).replace("\u2581", "") == word, (word, by_word[w])
    assert set(by_word) <= set(range(len(words))) | {-1}
    # links (source word, target word) -> (target piece, source piece) pairs
    src_owner, tgt_owner = [0, 0, 1, 2], [0, 1, 1, -1]
    assert GL.piece_links([(0, 1), (2, 0)], src_owner, tgt_owner) == [(0, 3), (1, 0), (1, 1), (2, 0), (2, 1)]
    shutil.rmtree(d, ignore_errors=True)


def label_rows():
    links = [np.array([[0, 1], [0, 2], [2, 0]]), np.zeros((0, 2), dtype=np.int64)]
    G_, n = GA.label_matrix(links, [0, 1], 4, 3, True, "cpu")
    assert n == 2 and G_.shape == (2, 4, 3)
    assert np.allclose(G_[0, 1].numpy(), [0, 0.5, 0.5]) and np.allclose(G_[0, 3].numpy(), [1, 0, 0])
    assert float(G_[0, 0].sum()) == 0 and float(G_[1].sum()) == 0
    G2, _ = GA.label_matrix(links, [0], 4, 3, False, "cpu")
    assert np.allclose(G2[0, 0].numpy(), [0, 0.5, 0.5]) and np.allclose(G2[0, 2].numpy(), [1, 0, 0])


def small_model(d):
    return T.random_gguf(d, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=2,
                         decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_length=40,
                         activation_function="swish", scale_embedding=True,
                         share_encoder_decoder_embeddings=True, tie_word_embeddings=True)


def fine_tune_and_apply():
    d = T.tempdir()
    model = small_model(d)
    labels = os.path.join(d, "labels.npz")
    subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "guided_labels.py"), "-m", model, "--max-pairs", "300",
                    "-o", labels], check=True, capture_output=True)
    z = np.load(labels)
    assert len(z["links_len"]) == 300 and z["links_len"].sum() > 1000, z["links_len"].sum()
    delta = os.path.join(d, "delta.npz")
    p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "guided_align.py"), "train", labels, "-m", model,
                        "--head", "1:1", "--max-steps", "2", "--max-tokens", "400", "--threads", "1",
                        "--device", "cpu", "--work", os.path.join(d, "w"), "-o", delta],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    changed = [k[2:] for k in np.load(delta).files if k.startswith("t:")]
    assert changed and all(k.startswith(("dec.1.", "dec.2.")) for k in changed), changed
    assert any(k.startswith("dec.1.cross_attn.q") for k in changed), changed
    out = os.path.join(d, "tuned.gguf")
    subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "guided_align.py"), "apply", model, delta, "-o", out,
                    "--view", "1:1,shift,words,grow"], check=True, capture_output=True)
    T.run_attend(["verify", out])
    before, after = G.GGUFFile(model), G.GGUFFile(out)
    for t in before.tensor_infos:
        same = np.array_equal(before.tensors[t["name"]], after.tensors[t["name"]])
        assert same != (t["name"] in changed), t["name"]
    assert after.metadata["attend.alignment.view"] == "1:1,shift,words,grow"
    T.run_attend(["translate", "-m", out, "--greedy", "Ein Hund."])
    # labels of other pairs (another subset) are refused by name
    other = os.path.join(d, "other.npz")
    np.savez(other, **{k: z[k] for k in z.files if k != "index"}, index=z["index"][::-1].copy())
    p = subprocess.run([T.PYTHON, os.path.join(T.TOOLS, "guided_align.py"), "train", other, "-m", model,
                        "--head", "1:1", "--max-steps", "1", "--device", "cpu", "--work", os.path.join(d, "w"),
                        "-o", delta], capture_output=True, text=True)
    assert p.returncode != 0 and "other pairs" in p.stderr, p.stderr[-300:]
    shutil.rmtree(d, ignore_errors=True)


def main():
    run = T.Runner()
    run.check("words to pieces, links to piece pairs", pieces_to_words)
    run.check("label rows: uniform over linked pieces, read one step later", label_rows)
    run.check("fine-tune the guided layers, apply exactly what changed", fine_tune_and_apply)
    run.finish()


if __name__ == "__main__":
    main()
