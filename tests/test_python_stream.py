#!/usr/bin/python3
"""Long inputs in the Python package: Model.translate_iter (streaming in input order, lazy,
equal to translate()), progress=True, and Model.translate_ids (token ids in, the same
Results as translate() of the text). On the shipped model models/de-en.gguf, greedy and
beams, one thread. Run: /usr/bin/python3 tests/test_python_stream.py"""
import io
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402
from attend import _stream  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
# blank lines and lengths that the library sorts into another order than the input's
LINES = ["Ich habe Hunger.", "", "Wo ist der Bahnhof?",
         "Ein Mann fährt mit dem Fahrrad durch die Stadt.", "Ja.",
         "Zwei Kinder spielen im Schnee.", "   ", "Kannst du mir bitte helfen?",
         "Die Frau liest ein Buch im Park, während ihr Hund neben ihr schläft.", "Danke!"]
M = None


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def raises(exc, fn):
    try:
        fn()
    except exc:
        return
    except Exception as e:  # noqa: BLE001 (the wrong kind fails the check)
        raise AssertionError(f"expected {exc.__name__}, got {type(e).__name__}: {e}") from None
    raise AssertionError(f"expected {exc.__name__}, nothing raised")


def model():
    global M
    if M is None:
        M = attend.Model(MODEL, threads=1)
    return M


def same(a, b, what):
    """Two Results bit for bit: text, score, ids, log-probs, attention, n-best."""
    check(a.text == b.text and a.source == b.source, f"{what}: {a.text!r} != {b.text!r}")
    check(a.score == b.score, f"{what}: score {a.score} != {b.score}")
    for name in ("tgt_ids", "logprob", "cross", "enc_self", "dec_self"):
        x, y = getattr(a, name), getattr(b, name)
        check((x is None) == (y is None) and (x is None or np.array_equal(x, y)),
                f"{what}: {name} differs")
    check([(h.text, h.score) for h in a.nbest] == [(h.text, h.score) for h in b.nbest],
            f"{what}: n-best differs")


def iter_equals_translate():
    m = model()
    for opts in ({"greedy": True, "attention": True}, {"beam": 3, "n_best": 2}):
        whole = m.translate(LINES, **opts)
        for bs, look in ((1, None), (3, None), (2, 5), (32, None)):
            got = list(m.translate_iter(iter(LINES), batch_size=bs, lookahead=look, **opts))
            check(len(got) == len(LINES), f"{len(got)} results for {len(LINES)} lines")
            for i, (a, b) in enumerate(zip(whole, got)):
                same(a, b, f"{opts} batch_size={bs} lookahead={look} line {i}")


def iter_is_lazy_and_in_order():
    """A generator that records how far it was read: after each result, at most lookahead
    lines beyond it have been taken, and results come in input order."""
    m = model()
    taken = []

    def source():
        for i, line in enumerate(LINES):
            taken.append(i)
            yield line

    it = m.translate_iter(source(), batch_size=2, greedy=True)
    check(taken == [], f"lines read before the first next(): {taken}")
    seen = []
    for k, r in enumerate(it):
        seen.append(r.source)
        check(len(taken) <= k + 2, f"after result {k}: {len(taken)} lines read (look-ahead 2)")
    check(seen == LINES, f"results out of order: {seen}")
    # a file's lines keep their newline: dropped (and a \r before it), as attend translate reads
    f = io.StringIO("Ich habe Hunger.\r\nDanke!\n\nJa.")
    texts = [r.text for r in m.translate_iter(f, greedy=True)]
    want = [r.text for r in m.translate(["Ich habe Hunger.", "Danke!", "", "Ja."], greedy=True)]
    check(texts == want, f"file lines: {texts} != {want}")


def iter_refuses_early():
    m = model()
    for bad, exc in (("Ich habe Hunger.", TypeError), (42, TypeError)):
        raises(exc, lambda: m.translate_iter(bad))
    taken = []

    def source():
        taken.append(1)
        yield "Hallo"
    raises(TypeError, lambda: m.translate_iter(source(), num_beams=2))
    raises(ValueError, lambda: m.translate_iter(source(), batch_size=0))
    raises(attend.AttendError, lambda: m.translate_iter(source(), beam=2, n_best=3))
    check(taken == [], "a refused call read its input")


def iter_prefix_per_line():
    """target_prefix as one prefix per line (a list or a generator, None for none): the
    Results of translate() with the same list, whatever the group size; fewer or more
    prefixes than lines is a ValueError; one str still goes to every line."""
    m = model()
    prefixes = ["The" if i % 3 == 0 else None if i % 3 == 1 else "A" for i in range(len(LINES))]
    whole = m.translate(LINES, greedy=True, target_prefix=prefixes)
    check(any(p and not r.text.startswith(p) for p, r in zip(prefixes, m.translate(LINES, greedy=True))),
          "the prefixes change nothing here: pick others")
    for bs, src in ((1, list), (3, iter), (32, list)):
        got = list(m.translate_iter(iter(LINES), batch_size=bs, greedy=True, target_prefix=src(prefixes)))
        check(len(got) == len(LINES), f"{len(got)} results for {len(LINES)} lines")
        for i, (a, b) in enumerate(zip(whole, got)):
            same(a, b, f"prefix per line, batch_size={bs} line {i}")
    raises(ValueError, lambda: list(m.translate_iter(LINES, batch_size=2, target_prefix=prefixes[:-1])))
    raises(ValueError, lambda: list(m.translate_iter(LINES, batch_size=2, target_prefix=prefixes + ["X"])))
    raises(TypeError, lambda: m.translate_iter(LINES, target_prefix=42))
    one = [r.text for r in m.translate_iter(LINES[:3], greedy=True, target_prefix="The")]
    check(one == [r.text for r in m.translate(LINES[:3], greedy=True, target_prefix="The")], f"one str: {one}")


