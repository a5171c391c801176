"""The linked int8 QDQ form (intq.onnx_format.links): onnxruntime fuses every unit of it on this
host (no float Conv / Add / Mul left between DequantizeLinear and QuantizeLinear in the graph it
runs) and its outputs equal the target that claims onnxruntime here (host_target)."""

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

import intq
from intq.ir import Graph, Node
from intq.runtime.oracles.ort import ort_session
from tests.export.onnx_harness import compare, const, q


def _ran_ops(blob: bytes) -> Counter:
    """The operators of the graph onnxruntime runs (ORT_ENABLE_ALL)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "optimized.onnx"
        ort_session(blob, "enable_all", optimized_path=str(path))
        return Counter(n.op_type for n in onnx.load(path).graph.node)


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_binary_unit_with_a_constant_operand_fuses(op):
    """A constant int8 operand (PP-OCR's hard-sigmoid ``x * alpha + beta``): every code of the
    activation against it; onnxruntime runs QLinearAdd / QLinearMul, not a float Add / Mul."""
    codes = np.arange(-128, 128, dtype=np.int8).reshape(1, 256, 1, 1)
    a = q("a", codes.shape, 0.0343, 65)
    b = const("b", np.full((1, 1, 1, 1), 37, np.int8), 0.0027, 115)
    y = q("y", codes.shape, 0.0701, -65)
    g = Graph([Node(op, op.lower(), ["a", "b"], ["y"], {"fused_activation_function": "NONE"})],
              {t.name: t for t in (a, b, y)}, ["a"], ["y"], name=op.lower())
    blob = intq.export_onnx(g, format="qdq", activations="int8", check=False)
    ran = _ran_ops(blob)
    assert ran[f"QLinear{op.capitalize()}"] == 1 and ran[op.capitalize()] == 0, ran
    compare(g, {"a": codes}, [("qdq", "int8", "enable_all")])


def test_tensor_with_several_readers_and_a_graph_output_fuses():
    """A convolution's output read by two convolutions and returned: each reader gets its own link,
    and onnxruntime runs all three as QLinearConv (before links: float Conv between DQ and Q)."""
    rng = np.random.default_rng(0)
    x, h = q("x", (1, 6, 6, 4), 0.05, 3), q("h", (1, 6, 6, 4), 0.08, -10)
    tensors = {t.name: t for t in (x, h)}
    nodes = []
    for name, src, dst in (("c0", "x", "h"), ("c1", "h", "y1"), ("c2", "h", "y2")):
        w = const(f"{name}/w", rng.integers(-127, 128, (4, 3, 3, 4)).astype(np.int8), 0.01)
        b = const(f"{name}/b", rng.integers(-500, 500, 4), dtype=np.int32)
        if dst != "h":
            tensors[dst] = q(dst, (1, 6, 6, 4), 0.1, 5)
        tensors.update({w.name: w, b.name: b})
        nodes.append(Node("CONV_2D", name, [src, w.name, b.name], [dst],
                          dict(padding="SAME", stride_h=1, stride_w=1, dilation_h_factor=1, dilation_w_factor=1,
                               fused_activation_function="NONE")))
    g = Graph(nodes, tensors, ["x"], ["y1", "y2", "h"], name="readers")
    blob = intq.export_onnx(g, format="qdq", activations="int8", check=False)
    ran = _ran_ops(blob)
    assert ran["QLinearConv"] == 3 and ran["Conv"] == 0, ran
    compare(g, {"x": rng.integers(-128, 128, (1, 6, 6, 4)).astype(np.int8)}, [("qdq", "int8", "enable_all")])
