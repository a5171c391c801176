"""Lowerings of the data-movement operators (csrc/copy.c): no arithmetic, the integers move unchanged.

RESHAPE and SQUEEZE are views (no code). Every other data-movement operator is a few
strided copies plus at most one fill value, learned from the kernel's own ``run`` on index-valued
inputs (:mod:`intq.export.c.movement`): TRANSPOSE, CONCATENATION, PACK, PAD, PADV2, SLICE,
STRIDED_SLICE, SPLIT, SPLIT_V, BROADCAST_TO, SPACE_TO_DEPTH, DEPTH_TO_SPACE, BATCH_TO_SPACE_ND,
SPACE_TO_BATCH_ND and a GATHER with constant indices that forms a few runs. The copies are written
after the arena plan (:func:`render`): a copy whose source already lies where it would be written
(a slice that is a run of its input, a concatenation input written into place) is left out.

GATHER with run-time indices (or constant indices that scatter) is ``intq_gather``, which checks
every index as both runtimes do (status :data:`~intq.export.c.lower.STATUS` ``gather_index``).
Any dtype moves (int8, and the int16 / int32 / int64 / bool tensors of int8 models): copies count bytes.
"""

from __future__ import annotations

import numpy as np

from intq.export.c import movement as mv
from intq.export.c.lower import (
    STATUS,
    Step,
    box_fields,
    c_struct,
    c_type,
    error,
    lowering,
    merge_box,
    prepare,
    shape_of,
)
from intq.ir import Graph, Node
from intq.kernels import Target

VIEWS = ("RESHAPE", "SQUEEZE")
#: which inputs of a data-movement operator are moved (the others are parameters: constants here)
DATA_INPUTS = {"SPLIT": (1,), "CONCATENATION": None, "PACK": None}  # None: every input; default (0,)
COPIES = ("TRANSPOSE", "CONCATENATION", "PACK", "PAD", "PADV2", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V",
          "BROADCAST_TO", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "GATHER")


@lowering(*VIEWS)
def view(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    prepare(node, graph, target)  # the kernel checks the contract (dtypes, shapes, runtime rules)
    step.view = True


@lowering(*COPIES)
def copies(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    kernel, p = prepare(node, graph, target)  # the kernel checks the contract (dtypes, shapes, runtime rules)
    if node.op_type == "CONCATENATION" and any(t is not None for t in p.tables):
        raise error(node, "rescaling uint8 inputs is not implemented in C")
    if node.op_type in ("PAD", "PADV2") and p.value is None:
        raise error(node, "a non-constant pad value is not implemented in C")
    tensors = [graph.tensors[t] if t else None for t in node.inputs]
    if node.op_type == "GATHER" and not tensors[1].is_constant:
        return _gather(step, node, graph, p, sym)
    data = DATA_INPUTS.get(node.op_type, (0,))
    for k, t in enumerate(tensors):
        if t is not None and not t.is_constant and data is not None and k not in data:
            raise error(node, f"input {k} ({t.name!r}) is computed at run time; the C backend needs it constant "
                              "(the copies are planned at code generation)")
    consts = [t.data if t is not None and t.is_constant else None for t in tensors]
    shapes = [None if t is None or t.is_constant else shape_of(graph, t.name) for t in tensors]
    maps = mv.index_map(kernel.run_for(p), p, consts, shapes)
    try:
        movements = tuple(mv.decompose(y) for y in maps)
    except mv.Fragmented as e:
        if node.op_type == "GATHER":
            return _gather(step, node, graph, p, sym)
        raise error(node, f"its data movement is not a few strided copies ({e}); not implemented in C") from None
    for o, m in zip(node.outputs, movements):
        if m.fill is not None:
            info = np.iinfo(graph.tensors[o].dtype) if graph.tensors[o].dtype != np.bool_ else None
            assert info is None or info.min <= m.fill <= info.max, (node.name, m.fill)
    step.movements = movements
    step.blocks = ("intq_copy", "intq_fill") if any(m.fill is not None for m in movements) else ("intq_copy",)


def render(step: Step, graph: Graph, elided: set[tuple[int, int]]) -> tuple[list[str], str]:
    """(constant definitions, C statements) of a data-movement step: per output, the fill of every
    byte no kept box or aliased input writes, then the kept boxes' copies."""
    node, sym = step.node, step.sym
    data, calls = [], []
    for k, (o, m) in enumerate(zip(node.outputs, step.movements)):
        if not o:
            continue
        dtype = graph.tensors[o].dtype
        size = dtype.itemsize
        total = int(np.prod(shape_of(graph, o), dtype=np.int64)) * size
        if m.fill is not None:
            taken = sorted((b.dst_base * size, (b.dst_base + b.size) * size)
                           for j, b in enumerate(m.boxes) if (k, j) in elided)
            fill = f"{sym}_f{k}"
            data.append(f"static const {c_type(dtype)} {fill} = {m.fill};")
            at = 0
            for start, stop in [*taken, (total, total)]:
                if start > at:
                    calls.append(f"intq_fill((uint8_t *){{out{k}}} + {at}, {(start - at) // size}, &{fill}, {size});")
                at = max(at, stop)
        for j, b in enumerate(m.boxes):
            if (k, j) in elided:
                continue
            dims, (ss, ds) = merge_box([*b.dims, size], [s * size for s in b.src_strides] + [1],
                                       [s * size for s in b.dst_strides] + [1])
            fields = box_fields(node, dims, ss, ds)
            name = f"{sym}_c{k}_{j}"
            data.append(c_struct("intq_copy_params", name, [
                ("rank", len(dims)), ("dims", fields[0]), ("ss", fields[1]), ("ds", fields[2]),
                ("src_base", b.src_base * size), ("dst_base", b.dst_base * size)]))
            calls.append(f"intq_copy(&{name}, {{in{b.source}}}, {{out{k}}});")
    return data, " ".join(calls)


def _gather(step: Step, node: Node, graph: Graph, p, sym: str) -> None:
    """``intq_gather``: x as [batch, outer, axis, inner] (the kernel's view), indices read per call."""
    from intq.kernels.gather import GatherParams

    if type(p) is not GatherParams:
        raise error(node, f"the kernel prepared {type(p).__name__}; the C backend implements GatherParams")
    b, o, a, i = p.view
    idx = graph.tensors[node.inputs[1]]
    coords = int(np.prod(shape_of(graph, idx.name), dtype=np.int64)) // max(b, 1)
    size = graph.tensors[node.outputs[0]].dtype.itemsize
    if idx.dtype not in (np.int32, np.int64):
        raise error(node, f"indices of dtype {idx.dtype.name} are not implemented in C (int32, int64)")
    step.data.append(c_struct("intq_gather_params", sym, [
        ("batch", b), ("outer", o), ("axis", a), ("inner", i * size), ("coords", coords),
        ("wide", int(idx.dtype == np.int64)), ("status", STATUS["gather_index"])]))
    step.blocks = ("intq_gather",)
    step.call = f"intq_gather(&{sym}, {{in0}}, {{in1}}, {{out0}})"
    step.status = True