class Tty(io.StringIO):
    def isatty(self):
        return True


def progress_lines():
    m = model()
    old_sparse, old_tty, old_err = _stream.SPARSE_SECONDS, _stream.TTY_SECONDS, sys.stderr
    try:
        _stream.SPARSE_SECONDS = _stream.TTY_SECONDS = 0  # a line for every batch
        sys.stderr = io.StringIO()
        m.translate(LINES, greedy=True, batch_size=3)
        check(sys.stderr.getvalue() == "", "progress is off by default")
        m.translate(LINES, greedy=True, batch_size=3, progress=True)
        out = sys.stderr.getvalue().splitlines()
        check(len(out) >= 3 and "\r" not in sys.stderr.getvalue(), f"not a tty: {out}")
        check(out[-1].startswith(f"attend: {len(LINES)} of {len(LINES)} lines, ")
                and out[-1].endswith(" lines/s"), f"last line: {out[-1]!r}")
        counts = [int(x.split()[1]) for x in out]
        check(counts == sorted(counts), f"counts go back: {counts}")
        sys.stderr = Tty()
        list(m.translate_iter(LINES, batch_size=2, greedy=True, progress=True))
        s = sys.stderr.getvalue()
        check(s.count("\n") == 1 and s.endswith("\n") and s.count("\r") >= 5,
                f"a terminal's line is rewritten in place: {s!r}")
        check(f"attend: {len(LINES)} lines, " in s.rsplit("\r", 1)[1], f"final: {s!r}")
        _stream.SPARSE_SECONDS = 3600.0
        sys.stderr = io.StringIO()
        m.translate(LINES, greedy=True, batch_size=1, progress=True)
        check(len(sys.stderr.getvalue().splitlines()) == 1,
                f"sparse when not a tty: {sys.stderr.getvalue()!r}")
    finally:
        _stream.SPARSE_SECONDS, _stream.TTY_SECONDS, sys.stderr = old_sparse, old_tty, old_err
    raises(TypeError, lambda: m.translate(LINES, progress="yes"))


def ids_equal_translate():
    m = model()
    texts = [x for x in LINES if x.strip()]
    ids = [m.tokenize(x) for x in texts]
    for opts in ({"greedy": True, "attention": True, "logits": True}, {"beam": 4, "n_best": 2}):
        want = m.translate(texts, **opts)
        for given in (ids, [list(map(int, a)) for a in ids]):
            got = m.translate_ids(given, **opts)
            check(len(got) == len(texts), "one Result per id list")
            for i, (a, b) in enumerate(zip(want, got)):
                b.source = a.source  # translate_ids has no text to give back
                same(a, b, f"ids {opts} {i}")
                check(np.array_equal(a.src_ids, b.src_ids) and a.src_tokens == b.src_tokens,
                        f"ids {i}: source ids or pieces differ")
                if a.logits is not None:
                    check(np.array_equal(a.logits, b.logits), f"ids {i}: logits differ")
    one = m.translate_ids(ids[0], greedy=True)
    check(isinstance(one, attend.Result) and one.text == want[0].text, "one sentence -> one Result")
    check(m.translate_ids(np.stack([ids[1], ids[1]]))[1].text == want[1].text, "a 2-D array")


def ids_errors():
    m = model()
    v = m.config.vocab_size
    for bad in ([[5, v]], [[-1, 0]], [[]], [np.array([3, v + 7])]):
        raises(attend.AttendError, lambda: m.translate_ids(bad))
    try:
        m.translate_ids([[5, 6, 0], [5, v + 1, 0]])
    except attend.AttendError as e:
        check(f"id {v + 1}" in str(e) and "ids 1" in str(e), f"message: {e}")
    raises(attend.AttendError, lambda: m.translate_ids([list(range(1, 3000))]))
    for bad in ("Hallo", [["a"]], [[1.5, 2.0]], 7):
        raises(TypeError, lambda: m.translate_ids(bad))
    raises(TypeError, lambda: m.translate_ids([[1, 0]], src_lang="de"))
    check(m.translate_ids([[5, 6, 0]]) is not None, "the model is usable after errors")


def main():
    run = T.Runner()
    for name, fn in [("translate_iter equals translate() bit for bit", iter_equals_translate),
                     ("translate_iter reads lazily, yields in order", iter_is_lazy_and_in_order),
                     ("translate_iter refuses bad calls before reading", iter_refuses_early),
                     ("translate_iter: target_prefix per line, read in step", iter_prefix_per_line),
                     ("progress=True: sparse lines, in place on a terminal, off by default",
                      progress_lines),
                     ("translate_ids equals translate() of the same text", ids_equal_translate),
                     ("translate_ids: bad ids are AttendError / TypeError", ids_errors)]:
        run.check(name, fn)
    run.finish()


if __name__ == "__main__":
    main()
