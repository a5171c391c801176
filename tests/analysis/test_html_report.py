"""The HTML report: self-contained, faithful to the Report, culprits and clipping shown, weights read right."""

import base64
import dataclasses
import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pytest

import intq
from intq.analysis import compare, render_html, weight_ranges, write_html_report
from intq.analysis.html_report import named_by_hints
from intq.analysis.plots import channel_flags
from intq.passes import simplify
from intq.qmath import QuantParams
from intq.testing.digits import load_split

NARROWED = "/features/features.8/Relu_output_0"  # the last conv's output: its consumer (a mean) hides no clipping
PNG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


class _LayerTable(HTMLParser):
    """The text of each cell of ``<table id="layers">``'s body rows."""

    def __init__(self):
        super().__init__()
        self.rows, self._in_table, self._in_body, self._cell = [], False, False, None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("id") == "layers":
            self._in_table = True
        elif self._in_table and tag == "tbody":
            self._in_body = True
        elif self._in_body and tag == "tr":
            self.rows.append([])
        elif self._in_body and tag == "td":
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(self._cell)
            self._cell = None
        elif tag == "table":
            self._in_table = self._in_body = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _table(text):
    parser = _LayerTable()
    parser.feed(text)
    return parser.rows


@pytest.fixture(scope="module")
def digits():
    (xtr, _), (xte, _) = load_split()
    fg = simplify(intq.load("intq/data/digits_cnn.onnx", input_shapes={"image": (1, 1, 8, 8)}))
    table = intq.calibrate(fg, [x[None] for x in xtr[:200]])
    return fg, table, [{"image": x[None]} for x in xte[:30]]


@pytest.fixture(scope="module")
def good(digits):
    fg, table, samples = digits
    qg = intq.quantize(fg, table=table)
    return fg, qg, compare(fg, qg, samples)


@pytest.fixture(scope="module")
def broken(digits):
    fg, table, samples = digits
    lo, hi = table[NARROWED]
    qg = intq.quantize(fg, table=table.with_ranges({NARROWED: (lo, 0.3 * hi)}))
    return fg, qg, compare(fg, qg, samples)


def _figures(rep, focus, all_histograms):
    """PNGs the page should hold: each focused tensor's histogram (and channel ranges when it has more
    than one channel), the other tensors' histograms when asked, 4 weighted layers' weight figures."""
    n = sum(1 + (rep.details[t].channel_low is not None and rep.details[t].channel_low.size > 1) for t in focus)
    return n + (len(rep.details) - len(focus) if all_histograms else 0) + 4


