"""A self-contained HTML page of a float-vs-int8 comparison, with its plots embedded.

:func:`write_html_report` turns a :class:`~intq.analysis.Report` (from :func:`intq.analysis.compare`,
which keeps everything the activation plots need, so no model runs again) and the two graphs
(for the weights, which are constants) into one HTML file:

* a header: the models, the samples, the target, each graph output's SQNR and top-1 agreement;
* the layers ranked worst SQNR first, with every metric and the hint;
* per-layer SQNR in graph order, culprits (SQNR < ``POOR_SQNR_DB`` or a hint) in red;
* for the worst layers (optionally every layer, collapsed): the histogram of the float values
  with the int8 grid's clip range and the fraction clipped;
* for each CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: each output channel's weight range
  against the per-tensor and the per-channel grids, channels with a tiny range in red.

Plots are PNG ``data:`` URIs (no external file, no script). matplotlib (Agg canvas, no pyplot,
so the caller's backend is untouched) is imported only when a report is rendered.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from intq.analysis.compare import POOR_SQNR_DB, Report, TensorDetail, TensorStats
from intq.extras import require
from intq.files import write_file
from intq.ir import Graph
from intq.qmath import dequantize

#: A channel that spans fewer codes than this on a per-tensor weight grid keeps under 3 bits of
#: resolution (8 levels on its larger side): per-channel scales are what saves it.
TINY_CHANNEL_CODES = 8

#: Output-channel axis of the integer weight, per op, when the weight is per-tensor (TFLite layouts:
#: CONV_2D OHWI, DEPTHWISE_CONV_2D 1HW(C*M), FULLY_CONNECTED [out, in]).
INT_WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0}

_HIST_COLOR, _CLIP_COLOR, _OK_COLOR, _BAD_COLOR = "#4c72b0", "#c44e52", "#4c72b0", "#c44e52"


@dataclass(frozen=True)
class WeightRanges:
    """Each output channel's float weight range in one layer, and the int8 grids for it.

    ``low[c]``, ``high[c]``: min and max of channel ``c``'s float weights (the float graph's, or
    the dequantized int8 weights when the float node cannot be matched: ``source``).
    ``scales[c]``: the step the integer graph uses for channel ``c`` (all equal when per-tensor).
    A per-tensor grid would use ``tensor_scale = max_c max(|low_c|, |high_c|) / qmax``.
    """

    layer: str  # the node's name
    op: str
    weight: str  # the integer weight tensor's name
    low: np.ndarray
    high: np.ndarray
    scales: np.ndarray
    per_channel: bool
    qmax: int
    source: str  # "float" or "dequantized"

    @property
    def tensor_scale(self) -> float:
        """The step of a per-tensor symmetric grid: ``max |w| / qmax``."""
        return float(max(np.abs(self.low).max(), np.abs(self.high).max())) / self.qmax

    def per_tensor_codes(self) -> np.ndarray:
        """Codes each channel's larger side spans on the per-tensor grid: ``max(|low_c|, |high_c|) / tensor_scale``."""
        scale = self.tensor_scale
        peak = np.maximum(np.abs(self.low), np.abs(self.high))
        return peak / scale if scale > 0 else np.zeros_like(peak)

    def tiny(self) -> np.ndarray:
        """Channels that would keep fewer than :data:`TINY_CHANNEL_CODES` codes per-tensor."""
        return self.per_tensor_codes() < TINY_CHANNEL_CODES


# ------------------------------------------------------------------------------- data gathering


def _float_weight_axis(node) -> int | None:
    """The output-channel axis of a float node's weight (input 1), or None for other ops."""
    if node.op_type == "Conv":
        return 0  # OIHW, also grouped and depthwise: (C*M, 1, kh, kw)
    if node.op_type == "Gemm":
        return 0 if node.attrs.get("transB", 0) else 1
    if node.op_type == "MatMul":
        return -1
    return None


