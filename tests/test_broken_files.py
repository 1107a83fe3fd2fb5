#!/usr/bin/python3
"""Hostile checkpoints: `attend info` and `attend verify` on a corpus of broken files.

Run as `/usr/bin/python3 tests/test_broken_files.py` (after `make`). The corpus is made at
test time from the committed tiny models tests/data/tiny-v1.gguf (f32, format version 1) and
tiny-v2.gguf (int8, format version 2): truncations (every byte of
the first 256, both sides of every field boundary of the header, a spread through the rest
and through the tensor data), byte flips, huge counts and lengths, wrong value types, bad
alignment, overlapping or overflowing offsets, duplicate names, bad config values, and
files re-written with tools/gguf_io.py (valid container, wrong content).

Each file must give: no signal (a crash), no hang, at most one line on stderr, exit 0 or 3
(EXIT_MODEL). Most must be refused by `info` (exit 3); a corruption that only touches tensor
bytes loads, and then `verify` must refuse it. BROKEN_FULL=1 truncates at every header byte;
BROKEN_SAMPLE=N keeps every Nth file; ATTEND_BIN picks the binary (make sanitize sets both).
"""
import concurrent.futures as cf
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ATTEND = os.environ.get("ATTEND_BIN", os.path.join(REPO, "build", "attend"))
TINY = os.path.join(HERE, "data", "tiny-v1.gguf")
MODELS = [TINY, os.path.join(HERE, "data", "tiny-v2.gguf")]  # f32 (format 1), int8 (format 2)
TINY_T5 = os.path.join(HERE, "data", "tiny-t5.gguf")  # the t5 family's own keys (t5_rewritten)
sys.path.insert(0, os.path.join(REPO, "tools"))
import gguf_io as G  # noqa: E402

EXIT_MODEL = 3
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


# --------------------------------------------------------------------------------------
# Where every field of the file is (an independent little parser)

