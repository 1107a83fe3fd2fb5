"""Minimal GGUF v3 writer and reader (pure Python + numpy), for attend's checkpoints.

Layout (see weights/FORMAT.md): "GGUF", u32 version, u64 tensor_count, u64 kv_count,
metadata key/values, tensor infos (name, n_dims, ne[] fastest-varying first, ggml type,
offset), zero padding to the alignment, then the tensor data, every tensor starting at an
aligned offset from the data start and padded with zeros to the alignment.

Library use:
    gguf_io.write(path, [(key, gguf_io.UINT32, 5), (key2, gguf_io.ARRAY, (gguf_io.STRING, [...]))],
                  [(name, numpy_array, gguf_io.GGML_F32)])
    meta, tensors = gguf_io.load(path)      # dict key -> value, dict name -> numpy view
    f = gguf_io.GGUFFile(path)              # plus value types, tensor infos, CRC checks

Tensor arrays are given and returned with PyTorch's shape ([rows, cols]); the file stores
ne reversed ([cols, rows]).

Command line: `gguf_io.py dump FILE` lists the metadata (large arrays summarised, f32 values
in their shortest exact form, generation.early_stopping with its meaning) and every
tensor's name, type, PyTorch shape, ne and offset, and checks attend.tensor_crc32 when
present (exit 1 on a mismatch, 2 on an unreadable file).
"""
import argparse
import mmap
import struct
import sys
import zlib

import numpy as np

MAGIC = b"GGUF"
VERSION = 3
DEFAULT_ALIGNMENT = 32  # GGUF's default when general.alignment is absent
CRC_KEY = "attend.tensor_crc32"
META_CRC_KEY = "attend.metadata_crc32"

# metadata value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
TYPE_NAMES = {UINT8: "u8", INT8: "i8", UINT16: "u16", INT16: "i16", UINT32: "u32", INT32: "i32",
              FLOAT32: "f32", BOOL: "bool", STRING: "string", ARRAY: "array", UINT64: "u64",
              INT64: "i64", FLOAT64: "f64"}
# scalar value types -> little-endian numpy dtype
_NP = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
       FLOAT32: "<f4", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8", BOOL: "<u1"}
_INT_TYPES = (UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64)

# tensor types
GGML_F32, GGML_F16, GGML_I8 = 0, 1, 24
GGML_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_I8: "I8"}
_GGML_NP = {GGML_F32: np.dtype("<f4"), GGML_F16: np.dtype("<f2"), GGML_I8: np.dtype("i1")}


class GGUFError(ValueError):
    pass


# --------------------------------------------------------------------------------------
# Writer

