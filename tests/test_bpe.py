#!/usr/bin/python3
"""The byte-level BPE tokenizer (tokenizer/bpe.c, GPT-2 / Whisper) against two independent
implementations: tools/reference_bpe.py (Python, HF's slow algorithm, the regex module) and
the npm package js-tiktoken's GPT-2 encoder (JavaScript, run with node).

Run as `/usr/bin/python3 tests/test_bpe.py` (after `make build/tests/bpe_driver npm-tiktoken`;
the driver is built here when missing; $BPE_DRIVER picks another build of it, e.g.
build-san/tests/bpe_driver). The Whisper tokenizer folder comes from
tools/whisper_tokenizer_files.py over js-tiktoken's GPT-2 ranks. Checks: the generated Unicode
tables regenerate identically; the folder's ids and merges; 2,500 Multi30k, Tatoeba and WMT
news lines, German and English, C == reference == js-tiktoken, and decode(encode(x)) == x;
hostile inputs (empty, every byte, invalid UTF-8, NUL, emoji, CJK, combining marks, digits,
whitespace runs, contractions, typed special tokens) C == reference, their bytes kept; a 1 MB
word in bounded time; decoding with and without skip_special, Whisper's prompt and timestamp
rules, errors="replace" against Python's decoder; the multilingual layout.
"""
import gzip
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testlib as T  # noqa: E402

import gen_unicode_classes  # noqa: E402  (tools/, on the path through testlib)
import reference_bpe as R  # noqa: E402
import whisper_tokenizer_files as W  # noqa: E402

REPO = os.path.dirname(HERE)
DRIVER = os.environ.get("BPE_DRIVER", os.path.join(REPO, "build", "tests", "bpe_driver"))  # e.g. build-san/...
NPM = os.path.join(REPO, "build", "npm", "node_modules", "js-tiktoken")
EOT, SOT, EN, TRANSCRIBE, SOP, NOTS, TS0 = 50256, 50257, 50258, 50358, 50360, 50362, 50363


