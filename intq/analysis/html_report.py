"""A self-contained HTML page of a float-vs-int8 comparison: what decides a deployment, first.

:func:`render_html` turns a :class:`~intq.analysis.Report` (from :func:`intq.analysis.compare`,
which keeps everything the figures need, so no model runs again) and the two graphs (for the
weights, which are constants) into one HTML page, every figure on the report's samples (the page
says how many; a sensitivity ranking on fewer says so):

* a header: the models, the samples, the target, the settings the integer graph was made with,
  each graph output's SQNR, cosine and top-1 agreement, each model's accuracy with labels, the
  first culprit in graph order, the intq version and the command line;
* with several runs (``intq compare --against`` / ``--sweep``): one table of the runs (output
  SQNR, agreement, accuracy, worst layer, settings) and one chart of their per-layer SQNR;
* the layers ranked worst SQNR first (``<table id="layers">``: every metric and the hint; the
  page's script sorts it by a column and filters it by text);
* per-layer SQNR in graph order as a list of bars (one row per layer: readable at any count);
* for every tensor a hint names (and the worst few): the histogram of its float values with the
  int8 clip range, and each channel's range against that one clip range;
* each CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED's per-channel weight ranges against the
  per-tensor and per-channel grids.

Figures are PNG ``data:`` URIs (:mod:`intq.analysis.plots`: matplotlib, ``pip install
'intq[html]'``); the report's data is embedded as JSON (``<script type="application/json"
id="intq-data">``) and the page's one inline script reads it: it writes what it found into
``#intq-status`` and sets ``data-intq-ready`` on ``<html>`` (what a headless browser checks). No
external file, font or script. The layout is fluid (cards in a grid, the tables in scroll boxes with
sticky headers), made to stay readable at 200 layers.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from intq.analysis.compare import POOR_SQNR_DB, Report, TensorDetail, TensorStats
from intq.analysis.plots import channel_flags, plot_channel_ranges, plot_histogram, plot_runs, plot_weights
from intq.analysis.runs import RunSummary, run_summary
from intq.analysis.weight_ranges import INT_WEIGHT_AXIS, TINY_CHANNEL_CODES, WeightRanges, weight_ranges
from intq.files import write_file
from intq.ir import Graph

__all__ = ["render_html", "write_html_report", "weight_ranges", "WeightRanges", "run_summary", "RunSummary",
           "is_culprit", "named_by_hints", "TINY_CHANNEL_CODES", "INT_WEIGHT_AXIS"]

#: the bar of an SQNR list spans 0 .. this many dB (infinite: full, marked ∞)
BAR_DB = 60.0
#: weight figures shown open; more are folded into a <details>
OPEN_WEIGHT_FIGURES = 12


def is_culprit(row: TensorStats) -> bool:
    """A layer worth a look: SQNR below :data:`POOR_SQNR_DB` or a hint."""
    return row.sqnr_db < POOR_SQNR_DB or bool(row.hint)


def _names_in(text: str, names) -> list[str]:
    """The tensor names that appear in ``text`` as whole names (not inside another name)."""
    found = []
    for n in sorted(names, key=len, reverse=True):
        if re.search(r"(?<![\w/.:-])" + re.escape(n) + r"(?![\w/.:-])", text):
            found.append(n)
            text = text.replace(n, " ")
    return found


def named_by_hints(report: Report, worst: int = 0) -> list[str]:
    """The tensors the page shows in full, in report order (worst first): each tensor with a hint,
    every tensor a hint names (a join's inputs, the upstream layer an error is inherited from), and
    the ``worst`` worst tensors; only tensors with plotting data."""
    out: list[str] = []

    def add(name):
        if name in report.details and name not in out:
            out.append(name)

    for i, r in enumerate(report.rows):
        if r.hint:
            add(r.name)
            for n in _names_in(r.hint, report.details):
                add(n)
        if i < worst:
            add(r.name)
    return out


# ----------------------------------------------------------------------------------------- html

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;padding:1.2em 2em;max-width:1800px;color:#222}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{padding:3px 8px;border-bottom:1px solid #e4e4e4;text-align:right;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0;cursor:pointer;white-space:nowrap}
td.l,th.l{text-align:left}td.name{word-break:break-all;max-width:38em}td.hint{max-width:40em}
tr.culprit td{background:#fbe9e9}code{font-size:12px}
.scroll{max-height:70vh;overflow:auto;border:1px solid #e4e4e4}
dl{display:grid;grid-template-columns:max-content auto;gap:3px 14px;margin:.6em 0}dt{font-weight:600}dd{margin:0;word-break:break-word}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:14px}
.card{border:1px solid #e4e4e4;border-radius:4px;padding:8px}
.card h3{font-size:14px;margin:0 0 4px;word-break:break-all}
figure{margin:.4em 0}figcaption{font-size:13px;color:#444}img{max-width:100%;height:auto}
.bars{max-height:70vh;overflow:auto;border:1px solid #e4e4e4;font-size:12px}
.bar-row{display:grid;grid-template-columns:3.5em minmax(12em,28em) 11em 1fr 5em;gap:6px;align-items:center;padding:1px 6px}
.bar-row:nth-child(even){background:#fafafa}.bar-row code{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;direction:rtl;text-align:left}
.bar{background:#eef1f6;height:11px;position:relative}.bar span{display:block;height:11px;background:#4c72b0}
.bar-row.culprit .bar span{background:#c44e52}.bar-row .v{text-align:right}
#intq-status{color:#666;font-size:12px}input#filter{width:24em;padding:3px;margin:.3em 0}
.note{color:#555;font-size:13px}
"""

_SCRIPT = """
(function () {
  var status = document.getElementById("intq-status");
  var data;
  try { data = JSON.parse(document.getElementById("intq-data").textContent); }
  catch (e) { status.textContent = "report data: unreadable (" + e + ")"; return; }
  var body = document.querySelector("#layers tbody");
  var rows = Array.prototype.slice.call(body.rows);
  var ok = rows.length === data.rows.length;
  status.textContent = "report data: " + data.rows.length + " tensors on " + data.samples + " samples, " +
    (data.runs ? data.runs.length + " runs, " : "") + "intq " + data.version +
    (ok ? "; click a column to sort, type to filter" : "; the table has " + rows.length + " rows (mismatch)");
  document.documentElement.setAttribute("data-intq-ready", ok ? "yes" : "mismatch");
  var filter = document.getElementById("filter");
  filter.addEventListener("input", function () {
    var q = filter.value.toLowerCase();
    rows.forEach(function (r) { r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none"; });
  });
  var heads = document.querySelectorAll("#layers thead th");
  Array.prototype.forEach.call(heads, function (th, i) {
    var up = true;
    th.addEventListener("click", function () {
      rows.sort(function (a, b) {
        var x = a.cells[i].textContent, y = b.cells[i].textContent;
        var nx = parseFloat(x === "inf" ? "Infinity" : x), ny = parseFloat(y === "inf" ? "Infinity" : y);
        var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
        return up ? c : -c;
      });
      up = !up;
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
"""

_READING = ("<p class=note>Each tensor is compared with its float counterpart on the same inputs, so error made "
            "upstream shows downstream too: in graph order, look first where SQNR drops. Red rows: SQNR "
            f"below {POOR_SQNR_DB:g} dB or a hint. LSB = the tensor's int8 step; 0.5 LSB is ideal rounding.</p>")


def _e(value) -> str:
    """HTML-escaped text (quotes too: safe in attributes)."""
    return html.escape(str(value), quote=True)


def _num(v: float | None, fmt: str) -> str:
    if v is None:
        return "-"
    return "inf" if v == float("inf") else format(v, fmt)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _settings_text(report: Report, int_graph: Graph) -> str:
    meta = int_graph.metadata
    weights = {True: "per-channel", False: "per-tensor"}.get(meta.get("per_channel"), "?")
    notes = report.settings.get("notes") or meta.get("conversion_notes") or ()
    text = f"{meta.get('calibration', '?')} calibration, {weights} weights"
    if meta.get("int16_tensors"):
        text += f", {len(meta['int16_tensors'])} int16 tensors"
    if meta.get("float_nodes"):
        text += f", float island {', '.join(meta['float_nodes'])}"
    if notes:
        text += f"; notes: {'; '.join(notes)}"
    return text


def _header(report: Report, float_graph: Graph, int_graph: Graph, sensitivity, command: str | None,
            version: str | None) -> str:
    """Models, samples, target, settings, each graph output's SQNR, accuracy, version, command."""
    source = float_graph.metadata.get("source", "")
    sens = ""
    if sensitivity is not None:
        sens = (f"; the sensitivity ranking: {'the same ' if sensitivity.samples == report.samples else 'the first '}"
                f"{sensitivity.samples}")
    items = [
        ("float model", float_graph.name + (f" (from {source})" if source else "")),
        ("integer graph", f"{int_graph.name}: {len(int_graph.nodes)} nodes; {_settings_text(report, int_graph)}"),
        ("samples", f"{report.samples}: every figure on this page is computed on these {report.samples} samples{sens}"),
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
    if report.accuracy is not None:
        f, q = report.accuracy
        items.append(("accuracy (top-1, labels)", f"float {100 * f:.2f}%, int8 {100 * q:.2f}% "
                                                  f"({100 * (q - f):+.2f} points, {report.labelled_rows} labelled rows)"))
    culprits = [r for r in report.rows if is_culprit(r)]
    items.append(("culprits", f"{len(culprits)} of {len(report.rows)} tensors (SQNR < {POOR_SQNR_DB:g} dB or a hint)"))
    first = next((n for n in report.details if n in rows and is_culprit(rows[n])), None)
    if first is not None:  # error flows downstream: the first culprit in graph order is where to look first
        items.append(("first culprit in graph order", f"{first} ({rows[first].op}, {_num(rows[first].sqnr_db, '.2f')} dB)"))
    if version:
        items.append(("intq version", version))
    if command:
        items.append(("command", command))
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items) + "</dl>"


def _table(report: Report, anchors: dict[str, str]) -> str:
    """The layers, worst SQNR first (``id="layers"``; one ``<tr>`` per compared tensor)."""
    head = ("<tr><th>#</th><th class=l>tensor</th><th class=l>op</th><th>SQNR dB</th><th>cosine</th>"
            "<th>max err LSB</th><th>mean err LSB</th><th>saturated %</th><th>range used %</th><th class=l>hint</th></tr>")
    body = []
    for i, r in enumerate(report.rows, 1):
        name = f'<a href="#{anchors[r.name]}">{_e(r.name)}</a>' if r.name in anchors else _e(r.name)
        body.append(
            f'<tr class="{"culprit" if is_culprit(r) else ""}"><td>{i}</td><td class="l name"><code>{name}</code></td>'
            f"<td class=l>{_e(r.op)}</td><td>{_num(r.sqnr_db, '.2f')}</td><td>{r.cosine:.5f}</td>"
            f"<td>{r.max_err_lsb:.2f}</td><td>{r.mean_err_lsb:.3f}</td><td>{100 * r.saturated:.2f}</td>"
            f'<td>{100 * r.range_used:.1f}</td><td class="l hint">{_e(r.hint)}</td></tr>')
    return (f'<input id="filter" type="search" placeholder="filter by tensor, op or hint" aria-label="filter">'
            f'<div class="scroll"><table id="layers"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></div>')


def _bar(db: float) -> str:
    width = 100.0 if not np.isfinite(db) else max(0.0, min(db / BAR_DB, 1.0)) * 100
    return f'<span class=bar><span style="width:{width:.1f}%"></span></span>'


def _sqnr_bars(report: Report, anchors: dict[str, str]) -> str:
    """Per-layer SQNR in graph order, one row per tensor (``id="sqnr-bars"``): a list that stays
    readable at any number of layers (names in full on hover, a scroll box)."""
    rows = {r.name: r for r in report.rows}
    names = [n for n in report.details if n in rows] or [r.name for r in report.rows]
    out = []
    for i, n in enumerate(names):
        r = rows[n]
        label = f'<a href="#{anchors[n]}">{_e(n)}</a>' if n in anchors else _e(n)
        out.append(f'<div class="bar-row{" culprit" if is_culprit(r) else ""}"><span>{i}</span>'
                   f'<code title="{_e(n)}"><bdi>{label}</bdi></code><span>{_e(r.op)}</span>{_bar(r.sqnr_db)}'
                   f'<span class=v>{"∞" if not np.isfinite(r.sqnr_db) else f"{r.sqnr_db:.1f}"} dB</span></div>')
    return (f"<p class=note>{len(names)} tensors in graph order; bars span 0-{BAR_DB:g} dB; red: culprit "
            f"(SQNR &lt; {POOR_SQNR_DB:g} dB or a hint).</p><div class=bars id=sqnr-bars>{''.join(out)}</div>")


def _img(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{_e(alt)}">'


def _tensor_card(detail: TensorDetail, row: TensorStats | None, anchor: str, channels: bool = True) -> str:
    """One tensor in full: its histogram with the clip range and, per channel, its float range
    against that one clip range (``channels``), with the metrics and the hint."""
    lo, hi = detail.clip
    caption = (f"float values in [{detail.float_range[0]:.4g}, {detail.float_range[1]:.4g}]; int8 clip range "
               f"[{lo:.4g}, {hi:.4g}] (step {detail.scale:.4g})")
    if row is not None:
        caption += (f'; <span class="clipped">{100 * row.saturated:.2f}% clipped</span>, SQNR '
                    f"{_num(row.sqnr_db, '.1f')} dB, {100 * row.range_used:.0f}% of the codes used")
    parts = [_img(plot_histogram(detail, row), "histogram of " + detail.name)]
    if channels and detail.channel_low is not None and detail.channel_low.size > 1:
        narrow, beyond = channel_flags(detail)
        parts.append(_img(plot_channel_ranges(detail), "channel ranges of " + detail.name))
        caption += (f"; {detail.channel_low.size} channels: {int(narrow.sum())} span under 1/8 of the clip range "
                    f"(under 32 codes), {int(beyond.sum())} reach past it")
    hint = f"<p><b>hint:</b> {_e(row.hint)}</p>" if row is not None and row.hint else ""
    return (f'<figure class=card id="{anchor}"><h3><code>{_e(detail.name)}</code></h3>{"".join(parts)}'
            f"<figcaption>{caption}</figcaption>{hint}</figure>")


def _tensor_sections(report: Report, worst: int, all_histograms: bool) -> tuple[str, dict[str, str]]:
    """The tensors hints name (and the worst few) in full, then (collapsed) the others' histograms;
    the anchor of each tensor shown."""
    rows = {r.name: r for r in report.rows}
    order = list(report.details)
    anchors = {name: f"hist-{i}" for i, name in enumerate(order)}
    focus = named_by_hints(report, worst)
    parts = [f"<div class=cards>{''.join(_tensor_card(report.details[n], rows.get(n), anchors[n]) for n in focus)}</div>"
             if focus else "<p>No tensor with a hint.</p>"]
    rest = [n for n in order if n not in focus] if all_histograms else []
    if rest:
        inner = "".join(_tensor_card(report.details[n], rows.get(n), anchors[n], channels=False) for n in rest)
        parts.append(f"<details><summary>the other {len(rest)} tensors' histograms, in graph order</summary>"
                     f"<div class=cards>{inner}</div></details>")
    shown = set(focus) | set(rest)
    return "".join(parts), {n: a for n, a in anchors.items() if n in shown}


def _weights_card(w: WeightRanges) -> str:
    tiny = np.flatnonzero(w.tiny())
    listed = ", ".join(str(int(c)) for c in tiny[:20]) + (" …" if tiny.size > 20 else "")
    caption = (f"{w.low.size} output channels, ranges from the {_e(w.source)} weights; per-tensor step "
               f"{w.tensor_scale:.4g}, per-channel steps {w.scales.min():.4g} … {w.scales.max():.4g}"
               + (f"; tiny-range channels: {listed}" if tiny.size else ""))
    return (f'<figure class=card><h3><code>{_e(w.layer)}</code> ({_e(w.op)})</h3>'
            f'{_img(plot_weights(w), "weight ranges of " + w.layer)}<figcaption>{caption}</figcaption></figure>')


def _weights_section(float_graph: Graph, int_graph: Graph) -> str:
    layers = weight_ranges(float_graph, int_graph)
    if not layers:
        return "<p>No layer with weights.</p>"
    cards = [_weights_card(w) for w in layers]
    head = f"<div class=cards>{''.join(cards[:OPEN_WEIGHT_FIGURES])}</div>"
    if len(cards) <= OPEN_WEIGHT_FIGURES:
        return head
    return head + (f"<details><summary>the other {len(cards) - OPEN_WEIGHT_FIGURES} layers with weights</summary>"
                   f"<div class=cards>{''.join(cards[OPEN_WEIGHT_FIGURES:])}</div></details>")


def _sensitivity_section(sens, report: Report) -> str:
    """The per-layer sensitivity table (:mod:`intq.analysis.sensitivity`), largest gain first."""
    if sens is None:
        return ""
    rows = "".join(f"<tr><td class=l><code>{_e(r.layer)}</code></td><td class=l>{_e(r.op)}</td><td>{r.gain_db:.1f}</td>"
                   f"<td>{r.alone_float_db:.1f}</td><td>{r.alone_int8_db:.1f}</td></tr>" for r in sens.rows)
    bound = ""
    if sens.weight_only_db:  # intq.analysis.weight_bound: int8 weights, every activation float
        bound = ("<p>Weight-only bound (int8 weights, every activation in float): "
                 + ", ".join(f"{_e(k)} {v:.1f} dB" for k, v in sens.weight_only_db.items()) + ".</p>")
    hints = "".join(f"<p>hint: {_e(h)}</p>" for h in sens.hints)
    which = (f"the same {sens.samples} samples as the rest of the page" if sens.samples == report.samples
             else f"the first {sens.samples} of the page's {report.samples} samples")
    return ("<h2>Sensitivity: which layer to keep out of int8</h2>"
            f"<p>Simulated (quantize-dequantize in float) on {which}. Output SQNR (per output channel, capped at "
            f"60 dB, averaged: not the header's whole-tensor SQNR) with every layer in int8: {sens.all_int8_db:.1f} dB. "
            f"Per layer: kept in float with the rest in int8 (gain over all-int8), and alone in int8 with the rest in "
            f"float.</p>{bound}{hints}"
            "<div class=scroll><table><thead><tr><th class=l>layer</th><th class=l>op</th><th>gain dB</th>"
            f"<th>kept float dB</th><th>alone int8 dB</th></tr></thead><tbody>{rows}</tbody></table></div>")


def _runs_section(runs: Sequence[RunSummary], order: Sequence[str]) -> str:
    """Several runs on the same samples: one table, one chart."""
    body = []
    for x in runs:
        s = x.settings
        weights = {True: "per-channel", False: "per-tensor"}.get(s.get("per_channel"), "?")
        settings = f"{s.get('calibration') or '?'}, {weights}" + (f"; {'; '.join(s.get('notes'))}" if s.get("notes") else "")
        body.append(f"<tr><td class=l><b>{_e(x.name)}</b></td><td>{_num(x.output_db, '.2f')}</td>"
                    f"<td>{_num(x.cosine, '.5f')}</td><td>{_pct(x.agreement)}</td><td>{_pct(x.float_accuracy)}</td>"
                    f"<td>{_pct(x.int_accuracy)}</td><td class=l><code>{_e(x.worst or '-')}</code> "
                    f"{_num(x.worst_db, '.1f')}</td><td>{x.tensors}</td><td class=l>{_e(settings)}</td></tr>")
    head = ("<tr><th class=l>run</th><th>output SQNR dB</th><th>cosine</th><th>top-1 agreement</th><th>float acc</th>"
            "<th>int8 acc</th><th class=l>worst layer (dB)</th><th>tensors</th><th class=l>settings</th></tr>")
    chart = plot_runs(order, [(x.name, dict(x.layers), x.output_db) for x in runs])
    return (f"<h2>{len(runs)} runs side by side</h2><p class=note>Each run compared with the same float model on the "
            f"same {runs[0].samples} samples. A run from another converter has no tensor mapping: its output only.</p>"
            f"<div class=scroll><table id=runs><thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div>"
            f"<figure>{_img(chart, 'SQNR per layer of each run')}</figure>")


def _json(value) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>`` or ``&`` left to end the element."""
    return json.dumps(value, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _data(report: Report, runs, version: str | None) -> dict:
    def db(v):
        return "inf" if v == float("inf") else round(float(v), 3)

    return {"version": version or "", "samples": report.samples, "target": report.target,
            "rows": [[r.name, r.op, db(r.sqnr_db), round(r.cosine, 6), round(r.saturated, 6), r.hint]
                     for r in report.rows],
            "accuracy": list(report.accuracy) if report.accuracy is not None else None,
            "runs": [x.as_dict() for x in runs] if runs else None}


def render_html(report: Report, *, float_graph: Graph, int_graph: Graph, title: str | None = None,
                worst: int = 6, all_histograms: bool = False, sensitivity=None,
                runs: Sequence[tuple[str, Report, Graph, Graph]] | None = None, command: str | None = None,
                version: str | None = None) -> str:
    """The report page as a string (see the module docstring); nothing is run, nothing written.

    ``worst``: how many of the worst tensors are shown in full besides every tensor a hint names;
    ``all_histograms`` adds the others' histograms in a collapsed section. ``sensitivity``: a
    :class:`~intq.analysis.sensitivity.SensitivityReport` to show after the layer table. ``runs``:
    ``(name, report, float graph, integer graph)`` of each run to show side by side (the first is
    ``report`` itself). ``command`` and ``version`` (default intq's) go into the header.
    """
    from intq.version import __version__

    version = version or __version__
    title = title or f"intq report: {float_graph.name}"
    tensors, anchors = _tensor_sections(report, worst, all_histograms)
    summaries = [run_summary(*r) for r in runs] if runs else []
    order = [n for n in report.details if any(n in x.layers for x in summaries)] if summaries else []
    sections = [
        f"<h1>{_e(title)}</h1>", "<p id=intq-status>report data: not read (the page's script did not run)</p>",
        _header(report, float_graph, int_graph, sensitivity, command, version),
        _runs_section(summaries, order) if summaries else "",
        "<h2>Layers, worst first</h2>", _table(report, anchors), _READING, _sensitivity_section(sensitivity, report),
        "<h2>SQNR per layer, in graph order</h2>", _sqnr_bars(report, anchors),
        "<h2>The tensors the hints name: histograms and channel ranges</h2>",
        "<p class=note>Activations are per-tensor in int8: every channel shares the one clip range (dashed). "
        "A channel that spans a small part of it keeps few codes; one that reaches past it is clipped.</p>", tensors,
        "<h2>Weight ranges per output channel</h2>", _weights_section(float_graph, int_graph),
        f'<script type="application/json" id="intq-data">{_json(_data(report, summaries, version))}</script>',
        f"<script>{_SCRIPT}</script>",
    ]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(s for s in sections if s) + "\n</body></html>\n")


def write_html_report(report: Report, path, *, float_graph: Graph, int_graph: Graph, title: str | None = None,
                      worst: int = 6, all_histograms: bool = False, overwrite: bool = True,
                      sensitivity=None, runs=None, command: str | None = None) -> Path:
    """Write :func:`render_html`'s page to ``path`` (UTF-8, atomically: :func:`intq.files.write_file`;
    an existing file is replaced unless ``overwrite`` is false); return the path."""
    return write_file(path, render_html(report, float_graph=float_graph, int_graph=int_graph, title=title,
                                        worst=worst, all_histograms=all_histograms, sensitivity=sensitivity,
                                        runs=runs, command=command),
                      overwrite=overwrite)