def _str_bytes(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _scalar_bytes(vtype, value, key):
    if vtype == STRING:
        if not isinstance(value, str):
            raise GGUFError(f"{key}: string value expected, got {type(value).__name__}")
        return _str_bytes(value)
    if vtype == BOOL:
        if not isinstance(value, (bool, np.bool_)):
            raise GGUFError(f"{key}: bool value expected, got {type(value).__name__}")
        return b"\x01" if value else b"\x00"
    if vtype in _INT_TYPES:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise GGUFError(f"{key}: integer value expected, got {type(value).__name__}")
        info = np.iinfo(np.dtype(_NP[vtype]))
        if not info.min <= int(value) <= info.max:
            raise GGUFError(f"{key}: value {value} out of range for {TYPE_NAMES[vtype]}")
        return np.array(int(value), dtype=_NP[vtype]).tobytes()
    if vtype in (FLOAT32, FLOAT64):
        return np.array(float(value), dtype=_NP[vtype]).tobytes()
    raise GGUFError(f"{key}: unknown value type {vtype}")


def _array_bytes(elem_type, values, key):
    if elem_type == ARRAY:
        raise GGUFError(f"{key}: nested arrays are not supported")
    if elem_type == STRING:
        values = list(values)
        parts = [struct.pack("<IQ", STRING, len(values))]
        for i, s in enumerate(values):
            if not isinstance(s, str):
                raise GGUFError(f"{key}[{i}]: string expected, got {type(s).__name__}")
            parts.append(_str_bytes(s))
        return b"".join(parts)
    if elem_type not in _NP:
        raise GGUFError(f"{key}: unknown array element type {elem_type}")
    if isinstance(values, (bytes, bytearray, memoryview)):
        if elem_type != UINT8:
            raise GGUFError(f"{key}: raw bytes need element type u8")
        raw = bytes(values)
        return struct.pack("<IQ", elem_type, len(raw)) + raw
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if elem_type in _INT_TYPES or elem_type == BOOL:
        if arr.size and arr.dtype.kind not in "iub":
            raise GGUFError(f"{key}: integer array expected, got {arr.dtype}")
        if elem_type == BOOL and arr.size and not np.isin(arr, (0, 1)).all():
            raise GGUFError(f"{key}: bool array holds values other than 0/1")
        if elem_type in _INT_TYPES and arr.size:
            info = np.iinfo(np.dtype(_NP[elem_type]))
            if int(arr.min()) < info.min or int(arr.max()) > info.max:
                raise GGUFError(f"{key}: values out of range for {TYPE_NAMES[elem_type]}")
    raw = arr.astype(_NP[elem_type]).tobytes()
    return struct.pack("<IQ", elem_type, arr.size) + raw


def _value_bytes(vtype, value, key):
    if vtype == ARRAY:
        try:
            elem_type, values = value
        except (TypeError, ValueError):
            raise GGUFError(f"{key}: array value must be (element_type, values)") from None
        return _array_bytes(elem_type, values, key)
    return _scalar_bytes(vtype, value, key)


def _tensor_bytes(name, arr, ggml_type):
    if ggml_type not in _GGML_NP:
        raise GGUFError(f"tensor {name}: unsupported ggml type {ggml_type}")
    arr = np.asarray(arr)
    if ggml_type == GGML_I8:
        if arr.dtype != np.int8:
            raise GGUFError(f"tensor {name}: int8 array expected for I8, got {arr.dtype}")
    elif arr.dtype.kind != "f":
        raise GGUFError(f"tensor {name}: floating-point array expected, got {arr.dtype}")
    if arr.ndim < 1 or arr.ndim > 4:
        raise GGUFError(f"tensor {name}: {arr.ndim} dimensions (1..4 supported)")
    return np.ascontiguousarray(arr, dtype=_GGML_NP[ggml_type]).tobytes()


def write(path, metadata, tensors, crc_key=CRC_KEY, meta_crc_key=META_CRC_KEY):
    """Write a GGUF v3 file.

    metadata: ordered list of (key, value_type, value); an ARRAY value is
        (element_type, values) where values is a list, a 1-D numpy array or (for u8) bytes.
    tensors: ordered list of (name, numpy array in PyTorch shape, GGML_F32 or GGML_F16);
        the array is converted to the ggml type.
    crc_key: if not None, that key (u32 array, zlib CRC-32 of each tensor's bytes in
        tensor-info order) is filled in where it appears in metadata (its value there is
        ignored) or appended at the end.
    meta_crc_key: if not None, that key (u32, zlib CRC-32 of the bytes of every key/value
        pair before it) is written as the last key; an entry of that name in metadata is
        dropped and replaced.
    The output depends only on the arguments: same inputs give the same bytes."""
    metadata = [m for m in metadata if meta_crc_key is None or m[0] != meta_crc_key]
    keys = [k for k, _, _ in metadata]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise GGUFError(f"duplicate metadata keys: {', '.join(dup)}")
    names = [t[0] for t in tensors]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise GGUFError(f"duplicate tensor names: {', '.join(dup)}")

    alignment = DEFAULT_ALIGNMENT
    for k, t, v in metadata:
        if k == "general.alignment":
            if t != UINT32 or not isinstance(v, (int, np.integer)) or v < 8 or v & (v - 1):
                raise GGUFError("general.alignment must be a u32 power of two >= 8")
            alignment = int(v)

    blobs = [_tensor_bytes(n, a, t) for n, a, t in tensors]
    if crc_key is not None:
        crcs = (UINT32, np.array([zlib.crc32(b) for b in blobs], dtype=np.uint32))
        for i, (k, t, v) in enumerate(metadata):
            if k == crc_key:
                metadata[i] = (k, ARRAY, crcs)
                break
        else:
            metadata.append((crc_key, ARRAY, crcs))

    kv = []
    for k, t, v in metadata:
        kv.append(_str_bytes(k))
        kv.append(struct.pack("<I", t))
        kv.append(_value_bytes(t, v, k))
    n_kv = len(metadata)
    if meta_crc_key is not None:
        crc = zlib.crc32(b"".join(kv))
        kv += [_str_bytes(meta_crc_key), struct.pack("<I", UINT32), _value_bytes(UINT32, crc, meta_crc_key)]
        n_kv += 1
    head = [MAGIC, struct.pack("<IQQ", VERSION, len(tensors), n_kv)] + kv
    offset = 0
    offsets = []
    for (name, arr, gtype), blob in zip(tensors, blobs):
        shape = np.shape(arr)
        head.append(_str_bytes(name))
        head.append(struct.pack("<I", len(shape)))
        head.append(struct.pack(f"<{len(shape)}Q", *reversed(shape)))
        head.append(struct.pack("<IQ", gtype, offset))
        offsets.append(offset)
        offset += len(blob) + (-len(blob) % alignment)
    header = b"".join(head)
    with open(path, "wb") as f:
        f.write(header)
        f.write(b"\0" * (-len(header) % alignment))
        for blob in blobs:
            f.write(blob)
            f.write(b"\0" * (-len(blob) % alignment))


# --------------------------------------------------------------------------------------
# Reader

class _Cursor:
    def __init__(self, buf, path):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n, what):
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: truncated file while reading {what} at byte {self.pos}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def string(self, what):
        (n,) = self.unpack("<Q", what)
        raw = self.take(n, what)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{self.path}: {what}: invalid UTF-8") from None


