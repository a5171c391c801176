"""16x8 layers at the edges of TFLite's scale contracts, as the PP-OCR recognizers hit them (every
capable node in int16): a convolution with dead channels (weights of 1e-41 left by a folded batch
norm, or all zero) and an ADD whose inputs nearly cancel. Both convert, and the file runs equal to
intq in LiteRT and TFLite Micro on every tensor."""

import numpy as np
from onnx import helper

import intq
from intq.convert.weights import SCALE_FLOOR, weight_scales
from intq.passes import simplify

from ..analysis.test_hints import _onnx
from .test_precision import _equal_in_runtimes

F32 = np.float32


def test_weight_scales_floor_dead_channels_at_the_layer_floor():
    w = np.zeros((4, 2), F32)
    w[0] = [0.5, -1.27]  # scale 0.01
    w[1] = [1e-41, 0]  # denormal: a dead channel of a folded batch norm
    w[3] = [2e-3, 0]  # small but real: kept
    s = weight_scales(w, 0)
    floor = np.float32(0.01 * SCALE_FLOOR)
    assert s[0] == np.float32(0.01) and s[3] == np.float32(2e-3 / 127)
    assert s[1] == floor and s[2] == floor
    assert np.all(weight_scales(np.zeros((3, 2), F32), 0) == 1.0)


def test_int16_conv_with_dead_channels_converts_and_runs_equal():
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, (4, 2, 3, 3)).astype(F32)
    w[1] = 1e-41  # before the floor: bias scale S_in * S_w underflowed float32 to 0 (QuantizationError)
    w[2] = 0.0
    b = np.array([0.1, 0.2, -0.3, 0.05], F32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["out"], pads=[1, 1, 1, 1])]
    fg = simplify(intq.load(_onnx(nodes, {"w": w, "b": b}, (1, 2, 6, 6), ["out"])))
    calib = [{"x": rng.normal(0, 1, (1, 2, 6, 6)).astype(F32)} for _ in range(4)]
    q = intq.quantize(fg, calib, precision={n.name: "int16" for n in fg.nodes})
    conv = next(n for n in q.nodes if n.op_type == "CONV_2D")
    assert q.tensors[conv.inputs[0]].dtype == np.int16
    _equal_in_runtimes(q, calib[0], at_least=4)
    got = intq.Interpreter(q).run(calib[0])["out"]
    assert np.allclose(got[:, 1], 0.2, atol=1e-3) and np.allclose(got[:, 2], -0.3, atol=1e-3)  # dead: the bias alone


def test_int16_add_of_nearly_cancelling_inputs_gets_an_output_scale_tflite_accepts():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Mul", ["x", "big"], ["u"]), helper.make_node("Mul", ["x", "minus"], ["v"]),
             helper.make_node("Add", ["u", "v"], ["out"])]  # out = 0.05 x from terms 20,000 times larger
    inits = {"big": np.array(1000.0, F32), "minus": np.array(-999.95, F32)}
    fg = simplify(intq.load(_onnx(nodes, inits, (1, 8), ["out"])))
    calib = [{"x": rng.normal(0, 1, (1, 8)).astype(F32)} for _ in range(4)]
    q = intq.quantize(fg, calib, precision={n.name: "int16" for n in fg.nodes})
    add = next(n for n in q.nodes if n.op_type == "ADD")
    s_in = max(float(q.tensors[i].qparams.scale[0]) for i in add.inputs)
    s_out = float(q.tensors[add.outputs[0]].qparams.scale[0])
    assert s_out >= s_in / 2**14  # raised: calibration's range alone needs 2^14.3 times less
    _equal_in_runtimes(q, calib[0], at_least=5)
