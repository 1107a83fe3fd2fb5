#!/usr/bin/python3
"""The API a CTranslate2 or Hugging Face user reaches for (python/attend/_vocabulary.py,
_stream.py's progress=): pieces and vocabularies, translation from pieces equal to
translation from text, async calls that overlap and leave the event loop running, progress=
as a callable or a tqdm-like bar, attend.quantize. On the shipped model.
Run: /usr/bin/python3 tests/test_python_api.py"""
import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib as T  # noqa: E402

sys.path.insert(0, os.path.join(T.REPO, "python"))
import attend  # noqa: E402

MODEL = os.path.join(T.REPO, "models", "de-en.gguf")
LINES = ["Wo ist der Bahnhof?", "Ich habe Hunger.", "Ein Mann fährt mit dem Fahrrad durch die Stadt."]


def pieces_round_trip(m):
    for line in LINES:
        pieces = m.tokenize_pieces(line)
        assert pieces[-1] == "</s>" and len(pieces) == len(m.tokenize(line)), pieces
        assert m.piece_to_id(pieces) == m.tokenize(line).tolist()
    assert m.piece_to_id("▁Bahnhof") is not None and m.piece_to_id("no-such-piece-xyz") is None
    r = m.translate(LINES[0])
    tgt = m.id_to_piece(r.tgt_ids.tolist())
    assert tgt == list(r.tgt_tokens), (tgt, r.tgt_tokens)
    assert m.detokenize_pieces(tgt) == r.text
    vocab = m.vocabulary
    assert len(vocab) == m.vocab_size("target") and vocab[r.tgt_ids[0]] == tgt[0]
    for bad in (-1, len(vocab), 2 ** 40):
        try:
            m.id_to_piece(bad)
            raise AssertionError(f"id {bad}: no IndexError")
        except IndexError:
            pass
    try:
        m.vocab_size("middle")
        raise AssertionError("a bad side was taken")
    except ValueError:
        pass


def translate_from_pieces(m):
    """translate_batch(pieces) == translate(text), token for token, greedy and beams"""
    batch = [m.tokenize_pieces(line)[:-1] for line in LINES]  # CT2's shape: no </s>
    for options in ({"beam": 1}, {"beam": 4}):
        from_text = m.translate(LINES, **options)
        from_pieces = m.translate_batch(batch, **options)
        for a, b in zip(from_text, from_pieces):
            assert a.tgt_ids.tolist() == b.tgt_ids.tolist() and a.text == b.text, (options, a.text, b.text)
    try:
        m.translate_batch([["▁Hallo", "no-such-piece-xyz"]])
        raise AssertionError("an unknown piece was taken")
    except attend.AttendError as e:
        assert "no-such-piece-xyz" in str(e)
    try:
        m.translate_batch("Hallo")
        raise AssertionError("a str was taken as pieces")
    except TypeError:
        pass


def async_calls_overlap(m):
    """two awaits run at once (their batches interleave in time) and the loop keeps ticking"""
    stamps = {"a": [], "b": []}
    long_lines = [f"Ein Mann fährt mit dem Fahrrad durch die Stadt {i}." for i in range(12)]

    async def main():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.005)
                ticks += 1

        t = asyncio.create_task(ticker())
        results = await asyncio.gather(
            *(m.translate_async(long_lines, batch_size=1, threads=1,
                                progress=lambda d, n, k=k: stamps[k].append(time.monotonic()))
              for k in ("a", "b")))
        done.set()
        await t
        return results, ticks

    (ra, rb), ticks = asyncio.run(main())
    assert [r.text for r in ra] == [r.text for r in rb] == [r.text for r in m.translate(long_lines)]
    a, b = stamps["a"], stamps["b"]
    assert len(a) == len(b) == len(long_lines)
    assert a[0] < b[-1] and b[0] < a[-1], "the two calls ran one after the other"
    assert ticks >= 3, f"the event loop ticked {ticks} times while the calls ran: blocked"


def progress_callable_and_bar(m):
    seen = []
    lines = LINES + [""]
    m.translate(lines, batch_size=1, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(lines), len(lines)) and [d for d, _ in seen] == sorted(d for d, _ in seen), seen

    class Bar:  # what translate uses of a tqdm bar
        total = None
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    m.translate(LINES, progress=bar)
    assert bar.total == len(LINES) and bar.n == len(LINES)
    try:
        m.translate(LINES, progress="yes")
        raise AssertionError("progress='yes' was taken")
    except TypeError:
        pass


def suppress_removes_sequences(m):
    """suppress= bans what the model would produce: a piece everywhere, a pair only in order"""
    line = LINES[0]
    for options in ({"beam": 1}, {"beam": 4}, {"sample": True, "seed": 3}):
        base = list(m.translate(line, **options).tgt_tokens)
        assert "▁station" in base or options.get("sample"), (options, base)
        one = m.translate(line, suppress=[["▁station"]], **options)
        assert "▁station" not in one.tgt_tokens, (options, one.tgt_tokens)
        by_id = m.translate(line, suppress=[[m.piece_to_id("▁station", "target")]], **options)
        assert list(by_id.tgt_tokens) == list(one.tgt_tokens), "ids and pieces suppress differently"
    pair = list(m.translate(line, suppress=[["▁the", "▁station"]]).tgt_tokens)
    assert all(pair[i:i + 2] != ["▁the", "▁station"] for i in range(len(pair))), pair
    assert "▁the" in pair, f"a pair's first piece alone must stay allowed: {pair}"
    assert m.translate(line, suppress=[]).text == m.translate(line).text
    unk = m.config.unk_id
    assert unk not in m.translate(LINES, disable_unk=True)[0].tgt_ids.tolist()
    for bad, err in (([[99999]], attend.AttendError), ([["no-such-piece-xyz"]], attend.AttendError),
                     ("▁station", TypeError), ([[]], ValueError), ([["▁the", 4]], TypeError)):
        try:
            m.translate(line, suppress=bad)
            raise AssertionError(f"suppress={bad!r} was taken")
        except err:
            pass