class Driver:
    """tests/bpe_driver on a model written from a tokenizer folder, one request per line."""

    def __init__(self, workdir, folder=None, tokens=None, merges=None):
        if folder:
            tokens, merges = model_of(folder)
        path = os.path.join(workdir, "model.%d" % id(self))
        with open(path, "w") as f:
            f.write(f"{len(tokens)} {len(merges)}\n")
            for kind, tok in tokens:
                f.write(f"{kind} {tok.hex() if tok is not None else '-'}\n")
            f.writelines(m.hex() + "\n" for m in merges)
        self.proc = subprocess.Popen([DRIVER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().rstrip("\n")

    def encode(self, data):
        rc, *ids = self.ask("e " + data.hex()).split(" ")
        assert rc == "0", f"bpe_encode returned {rc} on {data[:60]!r}"
        return [int(i) for i in ids]

    def decode(self, ids, skip=False):
        return bytes.fromhex(self.ask(f"d {int(skip)} " + " ".join(map(str, ids)))).decode("utf-8")

    def whisper(self, ids, skip=False):
        return bytes.fromhex(self.ask(f"w {int(skip)} {SOP} {SOT} " + " ".join(map(str, ids)))).decode("utf-8")

    def strip(self, text):
        return bytes.fromhex(self.ask("t " + text.encode("utf-8").hex())).decode("utf-8")

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def model_of(folder):
    """(kind, bytes) per id and the merges (bytes) of a tokenizer folder, as an exporter would
    give them to bpe_new: special tokens BPE_SPECIAL (1), other added tokens BPE_ADDED (2)."""
    ref = R.Tokenizer.load(folder)
    n = max(ref.id_to_token) + 1
    tokens = [(0, None)] * n
    for i, tok in ref.id_to_token.items():
        kind = 1 if i in ref.special_ids else 2 if tok in ref.added else 0
        tokens[i] = (kind, tok.encode("utf-8"))
    with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
        merges = [m.encode("utf-8") for m in f.read().split("\n")[1:] if m]
    return tokens, merges


def node_encode(texts):
    """js-tiktoken's GPT-2 ids of each text (all valid UTF-8, no <|endoftext|>)."""
    script = ("const {getEncoding} = require(process.argv[1]); const e = getEncoding('gpt2');"
              "let s = ''; process.stdin.on('data', d => s += d); process.stdin.on('end', () => "
              "console.log(JSON.stringify(JSON.parse(s).map(t => e.encode(t)))));")
    p = subprocess.run(["node", "-e", script, os.path.join(NPM, "dist", "index.cjs")], input=json.dumps(texts),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def corpus_lines():
    """2,500 lines: Multi30k, Tatoeba and WMT news, German and English."""
    files = [("multi30k", "train.{}.gz", 500), ("tatoeba-deu-eng", "tatoeba-deu-eng.train.{}.gz", 500),
             ("wmt-newstest-extra-deen", "train.{}.gz", 250)]
    out = []
    for folder, name, n in files:
        for side in ("de", "en"):
            with gzip.open(T.data_path(folder, name.format(side)), "rt", encoding="utf-8") as f:
                out += [next(f).rstrip("\n") for _ in range(n)]
    return out


def hostile_inputs():
    """Bytes that a tokenizer must survive, valid UTF-8 or not."""
    rnd = random.Random(7)
    return [
        b"", b" ", b"\x00", b"a\x00b", bytes(range(256)), bytes(range(255, -1, -1)),
        b"\xff\xfe kaputt \xe2\x82", b"\xc3", b"\xed\xa0\x80 surrogate", b"\xf4\x90\x80\x80 past",
        b"\xc0\xaf overlong", b"\xe0\x80\x80", b"x\x80\x80\x80y", b"'\xff's",
        "Grüße 😀👍🏽 und 🇩🇪!".encode(), "日本語のテキスト、中文文本。한국어".encode(),
        "e\u0301 a\u0308 n\u0303\u0323 \u0915\u093f".encode(), "12345 ٣٤٥ ½ Ⅻ 3.14 1,000,000".encode(),
        b"   a  b\t\t c \n\n\n d   ", b"\r\n\r\n", b" \t \x0b\x0c\x1c\x1d\x85", "\u00a0\u2003x\u3000 y\u2028".encode(),
        b"it's we've I'm they'll he'd don't WE'RE 'S ''s 'x", b"<|endoftext|>", b"<|endoftext|><|endoftext|>",
        b"Hallo<|de|> Welt<|0.00|>x<|30.00|><|notatoken|><|endoftext", b"<|<|en|>|>",
        b" <|startoftranscript|> ", "\ufeff BOM \u200b zero width".encode(),
        bytes(rnd.randrange(256) for _ in range(3000)),
        "".join(chr(rnd.choice([rnd.randrange(0x20, 0x3000), rnd.randrange(0x1f300, 0x1fa00)]))
                for _ in range(3000)).encode("utf-8", "surrogatepass"),
    ]


def piece_bytes(ref, ids):
    """The bytes that ids' tokens stand for (added tokens as their text)."""
    out = bytearray()
    for i in ids:
        tok = ref.id_to_token[i]
        out += tok.encode() if tok in ref.added else bytes(ref.dec[c] for c in tok)
    return bytes(out)


# ---- checks ---------------------------------------------------------------------------

def check_tables_regenerate(work):
    out = os.path.join(work, "bpe_unicode.c")
    subprocess.run([sys.executable, gen_unicode_classes.__file__, "-o", out], check=True)
    committed = open(os.path.join(REPO, "tokenizer", "bpe_unicode.c")).read()
    assert open(out).read() == committed, "tokenizer/bpe_unicode.c differs from a fresh generation: rerun the tool"


def check_folder(folder, ref):
    with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "#version: 0.2" and len(lines) == 50002 and lines[-1] == "", len(lines)
    assert lines[1:8] == ["Ġ t", "Ġ a", "h e", "i n", "r e", "o n", "Ġt he"], lines[1:8]
    expect = {"<|endoftext|>": EOT, "<|startoftranscript|>": SOT, "<|en|>": EN, "<|su|>": 50356,
              "<|translate|>": 50357, "<|transcribe|>": TRANSCRIBE, "<|startoflm|>": 50359,
              "<|startofprev|>": SOP, "<|nocaptions|>": 50361, "<|notimestamps|>": NOTS,
              "<|0.00|>": TS0, "<|30.00|>": 51863, "Hello": 15496, "Ġworld": 995}
    for tok, i in expect.items():
        assert ref.vocab[tok] == i, (tok, ref.vocab[tok], i)
    assert len(ref.id_to_token) == 51864 and max(ref.id_to_token) == 51863
    assert len(ref.special_ids) == 1 + 1 + 99 + 6, len(ref.special_ids)  # timestamps are not special


def check_corpus(drv, ref, lines):
    ours = [drv.encode(t.encode()) for t in lines]
    theirs = node_encode(lines)
    for t, a, c in zip(lines, ours, theirs):
        b = ref.encode(t)
        assert a == b == c, f"{t!r}: C {a} reference {b} js-tiktoken {c}"
        assert drv.decode(a) == t, t
    n_ids = sum(map(len, ours))
    assert n_ids > 40000, n_ids
    print(f"     {len(lines)} lines, {n_ids} ids: C == reference == js-tiktoken, round trip exact")


def check_hostile(drv, ref):
    for data in hostile_inputs():
        a, b = drv.encode(data), ref.encode(data)
        assert a == b, f"{data[:50]!r}: C {a[:20]} reference {b[:20]}"
        assert piece_bytes(ref, a) == data, f"{data[:50]!r}: bytes not kept"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            assert drv.decode(a) == data.decode("utf-8", "replace"), data[:50]
            continue
        assert drv.decode(a) == text, data[:50]


def check_hostile_node(drv):
    """js-tiktoken agrees on the valid hostile inputs without added tokens, except where the
    JavaScript \\s is not the regex module's (U+0085, U+FEFF)."""
    texts = []
    for data in hostile_inputs():
        try:
            t = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "<|" not in t and "\x85" not in t and "\ufeff" not in t:
            texts.append(t)
    for t, c in zip(texts, node_encode(texts)):
        assert drv.encode(t.encode()) == c, t[:50]
    assert len(texts) >= 12, len(texts)


def check_special_typed(drv):
    ids = drv.encode(b"Hallo<|de|> Welt<|0.00|>x<|endoftext|><|endoftext")
    assert EN + 2 in ids and TS0 in ids and ids.count(EOT) == 1, ids  # <|de|>
    assert ids[-1] != EOT and drv.decode(ids) == "Hallo<|de|> Welt<|0.00|>x<|endoftext|><|endoftext"
    assert EN in drv.encode(b"<|<|en|>|>")


def check_long_word(drv, ref):
    rnd = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyzäöüßABCDEFGHIJKLMNOPQRSTUVWXYZ"
    word = "".join(rnd.choice(letters) for _ in range(1_000_000)).encode()[:1_000_000]
    word = word.decode("utf-8", "ignore").encode()
    t0 = time.time()
    ids = drv.encode(word)
    dt = time.time() - t0
    assert dt < 10, f"{dt:.1f} s for a 1 MB word"
    assert drv.decode(ids) == word.decode()
    small = word[:3000].decode("utf-8", "ignore").encode()
    assert drv.encode(small) == ref.encode(small)
    same = b"Hallo" * 40000
    assert drv.encode(same) == ref.encode(same)
    print(f"     1 MB word: {len(ids)} ids in {dt:.2f} s (driver round trip included)")


def check_decode_special(drv, ref):
    text = drv.encode(b" Hello world.")
    ids = [SOT, EN, TRANSCRIBE, TS0] + text + [TS0 + 50, EOT]
    assert drv.decode(ids) == "<|startoftranscript|><|en|><|transcribe|><|0.00|> Hello world.<|1.00|><|endoftext|>"
    assert drv.decode(ids, skip=True) == "<|0.00|> Hello world.<|1.00|>"
    assert drv.whisper(ids) == "<|startoftranscript|><|en|><|transcribe|> Hello world.<|endoftext|>"
    assert drv.whisper(ids, skip=True) == " Hello world."
    prompt = [SOP] + drv.encode(b" earlier") + ids
    assert drv.whisper(prompt, skip=True) == " Hello world."
    assert drv.whisper(prompt) == "<|startofprev|> earlier" + drv.whisper(ids)
    assert drv.whisper([SOP] + text, skip=True) == ""
    typed = drv.encode(b"<|1.50|>") == [ref.vocab["<|1.50|>"]]
    assert typed and drv.whisper(drv.encode(b"a<|1.5|>b <|12.34|>")) == "ab "
    for seq in (ids, prompt, [SOP] + text, text + [EOT, -5, 99999, NOTS] + text):
        for skip in (False, True):
            assert drv.decode(seq, skip) == ref.decode(seq, skip), (seq, skip)
            assert drv.whisper(seq, skip) == ref.whisper_decode(seq, skip), (seq, skip)


def check_replace(drv, ref):
    """Runs of single-byte tokens: Python's errors="replace", split by an added token."""
    byte_id = {b: ref.vocab[ref.enc[b]] for b in range(256)}
    rnd = random.Random(11)
    pool = [0x41, 0x80, 0xbf, 0xc2, 0xc0, 0xe0, 0xa0, 0xed, 0x9f, 0xf0, 0x90, 0xf4, 0x8f, 0xf5, 0xff, 0xe2, 0x82, 0xac]
    for n in range(2000):
        data = bytes(rnd.choice(pool) if n % 2 else rnd.randrange(256) for _ in range(rnd.randrange(1, 12)))
        ids = [byte_id[b] for b in data]
        assert drv.decode(ids) == data.decode("utf-8", "replace"), data
        cut = rnd.randrange(len(data) + 1)
        split = ids[:cut] + [TS0] + ids[cut:]
        assert drv.decode(split) == ref.decode(split), data
    euro = [byte_id[b] for b in "€".encode()]
    assert drv.decode(euro[:2] + [EOT] + euro[2:]) == "\ufffd<|endoftext|>\ufffd"
    assert drv.decode(euro[:2] + [EOT] + euro[2:], skip=True) == "€"


def check_strip(drv):
    rnd = random.Random(5)
    parts = ["<|", "|>", "1", ".", "00", "٣", "x", "<", "|", " ", "<|0.00|>", "<|1.|>", "১২.৩"]
    for _ in range(2000):
        s = "".join(rnd.choice(parts) for _ in range(rnd.randrange(12)))
        assert drv.strip(s) == R.TIMESTAMP.sub("", s), s


def check_multilingual(work, drv_en, lines):
    folder = os.path.join(work, "multi")
    pieces, _ = W.load_ranks(os.path.join(NPM, "dist", "ranks", "gpt2.cjs"))
    assert W.write_folder(folder, pieces, open_merges(work), multilingual=True) == 51865
    ref = R.Tokenizer.load(folder)
    assert ref.vocab["<|endoftext|>"] == 50257 and ref.vocab["<|startoftranscript|>"] == 50258
    assert ref.vocab["<|notimestamps|>"] == 50363 and ref.vocab["<|0.00|>"] == 50364
    assert 50256 not in ref.id_to_token
    drv = Driver(work, folder)
    for t in lines[:200]:
        assert drv.encode(t.encode()) == drv_en.encode(t.encode()), t
    assert drv.encode(b"a<|endoftext|>") == [64, 50257]
    drv.close()


def open_merges(work):
    with open(os.path.join(work, "en", "merges.txt"), encoding="utf-8") as f:
        return [m for m in f.read().split("\n")[1:] if m]


def main():
    r = T.Runner()
    if not os.path.exists(DRIVER):
        subprocess.run(["make", "-C", REPO, "--no-print-directory", "build/tests/bpe_driver"], check=True,
                       stdout=subprocess.DEVNULL)
    ranks = os.path.join(NPM, "dist", "ranks", "gpt2.cjs")
    if not os.path.exists(ranks):
        print(f"FAIL js-tiktoken missing ({NPM}): run `make npm-tiktoken`")
        r.failed += 1
        r.finish()
    work = T.tempdir()
    folder = os.path.join(work, "en")
    subprocess.run([sys.executable, W.__file__, folder], check=True, stdout=subprocess.DEVNULL)
    ref = R.Tokenizer.load(folder)
    drv = Driver(work, folder)
    lines = corpus_lines()
    r.check("unicode tables regenerate identically", check_tables_regenerate, work)
    r.check("whisper .en folder: ids, merges", check_folder, folder, ref)
    r.check("2,500 corpus lines: C == reference == js-tiktoken", check_corpus, drv, ref, lines)
    r.check("hostile inputs: C == reference, bytes kept", check_hostile, drv, ref)
    r.check("hostile inputs: C == js-tiktoken (valid UTF-8)", check_hostile_node, drv)
    r.check("special tokens typed in text", check_special_typed, drv)
    r.check("1 MB word, long words against the reference", check_long_word, drv, ref)
    r.check("decode: skip_special, Whisper prompt and timestamps", check_decode_special, drv, ref)
    r.check("decode: errors=replace, runs split by added tokens", check_replace, drv, ref)
    r.check("timestamp filter == regex <\\|\\d+\\.\\d+\\|>", check_strip, drv)
    r.check("multilingual layout", check_multilingual, work, drv, lines)
    drv.close()
    r.finish()


if __name__ == "__main__":
    main()
