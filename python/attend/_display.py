"""Pictures of a Result: inline SVG for Jupyter (no dependency) and matplotlib heatmaps."""
from __future__ import annotations

import html
import math
import re
from typing import Any, List, Optional, Sequence, Tuple, Union

from ._numpy import np  # imported on first use: plain translation needs no numpy


# characters XML 1.0 does not allow (a piece may hold any byte the tokenizer passed through)
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def esc(s: str) -> str:
    """Text safe inside HTML and SVG, in element content and in quoted attributes."""
    return html.escape(_XML_BAD.sub("\ufffd", str(s)), quote=True)


def _colour(w: float) -> str:
    """White (0) to dark blue (1); grey for a weight that is not a finite number."""
    if not math.isfinite(w):
        return "rgb(160,160,160)"
    w = min(max(w, 0.0), 1.0)
    lo, hi = (255, 255, 255), (8, 48, 107)
    return "rgb(%d,%d,%d)" % tuple(round(a + (b - a) * w) for a, b in zip(lo, hi))


def clean_label(piece: str) -> str:
    """A piece as a label: SentencePiece's word-start mark ``▁`` dropped (a space would be
    invisible), a piece that is only the mark shown as ``␣``."""
    s = str(piece)
    return s.replace("\u2581", "") or ("\u2423" if s else s)


def _legend_svg(x: int, y: int, width: int) -> str:
    """The colour scale under a heatmap: 0 to 1, white to dark blue."""
    steps = 20
    w = width / steps
    out = [f'<rect x="{x + i * w:.1f}" y="{y}" width="{w + 0.5:.1f}" height="10" fill="{_colour(i / (steps - 1))}"/>'
           for i in range(steps)]
    out.append(f'<rect x="{x}" y="{y}" width="{width}" height="10" fill="none" stroke="#999"/>')
    out.append(f'<text x="{x}" y="{y + 22}">0</text>')
    out.append(f'<text x="{x + width}" y="{y + 22}" text-anchor="end">1</text>')
    return "".join(out)


def heatmap_svg(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], cell: int = 18,
                max_label: int = 24, legend: bool = True) -> str:
    """A labelled heatmap of ``matrix`` [len(rows), len(cols)] (weights in 0..1) as one
    standalone ``<svg>`` element: row labels on the left, column labels on top, each cell's
    weight in its tooltip, the colour scale (0 to 1) below unless legend=False. Every label
    is escaped."""
    a = np.asarray(matrix, dtype=np.float64)
    R, K = a.shape
    def cut(s: str) -> str:
        return s if len(s) <= max_label else s[:max_label - 1] + "\u2026"
    rows = [cut(str(s)) for s in rows]
    cols = [cut(str(s)) for s in cols]
    char = 7.2
    left = int(max([len(s) for s in rows] + [1]) * char) + 10
    top = int(max([len(s) for s in cols] + [1]) * char) + 10
    width, height = max(left + K * cell + 4, left + 124), top + R * cell + 4 + (34 if legend else 0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">']
    for j, s in enumerate(cols):
        x, y = left + j * cell + cell * 0.7, top - 6
        out.append(f'<text x="{x:.1f}" y="{y}" transform="rotate(-90 {x:.1f} {y})">{esc(s)}</text>')
    for i, s in enumerate(rows):
        y = top + i * cell + cell * 0.7
        out.append(f'<text x="{left - 6}" y="{y:.1f}" text-anchor="end">{esc(s)}</text>')
        for j in range(K):
            w = float(a[i, j])
            out.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell}" height="{cell}" '
                       f'fill="{_colour(w)}"><title>{esc(s)} \u2192 {esc(cols[j])}: {w:.3f}</title></rect>')
    out.append(f'<rect x="{left}" y="{top}" width="{K * cell}" height="{R * cell}" fill="none" '
               'stroke="#999"/>')
    if legend:
        out.append(_legend_svg(left, top + R * cell + 8, 120))
    out.append("</svg>")
    return "".join(out)


def result_html(r: Any, view: Optional[str] = None) -> str:
    """HTML for Jupyter: source, translation, score and the cross-attention heatmap of
    ``view`` (target pieces as rows, source pieces as columns)."""
    label = "target" if r.forced else "translation"
    parts = ['<div class="attend-result" style="font-family: sans-serif">',
             f"<div><b>source:</b> {esc(r.source)}</div>",
             f"<div><b>{label}:</b> {esc(r.text)}</div>"]
    if len(r.tgt_ids):
        parts.append(f"<div><b>score:</b> {r.score:.4f}, normalized {r.normalized_score:.4f} "
                     f"({len(r.tgt_ids)} tokens with &lt;/s&gt;)</div>")
    if r.cross is not None and r.cross.shape[2] and r.cross.shape[3]:
        try:
            from ._library import view_name
            shown = view if view is not None else r.default_view()
            parts.append(f"<div><b>cross-attention, view {esc(view_name(shown))}:</b></div>")
            parts.append(heatmap_svg(r.view(view), [clean_label(t) for t in r.tgt_tokens],
                                     [clean_label(t) for t in r.src_tokens]))
        except Exception as e:  # a view the model lacks: say so instead of failing the display
            parts.append(f"<div>(no heatmap: {esc(str(e))})</div>")
    elif r.cross is None and len(r.tgt_ids):
        parts.append("<div><i>translate with attention=True to see where the model looked</i></div>")
    parts.append("</div>")
    return "\n".join(parts)