def _page_data(text):
    m = re.search(r'<script type="application/json" id="intq-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


def test_the_report_is_self_contained_and_shows_the_reports_figures(good, tmp_path):
    fg, qg, rep = good
    path = write_html_report(rep, tmp_path / "report.html", float_graph=fg, int_graph=qg, worst=2, all_histograms=True)
    text = path.read_text(encoding="utf-8")
    # nothing external: no remote image, stylesheet or script file; the two scripts are inline
    assert 'src="http' not in text and "<link" not in text and "<script src" not in text
    assert text.count("<script") == 2
    rows = _table(text)
    assert [r[1] for r in rows] == [r.name for r in rep.rows]  # one row per compared tensor, worst first
    assert [float(r[3]) for r in rows] == [round(r.sqnr_db, 2) for r in rep.rows]
    assert [float(r[7]) for r in rows] == [round(100 * r.saturated, 2) for r in rep.rows]
    focus = named_by_hints(rep, 2)
    assert focus == [r.name for r in rep.rows[:2]]  # no hint on the good model: the 2 worst
    pngs = PNG.findall(text)
    assert len(pngs) == _figures(rep, focus, True)
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert text.count("<details>") == 1 and "top-1 agreement 100.00%" in text
    # the page's script reads the embedded data: one row per table row, the sample count the header says
    data = _page_data(text)
    assert [r[0] for r in data["rows"]] == [r.name for r in rep.rows] and data["samples"] == rep.samples == 30
    assert data["version"] == intq.__version__ and f"<dd>{intq.__version__}</dd>" in text
    assert "every figure on this page is computed on these 30 samples" in text
    # per-layer SQNR as one HTML bar per tensor in graph order (no chart to squeeze 200 labels into)
    bars = re.search(r"<div class=bars id=sqnr-bars>(.*?)</div></div>\n", text, re.S) or re.search(
        r"<div class=bars id=sqnr-bars>(.*)", text, re.S)
    assert bars.group(1).count('<div class="bar-row') == len(rep.details)


def test_a_too_narrow_range_is_ranked_worst_and_its_clipping_shown(broken):
    fg, qg, rep = broken
    text = render_html(rep, float_graph=fg, int_graph=qg, worst=1)
    worst = rep.rows[0]
    assert worst.name == NARROWED and worst.hint.startswith("clipping") and worst.saturated > 0.05
    assert _table(text)[0][1] == NARROWED and 'class="culprit"' in text
    focus = named_by_hints(rep, 1)
    assert focus[0] == NARROWED and all(n in rep.details for n in focus)
    assert len(PNG.findall(text)) == _figures(rep, focus, False)
    figure = re.search(r'<figure class=card id="hist-\d+">.*?</figure>', text, re.S).group(0)  # the worst's
    assert f"<code>{NARROWED}</code>" in figure and f"{100 * worst.saturated:.2f}% clipped" in figure
    # its channels against the one clip range they share: the narrowed range leaves some past it
    narrow, beyond = channel_flags(rep.details[NARROWED])
    assert f"{rep.details[NARROWED].channel_low.size} channels: {int(narrow.sum())} span under 1/8" in figure
    assert beyond.sum() > 0 and f"{int(beyond.sum())} reach past it" in figure
    assert f"first culprit in graph order</dt><dd>{NARROWED}" in text
    detail = rep.details[NARROWED]
    assert detail.float_range[1] > 2 * detail.clip[1]  # the histogram reaches well past the clip range


def test_every_tensor_a_hint_names_is_shown_in_full(good):
    """A hint that blames an upstream tensor gets that tensor's figures too (not only the 6 worst)."""
    fg, qg, rep = good
    victim, blamed = rep.rows[-1], rep.rows[-2]  # the two best: never among the worst shown
    rows = (*rep.rows[:-1], dataclasses.replace(victim, hint=f"inherited: the error comes from {blamed.name} upstream"))
    rep2 = dataclasses.replace(rep, rows=rows)
    focus = named_by_hints(rep2, 0)
    assert focus == [victim.name, blamed.name]
    text = render_html(rep2, float_graph=fg, int_graph=qg, worst=0)
    for name in focus:
        assert re.search(rf'<figure class=card id="hist-\d+"><h3><code>{re.escape(name)}</code>', text)


def test_labels_and_several_runs_share_one_page(digits):
    """Accuracy with labels in the header; --against / --sweep runs as one table and one chart."""
    fg, table, samples = digits
    (_, _), (_, y) = load_split()
    labels = y[: len(samples)]
    runs = []
    for name, per_channel in (("per-channel", True), ("per-tensor", False)):
        qg = intq.quantize(fg, table=table, per_channel=per_channel)
        runs.append((name, compare(fg, qg, samples, labels=labels), fg, qg))
    rep, qg = runs[0][1], runs[0][3]
    assert rep.accuracy is not None and rep.labelled_rows == len(samples)
    text = render_html(rep, float_graph=fg, int_graph=qg, runs=runs, command="intq compare m.onnx --sweep x")
    f, q = rep.accuracy
    assert f"float {100 * f:.2f}%, int8 {100 * q:.2f}%" in text
    runs_table = re.search(r"<table id=runs>.*?</table>", text, re.S).group(0)
    assert runs_table.count("<tr>") == 3 and "per-tensor" in runs_table
    data = _page_data(text)
    assert [r["name"] for r in data["runs"]] == ["per-channel", "per-tensor"]
    assert data["runs"][1]["settings"]["per_channel"] is False
    assert "<dd>intq compare m.onnx --sweep x</dd>" in text
    assert len(PNG.findall(text)) == _figures(rep, named_by_hints(rep, 6), False) + 1  # + the runs' chart


def test_the_layout_does_not_grow_with_200_layers(good):
    """200 tensors: the table and the bars scroll inside their boxes, one row each; no figure grows."""
    fg, qg, rep = good
    base = rep.rows[0]
    rows = tuple(dataclasses.replace(base, name=f"layer_{i:03d}/a_rather_long_tensor_name_output_0",
                                     sqnr_db=10.0 + i / 10, hint="") for i in range(200))
    big = dataclasses.replace(rep, rows=rows, details={})
    text = render_html(big, float_graph=fg, int_graph=qg, worst=0)
    assert len(_table(text)) == 200 and text.count('<div class="bar-row') == 200
    assert "<div class=\"scroll\"><table id=\"layers\">" in text and "class=bars id=sqnr-bars" in text
    assert len(PNG.findall(text)) == 4  # the 4 weighted layers: nothing per tensor without plotting data


def test_compare_keeps_what_the_plots_need(good, digits):
    fg, qg, rep = good
    samples = digits[2]
    assert list(rep.details) == sorted(rep.details, key=lambda n: rep.details[n].position)  # graph order
    assert set(rep.details) == {r.name for r in rep.rows}
    for d in rep.details.values():
        qp = qg.tensors[d.int_name].qparams
        s, zp = float(qp.scale[0]), int(qp.zero_point[0])
        assert d.clip == ((qp.qmin - zp) * s, (qp.qmax - zp) * s)
        assert d.histogram.total == len(samples) * int(np.prod(qg.tensors[d.int_name].shape))
        edges = d.histogram.edges()
        assert edges[0] <= d.float_range[0] <= d.float_range[1] < edges[-1]
    assert rep.target == "tflite" and rep.output_agreement["logits"] == 1.0


def test_weight_ranges_read_the_float_weights_and_flag_tiny_channels(digits):
    fg, table, _ = digits
    w = np.array(fg.tensors["fc.weight"].data)
    w[3] *= 1e-3  # one output channel with a tiny range: a per-tensor grid leaves it < 1 code
    tensors = dict(fg.tensors)
    tensors["fc.weight"] = dataclasses.replace(fg.tensors["fc.weight"], data=w)
    fg2 = fg.replace(tensors=tensors)
    qg = intq.quantize(fg2, table=table)
    layers = {x.layer: x for x in weight_ranges(fg2, qg)}
    assert [x.op for x in layers.values()] == ["CONV_2D"] * 3 + ["FULLY_CONNECTED"]
    fc = layers["/fc/Gemm"]
    assert fc.source == "float" and fc.per_channel and fc.qmax == 127
    np.testing.assert_array_equal(fc.low, w.min(axis=1))
    np.testing.assert_array_equal(fc.high, w.max(axis=1))
    assert np.flatnonzero(fc.tiny()).tolist() == [3]
    assert fc.tensor_scale == pytest.approx(np.abs(w).max() / 127)
    conv = layers["/features/features.3/Conv"]
    cw = fg2.tensors["onnx::Conv_34"].data.reshape(32, -1)
    np.testing.assert_array_equal(conv.high, cw.max(axis=1))
    qp: QuantParams = qg.tensors[f"{conv.layer}/weights"].qparams
    np.testing.assert_array_equal(conv.scales, qp.scale)


def test_tensor_names_and_the_title_are_escaped(good):
    fg, qg, rep = good
    evil = '<img src=x onerror="alert(1)">&'
    victim = rep.rows[0]
    rows = (dataclasses.replace(victim, name=evil), *rep.rows[1:])
    details = {(evil if n == victim.name else n): (dataclasses.replace(d, name=evil) if n == victim.name else d)
               for n, d in rep.details.items()}
    text = render_html(dataclasses.replace(rep, rows=rows, details=details), float_graph=fg, int_graph=qg,
                       worst=0, title="<b>digits</b>")
    assert evil not in text and "<b>digits</b>" not in text
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in text
    assert _table(text)[0][1] == evil  # the parser unescapes it back


def test_import_intq_does_not_import_matplotlib():
    code = "import sys, intq, intq.analysis; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _browser():
    import shutil

    return next((b for b in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
                 if shutil.which(b)), None)


def test_the_page_renders_in_headless_chromium_and_its_script_finds_its_data(broken, tmp_path):
    """The page as a browser shows it (tools/install_test_tools.sh installs chromium-headless-shell):
    the page's own script parsed the embedded data and found one table row per tensor (it sets
    data-intq-ready="yes" and writes the counts into #intq-status), and a screenshot is a real page."""
    browser = _browser()
    if browser is None:
        pytest.skip("no headless Chromium (tools/install_test_tools.sh installs chromium-headless-shell)")
    fg, qg, rep = broken
    page = write_html_report(rep, tmp_path / "report.html", float_graph=fg, int_graph=qg, worst=2)
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,2000"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-intq-ready="yes"' in dom, dom[:500]
    assert f"report data: {len(rep.rows)} tensors on {rep.samples} samples, intq {intq.__version__}" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1400, 2000) and len(png) > 100_000  # a page of text and figures, not a blank one
