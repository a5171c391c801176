"""SmoothQuant-style smoothing (intq.ptq.smoothing): the rewritten float graph computes the same
function, int8 gains where a LayerNorm output has an outlier channel, and the tensors it cannot
scale are skipped with the reason."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

import intq
from intq.convert import ConversionError
from intq.passes import simplify
from intq.ptq.smoothing import SmoothingError, smooth, smoothing_sites

C, T, N = 16, 8, 12
RNG = np.random.default_rng(25)
#: Float32 tolerance of "the same function": g/s, c/s and s*W are each rounded once to float32
#: (relative 6e-8), so every product term moves by a few ulps; summed over C=16 terms the outputs
#: (|y| up to ~10) move by < 1e-5 of their maximum. A rewrite that is not exact misses by >> 1e-3.
RTOL = 1e-5


def _model(residual: bool, outlier: float = 60.0):
    gamma = np.ones(C)
    gamma[3], gamma[11] = outlier, -outlier / 2  # outlier channels of the LayerNorm output
    inits = {"gamma": gamma, "beta": RNG.normal(0, 0.2, C), "wq": RNG.normal(0, 0.3, (C, N)),
             "wk": RNG.normal(0, 0.3, (C, N)), "wv": RNG.normal(0, 0.3, (C, N)), "bv": RNG.normal(0, 0.1, N)}
    for w in ("wq", "wk", "wv"):  # as in trained transformers, the outlier channels' weight rows are small
        inits[w][[3, 11]] /= outlier
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["ln", "wq"], ["q"]), helper.make_node("MatMul", ["ln", "wk"], ["k"]),
             helper.make_node("MatMul", ["ln", "wv"], ["v0"]), helper.make_node("Add", ["v0", "bv"], ["v"])]
    outs = ["q", "k", "v"]
    if residual:  # post-norm: the LayerNorm output is also the residual
        nodes.append(helper.make_node("Add", ["ln", "x"], ["res"]))
        outs.append("res")
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, [1, T, C])],
                          [helper.make_tensor_value_info(o, 1, None) for o in outs],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return simplify(intq.load(m))


def _data(n=32):
    return [{"x": RNG.normal(0, 1, (1, T, C)).astype(np.float32)} for _ in range(n)]


def _assert_same_function(a, b, samples):
    ia, ib = intq.Interpreter(a), intq.Interpreter(b)
    for s in samples:
        ya, yb = ia.run(s), ib.run(s)
        for k in a.outputs:
            np.testing.assert_allclose(yb[k], ya[k], rtol=0, atol=RTOL * np.abs(ya[k]).max())


def _sqnr(fg, qg, samples):
    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    sig = err = 0.0
    for s in samples:
        f, q = fi.run(s), qi.run(s)
        for k in ("q", "k", "v"):
            sig += float(np.sum(f[k].astype(np.float64) ** 2))
            err += float(np.sum((f[k].astype(np.float64) - q[k]) ** 2))
    return 10 * np.log10(sig / err)


def test_smoothing_is_the_same_function_and_shares_one_scale():
    g = _model(residual=False)
    data = _data()
    sg, report = smooth(g, data[:16], 0.5)
    _assert_same_function(g, sg, data[16:])
    assert report.layers == 3 and len(report.sites) == 1 and not report.sites[0].duplicate
    site = report.sites[0]
    s = g.constant(next(n for n in g.nodes if n.name.endswith("/scale")).inputs[1]) / \
        sg.constant(next(n for n in sg.nodes if n.name.endswith("/scale")).inputs[1])
    for name in site.layers:  # Q, K and V rows multiplied by the same s the LayerNorm divided by
        w0, w1 = g.constant(g.node(name).inputs[1]), sg.constant(sg.node(name).inputs[1])
        np.testing.assert_allclose(w1 / w0, np.broadcast_to(s.reshape(-1, 1), w0.shape), rtol=1e-5)
    ratio_before, ratio_after = report.ratios[site.tensor]
    assert ratio_before > 20 and ratio_after < ratio_before / 4
    assert "3 layer(s) read 1 smoothed tensor(s)" in report.note()


def test_smoothing_improves_int8_on_an_outlier_channel():
    g = _model(residual=False)
    data = _data()
    plain = intq.quantize(g, data[:16])
    smoothed = intq.quantize(g, data[:16], smooth=0.5)
    before, after = _sqnr(g, plain, data[16:]), _sqnr(g, smoothed, data[16:])
    # measured: 8.8 dB -> 29.3 dB; without smoothing the outlier channel (60x) sets the LayerNorm
    # output's int8 step, which leaves the other channels about 2 levels each
    assert after > before + 15, (before, after)
    assert smoothed.metadata["smoothed_layers"] == 3
    assert smoothed.metadata["conversion_notes"][0].startswith("smoothing (alpha 0.5): 3 layer(s)")


def test_residual_reader_gets_the_unsmoothed_tensor_through_a_copy_of_the_affine_tail():
    g = _model(residual=True)
    data = _data()
    sg, report = smooth(g, data[:16], 0.5)
    _assert_same_function(g, sg, data[16:])  # the residual Add still reads the original LayerNorm output
    (site,) = report.sites
    assert site.duplicate and site.others == (next(n.name for n in g.nodes if n.op_type == "Add"
                                                    and "x" in n.inputs),)
    assert sum(1 for n in sg.nodes if n.op_type == "Mul") == sum(1 for n in g.nodes if n.op_type == "Mul") + 1


def test_a_layer_both_producer_and_reader_of_smoothed_tensors():
    """LayerNorm -> A -> h -> B: A's input rows take the LayerNorm's s and its output channels h's 1/s."""
    w = RNG.normal(0, 0.3, (C, C)).astype(np.float32)
    w[:, 5] *= 40  # an outlier channel of h
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1),
             helper.make_node("MatMul", ["ln", "wa"], ["h0"]), helper.make_node("Add", ["h0", "ba"], ["h"]),
             helper.make_node("MatMul", ["h", "wb"], ["y"])]
    gamma = np.ones(C, np.float32)
    gamma[2] = 30.0
    gr = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, [1, T, C])],
                           [helper.make_tensor_value_info("y", 1, None)],
                           [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(np.zeros(C, np.float32), "beta"),
                            numpy_helper.from_array(w, "wa"), numpy_helper.from_array(RNG.normal(0, 1, C).astype(np.float32), "ba"),
                            numpy_helper.from_array(RNG.normal(0, 0.3, (C, N)).astype(np.float32), "wb")])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    g = simplify(intq.load(m))
    data = _data(24)
    sg, report = smooth(g, data[:8], 0.5)
    assert sorted(s.fold for s in report.sites) == ["affine", "linear"] and report.layers == 2
    _assert_same_function(g, sg, data[8:])


