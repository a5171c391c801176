"""ONNX import: legacy operator forms normalised to opset 21 keep their meaning (vs onnxruntime
running the original opset), unsupported operators are reported once, inputs bind clearly."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.errors import GraphError, UnsupportedOperatorError
from intq.frontends import OnnxImportError

from ..onnx_helpers import assert_close_to_reference, ort_session

RNG = np.random.default_rng(9)


def _model(nodes, x_shape, opset, inits=(), outputs=("y",), x_dtype=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "legacy", [helper.make_tensor_value_info("x", x_dtype, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


LEGACY = {
    "squeeze-11": (lambda: [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
                            helper.make_node("Squeeze", ["u"], ["y"], axes=[0])], [2, 3], 11),
    "reduce-mean-11": (lambda: [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 2], keepdims=0)], [2, 3, 4], 11),
    "reduce-sum-11": (lambda: [helper.make_node("ReduceSum", ["x"], ["y"], axes=[-1])], [2, 3, 4], 11),
    "split-attr-11": (lambda: [helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]),
                               helper.make_node("Concat", ["b", "a"], ["y"], axis=1)], [2, 4], 11),
    "split-equal-11": (lambda: [helper.make_node("Split", ["x"], ["a", "b"], axis=1),
                                helper.make_node("Sub", ["a", "b"], ["y"])], [2, 4], 11),
    "clip-attrs-9": (lambda: [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25)], [3, 4], 9),
    "pad-attrs-9": (lambda: [helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 2], value=1.5)], [2, 3], 9),
    "pad-reflect-9": (lambda: [helper.make_node("Pad", ["x"], ["y"], pads=[0, 2, 0, 1], mode="reflect")], [2, 4], 9),
    "slice-attrs-9": (lambda: [helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[100, -1], axes=[0, 1])], [4, 5], 9),
    "softmax-axis1-4d-11": (lambda: [helper.make_node("Softmax", ["x"], ["y"], axis=1)], [2, 3, 4, 5], 11),
    "logsoftmax-default-2d-9": (lambda: [helper.make_node("LogSoftmax", ["x"], ["y"])], [3, 7], 9),
    "softmax-neg-axis-11": (lambda: [helper.make_node("Softmax", ["x"], ["y"], axis=-2)], [2, 3, 4], 11),
    "upsample-9": (lambda: [helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")], [1, 2, 3, 4], 9),
    "resize-10": (lambda: [helper.make_node("Resize", ["x", "scales"], ["y"], mode="nearest")], [1, 2, 3, 4], 10),
    "dropout-9": (lambda: [helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.3)], [3, 4], 9),
    "batchnorm-9": (lambda: [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)], [2, 3, 4, 4], 9),
}
SCALES = np.array([1, 1, 2, 3], np.float32)
BN = [("s", np.array([1.0, 0.5, 2.0], np.float32)), ("b", np.array([0.1, 0.0, -0.3], np.float32)),
      ("m", np.array([0.2, -0.1, 0.0], np.float32)), ("v", np.array([1.0, 2.0, 0.5], np.float32))]


@pytest.mark.parametrize("case", sorted(LEGACY))
def test_legacy_forms_keep_their_meaning(case):
    make, shape, opset = LEGACY[case]
    inits = [("scales", SCALES)] if case in ("upsample-9", "resize-10") else BN if case == "batchnorm-9" else []
    model = _model(make(), shape, opset, inits)
    graph = intq.load(model)
    assert graph.metadata["source_opset"] == opset and graph.opset == 21
    legacy_attrs = {"axes", "split", "min", "max", "pads", "value", "starts", "ends", "scales", "ratio", "spatial"}
    assert not [(n.name, k) for n in graph.nodes for k in n.attrs if k in legacy_attrs], "legacy attributes remain"
    assert "Upsample" not in graph.op_types() and "Dropout" not in graph.op_types()
    x = RNG.standard_normal(shape).astype(np.float32)
    got = intq.Interpreter(graph).run({"x": x})
    want = dict(zip(["y"], ort_session(model).run(["y"], {"x": x})))
    assert_close_to_reference({"y": got["y"]}, want, rel=1e-6)


def test_every_unsupported_operator_is_reported_at_once():
    nodes = [helper.make_node("LpNormalization", ["x"], ["a"]), helper.make_node("LpNormalization", ["a"], ["b"], name="lp2"),
             helper.make_node("FusedConv", ["b"], ["c"], domain="com.microsoft", name="fc"),
             helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, [2, 3], 13)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOperatorError) as e:
        intq.load(model)
    msg = str(e.value)
    assert "2 operator type(s)" in msg and "(opset 13)" in msg
    assert "LpNormalization: 2 node(s): 'LpNormalization_0', 'lp2'" in msg
    assert "com.microsoft::FusedConv: 1 node(s): 'fc'" in msg and "Supported:" in msg and "Conv" in msg


def test_input_binding_errors_name_the_input(tmp_path):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], ["batch", 3], 13)
    assert intq.load(model).tensors["x"].shape == (1, 3)  # a dynamic batch alone defaults to 1
    seq = _model([helper.make_node("Relu", ["x"], ["y"])], ["batch", "n"], 13)
    with pytest.raises(OnnxImportError, match="input 'x' has dynamic dimensions \\['batch', 'n'\\]; pass input_shapes=\\{'x': \\(1, 128\\)\\} \\(128: example sizes for the dynamic n;"):
        intq.load(seq)
    with pytest.raises(OnnxImportError, match="the model's inputs are \\['x'\\]"):
        intq.load(model, input_shapes={"image": (1, 3)})
    with pytest.raises(OnnxImportError, match="rank 2"):
        intq.load(model, input_shapes={"x": (1, 3, 4)})
    static = _model([helper.make_node("Relu", ["x"], ["y"])], [2, 3], 13)
    with pytest.raises(OnnxImportError, match="static shape \\(2, 3\\)"):
        intq.load(static, input_shapes={"x": (4, 3)})
    g = intq.load(model, input_shapes={"x": (5, 3)})
    assert g.tensors["x"].shape == (5, 3)


def test_unreadable_files_are_named(tmp_path):
    with pytest.raises(OnnxImportError, match="no such file"):
        intq.load(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01not a protobuf at all\xff")
    with pytest.raises(OnnxImportError, match="bad.onnx: not a readable ONNX model"):
        intq.load(bad)
    with pytest.raises(intq.IntqError, match="reads .onnx files"):
        intq.load(tmp_path / "model.pb")
    old = _model([helper.make_node("Relu", ["x"], ["y"])], [2], 5)
    with pytest.raises(OnnxImportError, match="opset 5 is outside"):
        intq.load(old)


def test_names_constants_and_unnamed_nodes():
    nodes = [helper.make_node("Constant", [], ["c"], value_float=2.0),
             helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.arange(3, dtype=np.float32))),
             helper.make_node("Mul", ["x", "c"], ["m"], name="scale"),
             helper.make_node("Add", ["m", "k"], ["y"])]
    model = _model(nodes, [2, 3], 13)
    g = intq.load(model)
    assert [n.name for n in g.nodes] == ["scale", "Add_3"]
    assert g.constant("c") == 2.0 and g.constant("k").tolist() == [0, 1, 2]
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(intq.Interpreter(g).run({"x": x})["y"], x * 2 + np.arange(3, dtype=np.float32))
    # a file round trip gives the same graph
    assert "Graph 'legacy'" in g.summary()


def test_training_mode_batch_norm_is_refused():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=1)
    with pytest.raises(GraphError, match="training mode"):
        intq.load(_model([node], [2, 3, 4, 4], 15, BN))
