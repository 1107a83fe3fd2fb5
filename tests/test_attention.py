#!/usr/bin/python3
"""Attention capture, dumps and alignments, end to end.

Random MarianMT models with different encoder/decoder layer and head counts go through the
user path (HF directory -> export_marian.py -> .gguf -> build/attend) and are checked against
tools/reference.py (PyTorch):
  - every enc_self / dec_self / cross matrix of every layer and head within 1e-5;
  - rows sum to 1, decoder self-attention is zero above the diagonal;
  - the .npz loads with numpy.load, passes `unzip -t`, and holds exactly the documented keys;
  - forcing the engine's own greedy output (attend align --target) reproduces its ids,
    log-probabilities and every attention matrix, and matches reference.force_decode;
  - attend translate --alignment=VIEW equals an independent numpy implementation of the
    views, word merging and argmax rule on the dumped matrices;
  - attend align: text heatmap fits 80 columns, ASCII when not a terminal, colour on a
    terminal unless NO_COLOR; JSON output; errors for views the model does not have.
Run: /usr/bin/python3 tests/test_attention.py
"""
import json
import os
import pty
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402
import reference as R  # noqa: E402

TOL = 1e-5
BASE = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=96, decoder_ffn_dim=96, max_length=20)
CONFIGS = [
    # separate target vocabulary: the decoder can only emit target-SentencePiece pieces, so
    # its output re-tokenises to the same ids more often (for the forced-decoding check)
    ("enc2x4-dec3x2", dict(d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                           decoder_attention_heads=2, share_encoder_decoder_embeddings=False,
                           tie_word_embeddings=False)),
    ("enc3x2-dec1x8", dict(d_model=48, encoder_layers=3, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=8, activation_function="relu",
                           share_encoder_decoder_embeddings=False)),
    ("enc1x4-dec2x4", dict(encoder_layers=1, decoder_layers=2, max_length=24)),
]
WORD_START = "\u2581"


class Env:
    pass


E = Env()


def setup():
    E.work = T.tempdir()
    de = T.corpus_lines("tatoeba", "de", 3000)
    en = T.corpus_lines("tatoeba", "en", 3000)
    E.src_spm = T.train_spm(E.work, "src", de, 800)
    E.tgt_spm = T.train_spm(E.work, "tgt", en, 800)
    E.lines = T.corpus_lines("tatoeba", "de", 6, skip=5000) + [
        "Ein Hund läuft über die Wiese, während zwei Kinder am Ufer spielen.", "ja"]
    E.inp = os.path.join(E.work, "input.txt")
    with open(E.inp, "w", encoding="utf-8") as f:
        f.write("\n".join(E.lines) + "\n")
    E.models = {}
    for seed, (name, over) in enumerate(CONFIGS):
        separate = over.get("share_encoder_decoder_embeddings") is False
        vocab = R.build_vocab(E.src_spm) if separate else R.build_vocab(E.src_spm, E.tgt_spm)
        tvocab = R.build_vocab(E.tgt_spm) if separate else None
        pad = (tvocab or vocab)["<pad>"]
        cfg = dict(BASE, **over)
        cfg.update(vocab_size=len(vocab), decoder_vocab_size=len(tvocab or vocab), pad_token_id=pad,
                   decoder_start_token_id=pad, bad_words_ids=[[pad]])
        # gain 1.5 (weight std x sqrt(fan_in)): attention logits of the size trained models
        # have. Near gain 3 random models turn chaotic: there the float32 reference itself is
        # ~7e-5 away from a float64 run, and no float32 engine can be held to 1e-5.
        m = R.random_model(cfg, seed=seed + 11, bias_std=1.0, gain=1.5)
        m.tok = R.MarianTok(E.src_spm, E.tgt_spm, vocab, tvocab, max_len=m.config["max_position_embeddings"])
        R.calibrate_eos(m, [m.tok.encode(s) for s in T.corpus_lines("tatoeba", "de", 20, skip=800)], 0.1)
        d = os.path.join(E.work, name)
        R.save_hf_dir(m, d, open(E.src_spm, "rb").read(), open(E.tgt_spm, "rb").read(), vocab, tvocab)
        gguf = T.export(d, d + ".gguf")
        eng = d + "-eng.npz"
        T.run_attend(["translate", "-m", gguf, "--dump-attention", eng], open(E.inp, encoding="utf-8").read())
        ref = d + "-ref.npz"
        R.main(["dump", d, "--input", E.inp, "--out", ref])
        E.models[name] = dict(dir=d, gguf=gguf, eng=eng, ref=ref, cfg=R.load_hf_dir(d).config)