class GGUFFile:
    """A parsed GGUF file, memory-mapped.

    metadata: dict key -> value (scalars as Python values, numeric arrays as numpy arrays,
        string arrays as lists of str), in file order.
    types: dict key -> value_type, or (ARRAY, element_type) for arrays.
    tensor_infos: list of dicts {name, ggml_type, ne, shape, offset, nbytes} in file order.
    tensors: dict name -> read-only numpy view in PyTorch shape (ne reversed).
    alignment, data_start: as in the file."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            try:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # empty file
                raise GGUFError(f"{path}: empty file") from None
        buf = memoryview(self._mm)
        c = _Cursor(buf, path)
        if bytes(c.take(4, "magic")) != MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        (version,) = c.unpack("<I", "version")
        if version != VERSION:
            raise GGUFError(f"{path}: GGUF version {version} (only {VERSION} is supported)")
        n_tensors, n_kv = c.unpack("<QQ", "header counts")
        self.version = version
        self.metadata, self.types, self._kv_start = {}, {}, {}
        for _ in range(n_kv):
            start = c.pos
            key = c.string("metadata key")
            self._kv_start[key] = start
            if key in self.metadata:
                raise GGUFError(f"{path}: duplicate metadata key {key}")
            (vtype,) = c.unpack("<I", f"type of {key}")
            self.metadata[key], self.types[key] = self._value(c, vtype, key)
        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.metadata:
            a = self.metadata["general.alignment"]
            if self.types["general.alignment"] != UINT32 or a < 8 or a & (a - 1):
                raise GGUFError(f"{path}: general.alignment must be a u32 power of two >= 8")
            self.alignment = a
        self.tensor_infos = []
        seen = set()
        for _ in range(n_tensors):
            name = c.string("tensor name")
            if name in seen:
                raise GGUFError(f"{path}: duplicate tensor {name}")
            seen.add(name)
            (n_dims,) = c.unpack("<I", f"dims of {name}")
            if not 1 <= n_dims <= 4:
                raise GGUFError(f"{path}: tensor {name}: {n_dims} dimensions")
            ne = list(c.unpack(f"<{n_dims}Q", f"shape of {name}"))
            gtype, offset = c.unpack("<IQ", f"type/offset of {name}")
            if gtype not in _GGML_NP:
                raise GGUFError(f"{path}: tensor {name}: unsupported ggml type {gtype}")
            count = 1
            for n in ne:
                count *= n
            self.tensor_infos.append(dict(name=name, ggml_type=gtype, ne=ne,
                                          shape=tuple(reversed(ne)), offset=offset,
                                          nbytes=count * _GGML_NP[gtype].itemsize))
        self.data_start = c.pos + (-c.pos % self.alignment)
        data_len = len(buf) - self.data_start
        if data_len < 0:
            raise GGUFError(f"{path}: truncated before tensor data")
        self.tensors = {}
        spans = []
        whole = np.frombuffer(self._mm, dtype=np.uint8)
        for t in self.tensor_infos:
            off, nb = t["offset"], t["nbytes"]
            if off % self.alignment:
                raise GGUFError(f"{path}: tensor {t['name']}: offset {off} not a multiple "
                                f"of alignment {self.alignment}")
            if off + nb > data_len:
                raise GGUFError(f"{path}: tensor {t['name']}: data [{off}, {off + nb}) beyond "
                                f"end of data ({data_len} bytes)")
            spans.append((off, off + nb, t["name"]))
            start = self.data_start + off
            self.tensors[t["name"]] = (whole[start:start + nb].view(_GGML_NP[t["ggml_type"]])
                                       .reshape(t["shape"]))
        spans.sort()
        for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
            if b1 < e0:
                raise GGUFError(f"{path}: tensors {n0} and {n1} overlap")

    @staticmethod
    def _value(c, vtype, key):
        if vtype == STRING:
            return c.string(key), vtype
        if vtype == ARRAY:
            etype, count = c.unpack("<IQ", f"array header of {key}")
            if etype == STRING:
                return [c.string(f"{key} element") for _ in range(count)], (ARRAY, etype)
            if etype not in _NP:
                raise GGUFError(f"{c.path}: {key}: unsupported array element type {etype}")
            dt = np.dtype(_NP[etype])
            raw = c.take(count * dt.itemsize, key)
            arr = np.frombuffer(raw, dtype=dt)
            if etype == BOOL:
                if not np.isin(arr, (0, 1)).all():
                    raise GGUFError(f"{c.path}: {key}: bool array holds values other than 0/1")
                arr = arr.astype(bool)
            return arr, (ARRAY, etype)
        if vtype not in _NP:
            raise GGUFError(f"{c.path}: {key}: unknown value type {vtype}")
        dt = np.dtype(_NP[vtype])
        v = np.frombuffer(c.take(dt.itemsize, key), dtype=dt)[0]
        if vtype == BOOL:
            if v > 1:
                raise GGUFError(f"{c.path}: {key}: bool value {v}")
            return bool(v), vtype
        return (float(v) if vtype in (FLOAT32, FLOAT64) else int(v)), vtype

    def metadata_to_write(self, skip=()):
        """[(key, type, value)] as write() takes them: every key but the CRC-32 keys (write
        computes them again) and those in skip, in the file's order."""
        out = []
        for k, v in self.metadata.items():
            if k in (CRC_KEY, META_CRC_KEY) or k in skip:
                continue
            t = self.types[k]
            out.append((k, ARRAY, (t[1], v)) if isinstance(t, tuple) else (k, t, v))
        return out

    def tensor_bytes(self, name):
        t = next(t for t in self.tensor_infos if t["name"] == name)
        start = self.data_start + t["offset"]
        return self._mm[start:start + t["nbytes"]]

    def metadata_crc_ok(self, key=META_CRC_KEY):
        """None if the file has no metadata CRC, else whether it is the last key, a u32,
        and matches the bytes of the key/value pairs before it."""
        if key not in self.metadata:
            return None
        if list(self.metadata)[-1] != key or self.types[key] != UINT32:
            return False
        first = 24  # magic, version, tensor and key counts
        return zlib.crc32(self._mm[first:self._kv_start[key]]) == self.metadata[key]

    def crc_mismatches(self, crc_key=CRC_KEY):
        """Names of tensors whose bytes do not match crc_key (all of them if it is absent
        or has the wrong length)."""
        crcs = self.metadata.get(crc_key)
        if crcs is None or len(crcs) != len(self.tensor_infos):
            return [t["name"] for t in self.tensor_infos]
        return [t["name"] for t, want in zip(self.tensor_infos, crcs)
                if zlib.crc32(self.tensor_bytes(t["name"])) != int(want)]


