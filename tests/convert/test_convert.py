"""Conversion rules: the integer graph has the structure and parameters the TFLite spec requires."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.convert import ConversionError, convert
from intq.convert.weights import quantize_linear_layer
from intq.errors import UnsupportedOperatorError
from intq.passes import simplify
from intq.pipeline import quantize

RNG = np.random.default_rng(4)


def _data(shape, n=6):
    return [RNG.standard_normal(shape).astype(np.float32) for _ in range(n)]


def test_bias_overflow_raises_the_weight_scale_and_is_reported():
    w = np.zeros((3, 1, 1, 4))
    w[0] = 1e-9  # a channel with tiny weights next to a large bias
    w[1] = 0.5
    b = np.array([1e3, 0.1, 0.0])
    w_q, w_qp, b_q, b_qp, fit = quantize_linear_layer(w, b, input_scale=0.01, axis=0)
    assert fit.channels == (0,)
    assert abs(int(b_q[0])) <= 2**31 - 1 and b_q.dtype == np.int32
    np.testing.assert_allclose(b_q[0] * b_qp.scale[0], 1e3, rtol=1e-6)  # the bias stays exact
    assert w_qp.scale[0] > 1e-9 / 127 and w_qp.scale[1] == np.float32(0.5 / 127)


def test_the_fitted_bias_leaves_the_accumulator_room_for_every_product():
    """PP-OCRv4's detector (paddle2onnx): a pruned channel (weights ~1e-33) with a bias. Fitting the
    bias to int32 alone left no room for the K products, and CONV_2D refused the layer; the fit now
    keeps |bias| + K * 255 * 127 inside int32, so the kernel's accumulator bound holds."""
    k = 3 * 3 * 64
    w = np.full((2, 3, 3, 64), 1e-33)
    w[1] = 0.2
    b = np.array([5.0, 0.1])
    w_q, w_qp, b_q, b_qp, fit = quantize_linear_layer(w, b, input_scale=0.02, axis=0)
    assert fit.channels == (0,)
    assert abs(int(b_q[0])) + k * 255 * 127 <= 2**31 - 1
    assert abs(int(b_q[0])) + k * 255 * int(np.abs(w_q[0]).max()) <= 2**31 - 1
    np.testing.assert_allclose(b_q[0] * b_qp.scale[0], 5.0, rtol=1e-6)


def test_unconvertible_ops_are_listed_before_any_work():
    nodes = [helper.make_node("Erf", ["x"], ["e"], name="erf1"), helper.make_node("Exp", ["e"], ["y"], name="ex")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOperatorError, match="(?s)2 operator type\\(s\\).*Erf: 1 node\\(s\\): 'erf1'.*Exp: 1 node\\(s\\): 'ex'"):
        quantize(m, _data((1, 4)))


class _Head(torch.nn.Module):
    def __init__(self, flatten_spatial: bool):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1 if not flatten_spatial else 2)
        self.fc = torch.nn.Linear(8 if not flatten_spatial else 32, 5)

    def forward(self, x):
        return torch.softmax(self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1)), dim=1)


def test_layout_transposes_only_where_memory_order_changes():
    x = torch.randn(1, 3, 8, 8)
    head = quantize(_Head(False).eval(), _data((1, 3, 8, 8)), example_inputs=x)
    ops = head.op_types()
    assert "TRANSPOSE" in ops  # the NCHW input once, to NHWC
    assert ops["TRANSPOSE"] == 1, "global pooling then flatten needs no transpose"
    assert ops.get("SOFTMAX") == 1 and ops.get("CONV_2D") == 1 and ops.get("FULLY_CONNECTED") == 1
    conv = next(n for n in head.nodes if n.op_type == "CONV_2D")
    assert conv.attrs["fused_activation_function"] == "RELU" and conv.attrs["padding"] == "SAME"
    soft = next(n for n in head.nodes if n.op_type == "SOFTMAX")
    qp = head.tensors[soft.outputs[0]].qparams
    assert (qp.scale[0], qp.zero_point[0]) == (np.float32(1 / 256), -128)  # fixed by the spec