# --------------------------------------------------------------------------------------
# Dumps

def check_parity(name):
    M = E.models[name]
    c = M["cfg"]
    ref, eng = np.load(M["ref"]), np.load(M["eng"])
    worst = 0.0
    compared = 0
    for i in range(len(E.lines)):
        assert np.array_equal(ref[f"s{i}/src_ids"], eng[f"s{i}/src_ids"]), f"s{i}: source ids"
        if not np.array_equal(ref[f"s{i}/tgt_ids"], eng[f"s{i}/tgt_ids"]):
            raise AssertionError(f"s{i}: target ids differ: {ref[f's{i}/tgt_ids']} vs {eng[f's{i}/tgt_ids']}")
        for kind, L, H in (("enc_self", c["encoder_layers"], c["encoder_attention_heads"]),
                           ("dec_self", c["decoder_layers"], c["decoder_attention_heads"]),
                           ("cross", c["decoder_layers"], c["decoder_attention_heads"])):
            for l in range(L):
                r, e = ref[f"s{i}/{kind}/l{l}"], eng[f"s{i}/{kind}/l{l}"]
                assert e.dtype == np.float32 and e.shape == r.shape and e.shape[0] == H, \
                    f"s{i}/{kind}/l{l}: {e.dtype} {e.shape} vs reference {r.shape}"
                d = float(np.abs(r - e).max()) if e.size else 0.0
                worst = max(worst, d)
                assert d <= TOL, f"s{i}/{kind}/l{l}: differs by {d:.2e} > {TOL}"
                compared += 1
        assert not any(k.startswith(f"s{i}/{kind}/l") and int(k.rsplit("l", 1)[1]) >= c["decoder_layers"]
                       for k in eng.files for kind in ("cross",)), "extra layers"
    print(f"   {name}: {compared} matrices, largest difference {worst:.1e}")


def check_rows_and_causal(name):
    eng = np.load(E.models[name]["eng"])
    for k in eng.files:
        if "/enc_self/" in k or "/dec_self/" in k or "/cross/" in k:
            a = eng[k]
            if a.size == 0:
                continue
            assert np.abs(a.sum(-1) - 1).max() < 1e-5, f"{k}: rows do not sum to 1"
            assert (a >= 0).all(), f"{k}: negative weights"
            if "/dec_self/" in k:
                T_ = a.shape[-1]
                above = a[:, np.triu_indices(T_, 1)[0], np.triu_indices(T_, 1)[1]]
                assert (above == 0).all(), f"{k}: weights above the diagonal"


def check_npz_layout(name):
    M = E.models[name]
    c = M["cfg"]
    p = subprocess.run(["unzip", "-t", M["eng"]], capture_output=True, text=True)
    assert p.returncode == 0 and "No errors detected" in p.stdout, p.stdout + p.stderr
    eng = np.load(M["eng"])
    want = set()
    for i in range(len(E.lines)):
        want |= {f"s{i}/{k}" for k in ("src_ids", "tgt_ids", "src_pieces", "tgt_pieces", "text", "logprob",
                                                 "score", "normalized_score")}
        want |= {f"s{i}/enc_self/l{l}" for l in range(c["encoder_layers"])}
        want |= {f"s{i}/{k}/l{l}" for k in ("dec_self", "cross") for l in range(c["decoder_layers"])}
    assert set(eng.files) == want, f"keys: extra {set(eng.files) - want}, missing {want - set(eng.files)}"
    for i in range(len(E.lines)):
        S, T_ = len(eng[f"s{i}/src_ids"]), len(eng[f"s{i}/tgt_ids"])
        assert eng[f"s{i}/src_ids"].dtype == np.int32
        assert eng[f"s{i}/src_pieces"].shape == (S,) and eng[f"s{i}/tgt_pieces"].shape == (T_,)
        assert eng[f"s{i}/src_pieces"][-1] == "</s>"
        assert eng[f"s{i}/cross/l0"].shape == (c["decoder_attention_heads"], T_, S)
        assert eng[f"s{i}/enc_self/l0"].shape == (c["encoder_attention_heads"], S, S)
        assert eng[f"s{i}/logprob"].shape == (T_,) and (eng[f"s{i}/logprob"] <= 0).all()
        # greedy: the score is the sum of the tokens' log-probabilities
        assert eng[f"s{i}/score"].shape == (1,)
        assert abs(float(eng[f"s{i}/score"][0]) - float(eng[f"s{i}/logprob"].sum())) < 1e-4
        want_norm = float(eng[f"s{i}/score"][0]) / T_ ** 1.0  # the model's length_penalty
        assert abs(float(eng[f"s{i}/normalized_score"][0]) - want_norm) <= 1e-6 * abs(want_norm)
    assert str(eng["s0/text"][0]) == subprocess.run(
        [T.ATTEND, "translate", "-m", M["gguf"], E.lines[0]], capture_output=True, text=True).stdout.rstrip("\n")


