"""explicit_pads: after import every Conv / ConvTranspose / pool carries explicit ``pads`` and no
``auto_pad`` (nor ``output_shape``), and the float graph still computes what onnxruntime computes
on the original model (within ``assert_close_to_reference``'s 1e-4 of the output scale)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.errors import GraphError, UnsupportedOperatorError
from intq.ir import Graph, Node, Tensor
from intq.passes import explicit_pads
from intq.ir.windows import same_pads
from intq.passes.padding import WINDOW_OPS

from ..onnx_helpers import assert_close_to_reference, ort_session

RNG = np.random.default_rng(11)


def _one_node_model(op, x_shape, attrs, weight=None, bias=None):
    inits = []
    inputs = ["x"]
    if weight is not None:
        inits.append(numpy_helper.from_array(weight, "w"))
        inputs.append("w")
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        inputs.append("b")
    node = helper.make_node(op, inputs, ["y"], name="the_node", **attrs)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _check_against_onnxruntime(model, x_shape):
    graph = intq.load(model)
    (node,) = [n for n in graph.nodes if n.op_type in WINDOW_OPS]
    assert "auto_pad" not in node.attrs and "output_shape" not in node.attrs
    assert len(node.attrs["pads"]) == 2 * (len(x_shape) - 2)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    got = intq.Interpreter(graph).run({"x": x})
    (want,) = ort_session(model).run(None, {"x": x})
    assert got["y"].shape == want.shape
    assert_close_to_reference(got, {"y": want})
    return node


AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


def _attrs(auto_pad, **kw):
    attrs = dict(kw, auto_pad=auto_pad)
    if auto_pad != "NOTSET":
        attrs.pop("pads", None)
    return attrs


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("x_shape, kernel, strides, group", [
    ((1, 4, 9, 10), (3, 3), (2, 2), 1),   # odd totals: SAME_UPPER and SAME_LOWER differ
    ((2, 4, 8, 7), (4, 2), (1, 3), 4),    # depthwise, even kernel
    ((1, 3, 13), (4,), (3,), 1),          # 1-D
])
def test_conv(auto_pad, x_shape, kernel, strides, group):
    c = x_shape[1]
    w = RNG.standard_normal((6 if group == 1 else c, c // group, *kernel)).astype(np.float32)
    b = RNG.standard_normal(w.shape[0]).astype(np.float32)
    pads = [1] * len(kernel) + [0] * len(kernel)
    model = _one_node_model("Conv", x_shape, _attrs(auto_pad, strides=list(strides), group=group, pads=pads), w, b)
    node = _check_against_onnxruntime(model, x_shape)
    if auto_pad == "SAME_UPPER" and len(kernel) == 2 and x_shape[2] == 9:
        # out = ceil(9/2) = 5, total = 4*2 + 3 - 9 = 2 -> (1, 1); width 10: total = 1 -> (0, 1)
        assert node.attrs["pads"] == (1, 0, 1, 1)
    if auto_pad == "SAME_LOWER" and len(kernel) == 2 and x_shape[2] == 9:
        assert node.attrs["pads"] == (1, 1, 1, 0)


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("output_shape", [None, [10, 12]])
def test_conv_transpose(auto_pad, output_shape):
    x_shape = (1, 3, 5, 6)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    attrs = _attrs(auto_pad, strides=[2, 2], pads=[1, 0, 0, 1])
    if output_shape is not None:
        attrs["output_shape"] = output_shape
    node = _check_against_onnxruntime(_one_node_model("ConvTranspose", x_shape, attrs, w), x_shape)
    if auto_pad == "SAME_UPPER" and output_shape is None:
        # full = 2*(5-1) + 3 = 11, out = 10: total 1 at the end; width 13 - 12 = 1 likewise
        assert node.attrs["pads"] == (0, 0, 1, 1)


def test_conv_transpose_output_shape_beyond_the_full_size_grows_output_padding():
    x_shape = (1, 2, 4, 4)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    model = _one_node_model("ConvTranspose", x_shape, dict(strides=[2, 2], output_shape=[10, 9]), w)
    node = _check_against_onnxruntime(model, x_shape)  # full = 2*3 + 3 = 9
    assert node.attrs["pads"] == (0, 0, 0, 0) and node.attrs["output_padding"] == (1, 0)


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("op, extra", [
    ("MaxPool", {}),
    ("MaxPool", {"ceil_mode": 1}),
    ("AveragePool", {"count_include_pad": 0}),
    ("AveragePool", {"count_include_pad": 1}),
    ("AveragePool", {"count_include_pad": 0, "ceil_mode": 1}),
])
@pytest.mark.parametrize("x_shape, kernel, strides", [((1, 3, 9, 8), (3, 2), (2, 2)), ((2, 2, 11), (4,), (3,))])
def test_pools(auto_pad, op, extra, x_shape, kernel, strides):
    pads = [1] * len(kernel) + [0] * len(kernel)
    attrs = _attrs(auto_pad, kernel_shape=list(kernel), strides=list(strides), pads=pads, **extra)
    node = _check_against_onnxruntime(_one_node_model(op, x_shape, attrs), x_shape)
    assert node.attrs.get("ceil_mode", 0) == extra.get("ceil_mode", 0)  # ceil_mode is not padding: kept


def test_same_pads_formula():
    # ONNX: out = ceil(n/s), total = max(0, (out-1)*s + (k-1)*d + 1 - n), odd element at the end (UPPER)
    assert same_pads(10, 3, 2, 1) == (0, 1) and same_pads(10, 3, 2, 1, upper=False) == (1, 0)
    assert same_pads(11, 3, 2, 2) == (2, 2)  # dilated window 5: out 6, total 10 + 5 - 11 = 4
    assert same_pads(7, 1, 3, 1) == (0, 0)   # total clamps at 0


def _graph(x_shape, auto_pad):
    x = Tensor("x", shape=x_shape)
    w = Tensor("w", data=np.zeros((2, 3, 3, 3), np.float32))
    node = Node("Conv", "conv7", ("x", "w"), ("y",), {"auto_pad": auto_pad})
    return Graph([node], {"x": x, "w": w, "y": Tensor("y")}, ("x",), ("y",))


def test_same_with_an_unknown_spatial_size_names_the_node_and_the_fix():
    with pytest.raises(GraphError, match=r"node 'conv7' \(Conv\): auto_pad=SAME_UPPER needs the input's static "
                                         r"spatial size.*bind the model's input shape"):
        explicit_pads(_graph((1, 3, None, 8), "SAME_UPPER"))
    (node,) = explicit_pads(_graph((1, 3, None, 8), "VALID")).nodes  # VALID needs no size
    assert node.attrs["pads"] == (0, 0, 0, 0) and "auto_pad" not in node.attrs


def test_an_unknown_auto_pad_is_refused_by_name():
    with pytest.raises(UnsupportedOperatorError, match=r"node 'conv7' \(Conv\): auto_pad='SAME'"):
        explicit_pads(_graph((1, 3, 8, 8), "SAME"))


def test_pads_of_is_what_every_reader_calls():
    from intq.ir.windows import pads_of

    assert pads_of("n", {"pads": (1, 2, 3, 4)}, 2) == ([1, 2], [3, 4])
    assert pads_of("n", {}, 1) == ([0], [0])
    with pytest.raises(UnsupportedOperatorError, match=r"^n: auto_pad='SAME_LOWER': .*run intq.passes.explicit_pads"):
        pads_of("n", {"auto_pad": "SAME_LOWER"}, 2)
    with pytest.raises(UnsupportedOperatorError, match=r"output_shape=\[4, 4\]"):
        pads_of("n", {"output_shape": (4, 4)}, 2)
    with pytest.raises(GraphError, match="2\\*2 entries"):
        pads_of("n", {"pads": (1, 1)}, 2)
    with pytest.raises(GraphError, match="non-negative"):
        pads_of("n", {"pads": (1, -1, 0, 0)}, 2)
