"""Cross-layer equalization (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization
and Bias Correction", section 4.1).

Two linear layers in a row with a positively homogeneous activation between them (none, or ReLU:
``relu(x / s) = relu(x) / s`` for ``s > 0``) compute the same function when output channel ``i``
of the first is divided by ``s_i`` and input channel ``i`` of the second multiplied by it:

    W1[i] / s_i,  b1[i] / s_i,  W2[:, i] * s_i

With ``r1_i = max |W1[i]|`` and ``r2_i = max |W2[:, i]|``, ``s_i = sqrt(r1_i / r2_i)`` makes both
ranges ``sqrt(r1_i * r2_i)``: channels whose weights span very different ranges (common after
batch-norm folding) share a per-tensor scale better. With per-channel weights (intq's default)
the first layer's channels already have their own scales; what CLE then changes is the second
layer's per-output-channel ranges and the activation between them. Run before calibration (it
changes the activations' ranges).

Pairs: Conv -> Conv (the second ungrouped, or depthwise: then ``W2[i]`` is its channel ``i``),
Gemm -> Gemm, where the first layer's output has no other reader and is not a graph output, the
first layer's fused activation is none or RELU (RELU6 and others are not positively homogeneous
and are left alone), and the weights are constants. Pairs are taken in graph order, a layer in at most one pair
(``A -> B -> C`` equalizes A with B only).
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node, Tensor
from intq.passes.linear_layers import bias_vector, fresh_name
from intq.ir.facts import FUSED_ACTIVATION

_HOMOGENEOUS = (None, "RELU")


def _out_axis(layer: Node) -> int:
    return 0 if layer.op_type == "Conv" or layer.attrs.get("transB", 0) else 1


def _pair(graph: Graph, first: Node) -> Node | None:
    if first.op_type not in ("Conv", "Gemm") or first.attrs.get(FUSED_ACTIVATION) not in _HOMOGENEOUS:
        return None
    out = first.outputs[0]
    readers = graph.consumers(out)
    if len(readers) != 1 or out in graph.outputs:
        return None
    second = readers[0]
    if second.op_type != first.op_type or second.inputs[0] != out:
        return None
    w1, w2 = graph.constant(first.inputs[1]), graph.constant(second.inputs[1])
    if w1 is None or w2 is None:
        return None
    if first.op_type == "Conv":
        if int(first.attrs.get("group", 1)) != 1 and not _is_depthwise(first, w1):
            return None
        if int(second.attrs.get("group", 1)) != 1 and not _is_depthwise(second, w2):
            return None
    elif first.attrs.get("transA", 0) or second.attrs.get("transA", 0) or \
            float(first.attrs.get("alpha", 1.0)) != 1.0 or float(second.attrs.get("alpha", 1.0)) != 1.0:
        return None
    return second


def _is_depthwise(layer: Node, w: np.ndarray) -> bool:
    return int(layer.attrs.get("group", 1)) == w.shape[0] and w.shape[1] == 1


def _input_axis(layer: Node, w: np.ndarray) -> int:
    """The axis of the second layer's weights that its input channels index."""
    if layer.op_type == "Conv":
        return 0 if _is_depthwise(layer, w) else 1
    return 1 if layer.attrs.get("transB", 0) else 0


def _max_along(w: np.ndarray, axis: int) -> np.ndarray:
    return np.abs(np.moveaxis(w.astype(np.float64), axis, 0)).reshape(w.shape[axis], -1).max(axis=1)


def _scaled(w: np.ndarray, axis: int, k: np.ndarray) -> np.ndarray:
    shape = [1] * w.ndim
    shape[axis] = -1
    return w.astype(np.float64) * k.reshape(shape)


def equalize(graph: Graph) -> Graph:
    """Equalize every eligible pair of layers (see the module docstring); returns a new graph."""
    tensors = dict(graph.tensors)
    nodes = {n.name: n for n in graph.nodes}
    taken: set[str] = set()
    done: set[str] = set()

    def store(hint: str, value: np.ndarray) -> str:
        name = fresh_name(graph, hint, taken)
        taken.add(name)
        tensors[name] = Tensor(name, data=value.astype(np.float32))
        return name

    for first in graph.nodes:
        if first.name in done:
            continue
        second = _pair(graph, first)
        if second is None or second.name in done:
            continue
        first, second = nodes[first.name], nodes[second.name]
        w1, w2 = tensors[first.inputs[1]].data, tensors[second.inputs[1]].data
        a1, a2 = _out_axis(first), _input_axis(second, w2)
        if w1.shape[a1] != w2.shape[a2]:
            continue
        b1 = bias_vector(graph.replace(tensors=tensors), first, w1.shape[a1])
        if b1 is None:
            continue
        r1, r2 = _max_along(w1, a1), _max_along(w2, a2)
        s = np.where((r1 > 0) & (r2 > 0), np.sqrt(np.divide(r1, r2, out=np.ones_like(r1), where=r2 > 0)), 1.0)
        inputs1 = [first.inputs[0], store(f"{first.name}/weight_equalized", _scaled(w1, a1, 1 / s)),
                   store(f"{first.name}/bias_equalized", b1 / s)]
        attrs1 = dict(first.attrs)
        if first.op_type == "Gemm":
            attrs1["beta"] = 1.0
        nodes[first.name] = first.with_(inputs=tuple(inputs1), attrs=attrs1)
        w2_name = store(f"{second.name}/weight_equalized", _scaled(w2, a2, s))
        nodes[second.name] = second.with_(inputs=(second.inputs[0], w2_name) + tuple(second.inputs[2:]))
        done.update((first.name, second.name))
    if not done:
        return graph
    return graph.replace(nodes=[nodes[n.name] for n in graph.nodes], tensors=tensors).prune()
