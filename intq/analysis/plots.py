"""The report's figures: matplotlib on an Agg canvas, each returned as a PNG ``data:`` URI.

No pyplot (the caller's backend is untouched); matplotlib (``pip install 'intq[html]'``) is
imported only when a figure is drawn. Every figure is sized for a half-width card of the report
page (about 640 px wide) and keeps its labels horizontal whatever the number of channels or runs.

* :func:`plot_histogram` — a tensor's float values (log counts) with the int8 grid's clip range;
* :func:`plot_channel_ranges` — each channel's float range of an activation against the one clip
  range all its channels share (an activation is always per-tensor in int8);
* :func:`plot_weights` — each output channel's weight range against the per-tensor and
  per-channel grids;
* :func:`plot_runs` — several runs' per-layer SQNR in graph order, one line each.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np

from intq.analysis.compare import POOR_SQNR_DB, TensorDetail, TensorStats
from intq.extras import require

_HIST_COLOR, _CLIP_COLOR, _OK_COLOR, _BAD_COLOR, _HOT_COLOR = "#4c72b0", "#c44e52", "#4c72b0", "#c44e52", "#dd8452"

#: A channel of an activation whose range spans less than this fraction of the shared clip range
#: keeps fewer than 256 / 8 = 32 codes: per-tensor activation scales cost it resolution.
NARROW_CHANNEL = 1 / 8


def figure(width: float, height: float, **margins):
    """A matplotlib Figure on an Agg canvas (fixed margins: a layout engine costs more than the drawing)."""
    require("matplotlib", "html", "the HTML report's plots")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(**margins)
    return fig


def data_uri(fig) -> str:
    """The figure as a base64 PNG ``data:`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def short(name: str, n: int = 28) -> str:
    """``name`` cut to its last ``n`` characters (``…`` in front)."""
    return name if len(name) <= n else "…" + name[-(n - 1):]


def plot_histogram(detail: TensorDetail, row: TensorStats | None) -> str:
    """The float values' histogram (log counts) with the int8 clip range marked and shaded beyond."""
    edges, counts = detail.histogram.edges(), detail.histogram.counts
    lo, hi = detail.clip
    fmin, fmax = detail.float_range
    left, right = min(lo, fmin), max(hi, fmax)
    pad = 0.03 * (right - left or 1.0)
    fig = figure(6.4, 2.6, left=0.12, right=0.98, bottom=0.19, top=0.88)
    ax = fig.add_subplot()
    ax.stairs(np.maximum(counts, 0.5), edges, fill=True, color=_HIST_COLOR, alpha=0.8, baseline=0.5)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter("{x:g}")  # plain labels: mathtext (10^k) is the slowest part of a plot
    ax.axvspan(left - pad, lo, color=_CLIP_COLOR, alpha=0.12)
    ax.axvspan(hi, right + pad, color=_CLIP_COLOR, alpha=0.12)
    for v in (lo, hi):
        ax.axvline(v, color=_CLIP_COLOR, ls="--", lw=1.2)
    ax.set_xlim(left - pad, right + pad)
    clipped = f", {100 * row.saturated:.2f}% clipped" if row is not None else ""
    ax.set_title(f"{short(detail.name, 56)}: clip [{lo:.4g}, {hi:.4g}]{clipped}", fontsize=9)
    ax.set_xlabel("float value")
    ax.set_ylabel("count")
    return data_uri(fig)


def channel_flags(detail: TensorDetail) -> tuple[np.ndarray, np.ndarray]:
    """``(narrow, beyond)`` per channel of an activation: its range spans less than
    :data:`NARROW_CHANNEL` of the clip range, or reaches past the clip range."""
    lo, hi = detail.clip
    low, high = detail.channel_low, detail.channel_high
    span = max(hi - lo, 1e-30)
    return (high - low) < NARROW_CHANNEL * span, (low < lo) | (high > hi)


def plot_channel_ranges(detail: TensorDetail) -> str:
    """Each channel's float range (vertical bars) against the clip range every channel shares
    (dashed): narrow channels (fewer than 1/8 of the codes) in red, channels past the clip in orange."""
    low, high = detail.channel_low, detail.channel_high
    c = np.arange(low.size)
    narrow, beyond = channel_flags(detail)
    colors = np.where(beyond, _HOT_COLOR, np.where(narrow, _BAD_COLOR, _OK_COLOR))
    fig = figure(6.4, 2.6, left=0.12, right=0.98, bottom=0.19, top=0.88)
    ax = fig.add_subplot()
    ax.vlines(c, low, high, colors=colors, lw=max(0.6, min(4.0, 300 / max(len(c), 1))))
    if narrow.any():  # a tiny bar is invisible: mark the channel
        ax.plot(c[narrow], (low[narrow] + high[narrow]) / 2, "x", color=_BAD_COLOR, ms=5)
    lo, hi = detail.clip
    for v in (lo, hi):
        ax.axhline(v, color="gray", ls="--", lw=1)
    ax.set_xlabel("channel")
    ax.set_ylabel("float range")
    ax.set_title(f"{short(detail.name, 48)}: {int(narrow.sum())} of {low.size} channels narrow, "
                 f"{int(beyond.sum())} past the clip", fontsize=9)
    return data_uri(fig)


def plot_weights(w) -> str:
    """Each output channel's weight range (vertical bars) against the per-tensor grid's extent
    (dashed) and the per-channel grids' (ticks); below, the codes each channel spans per-tensor.
    ``w``: a :class:`intq.analysis.weight_ranges.WeightRanges`."""
    from intq.analysis.weight_ranges import TINY_CHANNEL_CODES

    c = np.arange(w.low.size)
    tiny = w.tiny()
    colors = np.where(tiny, _BAD_COLOR, _OK_COLOR)
    fig = figure(6.4, 3.6, left=0.12, right=0.76, bottom=0.13, top=0.91, hspace=0.12)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    top.vlines(c, w.low, w.high, colors=colors, lw=max(0.6, min(4.0, 300 / max(len(c), 1))))
    extent = w.tensor_scale * w.qmax
    top.axhline(extent, color="gray", ls="--", lw=1, label="per-tensor grid\n±qmax·s")
    top.axhline(-extent, color="gray", ls="--", lw=1)
    if w.per_channel:
        top.plot(c, w.scales * w.qmax, "_", color="black", ms=6, label="per-channel grid\n±qmax·s_c")
        top.plot(c, -w.scales * w.qmax, "_", color="black", ms=6)
    if tiny.any():
        top.plot(c[tiny], (w.low[tiny] + w.high[tiny]) / 2, "x", color=_BAD_COLOR, ms=7,
                 label=f"tiny range\n(< {TINY_CHANNEL_CODES} codes per-tensor)")
    top.set_ylabel("weight range")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    grid = "per-channel" if w.per_channel else "per-tensor"
    top.set_title(f"{short(w.layer, 44)} ({w.op}, {grid} int8 weights)", fontsize=9)
    bottom.bar(c, w.per_tensor_codes(), color=colors, width=0.8)
    bottom.axhline(TINY_CHANNEL_CODES, color=_BAD_COLOR, ls=":", lw=1, label=f"{TINY_CHANNEL_CODES} codes")
    bottom.set_ylim(0, w.qmax * 1.05)
    bottom.set_ylabel("codes on a\nper-tensor grid")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    bottom.set_xlabel("output channel")
    return data_uri(fig)


def plot_runs(order: Sequence[str], runs: Sequence[tuple[str, dict[str, float], float]]) -> str:
    """Several runs side by side: each run's SQNR per layer in graph order (``order``: the layer
    names), one line per run; ``runs``: ``(name, {layer: dB}, output dB)``, a run without layers
    (another converter's model) drawn as its output point at the end. Infinite SQNR is drawn at
    the top (an exact layer)."""
    finite = [v for _, layers, out in runs for v in (*layers.values(), out) if np.isfinite(v)]
    cap = (max(finite) if finite else POOR_SQNR_DB) + 5
    fig = figure(12.8, 3.6, left=0.06, right=0.78, bottom=0.14, top=0.9)
    ax = fig.add_subplot()
    x = np.arange(len(order))
    for name, layers, out in runs:
        label = f"{short(name, 30)} (output {out:.1f} dB)" if np.isfinite(out) else f"{short(name, 30)} (output exact)"
        if layers:
            y = np.array([layers.get(n, np.nan) for n in order], dtype=float)
            y = np.where(np.isinf(y), cap, y)
            ax.plot(x, y, marker="." if len(order) <= 60 else None, lw=1.2, label=label)
        else:
            ax.plot([len(order) - 1 if len(order) else 0], [min(out, cap)], "D", ms=7, label=label)
    ax.axhline(POOR_SQNR_DB, color="gray", ls="--", lw=1)
    ax.set_xlabel(f"layer, in graph order ({len(order)} layers; the table below names them)")
    ax.set_ylabel("SQNR (dB)")
    ax.set_title("SQNR per layer, each run on the same samples", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return data_uri(fig)