def plots_share_scale_and_clean_labels(m):
    try:
        import matplotlib
    except ImportError:
        print("   (matplotlib missing: the SVG checks only)")
        matplotlib = None
    r = m.translate(LINES[0], attention=True)
    svg = attend.heatmap_svg(r.view(), r.tgt_tokens, r.src_tokens)
    assert svg.count("<rect") == len(r.tgt_tokens) * len(r.src_tokens) + 1 + 21, "no colour legend"
    assert "\u2581" not in r._repr_html_().split("cross-attention")[-1], "▁ in the labels of the repr"
    if matplotlib is None:
        return
    matplotlib.use("Agg")
    ax = attend.plot(r, vmax=0.5, alignment=True)
    assert ax.images[0].get_clim() == (0.0, 0.5)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[:4] == ["Wo", "ist", "der", "Bahnhof"], labels
    assert len(ax.collections) == 1 and len(ax.collections[0].get_offsets()) == len(r.tgt_tokens)
    fig = attend.plot_grid(r, layers=[0, -1], heads=[0, 1])
    clims = {a.images[0].get_clim() for a in fig.axes if a.images}
    assert len([a for a in fig.axes if a.images]) == 4 and len(clims) == 1, clims
    peak = max(float(r.cross[li, h].max()) for li in (0, -1) for h in (0, 1))
    assert abs(clims.pop()[1] - peak) < 1e-6, "the shared scale is not the largest weight of the panels"


def streaming_equals_translate(m):
    """generate_tokens yields translate()'s tokens one by one (greedy and one sample), with
    their log-probabilities, </s> last; leaving early stops the decoding"""
    line = LINES[2]
    for options in ({}, {"sample": True, "seed": 5}):
        steps = list(m.generate_tokens(line, **options))
        r = m.translate(line, split=False, **(options or {"beam": 1}))
        assert [s.id for s in steps] == r.tgt_ids.tolist(), (options, steps, r.tgt_ids)
        assert [s.piece for s in steps] == list(r.tgt_tokens)
        assert [s.step for s in steps] == list(range(len(steps)))
        assert max(abs(s.logprob - float(x)) for s, x in zip(steps, r.logprob)) < 1e-5
    # early exit: closing after the first token takes a fraction of the whole decoding
    long = dict(min_length=250, max_length=256)
    t0 = time.monotonic()
    m.translate([line] * 8, beam=1, split=False, **long)
    whole = (time.monotonic() - t0) / 8
    t0 = time.monotonic()
    g = m.generate_tokens(line, **long)
    first = next(g)
    g.close()
    closed = time.monotonic() - t0
    assert first.step == 0 and closed < whole / 3, f"closing took {closed:.2f} s, the whole {whole:.2f} s"
    for bad in ({"beam": 4}, {"n_best": 2}):
        try:
            next(m.generate_tokens(line, **bad))
            raise AssertionError(f"{bad} was taken")
        except ValueError:
            pass


def forked_child_translates(m):
    """main-thread calls run on a kept library thread: a forked child (which has no copy of
    it) must make its own instead of waiting for it forever"""
    want = m.translate(LINES[0]).text
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, m.translate(LINES[0]).text.encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child hangs in translate()")
    got = os.read(r, 1000).decode()
    os.close(r)
    assert got == want, (got, want)


def quantize_writes_int8():
    with tempfile.TemporaryDirectory() as d:
        missing = os.path.join(d, "missing.gguf")
        try:
            attend.quantize(missing, os.path.join(d, "out.gguf"))
            raise AssertionError("a missing input was taken")
        except attend.AttendError as e:
            assert "missing.gguf" in str(e), e
        cfg = attend.Model(MODEL).config
        if "int8" in str(getattr(cfg, "dtype", "")):
            return  # the shipped model is int8 already: the error path is what is checked
        out = os.path.join(d, "int8.gguf")
        attend.quantize(MODEL, out)
        with attend.Model(out) as q:
            assert q.translate(LINES[0]).text, "the int8 model translates nothing"
        assert os.path.getsize(out) < os.path.getsize(MODEL)


def main():
    run = T.Runner()
    with attend.Model(MODEL, threads=1) as m:
        run.check("pieces: tokenize_pieces, piece_to_id, id_to_piece, vocabulary, detokenize_pieces",
                  pieces_round_trip, m)
        run.check("translate_batch(pieces) equals translate(text), greedy and beams", translate_from_pieces, m)
        run.check("translate_async: two awaits overlap, the event loop keeps running", async_calls_overlap, m)
        run.check("progress= a callable and a tqdm-like bar", progress_callable_and_bar, m)
        run.check("generate_tokens streams translate()'s tokens (greedy, sampling); close stops it",
                  streaming_equals_translate, m)
        run.check("a forked child translates (its own library thread)", forked_child_translates, m)
        run.check("plots: shared colour scale on a grid, vmax=, alignment marks, clean labels, SVG legend",
                  plots_share_scale_and_clean_labels, m)
        run.check("suppress= removes a piece and a pair the model would produce; disable_unk",
                  suppress_removes_sequences, m)
    run.check("attend.quantize: int8 copy translates; a missing input is AttendError", quantize_writes_int8)
    run.finish()


if __name__ == "__main__":
    main()
