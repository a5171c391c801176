"""ONNX If nodes folded at import when constants and static shapes decide their condition
(intq.frontends.onnx_if): the branch taken is inlined, nested Ifs fold too, and the result equals
onnxruntime on the original model; an If that depends on data stays and is named."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.errors import IntqError, UnsupportedOperatorError
from intq.frontends import OnnxImportError


def _branch(name, nodes, out, inits=()):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                             [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])


def _sample_rate_model() -> onnx.ModelProto:
    """y = x * 2 if sr == 16000 else x + 1 (torch.onnx's shape of a sample-rate switch); the then
    branch holds a nested If on the input's rank (a shape test), which folds once inlined."""
    inner_then = _branch("inner_then", [helper.make_node("Mul", ["x", "two"], ["t_in"])], "t_in", [("two", np.float32(2))])
    inner_else = _branch("inner_else", [helper.make_node("Neg", ["x"], ["e_in"])], "e_in")
    then = _branch("then", [helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Size", ["xs"], ["rank"]),
                            helper.make_node("Equal", ["rank", "two_i"], ["is2d"]),
                            helper.make_node("If", ["is2d"], ["t"], name="rank_if", then_branch=inner_then,
                                             else_branch=inner_else)],
                   "t", [("two_i", np.int64(2))])
    other = _branch("else", [helper.make_node("Add", ["x", "one"], ["e"])], "e", [("one", np.float32(1))])
    nodes = [helper.make_node("Reshape", ["sr", "flat"], ["sr1"]),
             helper.make_node("Gather", ["sr1", "zero"], ["sr0"], axis=0),
             helper.make_node("Equal", ["sr0", "rate"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["y"], name="rate_if", then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "sr_switch",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
                               helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray([-1], np.int64), "flat"),
                               numpy_helper.from_array(np.asarray(0, np.int64), "zero"),
                               numpy_helper.from_array(np.asarray(16000, np.int64), "rate")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("rate", [16000, 8000])
def test_constant_input_folds_the_if_it_decides(rate):
    model = _sample_rate_model()
    g = intq.load(model, input_shapes={"x": (1, 8)}, constant_inputs={"sr": rate})
    assert "If" not in {n.op_type for n in g.nodes} and list(g.inputs) == ["x"]
    x = np.random.default_rng(rate).standard_normal((1, 8)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "sr": np.asarray(rate, np.int64)})[0]
    np.testing.assert_array_equal(intq.Interpreter(g).run({"x": x})["y"], want)
    assert {n.op_type for n in g.nodes} - {"Identity"} == ({"Mul"} if rate == 16000 else {"Add"})  # conditions dropped


def test_an_if_decided_by_data_is_named_with_the_fix():
    with pytest.raises(UnsupportedOperatorError, match="(?s)If: 1 node\\(s\\): 'rate_if'.*constant_inputs=") as e:
        intq.load(_sample_rate_model(), input_shapes={"x": (1, 8)})
    assert "depends on data" in str(e.value)


def test_constant_inputs_are_checked():
    with pytest.raises(OnnxImportError, match="constant_inputs names \\['rate'\\]"):
        intq.load(_sample_rate_model(), input_shapes={"x": (1, 8)}, constant_inputs={"rate": 1})
    with pytest.raises(OnnxImportError, match="constant input 'sr' has shape \\[2\\]"):
        intq.load(_sample_rate_model(), input_shapes={"x": (1, 8)}, constant_inputs={"sr": [1, 2]})
    with pytest.raises(IntqError, match="constant_inputs= applies to ONNX models"):
        intq.load(b"TFL3", constant_inputs={"sr": 1})


def test_a_shape_test_behind_computed_reshapes_folds():
    """The condition reads the shape of a tensor ONNX shape inference leaves open (a Reshape to a
    computed shape): the importer runs the nodes it depends on to learn it."""
    then = _branch("then", [helper.make_node("Squeeze", ["r", "ax0"], ["t"])], "t", [("ax0", np.asarray([0], np.int64))])
    other = _branch("else", [helper.make_node("Identity", ["r"], ["e"])], "e")
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Mul", ["s", "one"], ["s2"]),
             helper.make_node("Reshape", ["x", "s2"], ["r"]), helper.make_node("Shape", ["r"], ["rs"]),
             helper.make_node("Gather", ["rs", "zero"], ["d0"], axis=0),
             helper.make_node("Equal", ["d0", "one_s"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="squeeze_if", then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "shape_test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones(2, np.int64), "one"),
                               numpy_helper.from_array(np.asarray(0, np.int64), "zero"),
                               numpy_helper.from_array(np.asarray(1, np.int64), "one_s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    for batch, shape in ((1, (4,)), (3, (3, 4))):
        g = intq.load(model, input_shapes={"x": (batch, 4)})
        x = np.arange(batch * 4, dtype=np.float32).reshape(batch, 4)
        assert intq.Interpreter(g).run({"x": x})["y"].shape == shape
