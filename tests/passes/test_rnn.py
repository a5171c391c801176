"""intq.passes.rnn: an LSTM unrolled into its steps computes what the LSTM op computes (float32,
another summation order), for every output and direction; what it does not implement is refused."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import intq
from intq.errors import UnsupportedOperatorError
from intq.passes import simplify


def _lstm_model(direction, dirs, hidden=4, steps=5, batch=2, **attrs):
    rng = np.random.default_rng(dirs)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n) for n, s in
             (("W", (dirs, 4 * hidden, 3)), ("R", (dirs, 4 * hidden, hidden)), ("B", (dirs, 8 * hidden)))]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "y_h", "y_c"], hidden_size=hidden,
                            direction=direction, **attrs)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, batch, 3]),
           helper.make_tensor_value_info("h0", TensorProto.FLOAT, [dirs, batch, hidden]),
           helper.make_tensor_value_info("c0", TensorProto.FLOAT, [dirs, batch, hidden])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y_h", "y_c")]
    graph = helper.make_graph([node], "lstm", ins, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("direction,dirs", [("forward", 1), ("reverse", 1), ("bidirectional", 2)])
def test_unrolled_lstm_equals_the_lstm_op(direction, dirs):
    g = intq.load(_lstm_model(direction, dirs))
    unrolled = simplify(g)
    assert "LSTM" not in {n.op_type for n in unrolled.nodes}
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((5, 2, 3)).astype(np.float32),
            "h0": rng.standard_normal((dirs, 2, 4)).astype(np.float32),
            "c0": rng.standard_normal((dirs, 2, 4)).astype(np.float32)}
    want, got = intq.Interpreter(g).run(feed), intq.Interpreter(unrolled).run(feed)
    for name in ("y", "y_h", "y_c"):
        assert got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_what_the_unrolling_does_not_implement_is_refused_by_name():
    with pytest.raises(UnsupportedOperatorError, match="LSTM: clip=3.0 is not implemented"):
        simplify(intq.load(_lstm_model("forward", 1, clip=3.0)))  # the float op refuses at shape inference
