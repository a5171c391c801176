"""The float builtins of a float island (intq.tflite.float_builtins): intq's float ops export as
TFLite float builtins that LiteRT's reference kernels and TensorFlow Lite Micro compute bit for bit
as intq does (the reason an op may be in a float island)."""

import numpy as np
import pytest

import intq
from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.runtime.float_ops import lookup
from intq.runtime.float_ops._libm import LOGISTIC_CUTOFF_LOWER, LOGISTIC_CUTOFF_UPPER, logistic
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.tflm import run_tflm
from intq.tflite.float_builtins import FLOAT_ISLAND_BUILTINS, float_ops_as_builtins


def _logistic_inputs() -> np.ndarray:
    """Values that exercise every branch of the reference LOGISTIC: both cutoffs and their float32
    neighbours, zero, the tails, and a dense uniform sweep."""
    rng = np.random.default_rng(3)
    edges = []
    for c in (LOGISTIC_CUTOFF_LOWER, LOGISTIC_CUTOFF_UPPER, np.float32(0)):
        v = np.float32(c)
        for _ in range(64):  # 64 float32 steps on either side of each edge
            edges += [v, -v]
            v = np.nextafter(v, np.float32(np.inf), dtype=np.float32)
        v = np.float32(c)
        for _ in range(64):
            v = np.nextafter(v, np.float32(-np.inf), dtype=np.float32)
            edges.append(v)
    sweep = rng.uniform(-30, 30, 20000).astype(np.float32)
    tails = np.float32([-200, -104, -88, -87.5, 30, 89, 200, 1e-30, -1e-30])
    return np.concatenate([np.float32(edges), sweep, tails]).astype(np.float32)


def _single_op_graph(node: Node, x: np.ndarray) -> Graph:
    tensors = {"x": Tensor("x", np.dtype(np.float32), x.shape), "y": Tensor("y", np.dtype(np.float32), x.shape)}
    return Graph([node], tensors, ["x"], ["y"], name="one_op")


@pytest.mark.parametrize("runtime", ["litert-ref", "tflm"])
def test_float_logistic_equals_the_runtimes_bit_for_bit(runtime):
    x = _logistic_inputs()
    x = np.pad(x, (0, -x.size % 64)).reshape(1, -1, 64)
    ours = logistic(x)
    assert np.array_equal(lookup("Sigmoid")(x)[0], ours)  # the float op a float island runs
    blob = intq.export_tflite(_single_op_graph(Node("Sigmoid", "sig", ("x",), ("y",)), x))
    oracle = run_litert if runtime == "litert-ref" else run_tflm
    theirs = oracle(blob, [x])["outputs"][0]
    assert theirs.dtype == np.float32 and np.array_equal(theirs, ours)
    # not a vacuous comparison: the reference kernel's cutoffs make it differ from the exact sigmoid
    exact = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    assert not np.array_equal(ours, exact)


def test_float_ops_become_builtins_and_unknown_ones_are_refused():
    x = np.zeros((1, 4), np.float32)
    g = _single_op_graph(Node("Sigmoid", "sig", ("x",), ("y",)), x)
    assert [n.op_type for n in float_ops_as_builtins(g).nodes] == ["LOGISTIC"]
    assert float_ops_as_builtins(float_ops_as_builtins(g)).nodes[0].op_type == "LOGISTIC"
    assert {"Sigmoid", "Add", "Sub", "Mul", "Div", "Concat", "Reshape", "Transpose"} <= FLOAT_ISLAND_BUILTINS
    assert float_ops_as_builtins(_single_op_graph(Node("Tanh", "t", ("x",), ("y",)), x)).nodes[0].op_type == "TANH"
    with pytest.raises(IntqError, match="'t' is the float op Softmax.*cannot hold"):
        float_ops_as_builtins(_single_op_graph(Node("Softmax", "t", ("x",), ("y",)), x))