_KINDS = ("cross", "enc_self", "dec_self")


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("attend.plot needs matplotlib, which is not installed: "
                          "apt-get install python3-matplotlib, or pip install matplotlib "
                          f"({e})") from None
    return plt


def _matrix(result: Any, layer: int, head: Union[int, str, None], kind: str,
            view: Optional[str]) -> Tuple[np.ndarray, str, List[str], List[str]]:
    """The matrix plot() draws, its title, its row and column pieces."""
    if kind not in _KINDS:
        raise ValueError(f"kind is one of {', '.join(_KINDS)}, not {kind!r}")
    a = getattr(result, kind)
    if a is None:
        raise ValueError("this result holds no attention: translate with attention=True")
    rows: List[str] = result.src_tokens if kind == "enc_self" else result.tgt_tokens
    cols: List[str] = result.tgt_tokens if kind == "dec_self" else result.src_tokens
    if view is not None:
        if kind != "cross":
            raise ValueError("view= applies to cross-attention only")
        return result.view(view), f"cross-attention, view {view}", rows, cols
    L, H = a.shape[0], a.shape[1]
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -L <= layer < L:
        raise ValueError(f"layer must be an int in {-L}..{L - 1}, not {layer!r}")
    li = int(layer) % L
    if head is None or head == "avg":
        m, hn = a[li].mean(axis=0), "avg"
    elif isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not -H <= head < H:
        raise ValueError(f"head must be an int in {-H}..{H - 1} or 'avg', not {head!r}")
    else:
        m, hn = a[li, int(head) % H], str(int(head) % H)
    return m, f"{kind.replace('_', '-')} attention, layer {li}, head {hn}", rows, cols


def _draw(ax: Any, m: np.ndarray, rows: List[str], cols: List[str], title: str, cmap: str,
          vmax: float, alignment: bool, clean: bool, colorbar: bool = True) -> Any:
    im = ax.imshow(m, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    label = clean_label if clean else str
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels([label(c) for c in cols], rotation=90)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label(r) for r in rows])
    ax.set_title(title)
    if alignment and m.size:
        # each row's highest-weight column, </s> (the last column) left out when others exist
        k = m.shape[1] - 1 if m.shape[1] > 1 else m.shape[1]
        best = np.nanargmax(np.nan_to_num(m[:, :k], nan=-1.0), axis=1)
        ax.scatter(best, range(m.shape[0]), marker="s", s=40, facecolors="none", edgecolors="red")
    if colorbar:
        ax.figure.colorbar(im, ax=ax)
    return im


def _vmax(ms: Sequence[np.ndarray], vmax: Optional[float]) -> float:
    if vmax is not None:
        return float(vmax)
    peaks = [float(np.nanmax(m)) for m in ms if m.size]
    return max(peaks + [1e-9]) if peaks else 1.0


def plot(result: Any, layer: int = -1, head: Union[int, str, None] = 0, kind: str = "cross",
         view: Optional[str] = None, ax: Any = None, cmap: str = "Blues", vmax: Optional[float] = None,
         alignment: bool = False, clean: bool = True) -> Any:
    """Draw one attention matrix of ``result`` as a labelled matplotlib heatmap and return
    the Axes.

    ``kind``: "cross" (rows: target pieces, columns: source pieces), "enc_self" (source ×
    source) or "dec_self" (target × target). ``layer`` counts from 0, negative from the
    end; ``head`` is an index or "avg" (or None) for the layer's mean. For cross-attention,
    ``view`` (e.g. "penultimate:avg") replaces layer and head. ``vmax``: the weight drawn
    darkest (default: the matrix's largest; give the same vmax to compare panels, or use
    plot_grid). ``alignment=True`` marks each row's highest-weight column (``</s>`` left
    out). ``clean=False`` keeps the ``▁`` of the pieces in the labels. Draws into ``ax``
    when given, else a new figure. Needs matplotlib (ImportError otherwise)."""
    plt = _pyplot()
    m, title, rows, cols = _matrix(result, layer, head, kind, view)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * len(cols) + 2), max(3.0, 0.35 * len(rows) + 1.5)))
    _draw(ax, m, rows, cols, title, cmap, _vmax([m], vmax), alignment, clean)
    return ax


def plot_grid(result: Any, layers: Optional[Sequence[int]] = None, heads: Optional[Sequence[Any]] = None,
              kind: str = "cross", cmap: str = "Blues", vmax: Optional[float] = None,
              alignment: bool = False, clean: bool = True) -> Any:
    """Every (layer, head) of ``layers`` × ``heads`` (default: all layers, every head) as a
    grid of heatmaps on one colour scale (``vmax``: default the largest weight of all
    panels, so that panels compare; one colour bar for the grid). Returns the Figure."""
    plt = _pyplot()
    a = getattr(result, kind, None)
    if a is None:
        raise ValueError("this result holds no attention: translate with attention=True")
    layers = list(range(a.shape[0])) if layers is None else list(layers)
    heads = list(range(a.shape[1])) if heads is None else list(heads)
    panels = [[_matrix(result, li, h, kind, None) for h in heads] for li in layers]
    top = _vmax([p[0] for row in panels for p in row], vmax)
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False,
                             figsize=(3.2 * len(heads) + 1, 3.0 * len(layers)))
    im = None
    for i, row in enumerate(panels):
        for j, (m, title, rows, cols) in enumerate(row):
            im = _draw(axes[i][j], m, rows, cols, title, cmap, top, alignment, clean, colorbar=False)
    fig.colorbar(im, ax=axes.ravel().tolist())
    return fig
