"""ONNX files exported from Keras by tf2onnx (tools/make_keras_onnx_fixtures.py): NHWC models
wrapped in Transposes, a dynamic batch with shape arithmetic, MatMul+Add dense layers.
intq must agree with Keras itself (the framework that defined them) and with onnxruntime."""

import os

import numpy as np
import onnx
import pytest

import intq
from intq.passes import simplify

from ..onnx_helpers import assert_close_to_reference, ort_session

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "keras")


@pytest.mark.parametrize("name", ["keras_cnn_opset13", "keras_unet_opset17"])
def test_keras_exports_match_keras_and_onnxruntime(name):
    proto = onnx.load(os.path.join(FIXTURES, f"{name}.onnx"))
    ref = np.load(os.path.join(FIXTURES, f"{name}.npz"))
    x, y_keras = ref["x"], ref["y"]
    assert intq.load(proto).tensors["x"].shape == (1, *x.shape[1:])  # a dynamic batch alone defaults to 1
    graph = simplify(intq.load(proto, input_shapes={"x": x.shape}))
    assert "Shape" not in graph.op_types(), "the dynamic-batch shape arithmetic must fold away"
    out = intq.Interpreter(graph).run({"x": x})
    (got,) = out.values()
    # Keras ran with oneDNN (other summation order): same 1e-4-of-scale bound as for onnxruntime
    assert_close_to_reference({"y": got}, {"y": y_keras})
    want = dict(zip([o.name for o in proto.graph.output], ort_session(proto).run(None, {"x": x})))
    assert_close_to_reference(out, want)
