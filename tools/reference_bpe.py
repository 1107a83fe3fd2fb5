#!/usr/bin/python3
"""An independent reference of the byte-level BPE tokenizer (GPT-2, Whisper), written in
Python from Hugging Face's slow GPT2Tokenizer / WhisperTokenizer algorithm, for the tests of
tokenizer/bpe.c. It reads a Hugging Face tokenizer folder (vocab.json, merges.txt and, when
there, added_tokens.json, special_tokens_map.json, tokenizer_config.json).

    /usr/bin/python3 tools/reference_bpe.py FOLDER encode "Hello world<|endoftext|>"
    /usr/bin/python3 tools/reference_bpe.py FOLDER decode 15496 995 50256 [--skip-special]
    /usr/bin/python3 tools/reference_bpe.py FOLDER whisper-decode 50360 11 50257 ... [--skip-special]

In Python:
    tok = Tokenizer.load(folder); ids = tok.encode("text" or b"bytes"); tok.decode(ids)

Bytes given to encode are read as UTF-8 with errors="surrogateescape": an invalid byte is a
character of its own (no letter, number or space) and is encoded as that byte, as bpe.h says.
"""
import argparse
import json
import os

import regex

# GPT-2's pre-tokenizer pattern (contractions, letters, numbers, other, trailing whitespace)
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
TIMESTAMP = regex.compile(r"<\|(\d+\.\d+)\|>")


def byte_alphabet():
    """byte -> the character GPT-2's vocabulary writes it as (bytes_to_unicode)."""
    keep = set(range(0x21, 0x7f)) | set(range(0xa1, 0xad)) | set(range(0xae, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Tokenizer:
    def __init__(self, vocab, merges, added=(), special=()):
        """vocab: {byte-level string: id}; merges: ["left right", ...] by rank; added: the
        added tokens' texts (found whole in text; ids in vocab); special: those of them that
        skip_special drops."""
        self.vocab = dict(vocab)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.ranks = {}
        for r, line in enumerate(merges):
            parts = tuple(line.split(" "))
            self.ranks[parts] = r  # a pair listed twice keeps its last rank, as HF's dict
        self.by_rank = {r: p for p, r in self.ranks.items()}
        self.added = set(added) | set(special)
        self.special_ids = {self.vocab[t] for t in special if t in self.vocab}
        self.unk = self.vocab.get("<|endoftext|>")
        self.enc = byte_alphabet()
        self.dec = {c: b for b, c in self.enc.items()}
        longest_first = sorted(self.added, key=len, reverse=True)
        self.added_re = regex.compile("|".join(regex.escape(t) for t in longest_first)) if longest_first else None

    @classmethod
    def load(cls, folder):
        def read(name, default=None):
            path = os.path.join(folder, name)
            if not os.path.exists(path):
                return default
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        vocab = read("vocab.json")
        with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
            merges = [m for m in f.read().split("\n")[1:] if m]
        added = read("added_tokens.json", {})
        vocab.update(added)
        smap = read("special_tokens_map.json", {})
        special = set(smap.get("additional_special_tokens", []))
        special |= {smap[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token") if isinstance(smap.get(k), str)}
        return cls(vocab, merges, added=added.keys(), special=special)

    # ---- encoding ----------------------------------------------------------------------

    def bpe(self, word):
        """HF's merge loop: the lowest-ranked pair, all its occurrences left to right, again."""
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get((a, b)), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))]
            ranked = [r for r, _ in ranked if r is not None]
            if not ranked:
                break
            left, right = self.by_rank[min(ranked)]
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
                    merged.append(left + right)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return symbols

    def encode_plain(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            word = "".join(self.enc[b] for b in piece.encode("utf-8", "surrogateescape"))
            for sym in self.bpe(word):
                ids.append(self.vocab.get(sym, self.unk))
        return ids

    def encode(self, text):
        """Ids of text (str, or bytes read with surrogateescape)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        ids, at = [], 0
        if self.added_re is not None:
            for m in self.added_re.finditer(text):
                ids += self.encode_plain(text[at:m.start()])
                ids.append(self.vocab[m.group(0)])
                at = m.end()
        return ids + self.encode_plain(text[at:])

    # ---- decoding ----------------------------------------------------------------------

    def decode(self, ids, skip_special=False):
        """Text of ids: runs of pieces' bytes with errors="replace", added tokens as text."""
        out, run = [], bytearray()
        for i in ids:
            tok = self.id_to_token.get(i)
            if tok is None or (skip_special and i in self.special_ids):
                continue
            if tok in self.added:
                out.append(run.decode("utf-8", "replace"))
                run = bytearray()
                out.append(tok)
            else:
                for c in tok:  # a character outside the alphabet (HF fails) keeps its UTF-8
                    run += bytes([self.dec[c]]) if c in self.dec else c.encode("utf-8", "surrogateescape")
        out.append(run.decode("utf-8", "replace"))
        return "".join(out)

    def whisper_decode(self, ids, skip_special=False):
        """WhisperTokenizer.decode with its defaults: prompt dropped (skip_special), timestamps
        removed from the text."""
        ids = list(ids)
        sop, sot = self.vocab.get("<|startofprev|>"), self.vocab.get("<|startoftranscript|>")
        if skip_special and ids and ids[0] == sop:
            ids = ids[ids.index(sot):] if sot in ids else []
        return TIMESTAMP.sub("", self.decode(ids, skip_special))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("command", choices=("encode", "decode", "whisper-decode"))
    ap.add_argument("args", nargs="+")
    ap.add_argument("--skip-special", action="store_true")
    a = ap.parse_args()
    tok = Tokenizer.load(a.folder)
    if a.command == "encode":
        print(" ".join(str(i) for i in tok.encode(" ".join(a.args))))
    elif a.command == "decode":
        print(tok.decode([int(x) for x in a.args], a.skip_special))
    else:
        print(tok.whisper_decode([int(x) for x in a.args], a.skip_special))


if __name__ == "__main__":
    main()
