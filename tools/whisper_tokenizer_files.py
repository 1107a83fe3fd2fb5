#!/usr/bin/python3
"""Write a Hugging Face Whisper tokenizer folder (vocab.json, merges.txt, added_tokens.json,
special_tokens_map.json, tokenizer_config.json) from GPT-2's byte-pair ranks as the npm
package js-tiktoken ships them (`make npm-tiktoken` installs it into build/npm).

    /usr/bin/python3 tools/whisper_tokenizer_files.py OUT                  # whisper-*.en layout
    /usr/bin/python3 tools/whisper_tokenizer_files.py OUT --multilingual   # whisper-tiny... layout

Whisper's English-only models use GPT-2's vocabulary, so the .en layout is the real one:
ids 0..50255 GPT-2's pieces, 50256 <|endoftext|>, 50257 <|startoftranscript|>, 99 language
tokens from 50258, <|translate|>, <|transcribe|>, <|startoflm|>, <|startofprev|>,
<|nocaptions|>, <|notimestamps|>, then the 1501 timestamps <|0.00|> .. <|30.00|>: 51864 ids.
The multilingual layout has the same added tokens one id later (<|endoftext|> at 50257,
51865 ids) but GPT-2's pieces, not the multilingual model's own (not reachable offline): id
50256 has no piece there. Only its ids and special tokens are real.

merges.txt is derived from the ranks as tiktoken's own converter checks it: the piece of rank
r (r >= 256) is the merge of the two parts that byte-pair encoding its bytes with the ranks
below r leaves; GPT-2's merge r - 256 made exactly that piece.
"""
import argparse
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RANKS = os.path.join(REPO, "build", "npm", "node_modules", "js-tiktoken", "dist", "ranks", "gpt2.cjs")

# Whisper's 99 languages in token order (large-v3's 100th, yue, is not in these models)
LANGUAGES = ("en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta "
             "no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk "
             "sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb "
             "my bo tl mg as tt haw ln ha ba jw su").split()
TASK_TOKENS = ("<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>",
               "<|notimestamps|>")


def bytes_to_unicode():
    """GPT-2's map from each byte to the character that stands for it in the vocabulary."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7e or 0xa1 <= b <= 0xac or 0xae <= b <= 0xff]
    others = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(0x100 + i) for i, b in enumerate(others)})
    return table


BYTE_CHAR = bytes_to_unicode()


def byte_level(piece):
    """A piece's bytes as its vocabulary string."""
    return "".join(BYTE_CHAR[b] for b in piece)


def load_ranks(path):
    """js-tiktoken's GPT-2 ranks file -> the pieces (bytes) by rank, and its special tokens.
    Its bpe_ranks field: lines "! OFFSET TOKEN TOKEN ...", each TOKEN base64, of rank
    OFFSET + its place on the line."""
    import base64
    text = open(path, encoding="utf-8").read()
    start, end = text.index("{"), text.rindex("}") + 1
    data = json.loads(text[start:end])
    ranks = {}
    for line in data["bpe_ranks"].split("\n"):
        if not line:
            continue
        _, offset, *tokens = line.split(" ")
        for i, tok in enumerate(tokens):
            ranks[int(offset) + i] = base64.b64decode(tok)
    pieces = [ranks[r] for r in range(len(ranks))]
    return pieces, data.get("special_tokens", {})


def split_of(piece, rank_of, limit):
    """The two parts byte-pair encoding piece with the ranks below limit ends with."""
    parts = [bytes([b]) for b in piece]
    while len(parts) > 2:
        best = None
        for i in range(len(parts) - 1):
            r = rank_of.get(parts[i] + parts[i + 1])
            if r is not None and r < limit and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    if len(parts) != 2:
        raise ValueError(f"piece of rank {limit} {piece!r} does not split in two: {parts!r}")
    return parts


def derive_merges(pieces):
    """merges.txt's lines ("left right", byte-level) from the pieces by rank."""
    rank_of = {p: r for r, p in enumerate(pieces)}
    if sorted(len(p) for p in pieces[:256]) != [1] * 256:
        raise ValueError("ranks 0..255 are not the 256 single bytes")
    return [" ".join(byte_level(p) for p in split_of(pieces[r], rank_of, r)) for r in range(256, len(pieces))]


def added_tokens(first):
    """Whisper's added tokens from id first (<|startoftranscript|>) on: (id, text, special)."""
    names = ["<|startoftranscript|>"] + [f"<|{c}|>" for c in LANGUAGES] + list(TASK_TOKENS)
    out = [(first + i, t, True) for i, t in enumerate(names)]
    stamps = [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
    return out + [(first + len(names) + i, t, False) for i, t in enumerate(stamps)]


def tokenizer_config(specials, eot):
    """tokenizer_config.json for WhisperTokenizer, with added_tokens_decoder."""
    decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                        "single_word": False, "special": s} for i, t, s in specials}
    return {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
            "bos_token": eot, "clean_up_tokenization_spaces": True, "eos_token": eot, "errors": "replace",
            "model_max_length": 1024, "pad_token": eot, "return_attention_mask": False,
            "tokenizer_class": "WhisperTokenizer", "unk_token": eot}


def write_folder(out, pieces, merges, multilingual=False):
    """The five files in out (created). Returns the vocabulary size (51864 or 51865)."""
    eot_id = 50257 if multilingual else 50256
    eot = "<|endoftext|>"
    vocab = {byte_level(p): r for r, p in enumerate(pieces)}
    vocab[eot] = eot_id
    added = added_tokens(eot_id + 1)
    specials = [(eot_id, eot, True)] + added
    os.makedirs(out, exist_ok=True)

    def dump(name, obj):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=2)
            f.write("\n")

    dump("vocab.json", vocab)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(m + "\n" for m in merges))
    dump("added_tokens.json", {t: i for i, t, _ in added})
    dump("special_tokens_map.json", {
        "additional_special_tokens": [t for _, t, s in specials if s],
        "bos_token": eot, "eos_token": eot, "pad_token": eot, "unk_token": eot})
    dump("tokenizer_config.json", tokenizer_config(specials, eot))
    return added[-1][0] + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="folder to write (created)")
    ap.add_argument("--multilingual", action="store_true", help="the multilingual ids (51865), GPT-2's pieces")
    ap.add_argument("--ranks", default=DEFAULT_RANKS, help="js-tiktoken's ranks/gpt2.cjs (default %(default)s)")
    args = ap.parse_args()
    if not os.path.exists(args.ranks):
        raise SystemExit(f"{args.ranks}: not there; `make npm-tiktoken` installs js-tiktoken into build/npm")
    pieces, special = load_ranks(args.ranks)
    if len(pieces) != 50256 or special.get("<|endoftext|>") != 50256:
        raise SystemExit(f"{args.ranks}: {len(pieces)} ranks, special {special}: not GPT-2's 50256 + <|endoftext|>")
    n = write_folder(args.out, pieces, derive_merges(pieces), args.multilingual)
    print(f"{args.out}: {n} ids")


if __name__ == "__main__":
    main()
