"""attend: translate with MarianMT / OPUS-MT checkpoints and see where the model looked.

Pure Python over the shared library libattend.so (ctypes; numpy for arrays, imported on
first use: plain translation needs none):

>>> import attend
>>> m = attend.Model("models/de-en.gguf", threads=2)
>>> r = m.translate(["Ich habe Hunger.", "Wo ist der Bahnhof?"], beam=4, attention=True)
>>> r[1].text, r[1].tgt_tokens
>>> r[1].cross.shape                      # [decoder layers, heads, T, S]
>>> r[1].alignment("penultimate:avg")     # [(source word, target word), ...]
>>> m.score("Ich habe Hunger.", "I am hungry.").logprob
>>> attend.explore(r, "page.html")        # attend explore's page (inline in Jupyter)
>>> attend.export("opus-mt-de-en/", "de-en.gguf", dtype="int8")   # python -m attend.export

translate() of one str returns one Result; of a list (any iterable) a list of Results.

The library is looked for in $ATTEND_LIBRARY, then ``attend/libattend.so`` beside this
package, then the build tree ``<repo>/build/libattend.so``, then ``PREFIX/lib`` of an
install, then the dynamic loader's path (see find_library). The library is opened on
first use.
"""
from __future__ import annotations

from ._capi import ATTEND_ALIGNMENT_VIEW_KEY, find_library, library_path
from ._display import heatmap_svg, plot, plot_grid
from ._explore import Page, explore
from . import export  # the exporters' package, callable as export() (attend/export/)
from .export import find_exporter
from ._common import AttendError, AttendWarning
from ._config import Config
from ._library import (default_model_path, default_threads, isa, isa_available, isa_bf16, library_version,
                       parse_view, split_sentences, view_name)
from ._model import Model
from ._results import Hypothesis, Result, Sentence, save_npz
from ._vocabulary import quantize
from ._speech import Segment, Transcript, Word, load_audio

__version__ = "0.4.0"

__all__ = [
    "ATTEND_ALIGNMENT_VIEW_KEY", "AttendError", "AttendWarning", "Config", "Hypothesis", "Model", "Page",
    "Result", "Segment", "Sentence", "Transcript", "Word", "load_audio", "default_model_path", "default_threads", "explore", "export", "find_exporter",
    "find_library", "heatmap_svg", "isa", "isa_available", "isa_bf16", "library_path", "library_version",
    "parse_view", "plot", "plot_grid", "quantize", "save_npz", "split_sentences", "view_name", "__version__",
]