def load(path):
    """(metadata dict, tensors dict of numpy views) of a GGUF file."""
    f = GGUFFile(path)
    return f.metadata, f.tensors


# --------------------------------------------------------------------------------------
# Command line

def _type_name(t):
    if isinstance(t, tuple):
        return f"array[{TYPE_NAMES[t[1]]}]"
    return TYPE_NAMES[t]


# values of attend keys that are codes: shown with their meaning (weights/FORMAT.md)
_MEANINGS = {"generation.early_stopping": {0: "false", 1: "true", 2: "never"}}


def _show(value, t, limit, key=None):
    if isinstance(t, tuple):
        n = len(value)
        if n > limit:
            return f"<{n} elements>"
        if t[1] == STRING:
            return "[" + ", ".join(repr(s) for s in value) + "]"
        return "[" + ", ".join(str(x) for x in value.tolist()) + "]"
    if t == FLOAT32:
        return str(np.float32(value))  # the shortest text that gives back this f32: 1e-05
    if key in _MEANINGS and value in _MEANINGS[key]:
        return f"{value!r} ({_MEANINGS[key][value]})"
    return repr(value)


def dump(path, out=sys.stdout, limit=16):
    f = GGUFFile(path)
    print(f"{path}: GGUF v{f.version}, {len(f.metadata)} keys, {len(f.tensor_infos)} tensors, "
          f"alignment {f.alignment}, data at byte {f.data_start}", file=out)
    for k, v in f.metadata.items():
        t = f.types[k]
        print(f"  {k} ({_type_name(t)}) = {_show(v, t, limit, k)}", file=out)
    for t in f.tensor_infos:
        shape = "[" + ", ".join(str(x) for x in t["shape"]) + "]"
        ne = "[" + ", ".join(str(x) for x in t["ne"]) + "]"
        print(f"  tensor {t['name']} {GGML_NAMES[t['ggml_type']]} {shape} "
              f"(ne {ne}) offset {t['offset']}", file=out)
    bad = []
    if CRC_KEY in f.metadata:
        bad = f.crc_mismatches()
        print(f"{CRC_KEY}: " + ("all tensors match" if not bad else
                                "MISMATCH: " + ", ".join(bad)), file=out)
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(description="Inspect GGUF files.")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="print metadata and tensor names/types/shapes")
    d.add_argument("file")
    d.add_argument("--limit", type=int, default=16,
                   help="print arrays with at most this many elements in full (default 16)")
    a = p.parse_args(argv)
    try:
        return dump(a.file, limit=a.limit)
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0
    except (GGUFError, OSError) as e:
        print(f"gguf_io: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