def test_a_matrix_product_read_by_a_residual_is_skipped_with_the_reason():
    w = RNG.normal(0, 1, (C, C)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node("MatMul", ["h", "w1"], ["y0"]),
             helper.make_node("Add", ["y0", "h"], ["y"])]
    gr = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, [1, T, C])],
                           [helper.make_tensor_value_info("y", 1, None)],
                           [numpy_helper.from_array(w, "w0"), numpy_helper.from_array(w.T.copy(), "w1")])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    g = simplify(intq.load(m))
    sites, skipped = smoothing_sites(g)
    assert not sites
    reasons = {s.tensor: s.reason for s in skipped}
    assert any("residual cannot take 1/s" in r for r in reasons.values()), reasons
    sg, report = smooth(g, _data(4), 0.5)
    assert sg is g and report.layers == 0 and report.skipped


def test_alpha_and_data_are_checked():
    g = _model(residual=False)
    with pytest.raises(SmoothingError, match="alpha"):
        smooth(g, _data(2), 1.5)
    with pytest.raises(SmoothingError, match="calibration data"):
        smooth(g, [], 0.5)
    with pytest.raises(ConversionError, match="calibrate after"):
        intq.quantize(g, table=intq.calibrate(g, _data(2)), smooth=0.5)


def test_cli_smooth_flag_reports_the_layers_and_the_file_stays_equal(tmp_path):
    """``intq quantize --smooth 0.75``: the note says how many layers were smoothed, and the .tflite
    passes the export check (LiteRT and TFLite Micro equal to intq on the calibration samples)."""
    import json
    import onnx

    from ..test_cli import run

    gamma = np.ones(C, np.float32)
    gamma[3] = 60.0
    w = RNG.normal(0, 0.3, (C, N)).astype(np.float32)
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1),
             helper.make_node("MatMul", ["ln", "w"], ["y0"]), helper.make_node("Add", ["ln", "x"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["rm"], axes=[2], keepdims=1),
             helper.make_node("Mul", ["y0", "rm"], ["y"])]
    gr = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, [1, T, C])],
                           [helper.make_tensor_value_info("y", 1, None)],
                           [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(np.zeros(C, np.float32), "beta"),
                            numpy_helper.from_array(w, "w")])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "ln.onnx")
    np.savez(tmp_path / "calib.npz", x=RNG.normal(0, 1, (16, T, C)).astype(np.float32))
    r = run("quantize", str(tmp_path / "ln.onnx"), "--calib", str(tmp_path / "calib.npz"), "--input-shape",
            f"x=1x{T}x{C}", "-o", str(tmp_path / "q.tflite"), "--smooth", "0.75", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["notes"][0].startswith("smoothing (alpha 0.75): 1 layer(s) read 1 smoothed tensor(s) (1 through a copy")
    assert out["export_check"]["equal"]
