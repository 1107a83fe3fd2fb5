"""Shared helpers for the Python tests: paths, a tiny test runner, SentencePiece models
trained on the shared corpora, random HF-style models exported to .gguf."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "tools")
ATTEND = os.path.join(REPO, "build", "attend")
PYTHON = sys.executable
sys.path.insert(0, TOOLS)

import data_paths  # noqa: E402  (tools/data_paths.py: the one place that finds the corpora)

# the shared corpora: ../shared/data beside the checkout, or $ATTEND_DATA
DATA = data_paths.data_dir()
MissingData = data_paths.MissingData


def data_path(*parts):
    """A file or folder of the shared corpora, e.g. data_path("opus-mt-real-files"); one clear
    MissingData error (the file, where it looked) when it is not there."""
    return data_paths.corpus(*parts)


def corpus_lines(name, side, n, skip=0):
    """n lines of a shared corpus file, e.g. corpus_lines('tatoeba', 'de', 100)."""
    files = {
        "tatoeba": f"tatoeba-deu-eng/tatoeba-deu-eng.train.{side}.gz",
        "multi30k": f"multi30k/train.{side}.gz",
    }
    path = data_path(files[name])
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < skip:
                continue
            if len(out) >= n:
                break
            out.append(line.rstrip("\n"))
    return out


def train_spm(workdir, prefix, lines, vocab_size, model_type="unigram", **options):
    """Train a SentencePiece model (unigram, or model_type "bpe") on lines; returns the .model
    path. options: trainer settings other than these defaults."""
    import sentencepiece as spm
    txt = os.path.join(workdir, prefix + ".txt")
    with open(txt, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    settings = dict(character_coverage=1.0, minloglevel=2, seed_sentencepiece_size=100000, num_threads=1)
    settings.update(options)
    spm.SentencePieceTrainer.train(input=txt, model_prefix=os.path.join(workdir, prefix),
                                   vocab_size=vocab_size, model_type=model_type, **settings)
    return os.path.join(workdir, prefix + ".model")


def bilingual_lines():
    """German and English text for a SentencePiece model that serves both: 3000 Tatoeba and
    2000 Multi30k lines of each."""
    return corpus_lines("tatoeba", "de", 3000) + corpus_lines("tatoeba", "en", 3000) + \
        corpus_lines("multi30k", "de", 2000) + corpus_lines("multi30k", "en", 2000)


def export(hf_dir, out, dtype="f32", exporter="export_marian.py"):
    subprocess.run([PYTHON, os.path.join(TOOLS, exporter), hf_dir, out, "--dtype", dtype,
                    "--name", "test"], check=True, stdout=subprocess.DEVNULL)
    return out


def random_gguf(d, seed=3, **dims):
    """A random MarianMT model (reference.random_model, gain 1.5, bias std 0.5) over
    SentencePiece models of 600 pieces trained on 2,000 Tatoeba lines each side, saved as an
    HF directory d/m and exported to d/m.gguf (f32). dims: config overrides (d_model,
    layers, heads, ffn dims, max_length ...). Returns the .gguf path."""
    import reference as R
    sspm = train_spm(d, "src", corpus_lines("tatoeba", "de", 2000), 600)
    tspm = train_spm(d, "tgt", corpus_lines("tatoeba", "en", 2000), 600)
    vocab = R.build_vocab(sspm, tspm)
    pad = vocab["<pad>"]
    cfg = dict(vocab_size=len(vocab), decoder_vocab_size=len(vocab), pad_token_id=pad,
               decoder_start_token_id=pad, bad_words_ids=[[pad]], **dims)
    m = R.random_model(cfg, seed=seed, bias_std=0.5, gain=1.5)
    hf = os.path.join(d, "m")
    R.save_hf_dir(m, hf, open(sspm, "rb").read(), open(tspm, "rb").read(), vocab)
    return export(hf, hf + ".gguf")


def smallest_top2_gap(logits):
    """The smallest gap between a step's two best logits over the rows of logits [T, V] (a
    greedy run's): a decision closer than a test's tie gap may go either way in float32."""
    import numpy as np
    top2 = np.sort(logits, axis=1)[:, -2:]
    return (top2[:, 1] - top2[:, 0]).min()


def check_nbest(what, hyps, ref, tol):
    """attend's hypotheses hyps (Python's: ids, score, normalized_score) against the reference
    beam search's ref, best first, pairwise: the same ids, normalized_score within tol of HF's
    sequence score, score of its sum of log-probabilities."""
    for h, r in zip(hyps, ref):
        assert h.ids.tolist() == r.ids, f"{what}: {h.ids.tolist()} != reference {r.ids}"
        assert abs(h.normalized_score - r.score) <= tol, f"{what}: normalized_score {h.normalized_score} vs {r.score}"
        assert abs(h.score - r.sum_logprobs) <= tol, f"{what}: score {h.score} vs {r.sum_logprobs}"


def run_attend(args, input_text=None, env=None, check=True, timeout=None):
    """Run build/attend; with timeout (seconds) a hung run raises subprocess.TimeoutExpired."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([ATTEND] + args, input=input_text, capture_output=True, text=True, env=e,
                       errors="replace", timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"attend {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    return p


def available_isas():
    """Kernel sets this CPU can run, as attend reports them."""
    out = []
    for isa in ("generic", "avx2", "avx512"):
        probe = subprocess.run([ATTEND, "isa"], env=dict(os.environ, ATTEND_ISA=isa),
                               capture_output=True, text=True)
        if probe.returncode == 0:
            out.append(isa)
    return out or ["generic"]


class Runner:
    """Collects named checks; prints 'N passed, M failed' and exits accordingly."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, fn, *args):
        try:
            fn(*args)
            print(f"ok   {name}", flush=True)
            self.passed += 1
        except MissingData as e:
            # the corpora are not there: one failure that says so, not one per check after it
            print(f"FAIL {name}: {e}", flush=True)
            self.failed += 1
            self.finish()
        except Exception:
            print(f"FAIL {name}", flush=True)
            traceback.print_exc()
            self.failed += 1

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


def tempdir():
    return tempfile.mkdtemp(prefix="attend-test-")
