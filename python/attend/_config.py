"""Config: a loaded model's configuration."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Tuple

from . import _capi as C


# ---------------------------------------------------------------------------------------
# Config


@dataclasses.dataclass(frozen=True)
class Config:
    """A loaded model's configuration: attend_config's fields, same names and values
    (``activation`` and ``dtype`` as str; ``early_stopping`` 0 false, 1 true, 2 never)."""

    vocab_size: int
    decoder_vocab_size: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_position_embeddings: int
    max_length: int
    activation: str
    scale_embedding: int
    shared_embeddings: int
    tied_output: int
    forced_eos: int
    pad_id: int
    eos_id: int
    unk_id: int
    decoder_start_id: int
    dtype: str
    tensor_count: int
    file_bytes: int
    metadata_checksum: int
    model_max_length: int
    generation_recorded: int
    num_beams: int
    early_stopping: int
    min_length: int
    no_repeat_ngram_size: int
    renormalize_logits: int
    length_penalty: float
    repetition_penalty: float
    max_line_bytes: int
    architecture: str
    n_languages: int
    languages: Tuple[str, ...]  # the codes src_lang / tgt_lang take (multilingual models)
    language_ids: Tuple[int, ...]
    alignment_view: str  # the view alignments use by default: the file's, else the default
    alignment_view_recorded: int  # 1: the file records it (attend.alignment.view)
    n_tasks: int
    tasks: Tuple[str, ...]  # the names task takes (T5's task_specific_params)
    task_prefixes: Tuple[str, ...]
    encoder_head_dim: int  # a head's width (T5's d_kv)
    decoder_head_dim: int
    relative_buckets: int  # T5's relative position buckets (0: other families)
    relative_max_distance: int
    audio: int = 0  # a speech model (Whisper: audio in, text out); 0 for text models
    n_mels: int = 0  # its log-mel bins
    audio_frames: int = 0  # the frames of one window of features (3000: 30 s)
    n_alignment_heads: int = 0  # Whisper: the heads word timestamps read
    alignment_heads: Tuple[Tuple[int, int], ...] = ()  # their (layer, head) pairs
    align_head_layer: int = -1  # a trained alignment head (attend.align_head.*): its decoder layer
    align_head_width: int = 0  # and width; 0 without one (a view names it `align`)

    @classmethod
    def _from_c(cls, c: C.attend_config) -> "Config":
        values = {}
        for name, _ in C.attend_config._fields_:
            v = getattr(c, name)
            if name in ("activation", "dtype", "architecture", "alignment_view"):
                v = C.decode(v)
            elif name in ("languages", "language_ids"):
                v = tuple(C.decode(v[i]) if name == "languages" else v[i] for i in range(c.n_languages))
            elif name in ("tasks", "task_prefixes"):
                v = tuple(C.decode(v[i]) for i in range(c.n_tasks))
            elif name == "alignment_heads":
                v = tuple((v[2 * k], v[2 * k + 1]) for k in range(c.n_alignment_heads))
            values[name] = v
        return cls(**values)

    def _to_c(self) -> C.attend_config:
        c = C.attend_config()
        for name, _ in C.attend_config._fields_:
            if name in ("n_languages", "languages", "language_ids", "n_tasks", "tasks", "task_prefixes",
                        "n_alignment_heads", "alignment_heads"):
                continue  # pointers into the loaded model: not needed by the callers
            v = getattr(self, name)
            setattr(c, name, v.encode("utf-8") if isinstance(v, str) else v)
        return c

    def as_dict(self) -> Dict[str, Any]:
        """The configuration as a plain dict."""
        return dataclasses.asdict(self)

    @property
    def default_beams(self) -> int:
        """The beams a translation uses when none are asked for (1: greedy)."""
        return self.num_beams if self.generation_recorded else 1
