"""onnxruntime's contrib GELUs (com.microsoft Gelu, BiasGelu, FastGelu) import as ONNX's Gelu, equal to
onnxruntime within float32 rounding (a few ulps: the ops' operations in another order); any other
com.microsoft float op is named as unsupported."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.errors import UnsupportedOperatorError
from intq.passes import simplify


def _model(op, bias):
    ins = ["x"] + (["b"] if bias else [])
    g = helper.make_graph([helper.make_node(op, ins, ["y"], domain="com.microsoft")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                          [numpy_helper.from_array(np.linspace(-1, 1, 8).astype(np.float32), "b")] if bias else [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


@pytest.mark.parametrize("op, bias, approximate", [("Gelu", False, "none"), ("BiasGelu", True, "none"),
                                                    ("FastGelu", False, "tanh"), ("FastGelu", True, "tanh")])
def test_contrib_gelus_are_gelu(op, bias, approximate):
    m = _model(op, bias)
    x = np.linspace(-6, 6, 16, dtype=np.float32).reshape(2, 8)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    g = simplify(intq.load(m))
    assert [n.op_type for n in g.nodes] == (["Add"] if bias else []) + ["Gelu"]
    assert g.nodes[-1].attrs["approximate"] == approximate
    np.testing.assert_allclose(intq.Interpreter(g).run({"x": x})["y"], want, rtol=0, atol=1e-6)


def test_other_contrib_ops_are_named():
    with pytest.raises(UnsupportedOperatorError, match="com.microsoft::QuickGelu"):
        intq.load(_model("QuickGelu", False))
