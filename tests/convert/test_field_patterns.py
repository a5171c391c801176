"""ONNX patterns third-party exporters write, converted and checked on every tensor against LiteRT's
reference kernels and TensorFlow Lite Micro (the field-models issue): unequal Split (YOLOv8's head
splits 64 box channels from the class channels) becomes SPLIT_V."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.convert import quantize
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.tflm import run_tflm


def _model(nodes, inits, in_shape, outputs, opset=17) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))
    ys = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs]
    graph = helper.make_graph(nodes, "field_pattern", [x], ys,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _assert_every_tensor_equals_both_runtimes(qg, samples):
    blob = to_tflite_bytes(qg)
    for x in samples:
        for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
            it = intq.Interpreter(qg, target=target)
            it.run({qg.inputs[0]: x})
            want = oracle(blob, [x])["tensors"]
            bad = {k: int(np.sum(v != want[k])) for k, v in it.tensors().items() if not np.array_equal(v, want[k])}
            assert not bad, f"[{target}] tensors differ (name: elements): {bad}"


@pytest.mark.parametrize("sizes,axis", [([64, 18], 1), ([3, 5, 2], 1), ([2, 6], 2), ([1, 4, 3], 3)])
def test_unequal_split_becomes_split_v(sizes, axis):
    rng = np.random.default_rng(sum(sizes) + axis)
    channels = sum(sizes) if axis == 1 else 8
    h = sum(sizes) if axis == 2 else 6
    w = sum(sizes) if axis == 3 else 5
    inits = {"w": (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32),
             "b": (rng.standard_normal(channels) * 0.1).astype(np.float32),
             "split": np.asarray(sizes, np.int64)}
    outs = [f"y{k}" for k in range(len(sizes))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Split", ["s", "split"], outs, axis=axis)]
    model = _model(nodes, inits, (1, 3, h, w), outs)
    data = [rng.standard_normal((1, 3, h, w)).astype(np.float32) for _ in range(6)]
    qg = quantize(model, data[:4])
    assert [n.op_type for n in qg.nodes].count("SPLIT_V") == 1
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])


def _conv_head(rng, channels=6, h=5, w=4):
    inits = {"w": (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32),
             "b": (rng.standard_normal(channels) * 0.1).astype(np.float32)}
    return [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])], inits, (1, 3, h, w)


@pytest.mark.parametrize("compare", ["Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual"])
def test_comparison_feeding_where_becomes_select_v2(compare):
    """A detector's score threshold: Where(c > t, c, other). The comparison runs on int8 (the constant
    on the activation's grid), the two values are requantized to SELECT_V2's output parameters."""
    rng = np.random.default_rng(len(compare))
    nodes, inits, shape = _conv_head(rng)
    inits.update({"t": np.float32(0.1), "floor": np.float32(-0.5)})
    nodes += [helper.make_node(compare, ["c", "t"], ["mask"]),
              helper.make_node("Sigmoid", ["c"], ["s"]),
              helper.make_node("Where", ["mask", "s", "c"], ["y"])]
    data = [rng.standard_normal((1, *shape[1:])).astype(np.float32) for _ in range(6)]
    qg = quantize(_model(nodes, inits, shape, ["y"]), data[:4])
    ops = [n.op_type for n in qg.nodes]
    assert "SELECT_V2" in ops and {"EQUAL": "Equal", "GREATER": "Greater", "LESS": "Less", "GREATER_EQUAL":
                                   "GreaterOrEqual", "LESS_EQUAL": "LessOrEqual"}.keys() & set(ops)
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])


def test_gather_pow_and_div_by_constants():
    """Gather by constant indices (one negative), x ** 2 as MUL(x, x), x / 4 as MUL by 0.25."""
    rng = np.random.default_rng(11)
    nodes, inits, shape = _conv_head(rng)
    inits.update({"idx": np.asarray([4, 0, -1], np.int64), "two": np.float32(2.0), "four": np.float32(4.0)})
    nodes += [helper.make_node("Gather", ["c", "idx"], ["g"], axis=1),
              helper.make_node("Pow", ["g", "two"], ["p"]),
              helper.make_node("Div", ["p", "four"], ["y"])]
    data = [rng.standard_normal((1, *shape[1:])).astype(np.float32) for _ in range(6)]
    qg = quantize(_model(nodes, inits, shape, ["y"]), data[:4])
    assert [n.op_type for n in qg.nodes].count("MUL") == 2 and "GATHER" in [n.op_type for n in qg.nodes]
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])


def test_an_exponent_with_no_int8_form_is_refused_before_calibration():
    """check_convertible runs the rules themselves on placeholder ranges: a square root (x ** 0.5:
    TFLite has no int8 SQRT) is named before any calibration sample is read."""
    rng = np.random.default_rng(2)
    nodes, inits, shape = _conv_head(rng)
    inits["half"] = np.float32(0.5)
    nodes += [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Pow", ["r", "half"], ["y"], name="sqrt_like")]
    model = _model(nodes, inits, shape, ["y"])

    def no_data():
        raise AssertionError("calibration data was read")
        yield

    with pytest.raises(intq.errors.IntqError, match="node 'sqrt_like' \\(Pow\\): exponent \\[0.5\\]"):
        quantize(model, no_data())
