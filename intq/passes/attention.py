"""Attention masks and the index arithmetic around them, in forms the integer graph computes exactly.

Exporters write a transformer's padding mask as float arithmetic on the integer ``attention_mask``
input: ``Where(keep, 0, -inf)`` (torch's sdpa, legacy and dynamo exporters), ``Where(keep, 0,
finfo.min)`` (eager attention), ``(1 - float(mask)) * -10000`` (older BERT exports), added to the
attention scores before the Softmax. Calibrating that sum would observe ``-inf`` or ``-3.4e38``;
quantizing it would spend the whole int8 range on the mask. intq's decision (rules as data below):

* ``Softmax(S + M)`` with ``M`` such a mask becomes the intq-domain ``MaskedSoftmax(S, condition)``
  (:mod:`intq.runtime.float_ops.attention`): calibration sees the scores ``S`` and the
  probabilities only, never the mask's values. The condition stays a boolean computed from the
  integer ids (exact); the integer graph selects the int8 minimum at masked positions before its
  SOFTMAX (:func:`intq.convert.rules.MaskedSoftmax`).
* The condition is brought back to the integer ids it is computed from: a ``Cast`` to bool, a ``Not``
  and an ``== 0`` move after the data movement they precede (``move(f(x)) = f(move(x))``), ``MaskedSoftmax(S,
  bool(ids))`` reads the ids themselves (non-zero = kept), and a ``Not`` or an ``Equal(ids, 0)`` on
  the condition flips ``keep``. The integer graph then looks the int8 mask up in a two-entry table
  indexed by the (int32) ids: data movement and a GATHER, no boolean arithmetic.
* ``Where(IsNaN(p), 0, p)`` after a MaskedSoftmax is ``p``: MaskedSoftmax writes 0 on a row with
  nothing kept and never NaN (the guard exists for ``-inf`` rows).
* Index arithmetic folded at fixed shapes: a ``Gather`` / ``GatherND`` with constant indices that
  read every element once in order is a ``Reshape`` (the dynamo exporter's ``mask[:, None, None, :]``);
  ``And(x, all-true constant)`` is ``x``; a ``Cast`` of a bool to bool is nothing.

A mask value counts as "large negative" at or below :data:`MASK_FILL_MAX` (``exp`` of it underflows to
0 in float32 for any score of magnitude below ~9900, so ``MaskedSoftmax`` equals ``Softmax(S + M)``
there bit for bit). An integer mask input is read as 0 (masked) / non-zero (kept): ``1 - mask`` with
a mask value of 2 is not a padding mask and its rewrite would differ.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from intq.ir.shapes import infer_shapes
from intq.ir import Graph, Node
from intq.passes.cleanup import remove_identities
from intq.passes.rewrite import Const, Pattern, Replacement, Rule, apply_rules

#: An additive mask's fill is "minus infinity" for softmax at or below this (float32 exp underflows).
MASK_FILL_MAX = -1.0e4

#: Ops that move an additive mask's values without changing them (the condition takes the same path).
_MASK_MOVES = frozenset({"Expand", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"})


def _all(value: np.ndarray | None, test) -> bool:
    return value is not None and value.size > 0 and bool(np.all(test(np.asarray(value, dtype=np.float64))))


def _is_zero(v):
    return _all(v, lambda a: a == 0)


def _is_fill(v):
    return _all(v, lambda a: a <= MASK_FILL_MAX)


def _dtype(graph: Graph, name: str):
    t = graph.tensors.get(name)
    return None if t is None or t.dtype is None else np.dtype(t.dtype)


def _mask_condition(graph: Graph, m: str, hint: str):
    """``(condition, keep, new_nodes, new_constants)`` when the additive mask ``m`` is 0 where
    ``condition`` (keep=1) or its negation (keep=0) holds and a large negative elsewhere, with the
    nodes computing ``condition``'s path from the mask's source; None when ``m`` is no such mask."""
    moves: list[Node] = []
    t = m
    while True:
        const = graph.constant(t)
        if const is not None:  # a constant mask (a causal mask written out): its condition is a constant
            a = np.asarray(const, dtype=np.float64)
            if not np.all((a == 0) | (a <= MASK_FILL_MAX)):
                return None
            source, keep, nodes, consts = f"{hint}/keep", 1, [], {f"{hint}/keep": a == 0}
            break
        p = graph.producer(t)
        if p is None:
            return None
        if p.op_type in _MASK_MOVES:
            moves.append(p)
            t = p.inputs[0]
            continue
        if p.op_type == "Cast" and _dtype(graph, p.inputs[0]) is not None and _dtype(graph, p.inputs[0]).kind == "f":
            t = p.inputs[0]  # float -> float: the same values
            continue
        found = _where_mask(graph, p) or _one_minus_mask(graph, p, hint)
        if found is None:
            return None
        source, keep, nodes = found
        consts = {}
        break
    cond = source
    for k, mv in enumerate(reversed(moves)):  # the condition takes the additive mask's path
        if mv.op_type == "Identity":
            continue
        out = f"{hint}/condition_{k}"
        nodes.append(Node(mv.op_type, f"{hint}/{mv.op_type.lower()}_{k}", (cond, *mv.inputs[1:]), (out,),
                          dict(mv.attrs), domain=mv.domain))
        cond = out
    return cond, keep, nodes, consts


def _where_mask(graph: Graph, p: Node):
    """``Where(c, 0, fill)`` -> (c, keep=1); ``Where(c, fill, 0)`` -> (c, keep=0); the constants must
    broadcast into ``c``'s shape (the mask is then ``c``'s shape)."""
    if p.op_type != "Where":
        return None
    c, a, b = p.inputs[:3]
    va, vb = graph.constant(a), graph.constant(b)
    shape_c = graph.tensors[c].shape
    if va is None or vb is None or shape_c is None or np.broadcast_shapes(shape_c, va.shape, vb.shape) != tuple(shape_c):
        return None
    if _is_zero(va) and _is_fill(vb):
        return c, 1, []
    if _is_fill(va) and _is_zero(vb):
        return c, 0, []
    return None


def _one_minus_mask(graph: Graph, p: Node, hint: str):
    """``(1 - float(x)) * fill`` (either operand order) with ``x`` bool or integer -> ``x != 0``, keep=1."""
    if p.op_type != "Mul":
        return None
    for sub, k in (p.inputs[:2], p.inputs[1::-1]):
        s = graph.producer(sub)
        if s is None or s.op_type != "Sub" or not _is_fill(graph.constant(k)) or not _all(graph.constant(s.inputs[0]),
                                                                                          lambda a: a == 1):
            continue
        cast = graph.producer(s.inputs[1])
        if cast is None or cast.op_type != "Cast":
            continue
        x = cast.inputs[0]
        dt = _dtype(graph, x)
        shape = graph.tensors[x].shape
        if dt is None or dt.kind not in "biu" or shape is None:
            continue
        if np.broadcast_shapes(tuple(shape), graph.constant(k).shape, graph.constant(s.inputs[0]).shape) != tuple(shape):
            continue
        if dt.kind == "b":
            return x, 1, []
        out = f"{hint}/keep"
        return out, 1, [Node("Cast", f"{hint}/nonzero", (x,), (out,), {"to": TensorProto.BOOL})]
    return None


def _masked_softmax(m, graph: Graph):
    root, add = m.root, m.nodes["add"]
    out_shape = graph.tensors[add.outputs[0]].shape
    for s, mask in (add.inputs[:2], add.inputs[1::-1]):
        if graph.tensors[s].shape != out_shape or graph.constant(s) is not None:
            continue
        found = _mask_condition(graph, mask, root.name)
        if found is None:
            continue
        cond, keep, nodes, consts = found
        # a trailing broadcast of the condition is the softmax input's: MaskedSoftmax broadcasts it itself
        while nodes and nodes[-1].op_type == "Expand" and _broadcasts(graph, nodes, nodes[-1].inputs[0], out_shape,
                                                                        consts):
            cond = nodes.pop().inputs[0]
        node = Node("MaskedSoftmax", root.name, (s, cond), root.outputs,
                    {"axis": int(root.attrs.get("axis", -1)), "keep": keep}, domain="intq")
        return Replacement([*nodes, node], consts)
    return [root]


def _broadcasts(graph: Graph, nodes, name: str, shape, consts) -> bool:
    """Whether tensor ``name`` (a graph tensor, a new constant, or the source of the path) has a
    known shape that broadcasts to ``shape`` without changing it."""
    if name in consts:
        known = consts[name].shape
    elif name in graph.tensors and graph.tensors[name].shape is not None and not any(o == name for n in nodes
                                                                                      for o in n.outputs):
        known = graph.tensors[name].shape
    else:
        return False
    try:
        return np.broadcast_shapes(tuple(known), tuple(shape)) == tuple(shape)
    except ValueError:
        return False


def _not_nan(m, graph: Graph):
    p = graph.producer(m.tensors["p"])
    if p is None or p.op_type != "MaskedSoftmax":
        return [m.root]
    return [Node("Identity", m.root.name, (m.tensors["p"],), m.root.outputs)]


def _unexpanded_condition(m, graph: Graph):
    """MaskedSoftmax(S, Expand(c)) = MaskedSoftmax(S, c) when c broadcasts to S (the Expand may feed
    several layers' softmaxes: it is left to the others, pruned once nothing reads it)."""
    root = m.root
    s_shape = graph.tensors[root.inputs[0]].shape
    cond = root.inputs[1]
    while s_shape is not None:  # through consecutive broadcasts (an and-with-true became one)
        p = graph.producer(cond)
        if p is None or p.op_type != "Expand" or not _broadcasts(graph, [], p.inputs[0], s_shape, {}):
            break
        cond = p.inputs[0]
    return [root] if cond == root.inputs[1] else [root.with_(inputs=(root.inputs[0], cond))]


def _elementwise_after_move(m, graph: Graph):
    """move(f(x)) = f(move(x)) for f = bool(.), Not, == 0 (elementwise, a scalar constant at most): the
    data movement first, on the integers."""
    move, f = m.root, m.nodes["f"]
    data = [i for i in f.inputs if graph.constant(i) is None]
    consts = [graph.constant(i) for i in f.inputs if graph.constant(i) is not None]
    if len(data) != 1 or any(c.size != 1 for c in consts) or _dtype(graph, data[0]) is None or \
            _dtype(graph, data[0]).kind not in "biu":
        return [move]
    if f.op_type == "Cast" and f.attrs.get("to") != TensorProto.BOOL:
        return [move]
    if f.op_type == "Equal" and not all(_is_zero(c) for c in consts):
        return [move]
    moved = f"{move.outputs[0]}/of_integers"
    return [move.with_(inputs=(data[0], *move.inputs[1:]), outputs=(moved,)),
            f.with_(name=f"{move.name}/{f.op_type.lower()}", inputs=tuple(moved if i == data[0] else i for i in f.inputs),
                    outputs=move.outputs)]


def _condition_of_integers(m, graph: Graph):
    """MaskedSoftmax(S, c) with c = bool(ids) -> the ids (non-zero kept); c = Not(b) -> b, keep flipped;
    c = Equal(ids, 0) -> the ids, keep flipped."""
    root = m.root
    s, c = root.inputs
    keep = int(root.attrs.get("keep", 1))
    p = graph.producer(c)
    if p is None:
        return [root]
    if p.op_type == "Cast" and p.attrs.get("to") == TensorProto.BOOL and (_dtype(graph, p.inputs[0]) or
                                                                         np.dtype(np.float32)).kind in "biu":
        new, flip = p.inputs[0], False
    elif p.op_type == "Not":
        new, flip = p.inputs[0], True
    elif p.op_type == "Equal":
        ids, zero = next(((a, b) for a, b in (p.inputs[:2], p.inputs[1::-1]) if _is_zero(graph.constant(b))), (None, None))
        if ids is None or _dtype(graph, ids) is None or _dtype(graph, ids).kind not in "iu":
            return [root]
        new, flip = ids, True
    else:
        return [root]
    return [root.with_(inputs=(s, new), attrs={**root.attrs, "keep": 1 - keep if flip else keep})]


def _index_map(graph: Graph, node: Node) -> np.ndarray | None:
    """The flat source index of each output element of a Gather / GatherND with constant indices
    (the op run on ``arange``), or None when the indices are not constants."""
    from intq.runtime.float_ops import FLOAT_OPS

    data, indices = node.inputs[:2]
    idx = graph.constant(indices)
    shape = graph.tensors[data].shape
    if idx is None or shape is None or graph.constant(data) is not None:
        return None
    positions = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    return FLOAT_OPS[node.op_type](positions, idx, **node.attrs)[0]


def _gather_as_reshape(m, graph: Graph):
    """A Gather / GatherND reading every element once, in order, is a Reshape to its output's shape."""
    node = m.root
    where = _index_map(graph, node)
    size = int(np.prod(graph.tensors[node.inputs[0]].shape, dtype=np.int64)) if where is not None else -1
    if where is None or where.size != size or not np.array_equal(where.ravel(), np.arange(size)):
        return [node]  # a selection (fewer elements), a repetition or another order: a real gather
    shape = f"{node.name}/shape"
    return Replacement([Node("Reshape", node.name, (node.inputs[0], shape), node.outputs)],
                       {shape: np.asarray(where.shape, dtype=np.int64)})


def _and_true(m, graph: Graph):
    x, out = m.tensors["x"], m.root.outputs[0]
    x_shape, out_shape = graph.tensors[x].shape, graph.tensors[out].shape
    if x_shape is None or out_shape is None:
        return [m.root]
    if tuple(x_shape) == tuple(out_shape):
        return [Node("Identity", m.root.name, (x,), m.root.outputs)]
    shape = f"{m.root.name}/shape"
    return Replacement([Node("Expand", m.root.name, (x, shape), m.root.outputs)], {shape: np.asarray(out_shape, np.int64)})


def _bool_cast(m, graph: Graph):
    x = m.root.inputs[0]
    if _dtype(graph, x) != np.dtype(np.bool_):
        return [m.root]
    return [Node("Identity", m.root.name, (x,), m.root.outputs)]


_TRUE = Const(lambda a: a.dtype == np.bool_ and bool(np.all(a)))

#: Index arithmetic on masks, folded at fixed shapes (the module docstring).
INDEX_RULES = (
    # Gather(x, c) / GatherND(x, c) reading x's elements once in order = Reshape(x)
    Rule("index/gather-in-order", Pattern("Gather", ("x", Const.any())), _gather_as_reshape),
    Rule("index/gathernd-in-order", Pattern("GatherND", ("x", Const.any())), _gather_as_reshape),
    # x and True = x (broadcast to the output's shape)
    Rule("bool/and-true", Pattern("And", ("x", _TRUE), commutative=True), _and_true),
    # bool(x) = x for a bool x
    Rule("bool/cast-bool", Pattern("Cast", ("x",), attrs={"to": TensorProto.BOOL}), _bool_cast),
)

#: Additive masks before a Softmax, then the NaN guard after it.
MASK_RULES = (
    # Softmax(S + M), M = 0 where kept and <= -1e4 elsewhere = MaskedSoftmax(S, kept)
    Rule("mask/softmax-of-masked-sum", Pattern("Softmax", (Pattern("Add", ("s", "m"), bind="add"),)), _masked_softmax),
)
GUARD_RULES = (
    # Where(IsNaN(p), 0, p) = p when p cannot be NaN (a MaskedSoftmax)
    Rule("mask/nan-guard", Pattern("Where", (Pattern("IsNaN", ("p",)), Const.scalar(0.0), "p")), _not_nan),
    # MaskedSoftmax(S, Expand(c)) = MaskedSoftmax(S, c): the condition broadcasts as the scores need
    Rule("mask/unexpanded-condition", Pattern("MaskedSoftmax", ("s", "c")), _unexpanded_condition),
)
#: The condition brought back to integer ids (the module docstring), applied until nothing changes.
CONDITION_RULES = (
    # move(f(x)) = f(move(x)) for the elementwise bool(x), Not(x), x == 0
    *(Rule(f"mask/{f.lower()}-after-{op.lower()}", Pattern(op, (Pattern(f, ("x",), bind="f"),)), _elementwise_after_move)
      for op in sorted(_MASK_MOVES - {"Identity"}) for f in ("Cast", "Not", "Equal")),
    Rule("mask/condition-of-integers", Pattern("MaskedSoftmax", ("s", "c")), _condition_of_integers),
)


def attention_masks(graph: Graph) -> Graph:
    """Apply :data:`INDEX_RULES`, then :data:`MASK_RULES`, then :data:`GUARD_RULES`, then
    :data:`CONDITION_RULES` until nothing changes; shapes are re-inferred between them, statically
    (:func:`intq.ir.shapes.infer_shapes`: the rules read shapes and dtypes)."""
    g = apply_rules(graph, INDEX_RULES)
    if g is not graph:
        g = infer_shapes(remove_identities(g))
    masked = apply_rules(g, MASK_RULES)
    if masked is g:
        return g
    g = infer_shapes(apply_rules(infer_shapes(masked), GUARD_RULES))
    for _ in range(32):  # each pass moves a Cast one step: a mask path is a few data movements long
        moved = apply_rules(g, CONDITION_RULES)
        if moved is g:
            break
        g = infer_shapes(moved)
    return g
