"""The HTML report: self-contained, faithful to the Report, culprits and clipping shown, weights read right."""

import base64
import dataclasses
import re
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pytest

import intq
from intq.analysis import compare, render_html, weight_ranges, write_html_report
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


def test_the_report_is_self_contained_and_shows_the_reports_figures(good, tmp_path):
    fg, qg, rep = good
    path = write_html_report(rep, tmp_path / "report.html", float_graph=fg, int_graph=qg, worst=2, all_histograms=True)
    text = path.read_text(encoding="utf-8")
    assert 'src="http' not in text and "<script" not in text and "<link" not in text
    rows = _table(text)
    assert [r[1] for r in rows] == [r.name for r in rep.rows]  # one row per compared tensor, worst first
    assert [float(r[3]) for r in rows] == [round(r.sqnr_db, 2) for r in rep.rows]
    assert [float(r[7]) for r in rows] == [round(100 * r.saturated, 2) for r in rep.rows]
    pngs = PNG.findall(text)
    assert len(pngs) == 1 + len(rep.rows) + 4  # SQNR, every histogram (2 worst + the rest collapsed), 4 weighted layers
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert text.count("<details>") == 1 and "top-1 agreement 100.00%" in text


def test_a_too_narrow_range_is_ranked_worst_and_its_clipping_shown(broken):
    fg, qg, rep = broken
    text = render_html(rep, float_graph=fg, int_graph=qg, worst=1)
    worst = rep.rows[0]
    assert worst.name == NARROWED and worst.hint.startswith("clipping") and worst.saturated > 0.05
    assert _table(text)[0][1] == NARROWED and 'class="culprit"' in text
    assert len(PNG.findall(text)) == 1 + 1 + 4
    figure = re.search(r'<figure id="hist-\d+">.*?</figure>', text).group(0)  # the first histogram: the worst's
    assert f"<code>{NARROWED}</code>" in figure and f"{100 * worst.saturated:.2f}% clipped" in figure
    assert f"first culprit in graph order</dt><dd>{NARROWED}" in text
    detail = rep.details[NARROWED]
    assert detail.float_range[1] > 2 * detail.clip[1]  # the histogram reaches well past the clip range


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
