"""Hints that name the cause (issue 13): pattern hints found on real graphs, never the method in use,
and the sensitivity ranking that names the layer to keep out of int8."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

import intq
from intq.analysis import compare
from intq.analysis.hints import TensorFacts, hints
from intq.analysis.sensitivity import output_sqnr, sensitivity
from intq.passes import simplify

RNG = np.random.default_rng(0)


def _onnx(nodes, inits, x_shape, outputs):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, list(x_shape))],
                          [helper.make_tensor_value_info(o, 1, None) for o in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def yolo_head(rng: np.random.Generator | None = None):
    """A YOLO-style output: box coordinates sigmoid * 320 concatenated with class scores in [0, 1]
    (as YOLOv8 exports write it), rows 0-3 boxes, rows 4-6 classes, 256 anchors. Its weights come
    from ``rng`` (a fresh generator seeded 0 by default), never from a shared one: the model must
    not depend on which test built one first."""
    rng = np.random.default_rng(0) if rng is None else rng
    f32 = np.float32
    inits = {"w1": rng.normal(0, 0.5, (8, 3, 3, 3)).astype(f32), "wb": rng.normal(0, 0.5, (4, 8, 1, 1)).astype(f32),
             "wc": rng.normal(0, 0.5, (3, 8, 1, 1)).astype(f32), "s320": np.array(320.0, f32),
             "shape": np.array([1, 7, 256], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["f0"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["f0"], ["f"]),
             helper.make_node("Conv", ["f", "wb"], ["b0"]), helper.make_node("Sigmoid", ["b0"], ["b1"]),
             helper.make_node("Mul", ["b1", "s320"], ["boxes"]),
             helper.make_node("Conv", ["f", "wc"], ["c0"]), helper.make_node("Sigmoid", ["c0"], ["scores"]),
             helper.make_node("Concat", ["boxes", "scores"], ["cat"], axis=1),
             helper.make_node("Reshape", ["cat", "shape"], ["out"])]
    return _onnx(nodes, inits, (1, 3, 16, 16), ["out"])


@pytest.fixture(scope="module")
def yolo():
    rng = np.random.default_rng(0)
    fg = simplify(intq.load(yolo_head(rng)))
    data = [{"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(6)]
    return fg, intq.quantize(fg, data), data


def test_yolo_concat_is_named_a_range_mismatched_join_and_ranked_first(yolo):
    fg, qg, data = yolo
    rows = {r.name: r for r in compare(fg, qg, data).rows}
    assert rows["cat"].sqnr_db > 30  # the overall SQNR hides it: the boxes dominate
    assert rows["cat"].hint.startswith("range-mismatched join: input scores spans +-1")
    # the class rows of the int8 output are dead: every score rounds to 0 or one step (320/255)
    out = intq.Interpreter(qg).run(data[0])["out"]
    step = qg.tensors[qg.nodes[-1].inputs[0]].qparams.tensor_scale
    assert step > 1.2 and set(np.unique(out[0, 4:])) <= {0.0, np.float32(step)}
    rep = sensitivity(fg, qg, data[:3])
    top = rep.rows[0]
    assert top.op == "Concat" and top.gain_db > 10, rep.table()
    assert top.alone_float_db - rep.all_int8_db == pytest.approx(top.gain_db)
    assert "Reshape" not in [r.op for r in rep.rows]  # a data-movement op belongs to the layer before it


def test_output_sqnr_weighs_channel_groups_equally():
    f = np.ones((2, 4, 10))
    f[:, 3] = 0.01  # a small channel beside big ones
    q = f.copy()
    q[:, 3] = 0.0  # lost entirely
    assert output_sqnr({"o": [f]}, {"o": [q]}) == pytest.approx((3 * 60 + 0) / 4)


def test_an_unfolded_affine_is_named(yolo):
    f32 = np.float32
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"]), helper.make_node("Mul", ["y", "k"], ["out"])]
    model = _onnx(nodes, {"w": RNG.normal(0, 1, (4, 3, 1, 1)).astype(f32), "k": RNG.uniform(0.5, 2, (4, 1, 1)).astype(f32)},
                  (1, 3, 8, 8), ["y", "out"])  # y is an output too: the Mul cannot fold
    fg = simplify(intq.load(model))
    data = [{"x": RNG.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(3)]
    rows = {r.name: r for r in compare(fg, intq.quantize(fg, data), data).rows}
    assert rows["out"].hint.startswith("unfolded affine: a constant MUL right after CONV_2D")


@pytest.mark.parametrize("method", ["minmax", "percentile", "mse", "entropy", "auto"])
def test_hints_never_suggest_the_method_in_use(method):
    resolution = hints(TensorFacts("CONV_2D", 12.0, 0.0, 0.1, method=method))
    assert resolution[0].startswith("resolution") and method not in resolution[0].split("try ")[1]
    clipping = hints(TensorFacts("ADD", 12.0, 0.2, 0.9, method=method))
    assert clipping[0].startswith("clipping")
    assert f"calibrate with {method}" not in clipping[0]


def test_a_fixed_range_output_is_not_a_calibration_problem():
    softmax = hints(TensorFacts("SOFTMAX", 18.0, 0.05, 0.3, method="minmax", scale=1 / 256))
    assert len(softmax) == 1 and softmax[0].startswith("fixed-range output: SOFTMAX") and "minmax" not in softmax[0]


def test_channel_hints():
    dead = hints(TensorFacts("CONV_2D", 12.0, 0.0, 0.9, channels=32, dead_channels=11))
    assert dead == ["dead channels: 11 of 32 output channels are always 0"]  # not also "weights"
    assert hints(TensorFacts("CONV_2D", 40.0, 0.0, 0.9, channels=32, dead_channels=11)) == []  # harmless there
    sat = hints(TensorFacts("CONV_2D", 12.0, 0.03, 0.9, method="minmax", channels=8, saturated_channels=2))
    assert sat[0].startswith("clipping under minmax") and sat[1].startswith("saturated channels: 2 of 8")