def check_forced(name):
    """Force-decoding the engine's greedy output gives back its ids, scores and attention."""
    M = E.models[name]
    eng = np.load(M["eng"])
    ref_model = R.load_hf_dir(M["dir"])
    checked = 0
    for i, line in enumerate(E.lines):
        text = str(eng[f"s{i}/text"][0])
        out = os.path.join(E.work, f"{name}-forced{i}.npz")
        p = T.run_attend(["align", "-m", M["gguf"], "--target", text, "--dump-attention", out,
                          "--format", "json", line])
        js = json.loads(p.stdout)
        assert js["forced"] is True
        f = np.load(out)
        g_ids, f_ids = eng[f"s{i}/tgt_ids"], f["s0/tgt_ids"]
        n = len(g_ids)  # greedy output cut at max_length: forcing adds </s>, compare the prefix
        if not np.array_equal(f_ids[:n], g_ids) or len(f_ids) - n not in (0, 1):
            continue  # the text re-tokenises differently (SentencePiece is not a bijection)
        checked += 1
        d = np.abs(f["s0/logprob"][:n] - eng[f"s{i}/logprob"]).max()
        assert d <= TOL, f"s{i}: forced log-probs differ by {d:.2e}"
        assert np.allclose(js["target_logprob"][:n], eng[f"s{i}/logprob"], atol=1e-5)
        for k in f.files:
            if "/l" in k:
                g = eng[k.replace("s0/", f"s{i}/")]
                fk = f[k][:, :n, :n] if "/dec_self/" in k else f[k][:, :n] if "/cross/" in k else f[k]
                d = np.abs(fk - g).max() if g.size else 0
                assert d <= TOL, f"s{i} {k}: forced attention differs by {d:.2e}"
        lp, _ = R.force_decode(ref_model, [int(x) for x in f["s0/src_ids"]], [int(x) for x in f["s0/tgt_ids"]])
        d = np.abs(np.array(lp) - f["s0/logprob"]).max()
        assert d <= 1e-4, f"s{i}: forced log-probs differ from reference.force_decode by {d:.2e}"
    assert checked >= 2, f"only {checked} sentences re-tokenised identically"
    print(f"   {name}: {checked} forced decodings match")


# --------------------------------------------------------------------------------------
# Alignments: an independent implementation of the documented rules

def view_matrix(cross, spec, L, H):
    """cross: list over layers of [H, T, S]. Returns the reduced [T, S]."""
    shift = False
    sel = set()
    for item in spec.split(","):
        item = item.strip()
        if item == "shift":
            shift = True
            continue
        ls, hs = item.split(":")
        layers = {"last": [L - 1], "penultimate": [L - 2], "all": list(range(L))}.get(ls)
        if layers is None:
            layers = [int(ls) % L] if int(ls) < 0 else [int(ls)]
        heads = list(range(H)) if hs == "avg" else [int(hs)]
        sel |= {(l, h) for l in layers for h in heads}
    A = np.mean([cross[l][h] for l, h in sorted(sel)], axis=0)
    if shift:
        A = np.concatenate([A[1:], np.zeros_like(A[:1])])
    return A