def _channel_min_max(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    w = np.moveaxis(np.asarray(w, dtype=np.float64), axis, 0).reshape(w.shape[axis], -1)
    return w.min(axis=1), w.max(axis=1)


def _float_weight(float_graph: Graph, int_graph: Graph, node) -> np.ndarray | None:
    """The float weights of the float node an integer node came from (same name, or the producer
    of the float tensor its output stands for), or None."""
    fnodes = {n.name: n for n in float_graph.nodes}
    fnode = fnodes.get(node.name)
    if fnode is None:
        float_name = int_graph.metadata.get("float_tensor_of", {}).get(node.outputs[0], (None,))[0]
        fnode = next((n for n in float_graph.nodes if float_name in n.outputs), None)
    if fnode is None or len(fnode.inputs) < 2 or _float_weight_axis(fnode) is None:
        return None
    t = float_graph.tensors.get(fnode.inputs[1])
    if t is None or not t.is_constant:
        return None
    return np.moveaxis(np.asarray(t.data), _float_weight_axis(fnode), 0)


def weight_ranges(float_graph: Graph, int_graph: Graph) -> list[WeightRanges]:
    """Per-output-channel weight ranges of every conv / depthwise / fully connected layer, in graph order."""
    out = []
    for node in int_graph.nodes:
        if node.op_type not in INT_WEIGHT_AXIS or len(node.inputs) < 2:
            continue
        t = int_graph.tensors.get(node.inputs[1])
        if t is None or not t.is_constant or t.qparams is None:
            continue
        qp = t.qparams
        axis = qp.axis if qp.axis is not None else INT_WEIGHT_AXIS[node.op_type]
        channels = t.data.shape[axis]
        fw = _float_weight(float_graph, int_graph, node)
        if fw is not None and fw.shape[0] == channels:
            low, high = _channel_min_max(fw, 0)
            source = "float"
        else:
            low, high = _channel_min_max(dequantize(t.data, qp), axis)
            source = "dequantized"
        scales = np.broadcast_to(qp.scale, (channels,)).astype(np.float64)
        out.append(WeightRanges(node.name, node.op_type, t.name, low, high, scales, qp.axis is not None,
                                qp.qmax, source))
    return out


def is_culprit(row: TensorStats) -> bool:
    """A layer worth a look: SQNR below :data:`POOR_SQNR_DB` or a hint."""
    return row.sqnr_db < POOR_SQNR_DB or bool(row.hint)


# ---------------------------------------------------------------------------------------- plots


def _figure(width: float, height: float, **margins):
    """A matplotlib Figure on an Agg canvas (no pyplot: the caller's backend is untouched).

    Margins are fixed (``subplots_adjust`` fractions): a layout engine costs more than the drawing.
    """
    require("matplotlib", "html", "the HTML report's plots")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(**margins)
    return fig


def _data_uri(fig) -> str:
    """The figure as a base64 PNG ``data:`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _short(name: str, n: int = 28) -> str:
    return name if len(name) <= n else "…" + name[-(n - 1):]


def plot_sqnr(report: Report) -> str:
    """Per-layer SQNR in graph order (bars; culprits red; infinite SQNR drawn capped, hatched)."""
    rows = {r.name: r for r in report.rows}
    names = [n for n in report.details if n in rows] or [r.name for r in report.rows]
    sqnr = np.array([rows[n].sqnr_db for n in names])
    finite = sqnr[np.isfinite(sqnr)]
    cap = (finite.max() if finite.size else POOR_SQNR_DB) + 10
    fig = _figure(max(6.0, min(0.45 * len(names) + 2, 18.0)), 4.2, left=0.1, right=0.98, bottom=0.36, top=0.92)
    ax = fig.add_subplot()
    x = np.arange(len(names))
    colors = [_BAD_COLOR if is_culprit(rows[n]) else _OK_COLOR for n in names]
    bars = ax.bar(x, np.where(np.isfinite(sqnr), sqnr, cap), color=colors)
    for bar, v in zip(bars, sqnr):
        if not np.isfinite(v):
            bar.set_hatch("//")
            ax.annotate("∞", (bar.get_x() + bar.get_width() / 2, cap), ha="center", va="bottom")
    ax.axhline(POOR_SQNR_DB, color="gray", ls="--", lw=1, label=f"{POOR_SQNR_DB:g} dB")
    step = max(1, len(names) // 40)  # at most ~40 labels
    ax.set_xticks(x[::step], [_short(n) for n in names[::step]], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("SQNR (dB)")
    ax.set_title("SQNR per tensor, in graph order (red: culprit)", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    return _data_uri(fig)


def plot_histogram(detail: TensorDetail, row: TensorStats | None) -> str:
    """The float values' histogram (log counts) with the int8 clip range marked and shaded beyond."""
    edges, counts = detail.histogram.edges(), detail.histogram.counts
    lo, hi = detail.clip
    fmin, fmax = detail.float_range
    left, right = min(lo, fmin), max(hi, fmax)
    pad = 0.03 * (right - left or 1.0)
    fig = _figure(7.0, 2.6, left=0.12, right=0.98, bottom=0.19, top=0.88)
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
    ax.set_title(f"{_short(detail.name, 60)}: clip range [{lo:.4g}, {hi:.4g}]{clipped}", fontsize=9)
    ax.set_xlabel("float value")
    ax.set_ylabel("count")
    return _data_uri(fig)


def plot_weights(w: WeightRanges) -> str:
    """Each output channel's weight range (vertical bars) against the per-tensor grid's extent
    (dashed) and the per-channel grids' (ticks); below, the codes each channel spans per-tensor."""
    c = np.arange(w.low.size)
    tiny = w.tiny()
    colors = np.where(tiny, _BAD_COLOR, _OK_COLOR)
    fig = _figure(8.0, 3.8, left=0.1, right=0.8, bottom=0.12, top=0.92, hspace=0.12)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    top.vlines(c, w.low, w.high, colors=colors, lw=max(0.6, min(4.0, 300 / max(len(c), 1))))
    extent = w.tensor_scale * w.qmax
    top.axhline(extent, color="gray", ls="--", lw=1, label="per-tensor grid\n±qmax·s")
    top.axhline(-extent, color="gray", ls="--", lw=1)
    if w.per_channel:
        top.plot(c, w.scales * w.qmax, "_", color="black", ms=6, label="per-channel grid\n±qmax·s_c")
        top.plot(c, -w.scales * w.qmax, "_", color="black", ms=6)
    if tiny.any():  # a tiny bar is invisible: mark the channel
        top.plot(c[tiny], (w.low[tiny] + w.high[tiny]) / 2, "x", color=_BAD_COLOR, ms=7,
                 label=f"tiny range\n(< {TINY_CHANNEL_CODES} codes per-tensor)")
    top.set_ylabel("weight range")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    grid = "per-channel" if w.per_channel else "per-tensor"
    top.set_title(f"{_short(w.layer, 48)} ({w.op}, {grid} int8 weights)", fontsize=9)
    bottom.bar(c, w.per_tensor_codes(), color=colors, width=0.8)
    bottom.axhline(TINY_CHANNEL_CODES, color=_BAD_COLOR, ls=":", lw=1, label=f"{TINY_CHANNEL_CODES} codes")
    bottom.set_ylim(0, w.qmax * 1.05)
    bottom.set_ylabel("codes on a\nper-tensor grid")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    bottom.set_xlabel("output channel")
    return _data_uri(fig)


# ----------------------------------------------------------------------------------------- html

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
td.l,th.l{text-align:left}tr.culprit td{background:#fbe9e9}code{font-size:12px}
figure{margin:1em 0}figcaption{font-size:13px;color:#444}img{max-width:100%}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:600}dd{margin:0}
"""


_READING = ("<p>Each tensor is compared with its float counterpart on the same inputs, so error made "
            "upstream shows downstream too: in graph order, look first where SQNR drops. Red rows: SQNR "
            f"below {POOR_SQNR_DB:g} dB or a hint. LSB = the tensor's int8 step; 0.5 LSB is ideal rounding.</p>")


def _e(value) -> str:
    """HTML-escaped text (quotes too: safe in attributes)."""
    return html.escape(str(value), quote=True)


def _num(v: float, fmt: str) -> str:
    return "inf" if v == float("inf") else format(v, fmt)


def _header(report: Report, float_graph: Graph, int_graph: Graph) -> str:
    """Models, samples, target, and each graph output's SQNR and top-1 agreement."""
    meta = int_graph.metadata
    source = float_graph.metadata.get("source", "")
    weights = {True: "per-channel", False: "per-tensor"}.get(meta.get("per_channel"), "?")
    items = [
        ("float model", float_graph.name + (f" (from {source})" if source else "")),
        ("integer graph", f"{int_graph.name}: {len(int_graph.nodes)} nodes, {meta.get('calibration', '?')} "
                          f"calibration, {weights} weights"),
        ("samples", report.samples),
        ("target", report.target),
    ]
    rows = {r.name: r for r in report.rows}
    for name in float_graph.outputs:
        parts = []
        if name in rows:
            parts.append(f"SQNR {_num(rows[name].sqnr_db, '.2f')} dB, cosine {rows[name].cosine:.4f}")
        if name in report.output_agreement:
            parts.append(f"top-1 agreement {100 * report.output_agreement[name]:.2f}%")
        items.append((f"output {name}", "; ".join(parts) or "not compared"))
    culprits = [r for r in report.rows if is_culprit(r)]
    items.append(("culprits", f"{len(culprits)} of {len(report.rows)} tensors (SQNR < {POOR_SQNR_DB:g} dB or a hint)"))
    first = next((n for n in report.details if n in rows and is_culprit(rows[n])), None)
    if first is not None:  # error flows downstream: the first culprit in graph order is where to look first
        items.append(("first culprit in graph order", f"{first} ({rows[first].op}, {_num(rows[first].sqnr_db, '.2f')} dB)"))
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items) + "</dl>"


def _table(report: Report, anchors: dict[str, str]) -> str:
    """The layers, worst SQNR first (``id="layers"``; one ``<tr>`` per compared tensor)."""
    head = ("<tr><th>#</th><th class=l>tensor</th><th class=l>op</th><th>SQNR dB</th><th>cosine</th>"
            "<th>max err LSB</th><th>mean err LSB</th><th>saturated %</th><th>range used %</th><th class=l>hint</th></tr>")
    body = []
    for i, r in enumerate(report.rows, 1):
        name = f'<a href="#{anchors[r.name]}">{_e(r.name)}</a>' if r.name in anchors else _e(r.name)
        body.append(
            f'<tr class="{"culprit" if is_culprit(r) else ""}"><td>{i}</td><td class=l><code>{name}</code></td>'
            f"<td class=l>{_e(r.op)}</td><td>{_num(r.sqnr_db, '.2f')}</td><td>{r.cosine:.5f}</td>"
            f"<td>{r.max_err_lsb:.2f}</td><td>{r.mean_err_lsb:.3f}</td><td>{100 * r.saturated:.2f}</td>"
            f"<td>{100 * r.range_used:.1f}</td><td class=l>{_e(r.hint)}</td></tr>")
    return f'<table id="layers"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _img(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{_e(alt)}">'


def _histogram_figure(detail: TensorDetail, row: TensorStats | None, anchor: str) -> str:
    lo, hi = detail.clip
    caption = (f"<code>{_e(detail.name)}</code>: float values in [{detail.float_range[0]:.4g}, "
               f"{detail.float_range[1]:.4g}]; int8 clip range [{lo:.4g}, {hi:.4g}] (step {detail.scale:.4g})")
    if row is not None:
        caption += f'; <span class="clipped">{100 * row.saturated:.2f}% clipped</span>'
    return (f'<figure id="{anchor}">{_img(plot_histogram(detail, row), "histogram of " + detail.name)}'
            f"<figcaption>{caption}</figcaption></figure>")


def _weights_figure(w: WeightRanges) -> str:
    tiny = np.flatnonzero(w.tiny())
    listed = ", ".join(str(int(c)) for c in tiny[:20]) + (" …" if tiny.size > 20 else "")
    caption = (f"<code>{_e(w.layer)}</code> ({_e(w.op)}), {w.low.size} output channels, ranges from the "
               f"{_e(w.source)} weights; per-tensor step {w.tensor_scale:.4g}, per-channel steps "
               f"{w.scales.min():.4g} … {w.scales.max():.4g}"
               + (f"; tiny-range channels: {listed}" if tiny.size else ""))
    return f'<figure>{_img(plot_weights(w), "weight ranges of " + w.layer)}<figcaption>{caption}</figcaption></figure>'


def _histogram_sections(report: Report, worst: int, all_histograms: bool) -> tuple[str, dict[str, str]]:
    """The worst layers' histograms, and (collapsed) the others'; the anchors of each tensor."""
    rows = {r.name: r for r in report.rows}
    order = list(report.details)
    anchors = {name: f"hist-{i}" for i, name in enumerate(order)}
    first = [r.name for r in report.rows if r.name in report.details][:worst]
    parts = [_histogram_figure(report.details[n], rows[n], anchors[n]) for n in first]
    rest = [n for n in order if n not in first] if all_histograms else []
    if rest:
        inner = "".join(_histogram_figure(report.details[n], rows.get(n), anchors[n]) for n in rest)
        parts.append(f"<details><summary>the other {len(rest)} tensors, in graph order</summary>{inner}</details>")
    shown = set(first) | set(rest)
    return "".join(parts), {n: a for n, a in anchors.items() if n in shown}


def _sensitivity_section(sens) -> str:
    """The per-layer sensitivity table (:mod:`intq.analysis.sensitivity`), largest gain first."""
    if sens is None:
        return ""
    rows = "".join(f"<tr><td class=l>{_e(r.layer)}</td><td class=l>{_e(r.op)}</td><td>{r.gain_db:.1f}</td>"
                   f"<td>{r.alone_float_db:.1f}</td><td>{r.alone_int8_db:.1f}</td></tr>" for r in sens.rows)
    bound = ""
    if sens.weight_only_db:  # intq.analysis.weight_bound: int8 weights, every activation float
        bound = ("<p>Weight-only bound (int8 weights, every activation in float): "
                 + ", ".join(f"{_e(k)} {v:.1f} dB" for k, v in sens.weight_only_db.items()) + ".</p>")
    hints = "".join(f"<p>hint: {_e(h)}</p>" for h in sens.hints)
    return ("<h2>Sensitivity: which layer to keep out of int8</h2>"
            f"<p>Output SQNR (per output channel, capped at 60 dB, averaged) with every layer in int8, simulated on "
            f"{sens.samples} samples: {sens.all_int8_db:.1f} dB. Per layer: kept in float with the rest in int8 "
            f"(gain over all-int8), and alone in int8 with the rest in float.</p>{bound}{hints}"
            "<table><tr><th class=l>layer</th><th class=l>op</th><th>gain dB</th><th>kept float dB</th>"
            f"<th>alone int8 dB</th></tr>{rows}</table>")


def render_html(report: Report, *, float_graph: Graph, int_graph: Graph, title: str | None = None,
                worst: int = 6, all_histograms: bool = False, sensitivity=None) -> str:
    """The report page as a string (see the module docstring); nothing is run, nothing written.

    ``worst``: how many of the worst tensors get a histogram; ``all_histograms`` adds the others
    in a collapsed section. PNGs: 1 (SQNR) + the histograms + 1 per weighted layer.
    ``sensitivity``: a :class:`~intq.analysis.sensitivity.SensitivityReport` to show after the
    layer table.
    """
    title = title or f"intq report: {float_graph.name}"
    hists, anchors = _histogram_sections(report, worst, all_histograms)
    weights = "".join(_weights_figure(w) for w in weight_ranges(float_graph, int_graph))
    sections = [
        f"<h1>{_e(title)}</h1>", _header(report, float_graph, int_graph),
        "<h2>Layers, worst first</h2>", _table(report, anchors), _READING, _sensitivity_section(sensitivity),
        "<h2>SQNR per layer</h2>", f"<figure>{_img(plot_sqnr(report), 'SQNR per layer')}</figure>",
        "<h2>Activation histograms and clip ranges</h2>",
        hists or "<p>No per-tensor histograms in this report.</p>",
        "<h2>Weight ranges per output channel</h2>", weights or "<p>No layer with weights.</p>",
    ]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(sections) + "\n</body></html>\n")


def write_html_report(report: Report, path, *, float_graph: Graph, int_graph: Graph, title: str | None = None,
                      worst: int = 6, all_histograms: bool = False, overwrite: bool = True,
                      sensitivity=None) -> Path:
    """Write :func:`render_html`'s page to ``path`` (UTF-8, atomically: :func:`intq.files.write_file`;
    an existing file is replaced unless ``overwrite`` is false); return the path."""
    return write_file(path, render_html(report, float_graph=float_graph, int_graph=int_graph, title=title,
                                        worst=worst, all_histograms=all_histograms, sensitivity=sensitivity),
                      overwrite=overwrite)
