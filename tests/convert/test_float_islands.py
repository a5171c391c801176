"""Float islands (``precision={node: "float"}``) for every operator of the kernel registry.

Each registered operator either has a float island form (:data:`intq.convert.precision.ISLAND_BUILTINS`:
the TFLite float builtin the island writes, from intq's float op) or a documented reason it has none
(:data:`~intq.convert.precision.NOT_ISLANDS`); a new operator with neither fails here. For every
island form, a small ONNX model puts that float op between the graph input and an integer MEAN:
converted with the op set to float, it must read DEQUANTIZE -> float op -> QUANTIZE, and the written
``.tflite`` must equal intq on every tensor in LiteRT ``BUILTIN_REF`` (target ``litert-ref``) and
TensorFlow Lite Micro (target ``tflite``) on random inputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import intq
from intq.convert.precision import FLOAT_ISLAND_OPS, ISLAND_BUILTINS, NOT_ISLANDS
from intq.export.tflite_writer import to_tflite_bytes
from intq.kernels import operators
from intq.passes import simplify
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.tflm import run_tflm

SHAPE = [1, 4, 8]
f32 = np.float32


def _model(nodes, inputs, consts=None, mid="t") -> onnx.ModelProto:
    """``inputs`` -> ``nodes`` (writing ``mid``) -> ReduceMean over the last axis -> ``out`` (an integer MEAN
    reading the island's result)."""
    consts = consts or {}
    nodes = [*nodes, helper.make_node("ReduceMean", [mid], ["out"], axes=[-1], keepdims=1)]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    init = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    graph = helper.make_graph(nodes, "island", vi, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _unary(op, **attrs):
    return lambda: (_model([helper.make_node(op, ["x"], ["t"], **attrs)], {"x": SHAPE}), {"x": (-4, 4)})


def _binary(op):
    return lambda: (_model([helper.make_node(op, ["x", "y"], ["t"])], {"x": SHAPE, "y": SHAPE}),
                    {"x": (-4, 4), "y": (-2, 3)})


def _clip(lo, hi):
    return lambda: (_model([helper.make_node("Clip", ["x", "lo", "hi"], ["t"])], {"x": SHAPE},
                           {"lo": f32(lo), "hi": f32(hi)}), {"x": (-8, 8)})


def _rsqrt():
    """``x / sqrt(y)`` (intq.passes.sqrt: ``x * Rsqrt(y)``; the island takes the Mul too)."""
    nodes = [helper.make_node("Sqrt", ["y"], ["r"]), helper.make_node("Div", ["x", "r"], ["t"])]
    return _model(nodes, {"x": SHAPE, "y": SHAPE}), {"x": (-4, 4), "y": (0.05, 9)}


#: builtin -> () -> (ONNX model, {input: (low, high)} of the uniform random inputs)
CASES = {
    "LOGISTIC": _unary("Sigmoid"), "TANH": _unary("Tanh"), "RELU": _unary("Relu"),
    "LEAKY_RELU": _unary("LeakyRelu", alpha=0.1),
    "ADD": _binary("Add"), "SUB": _binary("Sub"), "MUL": _binary("Mul"), "MAXIMUM": _binary("Max"),
    "MINIMUM": _binary("Min"),
    "RELU6": _clip(0, 6), "RELU_N1_TO_1": _clip(-1, 1),
    "CONCATENATION": lambda: (_model([helper.make_node("Concat", ["x", "y"], ["t"], axis=2)],
                                     {"x": SHAPE, "y": SHAPE}), {"x": (-4, 4), "y": (-1, 1)}),
    "RESHAPE": lambda: (_model([helper.make_node("Reshape", ["x", "s"], ["t"])], {"x": SHAPE},
                               {"s": np.array([1, 8, 4], np.int64)}), {"x": (-4, 4)}),
    "SQUEEZE": lambda: (_model([helper.make_node("Squeeze", ["x", "a"], ["t"])], {"x": [1, 4, 1, 8]},
                               {"a": np.array([2], np.int64)}), {"x": (-4, 4)}),
    "TRANSPOSE": lambda: (_model([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1])], {"x": SHAPE}),
                          {"x": (-4, 4)}),
    "RSQRT": _rsqrt,
    "SQRT": lambda: (_model([helper.make_node("Sqrt", ["x"], ["t"])], {"x": SHAPE}), {"x": (0.01, 9)}),
    "PRELU": lambda: (_model([helper.make_node("PRelu", ["x", "a"], ["t"])], {"x": SHAPE},
                             {"a": np.linspace(0.05, 0.5, 8).astype(f32)}), {"x": (-4, 4)}),
    **{op: (lambda onnx_op: lambda: (_model([helper.make_node(onnx_op, ["x"], ["t"], axes=[1], keepdims=1)],
                                            {"x": SHAPE}), {"x": (-4, 4)}))(onnx_op)
       for op, onnx_op in (("REDUCE_MAX", "ReduceMax"), ("REDUCE_MIN", "ReduceMin"))},
}


