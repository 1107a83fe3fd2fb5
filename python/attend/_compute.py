"""Model(compute_type=...): CTranslate2's compute-type names to attend_load_params.compute_type,
and a clear ValueError for those attend has no load option for."""
from __future__ import annotations

from typing import Dict

# CTranslate2's names (and attend's own) -> the library's
ACCEPTED: Dict[str, str] = {
    "default": "f32", "auto": "f32", "float32": "f32", "f32": "f32",
    "bfloat16": "bf16", "bf16": "bf16",
}

_INT8 = ("int8 arithmetic comes from an int8 file, not from a load option: write one with "
         "attend.quantize(path, 'model-int8.gguf') (or `attend quantize`, or attend.export(..., "
         "dtype='int8')) and load that file")

# the other CTranslate2 compute types, and why attend refuses each
REFUSED: Dict[str, str] = {
    "int8": _INT8, "int8_float32": _INT8, "int8_float16": _INT8, "int8_bfloat16": _INT8,
    "int16": "attend has no int16 arithmetic: use 'float32' (exact) or 'bfloat16'",
    "float16": "attend does not compute in float16 (an f16 file's weights are widened to f32 "
               "as they are read): use 'float32' (exact) or 'bfloat16'",
}


def library_name(compute_type: str) -> str:
    """The attend_load_params.compute_type for a Model(compute_type=...) value: "f32" for
    "default", "auto", "float32"; "bf16" for "bfloat16". ValueError naming what to do for
    CTranslate2's int8 / int16 / float16 types and anything else; TypeError for a non-str."""
    if not isinstance(compute_type, str):
        raise TypeError(f"compute_type must be a str, not {type(compute_type).__name__}")
    name = compute_type.strip().lower()
    if name in ACCEPTED:
        return ACCEPTED[name]
    if name in REFUSED:
        raise ValueError(f"compute_type={compute_type!r}: {REFUSED[name]}")
    raise ValueError(f"compute_type={compute_type!r}: must be 'default', 'auto' or 'float32' (f32 arithmetic, "
                     f"exact) or 'bfloat16' (bf16 products on AVX-512 BF16 CPUs)")
