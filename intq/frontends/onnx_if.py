"""ONNX ``If`` nodes whose condition is fixed at import: fold them, inline the branch taken.

Exporters write control flow that only looks dynamic: torch.onnx traces a sample-rate switch
(``if sr == 16000``) or a shape test (``if x.dim() == 3``) into ``If`` nodes. Once the caller
has fixed the input shapes (``input_shapes``) and the inputs that select a branch
(``constant_inputs``, e.g. ``{"sr": 16000}``), the condition is a constant: this module computes
it, replaces the ``If`` by the nodes of the branch taken (its initializers joined to the graph's,
each branch output copied to the ``If``'s output by an ``Identity``), and repeats, so ``If``
nodes nested in a taken branch fold too. Nodes nothing reads any more (the condition's own
arithmetic) are dropped.

A condition is a constant when every path from it to the graph's inputs passes through
constants (initializers, ``Constant`` nodes, inputs bound to values) or through ``Shape`` /
``Size`` of a tensor whose shape ONNX shape inference makes static; it is computed with intq's
float operators (opset-21 forms, through the importer's normalisers). An ``If`` whose condition
depends on data stays, and the importer's operator check names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from intq.errors import IntqError
from intq.ir import Node
from intq.passes import static_shapes
from intq.runtime.float_ops import FLOAT_OPS

#: Most ``If`` nodes one import folds (each fold may expose nested ones); a guard, not a limit met.
_MAX_FOLDS = 10_000


def bind_constant_inputs(proto: onnx.ModelProto, values: Mapping[str, Any], where: str) -> onnx.ModelProto:
    """A copy of ``proto`` whose inputs named in ``values`` are initializers holding those values
    (in the input's declared element type; a declared static shape must match)."""
    from intq.frontends.from_onnx import OnnxImportError, _dims, _dtype

    if not values:
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    inputs = {i.name: i for i in model.graph.input}
    unknown = sorted(set(values) - set(inputs))
    if unknown:
        raise OnnxImportError(f"{where}: constant_inputs names {unknown}, but the model's inputs are {sorted(inputs)}")
    for name, value in values.items():
        inp = inputs[name]
        array = np.asarray(value, dtype=_dtype(inp.type))
        dims = _dims(inp.type)
        if dims is not None and (len(dims) != array.ndim or any(d is not None and d != s for d, s in zip(dims, array.shape))):
            raise OnnxImportError(f"{where}: constant input {name!r} has shape {list(array.shape)}, the model declares "
                                  f"{['?' if d is None else d for d in dims]}")
        model.graph.input.remove(inp)
        model.graph.initializer.append(numpy_helper.from_array(array, name))
    return model


def fold_constant_ifs(proto: onnx.ModelProto, bound: Mapping[str, tuple[int, ...]], opset: int) -> onnx.ModelProto:
    """Fold every top-level ``If`` whose condition is a constant, repeatedly (nested ones included);
    ``bound``: the static shape of every graph input."""
    from intq.frontends.from_onnx import _with_bound_inputs

    if not any(n.op_type == "If" for n in proto.graph.node):
        return proto
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for _ in range(_MAX_FOLDS):
        evaluator = _Evaluator(model, _with_bound_inputs(model, bound), bound, opset)
        folded = False
        for k, node in enumerate(model.graph.node):
            if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
                continue
            cond = evaluator.value(node.input[0])
            if cond is None:
                continue
            _inline(model, k, node, bool(np.asarray(cond).reshape(-1)[0]))
            folded = True
            break  # shapes of the inlined nodes are inferred again before the next fold
        if not folded:
            break
    return _drop_dead_nodes(model)


class _Evaluator:
    """The value of a tensor when constants and static shapes decide it (None otherwise)."""

    def __init__(self, model: onnx.ModelProto, inferred: onnx.ModelProto, bound: Mapping[str, tuple[int, ...]],
                 opset: int):
        self.model, self.bound, self.opset = model, bound, opset
        self.known: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        self.producer = {o: n for n in model.graph.node for o in n.output if o}
        self.shapes: dict[str, tuple[int, ...]] = {}
        for v in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
            t = v.type.tensor_type
            if v.type.HasField("tensor_type") and t.HasField("shape") and all(
                    d.HasField("dim_value") and d.dim_value > 0 for d in t.shape.dim):
                self.shapes[v.name] = tuple(int(d.dim_value) for d in t.shape.dim)
        for name, value in self.known.items():
            self.shapes.setdefault(name, tuple(value.shape))
        self._busy: set[str] = set()

    def value(self, name: str) -> np.ndarray | None:
        if name in self.known:
            return self.known[name]
        node = self.producer.get(name)
        if node is None or name in self._busy or node.domain not in ("", "ai.onnx"):
            return None
        self._busy.add(name)
        try:
            outputs = self._run(node)
        finally:
            self._busy.discard(name)
        if outputs is None:
            return None
        for o, v in zip(node.output, outputs):
            if o:
                self.known[o] = np.asarray(v)
        return self.known.get(name)

    def _shape_of(self, name: str) -> tuple[int, ...] | None:
        if name in self.known:
            return tuple(self.known[name].shape)
        if name not in self.shapes:
            self.shapes[name] = self._run_for_shape(name)
        return self.shapes[name]

    def _run_for_shape(self, name: str) -> tuple[int, ...] | None:
        """The static shape of ``name`` where ONNX inference leaves it open (an exporter's computed
        reshapes): import the nodes it depends on as a model of their own and run it on zeros
        (static shapes and constant folding, :func:`intq.passes.static_shapes`). None when those nodes
        hold an ``If`` or the shape depends on data."""
        from intq.frontends.from_onnx import load_onnx

        g = self.model.graph
        cone, todo = [], [name]
        seen: set[str] = set()
        while todo:
            t = todo.pop()
            node = self.producer.get(t)
            if node is None or t in seen:
                continue
            seen.update(o for o in node.output if o)
            if node.op_type == "If" or any(a.type == onnx.AttributeProto.GRAPH for a in node.attribute):
                return None
            cone.append(node)
            todo.extend(i for i in node.input if i)
        used = {i for n in cone for i in n.input if i}
        order = {id(n): k for k, n in enumerate(g.node)}
        sub = helper.make_graph(sorted(cone, key=lambda n: order[id(n)]), "shape_of",
                                [i for i in g.input if i.name in used],
                                [helper.make_empty_tensor_value_info(name)],
                                [t for t in g.initializer if t.name in used])
        sub_model = helper.make_model(sub, opset_imports=list(self.model.opset_import))
        try:
            graph = static_shapes(load_onnx(sub_model, {k: v for k, v in self.bound.items() if k in used}))
        except IntqError:
            return None
        shape = graph.tensors[name].shape
        return tuple(int(d) for d in shape) if shape is not None and all(d is not None for d in shape) else None

    def _run(self, node: onnx.NodeProto) -> tuple | None:
        from intq.frontends.from_onnx import NORMALIZERS, _attr_value, _constant_value, _Context

        attrs = {a.name: _attr_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            return (_constant_value(node.name, attrs),)
        if node.op_type in ("Shape", "Size"):
            shape = self._shape_of(node.input[0])
            if shape is None:
                return None
            if node.op_type == "Size":
                return (np.asarray(int(np.prod(shape, dtype=np.int64)), np.int64),)
            return FLOAT_OPS["Shape"](np.empty(shape, np.uint8), **attrs)
        if node.op_type not in FLOAT_OPS or node.op_type == "If":
            return None
        inputs = [self.value(i) if i else None for i in node.input]
        if any(v is None for v, i in zip(inputs, node.input) if i):
            return None
        ctx = _Context(opset=self.opset, ranks={i: np.ndim(v) for i, v in zip(node.input, inputs) if i})
        ir_node = Node(node.op_type, node.name or node.op_type, tuple(node.input), tuple(node.output), attrs)
        normalise = NORMALIZERS.get(node.op_type)
        rewritten = normalise(ir_node, ctx) if normalise else [ir_node]
        if len(rewritten) != 1:
            return None
        env = {**dict(zip(node.input, inputs)), **ctx.constants}
        n = rewritten[0]
        with np.errstate(all="ignore"):
            result = FLOAT_OPS[n.op_type](*[env[i] if i else None for i in n.inputs], **dict(n.attrs))
        return result if isinstance(result, tuple) else (result,)


def _inline(model: onnx.ModelProto, index: int, node: onnx.NodeProto, condition: bool) -> None:
    """Replace graph node ``index`` (an ``If``) by the nodes of the branch ``condition`` selects."""
    branch = next(a.g for a in node.attribute if a.name == ("then_branch" if condition else "else_branch"))
    nodes = list(branch.node)
    for t in branch.initializer:
        model.graph.initializer.append(t)
    for out, if_out in zip(branch.output, node.output):
        if if_out:
            nodes.append(helper.make_node("Identity", [out.name], [if_out], name=f"{node.name or 'If'}/{out.name}"))
    for v in branch.value_info:
        model.graph.value_info.append(v)
    graph_nodes = list(model.graph.node)
    graph_nodes[index:index + 1] = nodes
    del model.graph.node[:]
    model.graph.node.extend(graph_nodes)


def _drop_dead_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Remove nodes none of whose outputs reach a graph output (the folded conditions)."""
    needed = {o.name for o in model.graph.output}
    keep = []
    for n in reversed(model.graph.node):
        if any(o in needed for o in n.output if o):
            keep.append(n)
            needed.update(i for i in n.input if i)
            for a in n.attribute:  # names a subgraph reads from the outer scope
                if a.type == onnx.AttributeProto.GRAPH:
                    needed.update(_outer_names(a.g))
    keep.reverse()
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


def _outer_names(graph: onnx.GraphProto) -> set[str]:
    names = set()
    for n in graph.node:
        names.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names.update(_outer_names(a.g))
    return names
