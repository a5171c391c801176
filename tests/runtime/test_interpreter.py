"""The float Interpreter: input checks naming the input, every tensor kept or streamed, fused
activations applied, optional outputs computed on request, errors naming the node."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.ir import Graph, Node, Tensor
from intq.runtime import InterpreterError, infer_shapes


def _model(nodes, x_shape=(1, 1, 4, 4), outputs=(("y", TensorProto.FLOAT),), inits=()):
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _chain():
    return intq.load(_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["n"]),
                             helper.make_node("Add", ["n", "x"], ["y"])]))


def test_inputs_are_checked_by_name_shape_dtype_and_value():
    it = intq.Interpreter(_chain())
    x = np.ones((1, 1, 4, 4), np.float32)
    with pytest.raises(InterpreterError, match="missing \\['x'\\], unexpected \\['z'\\]"):
        it.run({"z": x})
    with pytest.raises(InterpreterError, match="input 'x' must have shape \\(1, 1, 4, 4\\), got \\(1, 4, 4\\)"):
        it.run({"x": x[0]})
    with pytest.raises(InterpreterError, match="NaN"):
        it.run({"x": x * np.nan})
    with pytest.raises(InterpreterError, match="must be float32"):
        it.run({"x": np.array([["a"]])})
    out = it.run({"x": x.astype(np.float64)})  # numeric inputs are cast to the graph's float dtype
    assert out["y"].dtype == np.float32


def test_tensors_are_kept_or_streamed():
    it = intq.Interpreter(_chain())
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4)).astype(np.float32)
    it.run({"x": x})
    assert set(it.tensors()) == {"x", "r", "n", "y"}
    np.testing.assert_array_equal(it.tensors()["r"], np.maximum(x, 0))
    seen = []
    it.run({"x": x}, keep=False, capture=lambda k, v: seen.append(k))
    assert seen == ["x", "r", "n", "y"] and set(it.tensors()) == {"x", "y"}


def test_fused_activation_is_applied():
    w = np.full((1, 1, 1, 1), 10.0, np.float32)
    g = intq.load(_model([helper.make_node("Conv", ["x", "w"], ["y"])], inits=[("w", w)]))
    conv = g.nodes[0].with_(attrs={"fused_activation": "RELU6"})
    g = g.replace(nodes=[conv])
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(intq.Interpreter(g).run({"x": x})["y"], np.clip(10 * x, 0, 6))


def test_maxpool_indices_are_computed_when_the_graph_reads_them():
    m = _model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])],
               outputs=(("y", TensorProto.FLOAT), ("i", TensorProto.INT64)))
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    out = intq.Interpreter(intq.load(m)).run({"x": x})
    assert out["i"].tolist() == [[[[5, 6, 7], [9, 10, 11], [13, 14, 15]]]]


def test_a_failing_node_is_named():
    g = Graph([Node("MatMul", "bad_matmul", ["x", "w"], ["y"])],
              {"x": Tensor("x", shape=(2, 3)), "w": Tensor("w", data=np.ones((4, 5), np.float32)), "y": Tensor("y")},
              ["x"], ["y"])
    with pytest.raises(intq.IntqError, match="node 'bad_matmul' \\(MatMul\\): .*\\[2, 3\\] and \\[4, 5\\]"):
        intq.Interpreter(g).run({"x": np.ones((2, 3), np.float32)})
    g2 = Graph([Node("Frobnicate", "f", ["x"], ["y"])], {"x": Tensor("x", shape=(2,)), "y": Tensor("y")}, ["x"], ["y"])
    with pytest.raises(InterpreterError, match="cannot execute: \\['Frobnicate'\\]"):
        intq.Interpreter(g2)


def test_infer_shapes_fills_every_tensor():
    g = infer_shapes(intq.load(_model([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Shape", ["f"], ["y"])]),
                               ))
    assert g.tensors["f"].shape == (1, 16) and g.tensors["y"].shape == (2,) and g.tensors["y"].dtype == np.int64
