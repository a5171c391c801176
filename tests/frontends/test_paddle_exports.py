"""An ONNX file exported from PaddlePaddle by paddle2onnx at opset 11
(tools/make_paddle_onnx_fixtures.py): dynamic batch, Clip-as-ReLU6, HardSigmoid*x hard-swish,
grouped conv, standalone batch norm, shape arithmetic. intq must agree with Paddle itself and
with onnxruntime, and the HardSwish pattern must be recognised."""

import os

import numpy as np
import onnx

import intq
from intq.passes import simplify

from ..onnx_helpers import assert_close_to_reference, ort_session

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "paddle")


def test_paddle_export_matches_paddle_and_onnxruntime():
    proto = onnx.load(os.path.join(FIXTURES, "paddle_cnn.onnx"))
    ref = np.load(os.path.join(FIXTURES, "paddle_cnn.npz"))
    x, y_paddle = ref["x"], ref["y"]
    name = proto.graph.input[0].name
    graph = simplify(intq.load(proto, input_shapes={name: x.shape}))
    assert graph.metadata["source_opset"] == 11
    assert "HardSwish" in graph.op_types() and "Shape" not in graph.op_types()
    out = intq.Interpreter(graph).run({name: x})
    (got,) = out.values()
    assert_close_to_reference({"y": got}, {"y": y_paddle})
    want = dict(zip([o.name for o in proto.graph.output], ort_session(proto).run(None, {name: x})))
    assert_close_to_reference(out, want)
