"""A per-channel constant added after a convolution is the convolution's bias.

Exporters write a convolution without bias followed by an Add of a per-channel constant
(squeeze-excite blocks, folded normalisations exported as ``Conv`` then ``Add``). In the integer
graph that Add would be an int8 ADD with its own rounding; folded, the constant is part of the
int32 bias (scale ``s_in s_w``), exact to the accumulator's resolution.

Rule (the algebra): ``Conv(x, W, b) + c = Conv(x, W, b + c)`` when ``c`` broadcast to the
convolution's output ``[N, C, *spatial]`` varies along the channel axis only (``[C, 1, 1]``,
``[1, C, 1, 1]``, one value; ``b`` is 0 when absent), and nothing else reads the convolution's
output.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node, Tensor
from intq.passes.rewrite import Const, Pattern, match

#: Add(Conv(x, W[, b]), c), either operand order
PATTERNS = (
    Pattern("Add", (Pattern("Conv", ("x", Const.any()), bind="conv"), Const.any(bind="c")), commutative=True),
    Pattern("Add", (Pattern("Conv", ("x", Const.any(), Const.any()), bind="conv"), Const.any(bind="c")),
            commutative=True),
)


def _channel_values(c: np.ndarray, out_rank: int, channels: int) -> np.ndarray | None:
    """``c`` as one value per output channel, or None when it varies along another axis."""
    c = np.asarray(c)
    if not np.issubdtype(c.dtype, np.floating) or c.ndim > out_rank:
        return None
    dims = (1,) * (out_rank - c.ndim) + c.shape
    if dims[0] != 1 or any(d != 1 for d in dims[2:]) or dims[1] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1).astype(np.float64), (channels,))


def fold_conv_add_into_bias(graph: Graph) -> Graph:
    """Fold every ``Conv + per-channel constant`` (module docstring) into the convolution's bias."""
    replaced: dict[str, Node] = {}  # Add node name -> the Conv that replaces it
    dropped: set[str] = set()
    tensors = dict(graph.tensors)
    for node in graph.nodes:
        for pattern in PATTERNS:
            m = match(graph, node, pattern) if node.op_type == "Add" else None
            if m is None:
                continue
            conv = m.nodes["conv"]
            out = conv.outputs[0]
            w = graph.constant(conv.inputs[1])
            shape = graph.tensors[out].shape
            if conv.name in dropped or out in graph.outputs or len(graph.consumers(out)) != 1 or shape is None:
                break
            add = _channel_values(graph.constant(m.tensors["c"]), len(shape), w.shape[0])
            if add is None:
                break
            b = graph.constant(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
            bias = (np.zeros(w.shape[0]) if b is None else np.asarray(b, np.float64)) + add
            name = f"{conv.name}/bias+{node.name}"
            tensors[name] = Tensor(name, data=bias.astype(w.dtype))
            replaced[node.name] = conv.with_(inputs=(conv.inputs[0], conv.inputs[1], name), outputs=node.outputs)
            dropped.add(conv.name)
            break
    if not replaced:
        return graph
    nodes = [replaced.get(n.name, n) for n in graph.nodes if n.name not in dropped]
    return graph.replace(nodes=nodes, tensors=tensors).prune()
