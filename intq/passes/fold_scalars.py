"""Fold a scalar ``Mul`` (a ``Div`` by a constant has already become one) that feeds a linear
layer into the layer's weights.

Exporters scale inputs (``x / 255``, ``x * 0.125`` before an attention MatMul); quantized as
written, the scale is one more int8 MUL with its own rounding. A linear layer is linear in its
input, so with a scalar constant ``s``:

    Conv(x * s, W, b)          = Conv(x, W * s, b)          (zero padding: pad(x * s) = pad(x) * s)
    ConvTranspose(x * s, W, b) = ConvTranspose(x, W * s, b)
    Gemm(x * s, W, C)          = Gemm(x, W * s, C)          (transA = 0, alpha = 1)
    MatMul(x * s, W)           = MatMul(x, W * s)

Only a scalar folds this way: a per-channel factor would have to scale the weights along the
*input*-channel axis (not done here). A scalar after a layer is :mod:`intq.passes.fold_affine`'s
rule (a scalar is one value per channel). The Mul's output must have no other reader; chains
``x * a * b`` fold one factor per pass (:func:`fold_scalars` repeats until nothing changes).
Exact in real arithmetic; in float32 the folded weights round once more (about 1e-7 relative).
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.passes.linear_layers import LINEAR_OPS, foldable_weights, fresh_name
from intq.passes.rewrite import Const, Match, Pattern, Replacement, Rule, apply_rules


def _is_scalar(a: np.ndarray) -> bool:
    return a.size == 1 and np.issubdtype(a.dtype, np.floating)


def _fold_input_scale(m: Match, graph: Graph) -> list[Node] | Replacement:
    """layer(x * s, W, ...)  ->  layer(x, W * s, ...)"""
    layer = m.root
    w = foldable_weights(graph, layer)
    if w is None or layer.inputs[0] != m.nodes["mul"].outputs[0]:
        return [m.root]
    s = float(graph.constant(m.tensors["s"]).reshape(()))
    x_shape = graph.tensors[m.tensors["x"]].shape
    if x_shape is None or x_shape != graph.tensors[layer.inputs[0]].shape:  # x * s must not broadcast x
        return [m.root]
    w_name = fresh_name(graph, f"{layer.name}/weight_scaled")
    node = layer.with_(inputs=(m.tensors["x"], w_name) + tuple(layer.inputs[2:]))
    return Replacement([node], {w_name: (w.astype(np.float64) * s).astype(np.float32)})


def _rules() -> tuple[Rule, ...]:
    scaled = Pattern("Mul", ("x", Const(_is_scalar, "s")), commutative=True, bind="mul")
    # layer(x * s, W) = layer(x, W * s)
    return tuple(Rule(f"fold-input-scale/{op}", Pattern(op, (scaled,)), _fold_input_scale) for op in LINEAR_OPS)


FOLD_SCALAR_RULES = _rules()


def fold_scalars(graph: Graph) -> Graph:
    """Fold every scalar Mul that is a linear layer's only input path into the layer's weights,
    repeatedly, until nothing changes."""
    while True:
        folded = apply_rules(graph, FOLD_SCALAR_RULES)
        if folded is graph:
            return graph
        graph = folded
