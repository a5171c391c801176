"""Fold a per-channel affine constant that follows a linear layer into the layer.

Exporters write batch norms as ``Mul`` then ``Add`` (tf2onnx does for Keras depthwise convs) and
scale or shift a layer's output by constants; quantized as written, each costs an extra integer
op and an extra requantization (issue 13: two per MobileNetV2 block). Folded, the layer computes
the same function with one rounding. With ``y = W * x + b`` (per output channel ``c``) and a
constant ``k`` or ``d`` holding one value per channel (a scalar counts):

    y * k = (W * k) * x + b * k          (W scaled along its output-channel axis)
    y + d = W * x + (b + d)
    y - d = W * x + (b - d)

for Conv, ConvTranspose, Gemm and MatMul with constant weights (:mod:`intq.passes.linear_layers`
says where the channels are). A bias-less layer gets a bias; a MatMul cannot hold one, so
``MatMul + d`` is :mod:`intq.passes.matmul_bias`'s rule. The fold applies only when the layer's
output has no other reader (the rewrite engine checks that) and is not a graph output, and when the
constant does not broadcast the output to a larger shape. Folding is computed in float64 and
stored as float32: the folded layer agrees with the unfolded pair to float32 rounding (about
1e-6 relative), not bit for bit.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.passes.linear_layers import (
    LINEAR_OPS,
    bias_vector,
    channel_vector,
    foldable_weights,
    output_channel_axis,
    output_channels,
    scale_output_channels,
    with_weights,
)
from intq.passes.rewrite import Const, Match, Pattern, Replacement, Rule, apply_rules


def _parts(m: Match, graph: Graph, const: str):
    """(layer, W, b, constant as a channel vector) of a match, or None when the fold does not apply."""
    layer = m.nodes["layer"]
    w = foldable_weights(graph, layer)
    if w is None:
        return None
    channels = output_channels(layer, w)
    out_shape = graph.tensors[layer.outputs[0]].shape
    if out_shape is None or graph.tensors[m.root.outputs[0]].shape != out_shape:
        return None
    v = channel_vector(graph.constant(m.tensors[const]), out_shape, output_channel_axis(layer, len(out_shape)), channels)
    b = bias_vector(graph, layer, channels)
    if v is None or b is None:
        return None
    return layer, w, b, v


def _fold_mul(m: Match, graph: Graph) -> list[Node] | Replacement:
    """(W x + b) * k  ->  (W k) x + b k"""
    parts = _parts(m, graph, "k")
    if parts is None:
        return [m.root]
    layer, w, b, k = parts
    w_new = scale_output_channels(layer, w, k)
    if w_new is None:
        return [m.root]
    node, constants = with_weights(graph, layer, w_new, b * k, m.root.outputs, set())
    return Replacement([node], constants)


def _fold_shift(sign: float):
    def fold(m: Match, graph: Graph) -> list[Node] | Replacement:
        """(W x + b) +- d  ->  W x + (b +- d)"""
        parts = _parts(m, graph, "d")
        if parts is None or parts[0].op_type == "MatMul":  # a MatMul has no bias: matmul_bias's rule
            return [m.root]
        layer, w, b, d = parts
        node, constants = with_weights(graph, layer, w.astype(np.float64), b + sign * d, m.root.outputs, set())
        return Replacement([node], constants)

    return fold


def _rules() -> tuple[Rule, ...]:
    rules = []
    for op in LINEAR_OPS:
        layer = Pattern(op, bind="layer")
        rules += [
            # (W x + b) * k = (W k) x + b k
            Rule(f"fold-mul/{op}", Pattern("Mul", (layer, Const.any("k")), commutative=True), _fold_mul),
            # (W x + b) + d = W x + (b + d)
            Rule(f"fold-add/{op}", Pattern("Add", (layer, Const.any("d")), commutative=True), _fold_shift(1.0)),
            # (W x + b) - d = W x + (b - d)
            Rule(f"fold-sub/{op}", Pattern("Sub", (layer, Const.any("d"))), _fold_shift(-1.0)),
        ]
    return tuple(rules)


FOLD_AFFINE_RULES = _rules()


def fold_affine(graph: Graph) -> Graph:
    """Fold every per-channel constant Mul / Add / Sub after a private linear layer into the layer,
    repeatedly (``Conv -> Mul -> Add`` folds both), until nothing changes."""
    while True:
        folded = apply_rules(graph, FOLD_AFFINE_RULES)
        if folded is graph:
            return graph
        graph = folded