def words_of(pieces):
    out, w = [], -1
    for p in pieces:
        if p in ("</s>", "<pad>", "<s>"):
            out.append(-1)
            continue
        if p.startswith(WORD_START) or w < 0:
            w += 1
        out.append(w)
    return out


def pharaoh(A, src_pieces, tgt_pieces):
    sw, tw = words_of(src_pieces), words_of(tgt_pieces)
    links = set()
    for t in range(A.shape[0]):
        if tw[t] < 0:
            continue
        row = np.where(np.array(sw) >= 0, A[t], -1.0)
        j = int(np.argmax(row))
        if row[j] > 0:
            links.add((sw[j], tw[t]))
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def check_alignment_output(name):
    M = E.models[name]
    c = M["cfg"]
    L, H = c["decoder_layers"], c["decoder_attention_heads"]
    eng = np.load(M["eng"])
    specs = ["last:0", "all:avg", f"{L - 1}:avg,shift", f"0:{H - 1},{L - 1}:0"]
    if L >= 2:
        specs.append("penultimate:avg")
    inp = open(E.inp, encoding="utf-8").read() + "\n"  # and a blank line
    for spec in specs:
        p = T.run_attend(["translate", "-m", M["gguf"], f"--alignment={spec}", "-b", "3"], inp)
        out = p.stdout.split("\n")
        assert out[-1] == "" and len(out) - 1 == len(E.lines) + 1, f"{spec}: {len(out) - 1} lines out"
        assert out[-2] == " ||| ", f"blank line gave {out[-2]!r}"
        for i in range(len(E.lines)):
            text, al = out[i].split(" ||| ")
            assert text == str(eng[f"s{i}/text"][0])
            cross = [eng[f"s{i}/cross/l{l}"] for l in range(L)]
            A = view_matrix(cross, spec, L, H)
            want = pharaoh(A, [str(x) for x in eng[f"s{i}/src_pieces"]], [str(x) for x in eng[f"s{i}/tgt_pieces"]])
            assert al == want, f"{spec} s{i}: {al!r} != {want!r}"
    p = T.run_attend(["translate", "-m", M["gguf"], f"--alignment={L}:0", "x"], check=False)
    assert p.returncode == 2 and "decoder layers" in p.stderr and p.stdout == "", p.stderr
    p = T.run_attend(["translate", "-m", M["gguf"], "--alignment=last:zero", "x"], check=False)
    assert p.returncode == 2 and "LAYER:HEAD" in p.stderr


# --------------------------------------------------------------------------------------
# attend align

LONG = ("Ich möchte gerne einen großen Kaffee mit Milch und Zucker, bitte, und danach noch ein "
        "Stück Kuchen mit Sahne, weil ich heute Geburtstag habe.")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def width(s):
    return sum(2 if 0x1100 <= ord(ch) <= 0x115f or 0x2e80 <= ord(ch) <= 0xa4cf else 1 for ch in s)


def check_align_text():
    M = E.models["enc1x4-dec2x4"]
    for extra in ([], ["--words"], ["--all-heads"], ["--preset", "all:avg,shift"]):
        p = T.run_attend(["align", "-m", M["gguf"], LONG] + extra)
        lines = p.stdout.split("\n")
        body = lines
        assert max(width(l) for l in body) <= 80, f"{extra}: a line is {max(width(l) for l in body)} wide"
        assert "\x1b" not in p.stdout, "escape codes when stdout is not a terminal"
        assert not set("\u2591\u2592\u2593\u2588") & set(p.stdout), "Unicode shades when not a terminal"
        assert "alignment:" in p.stdout and "log-prob:" in p.stdout
    p = T.run_attend(["align", "-m", M["gguf"], LONG, "--width", "60", "--color", "always"])
    assert "\x1b[38;5;" in p.stdout and "\u2588" in p.stdout
    body = [ANSI.sub("", l) for l in p.stdout.split("\n")]
    assert max(width(l) for l in body) <= 60


