"""Constant folding and arithmetic canonicalisation.

* :func:`fold_constants`: a node whose inputs are all constants is evaluated once with the float
  executor's own operator and replaced by constant tensors. With static shapes (see
  :func:`intq.runtime.interpreter.infer_shapes`) ``Shape`` of any tensor is a constant too, so
  the shape arithmetic that exporters emit (Shape -> Gather -> Concat -> Reshape,
  ConstantOfShape, Range...) collapses to constants.
* :func:`div_by_constant_to_mul`: ``x / c`` becomes ``x * (1/c)`` for a float constant ``c``, so the
  integer engine sees one multiply. (In float32 the two may differ by one unit in the last place.)
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError, IntqError
from intq.ir import Graph, Node, Tensor
from intq.ir.facts import FUSED_ACTIVATION


def fold_constants(graph: Graph) -> Graph:
    """Evaluate every node computable from constants (and static shapes) ahead of time."""
    from intq.runtime.float_ops import FLOAT_OPS

    known: dict[str, np.ndarray] = {k: t.data for k, t in graph.tensors.items() if t.is_constant}
    kept: list[Node] = []
    folded: dict[str, np.ndarray] = {}
    for n in graph.nodes:
        if n.op_type == "Shape" and n.inputs[0] not in known and graph.tensors[n.inputs[0]].is_static:
            shape = np.asarray(graph.tensors[n.inputs[0]].shape, dtype=np.int64)
            value = FLOAT_OPS["Shape"](np.empty(shape, np.uint8), **dict(n.attrs))
        elif n.op_type in FLOAT_OPS and all((not i) or i in known for i in n.inputs) and FUSED_ACTIVATION not in n.attrs:
            args = [known[i] if i else None for i in n.inputs]
            try:
                with np.errstate(all="ignore"):
                    value = FLOAT_OPS[n.op_type](*args, **dict(n.attrs))
            except IntqError as e:  # the op's own contract check: name the node, as the interpreter does
                raise type(e)(f"node {n.name!r} ({n.op_type}): {e}") from None
            except Exception as e:  # a numpy error on these constants: name the node, keep the cause
                shapes = [None if a is None else list(np.shape(a)) for a in args]
                raise GraphError(f"node {n.name!r} ({n.op_type}) failed on its constant inputs of shapes {shapes}: "
                                 f"{type(e).__name__}: {e}") from e
        else:
            kept.append(n)
            continue
        values = value if isinstance(value, tuple) else (value,)
        for name, v in zip(n.outputs, values):
            if name:
                known[name] = np.asarray(v)
                folded[name] = known[name]
    if not folded:
        return graph
    tensors = dict(graph.tensors)
    for name, v in folded.items():
        tensors[name] = Tensor(name, data=v)
    # graph outputs that became constants stay outputs: constants are valid outputs
    return graph.replace(nodes=kept, tensors=tensors).prune()


def div_by_constant_to_mul(graph: Graph) -> Graph:
    """Rewrite ``Div(x, c)`` with a floating constant ``c`` (no zeros) as ``Mul(x, 1/c)``."""
    tensors = dict(graph.tensors)
    nodes = []
    changed = False
    for n in graph.nodes:
        c = graph.constant(n.inputs[1]) if n.op_type == "Div" and len(n.inputs) == 2 else None
        if c is not None and np.issubdtype(c.dtype, np.floating) and np.all(c != 0) and graph.constant(n.inputs[0]) is None:
            name = f"{n.name}/reciprocal"
            tensors[name] = Tensor(name, data=(1.0 / c.astype(np.float64)).astype(c.dtype))
            n = n.with_(op_type="Mul", inputs=(n.inputs[0], name))
            changed = True
        nodes.append(n)
    return graph.replace(nodes=nodes, tensors=tensors).prune() if changed else graph