def test_every_registered_operator_is_an_island_or_says_why_not():
    ops = set(operators())
    assert not set(ISLAND_BUILTINS) & set(NOT_ISLANDS)
    missing = ops - set(ISLAND_BUILTINS) - set(NOT_ISLANDS)
    assert not missing, f"operators with no float island form and no reason in NOT_ISLANDS: {sorted(missing)}"
    assert set(ISLAND_BUILTINS) <= ops and set(NOT_ISLANDS) <= ops, "stale entries"
    assert set(ISLAND_BUILTINS.values()) <= FLOAT_ISLAND_OPS
    assert set(CASES) == set(ISLAND_BUILTINS), "every island form has a conversion test here"
    doc = (Path(__file__).parents[2] / "docs" / "engine.md").read_text()
    section = doc[doc.index("### Float islands"):]
    listed = set(re.findall(r"\b[A-Z][A-Z0-9_]+[A-Z0-9]\b", section[:section.index("\n## ")]))
    assert set(NOT_ISLANDS) <= listed, f"docs/engine.md 'Float islands' does not list {sorted(set(NOT_ISLANDS) - listed)}"


def _every_tensor_equal(qg, blob, feed, target, oracle):
    it = intq.Interpreter(qg, target=target, trace=True)
    it.run(dict(feed))
    mine, theirs = it.tensors(), oracle(blob, [feed[n] for n in qg.inputs])["tensors"]
    common = [k for k in mine if k in theirs]
    assert len(common) >= len(qg.nodes)
    bad = [k for k in common if not np.array_equal(mine[k], theirs[k])]
    assert not bad, f"[{target}] tensors differ: {bad[:5]}"


@pytest.mark.parametrize("builtin", sorted(CASES))
def test_a_float_island_of_each_form_equals_both_runtimes(builtin):
    model, ranges = CASES[builtin]()
    g = simplify(intq.load(model))
    op = ISLAND_BUILTINS[builtin]
    node = next(n for n in g.nodes if n.op_type == op)
    rng = np.random.default_rng(sorted(CASES).index(builtin))
    shapes = {n: g.tensors[n].shape for n in g.inputs}

    def sample():
        return {n: rng.uniform(*ranges[n], size=shapes[n]).astype(f32) for n in g.inputs}

    qg = intq.quantize(g, [sample() for _ in range(8)], precision={node.name: "float"})
    island = next(n for n in qg.nodes if n.op_type == op)
    producers = {o: n for n in qg.nodes for o in n.outputs}
    assert {producers[i].op_type for i in island.inputs if i in producers} <= {"DEQUANTIZE", *FLOAT_ISLAND_OPS}
    assert any(n.op_type == "QUANTIZE" and qg.tensors[n.inputs[0]].dtype == np.float32 and n.inputs[0] not in qg.inputs
               for n in qg.nodes), "the island's result is not QUANTIZEd back"
    assert any(n.op_type == "MEAN" for n in qg.nodes)
    blob = to_tflite_bytes(qg)
    for _ in range(3):
        feed = sample()
        _every_tensor_equal(qg, blob, feed, "litert-ref", run_litert)
        _every_tensor_equal(qg, blob, feed, "tflite", run_tflm)
