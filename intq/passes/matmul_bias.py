"""``MatMul`` with constant weights followed by a constant ``Add``: one layer with a bias.

Exporters write a dense layer as ``MatMul(x, W) + b`` (tf2onnx for Keras ``Dense``, PyTorch for
``Linear`` on 3-D inputs). Quantized as written that is FULLY_CONNECTED without a bias, then an
int8 ADD with its own rounding; as one layer, the bias is added in the int32 accumulator
(FULLY_CONNECTED with an int32 bias, quantized at ``S_x * S_w``) and the output is requantized
once. With ``d`` one value per output column (or a scalar):

    x @ W + d = Gemm(x, W, C = d)                          (x 2-D [M, K])
    x @ W + d = Reshape(Gemm(Reshape(x, [-1, K]), W, d), shape of x @ W)    (x N-D [..., K])

The reshapes are free in the integer graph (RESHAPE keeps the quantization parameters). Exact in
real arithmetic; in float32 the sum may round differently (about 1e-7 relative).
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.passes.linear_layers import channel_vector, foldable_weights, fresh_name
from intq.passes.rewrite import Const, Match, Pattern, Replacement, Rule, apply_rules


def _matmul_plus_bias(m: Match, graph: Graph) -> list[Node] | Replacement:
    """x @ W + d  ->  Gemm(x, W, d)  (reshaped around the Gemm when x is not 2-D)"""
    mm = m.nodes["layer"]
    w = foldable_weights(graph, mm)
    x_shape = graph.tensors[mm.inputs[0]].shape
    out_shape = graph.tensors[mm.outputs[0]].shape
    if (w is None or x_shape is None or out_shape is None or len(x_shape) < 2 or None in out_shape
            or graph.tensors[m.root.outputs[0]].shape != out_shape):
        return [m.root]
    d = channel_vector(graph.constant(m.tensors["d"]), out_shape, len(out_shape) - 1, w.shape[1])
    if d is None:
        return [m.root]
    taken: set[str] = set()

    def name(hint: str) -> str:
        n = fresh_name(graph, f"{mm.name}/{hint}", taken)
        taken.add(n)
        return n

    w_name, b_name = name("weight"), name("bias")
    constants = {w_name: w.astype(np.float32), b_name: d.astype(np.float32)}
    if len(x_shape) == 2:
        return Replacement([Node("Gemm", mm.name, (mm.inputs[0], w_name, b_name), m.root.outputs)], constants)
    flat_shape, out_shape_name = name("flat_shape"), name("out_shape")
    flat_in, flat_out = name("flat_in"), name("flat_out")
    constants[flat_shape] = np.asarray([-1, w.shape[0]], np.int64)
    constants[out_shape_name] = np.asarray(out_shape, np.int64)
    return Replacement([
        Node("Reshape", f"{mm.name}/flatten", (mm.inputs[0], flat_shape), (flat_in,)),
        Node("Gemm", mm.name, (flat_in, w_name, b_name), (flat_out,)),
        Node("Reshape", f"{mm.name}/unflatten", (flat_out, out_shape_name), m.root.outputs),
    ], constants)


MATMUL_BIAS_RULES = (
    # x @ W + d = Gemm(x, W, d)
    Rule("matmul-bias", Pattern("Add", (Pattern("MatMul", bind="layer"), Const.any("d")), commutative=True),
         _matmul_plus_bias),
)


def matmul_bias(graph: Graph) -> Graph:
    """Turn every private constant-weight ``MatMul`` followed by a per-column constant ``Add`` into
    a ``Gemm`` with that bias."""
    return apply_rules(graph, MATMUL_BIAS_RULES)
