"""ONNX patterns third-party exporters write, converted and checked on every tensor against LiteRT's
reference kernels and TensorFlow Lite Micro (the field-models issue): unequal Split (YOLOv8's head
splits 64 box channels from the class channels) becomes SPLIT_V."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.export.tflite_writer import to_tflite_bytes
from intq.pipeline import quantize
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
    """check_convertible runs the rules themselves on placeholder ranges: a fourth root (x ** 0.25:
    no int8 builtin computes it) is named before any calibration sample is read."""
    rng = np.random.default_rng(2)
    nodes, inits, shape = _conv_head(rng)
    inits["quarter"] = np.float32(0.25)
    nodes += [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Pow", ["r", "quarter"], ["y"], name="root4")]
    model = _model(nodes, inits, shape, ["y"])

    def no_data():
        raise AssertionError("calibration data was read")
        yield

    with pytest.raises(intq.errors.IntqError, match="node 'root4' \\(Pow\\): exponent \\[0.25\\]"):
        quantize(model, no_data())


def test_decomposed_layer_norm_divides_by_rsqrt():
    """SVTR's LayerNorm as paddle2onnx writes it: (x - mean) / sqrt(mean((x - mean) ** 2) + eps).
    ``a / sqrt(b)`` becomes MUL(a, RSQRT(b)) (no int8 DIV exists; RSQRT does in both runtimes)."""
    rng = np.random.default_rng(5)
    inits = {"two": np.float32(2.0), "eps": np.float32(1e-5), "axes": np.asarray([-1], np.int64),
             "w": (rng.standard_normal((16, 16)) * 0.3).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("ReduceMean", ["h", "axes"], ["mu"], keepdims=1),
             helper.make_node("Sub", ["h", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]),
             helper.make_node("ReduceMean", ["d2", "axes"], ["var"], keepdims=1),
             helper.make_node("Add", ["var", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["y"])]
    model = _model(nodes, inits, (1, 6, 16), ["y"], opset=18)
    data = [rng.standard_normal((1, 6, 16)).astype(np.float32) for _ in range(6)]
    qg = quantize(model, data[:4])
    ops = [n.op_type for n in qg.nodes]
    assert "RSQRT" in ops and "DIV" not in ops
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])
    f = intq.Interpreter(intq.load(model)).run({"x": data[5]})["y"]
    q = intq.Interpreter(qg).run({"x": data[5]})["y"]
    assert np.max(np.abs(f - q)) < 0.15 * np.max(np.abs(f))  # a normalisation, not noise


def test_square_root_is_x_times_rsqrt_with_its_error_noted():
    """A standalone sqrt (an STFT magnitude, x ** 0.5): x * RSQRT(x), RSQRT's range chosen for the
    smallest worst-case error, which the conversion notes state."""
    rng = np.random.default_rng(6)
    nodes, inits, shape = _conv_head(rng)
    inits["half"] = np.float32(0.5)
    nodes += [helper.make_node("Mul", ["c", "c"], ["c2"]), helper.make_node("Pow", ["c2", "half"], ["y"])]
    data = [rng.standard_normal((1, *shape[1:])).astype(np.float32) for _ in range(6)]
    model = _model(nodes, inits, shape, ["y"])
    qg = quantize(model, data[:4])
    assert [n.op_type for n in qg.nodes].count("RSQRT") == 1
    note = next(n for n in qg.metadata["conversion_notes"] if "RSQRT" in n)
    worst = float(note.split("worst error ")[1].split()[0])
    assert 0.5 <= worst <= 8.0
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])
    it = intq.Interpreter(qg)
    it.run({"x": data[5]})
    rsqrt = next(n for n in qg.nodes if n.op_type == "RSQRT")
    mul = next(n for n in qg.nodes if n.op_type == "MUL" and rsqrt.outputs[0] in n.inputs)
    (qx, tx), (qy, ty) = ((qg.tensors[t].qparams, it.tensors()[t]) for t in (rsqrt.inputs[0], mul.outputs[0]))
    x_real = (tx.astype(np.float64) - qx.tensor_zero_point) * qx.tensor_scale
    y_real = (ty.astype(np.float64) - qy.tensor_zero_point) * qy.tensor_scale
    # the lowering's own error (its input taken as given), within the note's bound (a float model of
    # the kernels chose it: allow one step for its rounding)
    assert np.max(np.abs(y_real - np.sqrt(x_real))) <= (worst + 1) * qy.tensor_scale


def test_conv1d_reflect_pad_and_rank5_slice():
    """What audio and attention exporters write: Pad mode 'reflect' (slices and CONCATENATION), a 1-D
    Conv (CONV_2D over a height-1 view) and a slice of a rank-5 tensor (TFLite Micro slices rank <= 4:
    the whole axes around the sliced one are merged first)."""
    rng = np.random.default_rng(7)
    inits = {"pads": np.asarray([0, 0, 3, 0, 0, 2], np.int64), "w": (rng.standard_normal((8, 2, 5)) * 0.3).astype(np.float32),
             "b": (rng.standard_normal(8) * 0.1).astype(np.float32), "shape5": np.asarray([1, 2, 2, 2, 22], np.int64),
             "s": np.asarray([1], np.int64), "e": np.asarray([2], np.int64), "ax": np.asarray([2], np.int64)}
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect"),
             helper.make_node("Conv", ["p", "w", "b"], ["c"], strides=[2], pads=[1, 1]),
             helper.make_node("Reshape", ["c", "shape5"], ["r5"]),
             helper.make_node("Slice", ["r5", "s", "e", "ax"], ["y"])]
    model = _model(nodes, inits, (1, 2, 40), ["y"])
    data = [rng.standard_normal((1, 2, 40)).astype(np.float32) for _ in range(6)]
    g = intq.load(model)
    assert tuple(g.tensors["c"].shape or intq.runtime.interpreter.infer_shapes(g).tensors["c"].shape) == (1, 8, 22)
    qg = quantize(model, data[:4])
    ops = [n.op_type for n in qg.nodes]
    assert "CONV_2D" in ops and ops.count("CONCATENATION") == 1 and ops.count("STRIDED_SLICE") == 3
    assert all(len(qg.tensors[n.inputs[0]].shape) <= 4 for n in qg.nodes if n.op_type == "STRIDED_SLICE")
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])
    f = intq.Interpreter(g).run({"x": data[5]})["y"]
    q = intq.Interpreter(qg).run({"x": data[5]})["y"]
    assert np.max(np.abs(f - q)) < 0.05 * np.max(np.abs(f))


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_unrolls_into_int8_builtins(direction):
    """An ONNX LSTM (a recognition net's decoder; silero-vad's) with initial states: unrolled at
    simplify into FULLY_CONNECTED, SPLIT, LOGISTIC, TANH, MUL, ADD steps, equal to both runtimes."""
    rng = np.random.default_rng(8)
    dirs, hidden, steps = (2 if direction == "bidirectional" else 1), 6, 3
    inits = {"W": (rng.standard_normal((dirs, 4 * hidden, 5)) * 0.4).astype(np.float32),
             "R": (rng.standard_normal((dirs, 4 * hidden, hidden)) * 0.4).astype(np.float32),
             "B": (rng.standard_normal((dirs, 8 * hidden)) * 0.1).astype(np.float32),
             "h0": (rng.standard_normal((dirs, 1, hidden)) * 0.5).astype(np.float32)}
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "h0"], ["y", "y_h"], hidden_size=hidden,
                              direction=direction)]
    model = _model(nodes, inits, (steps, 1, 5), ["y", "y_h"], opset=14)
    data = [rng.standard_normal((steps, 1, 5)).astype(np.float32) for _ in range(6)]
    qg = quantize(model, data[:4])
    ops = [n.op_type for n in qg.nodes]
    assert ops.count("FULLY_CONNECTED") == dirs * (2 * steps - 1) and "LSTM" not in ops  # h0 @ R^T: a constant and ops.count("LOGISTIC") >= 3 * steps
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])


def test_squeeze_excite_bias_add_folds_into_the_conv_bias():
    """A bias-less Conv followed by Add of a per-channel constant: no int8 ADD, the constant is the
    int32 bias (a nonzero one), every tensor equal to both runtimes."""
    rng = np.random.default_rng(9)
    inits = {"w": (rng.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float32),
             "c": (rng.standard_normal((6, 1, 1)) * 0.5).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["a", "c"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    data = [rng.standard_normal((1, 3, 5, 4)).astype(np.float32) for _ in range(6)]
    qg = quantize(_model(nodes, inits, (1, 3, 5, 4), ["y"]), data[:4])
    ops = [n.op_type for n in qg.nodes]
    assert "ADD" not in ops
    conv = next(n for n in qg.nodes if n.op_type == "CONV_2D")
    assert np.count_nonzero(qg.tensors[conv.inputs[2]].data) == 6 and conv.attrs["fused_activation_function"] == "RELU"
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])


def test_expand_and_tile_become_broadcast_to():
    """Expand (a per-channel vector to a feature map) and Tile (repeats on two axes) as BROADCAST_TO
    with RESHAPE views, equal to both runtimes; the values are copied exactly."""
    rng = np.random.default_rng(10)
    nodes, inits, shape = _conv_head(rng)  # c: [1, 6, 5, 4]
    inits.update({"axes": np.asarray([2, 3], np.int64), "shape": np.asarray([1, 6, 3, 4], np.int64),
                  "reps": np.asarray([2, 1, 1, 3], np.int64)})
    nodes += [helper.make_node("ReduceMean", ["c", "axes"], ["m"], keepdims=1),  # [1, 6, 1, 1]
              helper.make_node("Expand", ["m", "shape"], ["e"]),                  # [1, 6, 3, 4]
              helper.make_node("Tile", ["c", "reps"], ["t"])]                     # [2, 6, 5, 12]
    data = [rng.standard_normal((1, *shape[1:])).astype(np.float32) for _ in range(6)]
    model = _model(nodes, inits, shape, ["e", "t"], opset=18)  # ReduceMean takes axes as an input from opset 18
    qg = quantize(model, data[:4])
    assert [n.op_type for n in qg.nodes].count("BROADCAST_TO") == 2
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])
    f, q = intq.Interpreter(intq.load(model)).run({"x": data[5]}), intq.Interpreter(qg).run({"x": data[5]})
    for name in ("e", "t"):
        assert q[name].shape == f[name].shape
        assert np.max(np.abs(q[name] - f[name])) < 0.05 * np.max(np.abs(f[name]))


def test_embedding_lookup_gathers_from_an_int8_table():
    """Gather from a constant table by run-time ids (int64 in ONNX): an int32 graph input and a GATHER
    of the int8 table, every tensor equal to both runtimes; ids outside the table fail in all three."""
    rng = np.random.default_rng(12)
    inits = {"table": (rng.standard_normal((20, 8)) * 0.7).astype(np.float32),
             "w": (rng.standard_normal((8, 5)) * 0.3).astype(np.float32)}
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0), helper.make_node("MatMul", ["e", "w"], ["y"])]
    ids_in = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])
    graph = helper.make_graph(nodes, "embed", [ids_in], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = [rng.integers(0, 20, (1, 6)).astype(np.int64) for _ in range(18)]
    qg = quantize(model, data[:16])  # every id is seen: the output range is the table's reach
    assert qg.tensors["ids"].dtype == np.int32 and "GATHER" in [n.op_type for n in qg.nodes]
    _assert_every_tensor_equals_both_runtimes(qg, [d.astype(np.int32) for d in data[16:]])
    f, q = intq.Interpreter(intq.load(model)).run({"ids": data[17]}), intq.Interpreter(qg).run({"ids": data[17]})
    assert np.max(np.abs(q["y"] - f["y"])) < 0.05 * np.max(np.abs(f["y"]))
    with pytest.raises(intq.errors.IntqError, match="indices must lie in \\[0, 20\\)"):
        intq.Interpreter(qg).run({"ids": np.full((1, 6), 20, np.int64)})


def test_a_float_cast_is_the_identity_and_an_integer_cast_is_named():
    """torch.onnx writes Cast(to=FLOAT) on float tensors (silero-vad's STFT): nothing to do in an int8
    graph. A Cast to an integer type has no int8 meaning: refused before calibration, by name."""
    rng = np.random.default_rng(13)
    nodes, inits, shape = _conv_head(rng)
    nodes += [helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)]
    data = [rng.standard_normal((1, *shape[1:])).astype(np.float32) for _ in range(5)]
    qg = quantize(_model(nodes, inits, shape, ["y"]), data[:4])
    assert "CAST" not in qg.op_types() and "CONV_2D" in qg.op_types()
    _assert_every_tensor_equals_both_runtimes(qg, data[4:])
    nodes[-1] = helper.make_node("Cast", ["c"], ["y"], to=TensorProto.INT32, name="to_int")
    with pytest.raises(intq.errors.IntqError, match="node 'to_int' \\(Cast\\): a Cast from float32 to int32"):
        quantize(_model(nodes, inits, shape, ["y"]), data[:4])