class Layout:
    def __init__(self, data):
        self.data = data
        self.kv = {}       # key -> dict(pos, type_pos, value_pos, end, type, elem, count)
        self.tensors = []  # dicts(name, pos, ndims_pos, ne_pos, type_pos, offset_pos, offset, nbytes)
        self.bounds = {0, 4, 8, 16, 24}
        p = 24
        (n_t, n_kv) = struct.unpack_from("<QQ", data, 8)
        for _ in range(n_kv):
            kpos = p
            (kl,) = struct.unpack_from("<Q", data, p)
            key = data[p + 8:p + 8 + kl].decode()
            p += 8 + kl
            (vt,) = struct.unpack_from("<I", data, p)
            e = dict(pos=kpos, type_pos=p, value_pos=p + 4, type=vt, elem=None, count=1)
            self.bounds |= {kpos, kpos + 8, p, p + 4}
            p += 4
            if vt == 8:
                (n,) = struct.unpack_from("<Q", data, p)
                p += 8 + n
            elif vt == 9:
                et, n = struct.unpack_from("<IQ", data, p)
                e["elem"], e["count"] = et, n
                self.bounds |= {p + 4, p + 12}
                p += 12
                if et == 8:
                    for _ in range(n):
                        (sl,) = struct.unpack_from("<Q", data, p)
                        p += 8 + sl
                else:
                    p += n * SCALAR[et]
            else:
                p += SCALAR[vt]
            e["end"] = p
            self.kv[key] = e
        self.alignment = 32
        if "general.alignment" in self.kv:
            (self.alignment,) = struct.unpack_from("<I", data, self.kv["general.alignment"]["value_pos"])
        for _ in range(n_t):
            t = dict(pos=p)
            (nl,) = struct.unpack_from("<Q", data, p)
            t["name"] = data[p + 8:p + 8 + nl].decode()
            p += 8 + nl
            t["ndims_pos"] = p
            (nd,) = struct.unpack_from("<I", data, p)
            p += 4
            t["ne_pos"] = p
            ne = struct.unpack_from(f"<{nd}Q", data, p)
            p += 8 * nd
            t["type_pos"], t["offset_pos"] = p, p + 4
            gt, off = struct.unpack_from("<IQ", data, p)
            p += 12
            t["offset"], t["nbytes"], t["type"] = off, int(np.prod(ne)) * {0: 4, 1: 2, 24: 1}[gt], gt
            self.bounds |= {t["pos"], t["pos"] + 8, t["ndims_pos"], t["ne_pos"], t["type_pos"],
                            t["offset_pos"], p}
            self.tensors.append(t)
        self.info_end = p
        self.data_start = -(-p // self.alignment) * self.alignment
        self.data_end = self.data_start + max(t["offset"] + t["nbytes"] for t in self.tensors)


# --------------------------------------------------------------------------------------
# The corpus: (name, bytes, expectation); expectation "info" = refused by info (and so by
# verify), "verify" = verify must refuse, "any" = either way, but cleanly.

def patch(data, pos, fmt, *values):
    b = bytearray(data)
    struct.pack_into(fmt, b, pos, *values)
    return bytes(b)


def corpus(data, L, full):
    cases = []
    add = lambda name, b, want="info": cases.append((name, b, want))  # noqa: E731

    # truncations
    points = set(range(0, 257))
    if full:
        points |= set(range(0, L.data_start + 1))
    for b in L.bounds:
        points |= {b - 1, b, b + 1}
    points |= set(range(0, L.data_start, 211))
    points |= {L.info_end, L.data_start - 1, L.data_start}
    points |= set(np.linspace(L.data_start, L.data_end - 1, 40).astype(int).tolist())
    for n in sorted(p for p in points if 0 <= p < L.data_end):
        add(f"truncated at {n}", data[:n])
    add("file ends after the last tensor", data[:L.data_end], "any")

    # header
    add("bad magic", b"GGUF"[::-1] + data[4:])
    for v in (0, 1, 2, 4, 0xFFFFFFFF):
        add(f"version {v}", patch(data, 4, "<I", v))
    (n_t, n_kv) = struct.unpack_from("<QQ", data, 8)
    for name, pos, base in (("tensor count", 8, n_t), ("key count", 16, n_kv)):
        for v in (0, base - 1, base + 1, 2**31, 2**63, 2**64 - 1):
            add(f"{name} {v}", patch(data, pos, "<Q", v))

    # keys
    first = min(L.kv.values(), key=lambda e: e["pos"])
    for v in (0, 1, 2**32, 2**63, 2**64 - 1):
        add(f"first key length {v}", patch(data, first["pos"], "<Q", v))
    for key, e in L.kv.items():
        for vt in (13, 255, 0xFFFFFFFF):
            add(f"key {key}: value type {vt}", patch(data, e["type_pos"], "<I", vt))
        if e["type"] == 8:
            for v in (2**40, 2**64 - 1):
                add(f"key {key}: string length {v}", patch(data, e["value_pos"], "<Q", v))
        if e["type"] == 9:
            for et in (9, 13, 0xFFFFFFFF):
                add(f"key {key}: element type {et}", patch(data, e["value_pos"], "<I", et))
            for c in (e["count"] + 1, 2**32, 2**61, 2**64 - 1):
                add(f"key {key}: element count {c}", patch(data, e["value_pos"] + 4, "<Q", c))
            add(f"key {key}: element count - 1", patch(data, e["value_pos"] + 4, "<Q", e["count"] - 1))
        if e["type"] == 4:  # u32 -> same-sized wrong types
            for vt in (5, 6):
                add(f"key {key}: u32 read as type {vt}", patch(data, e["type_pos"], "<I", vt))
            for v in (0, 2**31, 2**32 - 1):  # 0 is a valid id
                add(f"key {key} = {v}", patch(data, e["value_pos"], "<I", v), "any" if v == 0 else "info")
        if e["type"] == 7:
            add(f"key {key}: bool 2", patch(data, e["value_pos"], "<B", 2))
            add(f"key {key}: bool read as u8", patch(data, e["type_pos"], "<I", 0))
        if e["type"] == 6:
            add(f"key {key}: f32 read as u32", patch(data, e["type_pos"], "<I", 4))
            for v in (float("nan"), float("inf"), -1.0, 0.0, 5.0):
                add(f"key {key} = {v}", patch(data, e["value_pos"], "<f", v))
    for key, bad in (("general.architecture", b"marion"), ("general.architecture", b"mar\nan"),
                     ("marian.activation", b"swis\n"), ("marian.activation", b"\0\0\0\0\0")):
        e = L.kv[key]
        b = bytearray(data)
        b[e["value_pos"] + 8:e["value_pos"] + 8 + len(bad)] = bad
        add(f"key {key} = {bad!r}", bytes(b))
    for key, v in (("marian.eos_id", 487), ("marian.pad_id", 0), ("marian.unk_id", 488),
                   ("marian.d_model", 18), ("marian.d_model", 17), ("marian.encoder_heads", 3),
                   ("marian.vocab_size", 489), ("marian.encoder_layers", 2),
                   ("attend.format_version", 999), ("marian.max_position_embeddings", 1),
                   ("general.alignment", 3), ("general.alignment", 1 << 20)):
        add(f"key {key} = {v}", patch(data, L.kv[key]["value_pos"], "<I", v))
    for v in (8, 16, 128):  # offsets may still fit; the data then moves and verify notices
        add(f"key general.alignment = {v}", patch(data, L.kv["general.alignment"]["value_pos"], "<I", v),
            "any")
    # two keys of equal length: the second renamed to the first
    by_len = {}
    for key, e in L.kv.items():
        by_len.setdefault(len(key), []).append(key)
    for keys in by_len.values():
        if len(keys) > 1:
            b = bytearray(data)
            e = L.kv[keys[1]]
            b[e["pos"] + 8:e["pos"] + 8 + len(keys[0])] = keys[0].encode()
            add(f"key {keys[0]} twice", bytes(b))
    # crc
    crc = L.kv["attend.tensor_crc32"]
    b = bytearray(data)
    b[crc["value_pos"] + 12 + 4 * 7] ^= 1
    add("crc of tensor 7 flipped", bytes(b), "verify")

    # tensor infos
    for i, t in enumerate(L.tensors):
        nm = t["name"]
        if i % 5 == 0 or i == len(L.tensors) - 1:
            for v in (0, 2**40, 2**64 - 1):
                add(f"tensor {nm}: name length {v}", patch(data, t["pos"], "<Q", v))
            b = bytearray(data)
            b[t["pos"] + 8 + 2] = 10
            add(f"tensor {nm}: newline in name", bytes(b))
            for v in (0, 3, 5, 2**32 - 1):
                add(f"tensor {nm}: {v} dims", patch(data, t["ndims_pos"], "<I", v))
            for v in (0, 1, 2**40 + 1, 2**63):
                add(f"tensor {nm}: ne[0] = {v}", patch(data, t["ne_pos"], "<Q", v))
            for gt in (2, 24 if t["type"] != 24 else 0, 99):  # a different type, never the same
                add(f"tensor {nm}: ggml type {gt}", patch(data, t["type_pos"], "<I", gt))
            add(f"tensor {nm}: ggml type f16", patch(data, t["type_pos"], "<I", 1), "any")
            for off in (t["offset"] + 1, t["offset"] + L.alignment, L.data_end - L.data_start,
                        2**63, 2**64 - L.alignment):
                add(f"tensor {nm}: offset {off}", patch(data, t["offset_pos"], "<Q", off),
                    "info")
    # two tensors at one offset; two tensors of equal-length names, the second renamed
    t0, t1 = L.tensors[0], L.tensors[1]
    add(f"tensor {t1['name']}: offset of {t0['name']}", patch(data, t1["offset_pos"], "<Q", t0["offset"]))
    seen = {}
    for t in L.tensors:
        other = seen.setdefault(len(t["name"]), t)
        if other is not t:
            b = bytearray(data)
            b[t["pos"] + 8:t["pos"] + 8 + len(other["name"])] = other["name"].encode()
            add(f"tensor {other['name']} twice", bytes(b))
            break

    # flips: random bytes of the header (any outcome, but clean), tensor bytes (verify)
    rng = random.Random(6)
    for _ in range(150):
        p = rng.randrange(L.data_start)
        b = bytearray(data)
        b[p] ^= 1 << rng.randrange(8)
        add(f"header byte {p} flipped", bytes(b), "any")
    for _ in range(30):
        p = rng.randrange(L.data_start)
        b = bytearray(data)
        b[p] = 0xFF
        add(f"header byte {p} = 0xff", bytes(b), "any")
    for t in L.tensors[::3]:
        p = L.data_start + t["offset"] + rng.randrange(t["nbytes"])
        b = bytearray(data)
        b[p] ^= 0x40
        add(f"tensor {t['name']}: data byte {p} flipped", bytes(b), "verify")
    return cases


def parts(model):
    """A model's (GGUFFile, metadata, tensors) in the form tools/gguf_io.py writes."""
    f = G.GGUFFile(model)
    meta = [(k, f.types[k] if not isinstance(f.types[k], tuple) else G.ARRAY,
             f.metadata[k] if not isinstance(f.types[k], tuple) else (f.types[k][1], f.metadata[k]))
            for k in f.metadata]
    meta = [(k, t, (v[0], bytes(np.asarray(v[1], dtype=np.uint8))) if t == G.ARRAY and v[0] == G.UINT8
             else v) for k, t, v in meta]
    tens = [(t["name"], np.array(f.tensors[t["name"]]), t["ggml_type"]) for t in f.tensor_infos]
    return f, meta, tens


def rewritten(tmp, model):
    """Valid containers with wrong content, written by tools/gguf_io.py (CRCs recomputed)."""
    f, meta, tens = parts(model)
    out = []

    def emit(name, m, t, want="info", meta_crc=True, edit=None):
        path = os.path.join(tmp, f"rw{len(out)}-{os.path.basename(model)}")
        G.write(path, m, t, meta_crc_key=G.META_CRC_KEY if meta_crc else None)
        if edit:  # change bytes after writing: the CRCs no longer match
            with open(path, "rb") as fh:
                b = fh.read()
            with open(path, "wb") as fh:
                fh.write(edit(b))
        out.append((name, path, want))

    # the metadata CRC (files written before it have none; the committed tiny models)
    piece = f.metadata["tokenizer.target_pieces"][20].encode()
    swapped = bytes([piece[0] ^ 0x20]) + piece[1:] if piece[:1].isalpha() else piece[::-1]
    emit("a target piece changed, metadata CRC kept", meta, tens, "verify",
         edit=lambda b: b.replace(b"\x00" + piece, b"\x00" + swapped, 1))
    emit("metadata CRC of 0", meta + [(G.META_CRC_KEY, G.UINT32, 0)], tens, "verify", meta_crc=False)
    emit("metadata CRC not the last key", [(G.META_CRC_KEY, G.UINT32, 0)] + meta, tens, "verify",
         meta_crc=False)
    emit("metadata CRC is a string", meta + [(G.META_CRC_KEY, G.STRING, "0")], tens, "verify",
         meta_crc=False)

    def with_meta(key, value=None, drop=False):
        r = []
        for k, t, v in meta:
            if k == key:
                if drop:
                    continue
                v = value
            r.append((k, t, v))
        return r

    emit("key marian.d_model missing", with_meta("marian.d_model", drop=True), tens)
    emit("key tokenizer.source_spm missing", with_meta("tokenizer.source_spm", drop=True), tens)
    src = f.metadata["tokenizer.source_pieces"]
    emit("one source piece short", with_meta("tokenizer.source_pieces", (G.STRING, src[:-1])), tens)
    emit("source pieces all equal", with_meta("tokenizer.source_pieces", (G.STRING, ["x"] * len(src))),
         tens, "any")
    spm = bytes(np.asarray(f.metadata["tokenizer.source_spm"], dtype=np.uint8))
    emit("source spm model empty", with_meta("tokenizer.source_spm", (G.UINT8, b"")), tens)
    emit("source spm model cut in half", with_meta("tokenizer.source_spm", (G.UINT8, spm[:len(spm) // 2])),
         tens)
    emit("source spm model is garbage", with_meta("tokenizer.source_spm", (G.UINT8, bytes(range(256)) * 4)),
         tens)
    # hostile normalization maps (SentencePiece would follow their trie without bounds checks)
    def ld(field, payload):
        n, head = len(payload), bytes([field << 3 | 2])
        while True:
            head += bytes([(n & 0x7f) | (0x80 if n > 0x7f else 0)])
            n >>= 7
            if not n:
                return head + payload
    rng = random.Random(7)
    for what, blob in (
            ("random trie", struct.pack("<I", 1024) + rng.randbytes(1024) + b"abc\0"),
            ("random trie, strings without NUL", struct.pack("<I", 1024) + rng.randbytes(1024) + b"abc"),
            ("trie size past the end", struct.pack("<I", 4096) + rng.randbytes(64)),
            ("trie size not whole units", struct.pack("<I", 6) + bytes(6) + b"a\0"),
            ("root pointing outside", struct.pack("<I", 4) + struct.pack("<I", 0xFFFFFC00) + b"a\0"),
            ("3 bytes", b"abc")):
        for field in (3, 5):  # normalizer, denormalizer
            evil = spm + ld(field, ld(1, b"nmt_nfkc") + ld(2, blob))
            emit(f"source spm with a hostile {'de' if field == 5 else ''}normalization map: {what}",
                 with_meta("tokenizer.source_spm", (G.UINT8, evil)), tens)
    emit("source spm model with a truncated field", with_meta("tokenizer.source_spm", (G.UINT8, spm + b"\x1a\xff\x01")),
         tens)
    emit("tensor enc.0.ffn.fc1.weight missing", meta, [t for t in tens if t[0] != "enc.0.ffn.fc1.weight"])
    emit("extra tensor", meta, tens + [("enc.7.extra", np.zeros(4, np.float32), 0)])
    emit("extra tensor of an unknown name", meta, tens + [("bogus", np.zeros(4, np.float32), 0)])
    emit("tensor transposed", meta,
         [(n, a.T.copy() if n == "enc.0.ffn.fc1.weight" else a, g) for n, a, g in tens])
    emit("bias as a matrix", meta,
         [(n, a.reshape(1, -1) if n == "enc.0.ffn.fc1.bias" else a, g) for n, a, g in tens])
    emit("norm weight stored f16", meta,
         [(n, a, 1 if n == "enc.0.ffn_norm.weight" else g) for n, a, g in tens])
    vec = [i for i, (n, a, g) in enumerate(tens) if g == G.GGML_F32]  # f32 tensors
    nan = [(n, a.copy(), g) for n, a, g in tens]
    nan[vec[3]][1].reshape(-1)[3] = np.nan
    emit(f"a NaN in {nan[vec[3]][0]} (CRC matches)", meta, nan, "verify")
    inf = [(n, a.copy(), g) for n, a, g in tens]
    inf[vec[0]][1].reshape(-1)[0] = np.inf
    emit(f"an infinity in {inf[vec[0]][0]} (CRC matches)", meta, inf, "verify")
    if any(g == G.GGML_I8 for _, _, g in tens):  # int8 matrices and their scales
        names = [n for n, _, _ in tens]
        emit("scale of enc.0.ffn.fc1.weight missing", meta,
             [t for t in tens if t[0] != "enc.0.ffn.fc1.weight.scale"])
        emit("scale of enc.0.ffn.fc1.weight one short", meta,
             [(n, a[:-1] if n == "enc.0.ffn.fc1.weight.scale" else a, g) for n, a, g in tens])
        emit("scale stored f16", meta,
             [(n, a, 1 if n == "enc.0.ffn.fc1.weight.scale" else g) for n, a, g in tens])
        emit("bias stored int8", meta,
             [(n, a.astype(np.int8) if n == "enc.0.ffn.fc1.bias" else a,
               G.GGML_I8 if n == "enc.0.ffn.fc1.bias" else g) for n, a, g in tens])
        emit("a scale without its matrix", meta, tens + [("enc.0.extra.weight.scale", np.ones(4, np.float32), 0)])
        sc = [(n, a.copy(), g) for n, a, g in tens]
        sc[names.index("dec.0.ffn.fc2.weight.scale")][1][2] = np.nan
        emit("a NaN scale (CRC matches)", meta, sc, "verify")
        sc = [(n, a.copy(), g) for n, a, g in tens]
        sc[names.index("dec.0.ffn.fc2.weight.scale")][1][0] = -1.0
        emit("a negative scale (CRC matches)", meta, sc, "any")
        emit("format version 1 with int8 tensors", with_meta("attend.format_version", 1), tens)
        return out
    with np.errstate(over="ignore"):  # 70000 does not fit in f16: that is the point
        emit("f16 file with an f16 infinity", meta,
             [(n, (np.full_like(a, 70000.0) if n == "enc.0.self_attn.q.weight" else a),
               1 if a.ndim == 2 else g) for n, a, g in tens], "verify")
    return out


def t5_rewritten(tmp):
    """The t5 family's keys and tensors with broken and hostile values (CRCs recomputed):
    each refused at load (attend info), naming the key or tensor."""
    f, meta, tens = parts(TINY_T5)
    out = []

    def emit(name, m, t=tens):
        path = os.path.join(tmp, f"t5-{len(out)}.gguf")
        G.write(path, m, t, meta_crc_key=G.META_CRC_KEY)
        out.append((f"tiny-t5.gguf: {name}", path, "info"))

    def with_meta(key, value=None, drop=False, typ=None):
        r = [(k, typ or t, value) if k == key else (k, t, v) for k, t, v in meta if not (drop and k == key)]
        assert drop or any(k == key for k, _, _ in meta), key
        return r

    for key, value in (("t5.d_kv", 0), ("t5.d_kv", 70000), ("t5.d_kv", 40000), ("t5.relative_buckets", 0),
                       ("t5.relative_buckets", 3), ("t5.relative_buckets", 1 << 30),
                       ("t5.relative_max_distance", 0), ("t5.relative_max_distance", 4),
                       ("t5.decoder_heads", 1), ("t5.encoder_heads", 0), ("t5.unk_id", 400)):
        emit(f"{key} = {value}", with_meta(key, value))
    for key in ("t5.d_kv", "t5.relative_buckets", "t5.relative_max_distance", "t5.gated_ffn", "t5.scale_output",
                "t5.task_prefixes"):
        emit(f"{key} missing", with_meta(key, drop=True))
    for key, value in (("t5.gated_ffn", False), ("t5.scale_embedding", True), ("t5.shared_embeddings", False)):
        emit(f"{key} = {value}", with_meta(key, value))
    emit("t5.d_kv a string", with_meta("t5.d_kv", "4", typ=G.STRING))
    emit("t5.activation gelu_fast", with_meta("t5.activation", "gelu_fast"))
    names = list(f.metadata["t5.tasks"])
    prefixes = list(f.metadata["t5.task_prefixes"])
    for what, n, p in (("one task name more than prefixes", names + ["x"], prefixes),
                       ("a task name with a space", ["a b", names[1]], prefixes),
                       ("an empty task name", ["", names[1]], prefixes),
                       ("a task name with a control byte", ["a\x01", names[1]], prefixes),
                       ("a task name of 65 bytes", ["x" * 65, names[1]], prefixes),
                       ("a task named twice", [names[0], names[0]], prefixes),
                       ("a prefix of 1025 bytes", names, [prefixes[0], "p" * 1025]),
                       ("a prefix holding a NUL", names, [prefixes[0], "a\x00b"]),
                       ("300 tasks", [f"t{i}" for i in range(300)], [""] * 300)):
        m = with_meta("t5.tasks", (G.STRING, n))
        emit(what, [(k, t, (G.STRING, p) if k == "t5.task_prefixes" else v) for k, t, v in m])
    emit("t5.tasks numbers, not strings", with_meta("t5.tasks", (G.UINT32, [1, 2])))
    emit("tensor enc.relative_bias missing", meta, [t for t in tens if t[0] != "enc.relative_bias"])
    emit("tensor dec.relative_bias one short", meta,
         [(n, a[:-1] if n == "dec.relative_bias" else a, g) for n, a, g in tens])
    emit("tensor dec.0.ffn.gate.weight missing", meta, [t for t in tens if t[0] != "dec.0.ffn.gate.weight"])
    emit("a norm with a bias", meta, tens + [("enc.final_norm.bias", np.zeros(16, np.float32), 0)])
    emit("a linear layer with a bias", meta, tens + [("enc.0.self_attn.q.bias", np.zeros(8, np.float32), 0)])
    emit("q as wide as d_model", meta,
         [(n, np.zeros((16, 16), np.float32) if n == "enc.0.self_attn.q.weight" else a, g) for n, a, g in tens])
    return out


# --------------------------------------------------------------------------------------
# attend quantize on an f32 model holding a NaN or an infinity: refused (exit 3, one line
# naming the tensor and row), and no output file. It once quantized the NaN (undefined
# behaviour) and wrote a file that attend then refused.

def quantize_non_finite(tmp):
    """One result per case: None, or what went wrong."""
    _, meta, tens = parts(TINY)
    cases = [("enc.0.ffn.fc1.weight", (5, 3), np.nan, "row 5, column 3"),
             ("dec.0.self_attn.o.weight", (15, 0), np.inf, "row 15, column 0"),
             ("enc.embed.weight", (0, 15), -np.inf, "row 0, column 15"),
             ("dec.0.ffn_norm.bias", (7,), np.nan, "element 7"),
             (None, None, None, None)]  # the valid model: quantized
    results = []
    for name, at, value, where in cases:
        t = [(n, a.copy(), g) for n, a, g in tens]
        if name:
            [a for n, a, _ in t if n == name][0][at] = value
        src, out = os.path.join(tmp, "q-in.gguf"), os.path.join(tmp, "q-out.gguf")
        G.write(src, meta, t)
        p = subprocess.run([ATTEND, "quantize", src, out], capture_output=True, timeout=60)
        err = p.stderr.decode("utf-8", "replace")
        made = [x for x in os.listdir(tmp) if x.startswith("q-out")]
        what = f"quantize with {value} in {name} at {at}" if name else "quantize the valid model"
        if name:
            bad = p.returncode != EXIT_MODEL or err.count("\n") != 1 or f"tensor {name}: {where} " not in err or made
        else:
            bad = p.returncode != 0 or made != ["q-out.gguf"] or err
        results.append(f"{what}: exit {p.returncode}, files {made}, stderr {err!r}" if bad else None)
        for x in made:
            os.remove(os.path.join(tmp, x))
    return results


# --------------------------------------------------------------------------------------
# Running

def run(cmd, path):
    try:
        p = subprocess.run([ATTEND, cmd, path], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "hangs"
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}: {err.strip()[:300]}"
    if p.returncode not in (0, EXIT_MODEL):
        return f"exit {p.returncode}, expected 0 or {EXIT_MODEL}: {err.strip()[:300]}"
    if p.returncode and (err.count("\n") != 1 or not err.endswith("\n") or len(err) < 10):
        return f"stderr is not one line: {err[:300]!r}"
    if p.returncode == 0 and err:
        return f"exit 0 with stderr {err[:200]!r}"
    return p.returncode


def check(name, path, want):
    info = run("info", path)
    if isinstance(info, str):
        return f"{name}: info: {info}"
    ver = run("verify", path)
    if isinstance(ver, str):
        return f"{name}: verify: {ver}"
    if info and not ver:
        return f"{name}: info refused the file but verify accepted it"
    if want == "info" and info == 0:
        return f"{name}: info accepted the file"
    if want == "verify" and ver == 0:
        return f"{name}: verify accepted the file"
    if want == "ok" and (info or ver):
        return f"{name}: refused"
    return None


def main():
    if not os.path.exists(ATTEND):
        print(f"{ATTEND} missing: run make first")
        print("0 passed, 1 failed")
        return 1
    tmp = tempfile.mkdtemp(prefix="attend-broken-")
    passed = failed = 0
    try:
        jobs = []
        for model in MODELS + [TINY_T5]:
            data = open(model, "rb").read()
            if model == TINY_T5:  # the byte-level corpus patches Marian's keys
                jobs += t5_rewritten(tmp) + [("tiny-t5.gguf: the valid model", model, "ok")]
                continue
            L = Layout(data)
            tag = os.path.basename(model)
            for i, (name, b, want) in enumerate(corpus(data, L, os.environ.get("BROKEN_FULL") == "1")):
                path = os.path.join(tmp, f"c{i}-{tag}")
                with open(path, "wb") as fh:
                    fh.write(b)
                jobs.append((f"{tag}: {name}", path, want))
            try:
                jobs += [(f"{tag}: {n}", p, w) for n, p, w in rewritten(tmp, model)]
            except Exception:
                traceback.print_exc()
                failed += 1
            jobs.append((f"{tag}: the valid model", model, "ok"))
        for r in quantize_non_finite(tmp):
            if r is None:
                passed += 1
            else:
                failed += 1
                print("FAIL", r)
        sample = int(os.environ.get("BROKEN_SAMPLE", "1"))  # every Nth file (make sanitize)
        jobs = [j for i, j in enumerate(jobs) if i % sample == 0 or j[2] == "ok"]
        with cf.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
            results = list(ex.map(lambda j: check(*j), jobs))
        for (name, path, want), r in zip(jobs, results):
            if r is None:
                passed += 1
            else:
                failed += 1
                print("FAIL", r)
        kinds = {}
        for _, _, want in jobs:
            kinds[want] = kinds.get(want, 0) + 1
        print(f"{len(jobs)} files: " + ", ".join(f"{v} expected {k}" for k, v in sorted(kinds.items())))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
