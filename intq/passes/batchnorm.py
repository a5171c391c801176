"""Fold BatchNormalization into the preceding Conv, ConvTranspose or Gemm (spec 004).

Inference batch norm is per-channel affine: ``y = gamma * (x - mean) / sqrt(var + eps) + beta``.
After a linear layer ``x = W * in + b`` it folds into the layer:

    k      = gamma / sqrt(var + eps)              (per output channel)
    W_fold = W * k                                 (scaled along the output-channel axis)
    b_fold = (b - mean) * k + beta                 (b = 0 if the layer had no bias)

Output-channel axis of W: see :mod:`intq.passes.linear_layers`.
Folding is done in float64 and stored as float32. A layer whose output has other readers, or
whose weights are not constants, is left alone.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node, Tensor
from intq.passes.linear_layers import scale_output_channels

_FOLDABLE = frozenset({"Conv", "ConvTranspose", "Gemm"})


def _bn_factors(graph: Graph, bn: Node):
    vals = [graph.constant(i) for i in bn.inputs[1:5]]
    if any(v is None for v in vals):
        return None
    gamma, beta, mean, var = (v.astype(np.float64) for v in vals)
    k = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    return k, beta - mean * k


def fold_batch_norms(graph: Graph) -> Graph:
    """Fold every BatchNormalization whose input is written by a foldable, private linear layer."""
    folds: dict[str, tuple[Node, Node, np.ndarray, np.ndarray]] = {}
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization":
            continue
        src = bn.inputs[0]
        layer = graph.producer(src)
        if layer is None or layer.op_type not in _FOLDABLE or len(graph.consumers(src)) != 1 or src in graph.outputs:
            continue
        if layer.op_type == "Gemm" and float(layer.attrs.get("alpha", 1.0)) != 1.0:
            continue
        factors = _bn_factors(graph, bn)
        w = graph.constant(layer.inputs[1])
        if factors is None or w is None:
            continue
        k, shift = factors
        w_fold = scale_output_channels(layer, w, k)
        if w_fold is None:
            continue
        b_name = layer.inputs[2] if len(layer.inputs) > 2 and layer.inputs[2] else None
        b = graph.constant(b_name) if b_name else np.zeros(k.size)
        if b is None or b.size not in (1, k.size):
            continue
        if layer.op_type == "Gemm":
            b = b * float(layer.attrs.get("beta", 1.0))
        b_fold = b.astype(np.float64).reshape(-1) * k + shift
        folds[layer.name] = (layer, bn, w_fold.astype(np.float32), b_fold.astype(np.float32))
    if not folds:
        return graph
    tensors = dict(graph.tensors)
    rewritten: dict[str, Node] = {}
    for name, (layer, bn, w_fold, b_fold) in folds.items():
        w_name, b_name = f"{layer.name}/weight_bn_folded", f"{layer.name}/bias_bn_folded"
        tensors[w_name] = Tensor(w_name, data=w_fold)
        tensors[b_name] = Tensor(b_name, data=b_fold)
        attrs = dict(layer.attrs)
        if layer.op_type == "Gemm":
            attrs["beta"] = 1.0
        rewritten[name] = layer.with_(inputs=(layer.inputs[0], w_name, b_name), outputs=bn.outputs, attrs=attrs)
    dropped = {bn.name for _, bn, _, _ in folds.values()}
    nodes = [rewritten.get(n.name, n) for n in graph.nodes if n.name not in dropped]
    return graph.replace(nodes=nodes, tensors=tensors).prune()