def run_on_pty(args, env):
    """Run attend with stdout on a pseudo-terminal; returns what it printed."""
    master, slave = pty.openpty()
    e = dict(os.environ, **env)
    e.pop("NO_COLOR", None) if "NO_COLOR" not in env else None
    p = subprocess.Popen([T.ATTEND] + args, stdout=slave, stderr=subprocess.PIPE, env=e)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    p.wait()
    os.close(master)
    assert p.returncode == 0, p.stderr.read()
    return b"".join(chunks).decode("utf-8", "replace")


def check_align_terminal():
    M = E.models["enc2x4-dec3x2"]
    env = {"TERM": "xterm-256color", "COLUMNS": "80"}
    out = run_on_pty(["align", "-m", M["gguf"], E.lines[0]], env)
    assert "\x1b[38;5;" in out, "no 256-colour escapes on a terminal"
    out = run_on_pty(["align", "-m", M["gguf"], E.lines[0]], dict(env, NO_COLOR="1"))
    assert "\x1b[" not in out and ("\u2588" in out or "\u2593" in out or "\u2592" in out or "\u2591" in out), \
        "NO_COLOR: expected Unicode shading without colour"


def check_align_json_and_errors():
    M = E.models["enc2x4-dec3x2"]
    c = M["cfg"]
    eng = np.load(M["eng"])
    p = T.run_attend(["align", "-m", M["gguf"], E.lines[1], "--layer", "1", "--head", "1", "--format", "json",
                      "--all-heads"])
    js = json.loads(p.stdout)
    A = np.array(js["matrix"])
    np.testing.assert_allclose(A, eng["s1/cross/l1"][1], atol=1e-6)
    assert js["view"] == "1:1" and js["heads_layer"] == 1 and len(js["heads"]) == c["decoder_attention_heads"]
    np.testing.assert_allclose(np.array(js["heads"][0]), eng["s1/cross/l1"][0], atol=1e-6)
    assert js["source_pieces"] == [str(x) for x in eng["s1/src_pieces"]]
    assert js["alignment"] == " ".join(f"{a}-{b}" for a, b in js["links"])
    p = T.run_attend(["align", "-m", M["gguf"], E.lines[1], "--words", "--format", "json"])
    js = json.loads(p.stdout)
    A = np.array(js["matrix"])
    assert A.shape == (len(js["target_words"]), len(js["source_words"]))
    sp = js["source_pieces"]
    ws = words_of(sp)
    want = ["".join(p.replace(WORD_START, "") for p, w in zip(sp, ws) if w == k) for k in range(max(ws) + 1)]
    assert js["source_words"] == want, (js["source_words"], want)
    assert "".join(js["source_words"]) == E.lines[1].replace(" ", "")
    for args, msg in ((["--layer", "3"], "decoder layers"), (["--head", "2"], "head 2"),
                      (["--preset", "bogus"], "LAYER:HEAD"), (["--format", "xml"], "text or json"),
                      (["--preset", "last:0", "--layer", "0"], "not both")):
        p = T.run_attend(["align", "-m", M["gguf"], "Hallo"] + args, check=False)
        assert p.returncode == 2 and msg in p.stderr, (args, p.returncode, p.stderr)
    M1 = E.models["enc3x2-dec1x8"]
    p = T.run_attend(["align", "-m", M1["gguf"], "Hallo", "--preset", "penultimate:avg"], check=False)
    assert p.returncode == 2 and "no penultimate" in p.stderr, p.stderr


def main():
    run = T.Runner()
    try:
        setup()
    except Exception:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
    for name, _ in CONFIGS:
        run.check(f"attention parity {name}", check_parity, name)
        run.check(f"rows sum to 1, causal {name}", check_rows_and_causal, name)
        run.check(f"npz layout, numpy.load, unzip -t {name}", check_npz_layout, name)
        run.check(f"forced decoding reproduces greedy {name}", check_forced, name)
        run.check(f"translate --alignment {name}", check_alignment_output, name)
    run.check("align text heatmap fits 80 columns", check_align_text)
    run.check("align colour on a terminal, NO_COLOR", check_align_terminal)
    run.check("align json and errors", check_align_json_and_errors)
    shutil.rmtree(E.work, ignore_errors=True)
    run.finish()


if __name__ == "__main__":
    main()
