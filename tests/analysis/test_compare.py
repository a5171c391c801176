"""Per-layer float-vs-int8 analysis: metrics computed right, culprits ranked first, hints apt."""

import numpy as np
import pytest
import torch

import intq
from intq.analysis import compare
from intq.passes import simplify
from intq.qmath import dequantize
from intq.testing.digits import load_split


@pytest.fixture(scope="module")
def digits():
    (xtr, _), (xte, _) = load_split()
    fg = simplify(intq.load("intq/data/digits_cnn.onnx", input_shapes={"image": (1, 1, 8, 8)}))
    return fg, xtr, [{"image": x[None]} for x in xte[:40]]


def test_a_well_calibrated_model_has_no_culprits(digits):
    fg, xtr, samples = digits
    qg = intq.quantize(fg, [x[None] for x in xtr[:200]])
    rep = compare(fg, qg, samples)
    assert rep.samples == 40 and len(rep.rows) == 7
    assert [r.sqnr_db for r in rep.rows] == sorted(r.sqnr_db for r in rep.rows)
    assert all(r.sqnr_db > 30 and r.saturated < 0.001 and r.hint == "" for r in rep.rows)
    assert "logits" in rep.table() and len(rep.worst(3)) == 3


def test_a_too_narrow_calibration_is_named_as_clipping(digits):
    fg, xtr, samples = digits
    qg = intq.quantize(fg, [x[None] * 0.3 for x in xtr[:20]])  # calibrated on far too dark digits
    rep = compare(fg, qg, samples)
    worst = rep.worst(1)[0]
    assert worst.sqnr_db < 10 and worst.saturated > 0.01 and worst.hint.startswith("clipping")


def test_metrics_match_a_hand_computation():
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU()).eval()
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 2, 6, 6)).astype(np.float32) for _ in range(4)]
    fg = simplify(intq.load(model, example_inputs=torch.from_numpy(data[0])))
    qg = intq.quantize(fg, data[:2])
    samples = [{fg.inputs[0]: x} for x in data]
    rep = compare(fg, qg, samples)
    row = next(r for r in rep.rows if r.op == "CONV_2D")
    int_name = next(k for k, (f, _) in qg.metadata["float_tensor_of"].items() if f == row.name)
    perm = qg.metadata["float_tensor_of"][int_name][1]
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    sig = noise = 0.0
    for s in samples:
        fi.run(s)
        qi.run(s)
        f = fi.tensors()[row.name].astype(np.float64)
        r = dequantize(qi.tensors()[int_name], qg.tensors[int_name].qparams).astype(np.float64).transpose(np.argsort(perm))
        sig += (f ** 2).sum()
        noise += ((f - r) ** 2).sum()
    assert row.sqnr_db == pytest.approx(10 * np.log10(sig / noise), rel=1e-12)
    assert 0 <= row.range_used <= 1 and row.max_err_lsb >= row.mean_err_lsb >= 0


def test_graphs_not_made_by_quantize_are_refused(digits):
    fg, _, samples = digits
    with pytest.raises(intq.IntqError, match="float-tensor mapping"):
        compare(fg, fg, samples)


def test_error_inherited_from_upstream_is_pointed_upstream(digits):
    """Clip the first conv's output hard: it is the clipping culprit, and a later layer that only
    carries its error is pointed upstream instead of being blamed (e.g. on its weights)."""
    fg, xtr, samples = digits
    table = intq.calibrate(fg, [x[None] for x in xtr[:200]], "minmax")
    first = "/features/features.2/Relu_output_0"
    lo, hi = table[first]
    rep = compare(fg, intq.quantize(fg, table=table.with_ranges({first: (lo, 0.05 * hi)})), samples)
    rows = {r.name: r for r in rep.rows}
    assert rows[first].hint.startswith("clipping")
    inherited = [r for r in rep.rows if r.hint.startswith("inherited")]
    assert inherited, rep.table()
    for r in inherited:  # each names an upstream tensor whose SQNR is indeed within 3 dB or worse
        upstream = r.hint.split("its input ")[1].split(" is already")[0]
        assert upstream in rows and rows[upstream].sqnr_db - r.sqnr_db < 3.0 and r.sqnr_db < 25