def test_weights_are_per_channel_int8_narrow_and_biases_int32():
    qg = quantize(_Head(False).eval(), _data((1, 3, 8, 8)), example_inputs=torch.randn(1, 3, 8, 8))
    conv = next(n for n in qg.nodes if n.op_type == "CONV_2D")
    w, b = qg.tensors[conv.inputs[1]], qg.tensors[conv.inputs[2]]
    assert w.dtype == np.int8 and w.shape == (8, 3, 3, 3) and w.qparams.axis == 0 and w.qparams.narrow_range
    assert w.data.min() >= -127 and np.all(w.qparams.zero_point == 0)
    x_qp = qg.tensors[conv.inputs[0]].qparams
    assert b.dtype == np.int32 and np.allclose(b.qparams.scale, np.float32(x_qp.scale[0]) * w.qparams.scale.astype(np.float32))
    per_tensor = quantize(_Head(False).eval(), _data((1, 3, 8, 8)), example_inputs=torch.randn(1, 3, 8, 8), per_channel=False)
    conv = next(n for n in per_tensor.nodes if n.op_type == "CONV_2D")
    assert per_tensor.tensors[conv.inputs[1]].qparams.axis is None


def test_pooling_keeps_the_input_parameters():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(2)).eval()
    qg = quantize(m, _data((1, 3, 10, 10)), example_inputs=torch.randn(1, 3, 10, 10))
    for n in qg.nodes:
        if n.op_type in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            assert qg.tensors[n.inputs[0]].qparams == qg.tensors[n.outputs[0]].qparams


def test_int8_io_and_float_io():
    m = torch.nn.Sequential(torch.nn.Linear(6, 3)).eval()
    data = _data((1, 6))
    g = simplify(intq.load(m, example_inputs=torch.randn(1, 6)))
    table = intq.calibrate(g, data)
    q8 = convert(g, table, input_type="int8", output_type="int8")
    assert q8.tensors[q8.inputs[0]].dtype == np.int8 and q8.tensors[q8.outputs[0]].dtype == np.int8
    assert "QUANTIZE" not in q8.op_types() and "DEQUANTIZE" not in q8.op_types()
    qf = convert(g, table)
    assert qf.tensors[qf.inputs[0]].dtype == np.float32 and qf.inputs == g.inputs and qf.outputs == g.outputs
    with pytest.raises(ConversionError, match="input_type"):
        convert(g, table, input_type="uint4")


@pytest.mark.parametrize("auto_pad, padding, pad_ops", [
    ("SAME_UPPER", "SAME", 0),    # TFLite's SAME is ONNX's SAME_UPPER
    ("SAME_LOWER", "VALID", 1),   # odd totals put the extra pad first: an explicit PAD
    ("VALID", "VALID", 0),
])
def test_auto_pad_arrives_as_explicit_pads_and_maps_to_tflite_padding(auto_pad, padding, pad_ops):
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(RNG.standard_normal(4).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad=auto_pad, strides=[2, 2])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    q = quantize(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), _data((1, 3, 9, 10)))
    conv = next(n for n in q.nodes if n.op_type == "CONV_2D")
    assert conv.attrs["padding"] == padding
    assert q.op_types().get("PAD", 0) == pad_ops


def test_a_graph_built_with_auto_pad_is_refused_by_name():
    """Graphs from intq.load have explicit pads; one built by hand with auto_pad is refused, naming the fix."""
    from intq.ir import Graph, Node, Tensor

    tensors = {"x": Tensor("x", shape=(1, 3, 8, 8)), "w": Tensor("w", data=np.ones((4, 3, 3, 3), np.float32)),
               "y": Tensor("y")}
    g = Graph([Node("Conv", "c1", ("x", "w"), ("y",), {"auto_pad": "SAME_UPPER"})], tensors, ("x",), ("y",))
    with pytest.raises(UnsupportedOperatorError, match=r"auto_pad='SAME_UPPER'.*intq.passes.explicit_pads"):
        quantize(g, _data((1, 3, 8, 8)))
    q = quantize(intq.passes.explicit_pads(g), _data((1, 3, 8, 8)))
    assert next(n for n in q.nodes if n.op_type == "CONV_2D").attrs["padding"] == "SAME"
