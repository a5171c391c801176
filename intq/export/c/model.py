"""From an integer graph to a :class:`CModel`: the lowered steps, the buffers and the arena plan.

1. Constant subgraphs are evaluated once with the kernels (SHAPE of a static tensor, and whatever
   reads only constants: the dynamic-batch shape arithmetic of converter models).
2. The float boundary is cut: a float graph input read by QUANTIZE becomes that QUANTIZE's int8
   output, a float graph output written by DEQUANTIZE becomes its int8 input; the generated
   ``<prefix>_invoke`` takes and returns int8 tensors, and the optional float helpers
   (``<prefix>_quantize_input_i`` / ``<prefix>_dequantize_output_i``) compute those two boundary
   operators exactly as intq.qmath.quantize / dequantize do.
3. Every remaining node is lowered (:mod:`intq.export.c.lower`); then buffers and the arena plan
   (:mod:`intq.export.c.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.kernels import KernelContext, Target, activation_of, get_target, lookup
from intq.export.c import plan as arena
from intq.export.c.lower import INT8, LOWERINGS, CExportError, Step, absorbable_pads, lower_node


@dataclass(frozen=True)
class Port:
    """One int8 input or output of the generated function, and the float tensor it stands for."""

    name: str  # the int8 tensor
    shape: tuple[int, ...]
    scale: float
    zero_point: int
    float_name: str | None  # the graph's float tensor (None: the graph's I/O is int8 already)


@dataclass
class CModel:
    graph: Graph  # the integer graph that is generated (constants folded, float boundary cut)
    source: Graph  # the graph given
    target: Target
    steps: list[Step]
    inputs: list[Port]
    outputs: list[Port]
    buffers: list[arena.Buffer]
    storage: dict[str, arena.Buffer]  # tensor -> its buffer
    scratch: dict[int, arena.Buffer]  # step index -> its scratch buffer
    arena_bytes: int
    arena_lower_bound: int
    copies: list[tuple[str, str]] = field(default_factory=list)  # (src tensor, output tensor) copied at the end


# ------------------------------------------------------------------------------ graph preparation

def fold_constants(graph: Graph, target: Target) -> Graph:
    """Evaluate the nodes whose value does not depend on the inputs (SHAPE of a static tensor, nodes
    reading only constants) with their kernels, and keep the results as constants."""
    values: dict[str, np.ndarray] = {k: t.data for k, t in graph.tensors.items() if t.is_constant}
    folded: set[str] = set()
    for node in graph.nodes:
        static_shape = node.op_type == "SHAPE" and graph.tensors[node.inputs[0]].is_static
        if not static_shape and not all((not i) or i in values for i in node.inputs):
            continue
        first = graph.tensors[node.inputs[0]] if node.inputs and node.inputs[0] else None
        kernel = lookup(node.op_type, activation_of(first.dtype if first is not None else None))
        ctx = KernelContext(node, tuple(graph.tensors[i] if i else None for i in node.inputs),
                            tuple(graph.tensors[o] for o in node.outputs), target)
        args = []
        for i in node.inputs:
            if not i:
                args.append(None)
            elif i in values:
                args.append(values[i])
            else:  # SHAPE's input: only its static shape matters
                t = graph.tensors[i]
                args.append(np.zeros(t.shape, t.dtype))
        outs = kernel.run(kernel.prepare(ctx), *args)
        for name, v in zip(node.outputs, outs):
            if name:
                values[name] = np.asarray(v)
        folded.add(node.name)
    if not folded:
        return graph
    tensors = dict(graph.tensors)
    for node in graph.nodes:
        if node.name in folded:
            for o in node.outputs:
                if o:
                    t = tensors[o]
                    tensors[o] = Tensor(o, data=values[o].astype(t.dtype), qparams=t.qparams)
    nodes = [n for n in graph.nodes if n.name not in folded]
    return graph.replace(nodes=nodes, tensors=tensors).prune()


def cut_float_boundary(graph: Graph) -> tuple[Graph, list[Port], list[Port]]:
    """The int8 graph between the boundary QUANTIZE / DEQUANTIZE nodes (module docstring)."""
    nodes = list(graph.nodes)
    drop: set[str] = set()
    inputs: list[Port] = []
    for name in graph.inputs:
        t = graph.tensors[name]
        if t.dtype == INT8:
            inputs.append(_port(graph, name, None))
            continue
        readers = graph.consumers(name)
        if (t.dtype != np.float32 or len(readers) != 1 or readers[0].op_type != "QUANTIZE"
                or graph.tensors[readers[0].outputs[0]].dtype != INT8):
            raise CExportError(f"graph input {name!r} is {t.dtype.name}; the C backend takes int8 inputs, or float32 "
                               "inputs read only by one QUANTIZE to int8")
        drop.add(readers[0].name)
        inputs.append(_port(graph, readers[0].outputs[0], name))
    outputs: list[Port] = []
    for name in graph.outputs:
        t = graph.tensors[name]
        if t.dtype == INT8:
            outputs.append(_port(graph, name, None))
            continue
        writer = graph.producer(name)
        if (t.dtype != np.float32 or writer is None or writer.op_type != "DEQUANTIZE"
                or graph.tensors[writer.inputs[0]].dtype != INT8 or graph.consumers(name)):
            raise CExportError(f"graph output {name!r} is {t.dtype.name}; the C backend returns int8 outputs, or "
                               "float32 outputs written by one DEQUANTIZE of an int8 tensor")
        drop.add(writer.name)
        outputs.append(_port(graph, writer.inputs[0], name))
    new_inputs = [p.name for p in inputs]
    new_outputs = [p.name for p in outputs]
    kept = [n for n in nodes if n.name not in drop]
    tensors = dict(graph.tensors)
    g = Graph(kept, tensors, new_inputs, new_outputs, name=graph.name, metadata=graph.metadata).prune()
    return g, inputs, outputs


def _port(graph: Graph, name: str, float_name: str | None) -> Port:
    t = graph.tensors[name]
    if not t.is_static:
        raise CExportError(f"tensor {name!r} has shape {t.shape}; the C backend needs static shapes "
                           "(bind dynamic dimensions at import with input_shapes=)")
    qp = t.qparams
    if qp is None or qp.per_axis:
        raise CExportError(f"tensor {name!r} needs per-tensor quantization parameters")
    return Port(name, tuple(int(d) for d in t.shape), float(qp.tensor_scale), int(qp.tensor_zero_point), float_name)


# ------------------------------------------------------------------------------ building

def build(graph: Graph, target="tflite", prefix: str = "model") -> CModel:
    """Lower ``graph`` and plan its arena. Raises :class:`CExportError` naming the first node the
    C backend cannot generate (its operator, dtype or prepared variant)."""
    target = get_target(target)
    source = graph
    g = fold_constants(graph, target)
    for node in g.nodes:  # an operator without a lowering is named first, whatever else is wrong
        boundary = node.op_type in ("QUANTIZE", "DEQUANTIZE") and any(
            g.tensors[t].dtype == np.float32 for t in (*node.inputs[:1], *node.outputs[:1]))
        if node.op_type not in LOWERINGS and not boundary:
            raise CExportError(f"node {node.name!r} ({node.op_type}): the C backend does not implement "
                               f"{node.op_type}; it implements {', '.join(sorted(LOWERINGS))}")
        for o in node.outputs:
            dtype = g.tensors[o].dtype if o else INT8
            if dtype != INT8 and not (node.op_type == "DEQUANTIZE" and dtype == np.float32):
                raise CExportError(f"node {node.name!r} ({node.op_type}) writes {o!r} as {dtype.name}; the C backend "
                                   "implements int8 tensors (TFLite's int8 scheme, not 16x8)")
    g, inputs, outputs = cut_float_boundary(g)
    for name, t in g.tensors.items():
        if not t.is_constant and not t.is_static:
            raise CExportError(f"tensor {name!r} has shape {t.shape}; the C backend needs static shapes")
    for node in g.nodes:
        for o in node.outputs:
            if o and g.tensors[o].dtype != INT8:
                raise CExportError(f"node {node.name!r} ({node.op_type}) writes {o!r} as {g.tensors[o].dtype.name}; "
                                   "the C backend implements int8 tensors")
    absorbed = absorbable_pads(g, target)
    dropped = {a.pad.name for a in absorbed.values()}
    steps = [lower_node(node, g, target, f"{prefix}_n{i}", absorbed.get(node.name))
             for i, node in enumerate(g.nodes) if node.name not in dropped]
    buffers, storage, scratch, copies = _buffers(g, steps)
    size = arena.place(buffers)
    return CModel(g, source, target, steps, inputs, outputs, buffers, storage, scratch, size,
                  arena.lower_bound(buffers, len(steps)), copies)


def _nbytes(g: Graph, name: str) -> int:
    return int(np.prod(g.tensors[name].shape)) * g.tensors[name].dtype.itemsize


def _buffers(g: Graph, steps: list[Step]):
    """Tensors -> buffers (views and in-place outputs share their input's), with lifetimes."""
    nodes = [s.node for s in steps]  # as the steps read them (an absorbed PAD's input, not its output)
    last_read: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.inputs:
            if t:
                last_read[t] = i
    end = len(steps)
    storage: dict[str, arena.Buffer] = {}
    buffers: list[arena.Buffer] = []
    for k, name in enumerate(g.inputs):
        b = arena.Buffer(_nbytes(g, name), -1, end, "input", k, tensors=[name])
        storage[name] = b
        buffers.append(b)
    output_index = {name: k for k, name in enumerate(g.outputs)}
    copies: list[tuple[str, str]] = []

    def dies_here(t: str, i: int) -> bool:
        """``t``'s bytes are free after step i: no later reader of any tensor in its buffer."""
        b = storage.get(t)
        return b is not None and b.kind == "arena" and all(last_read.get(x, -1) <= i for x in b.tensors)

    scratch: dict[int, arena.Buffer] = {}
    for i, (node, step) in enumerate(zip(nodes, steps)):
        if step.scratch:
            s = arena.Buffer(step.scratch, i, i)
            scratch[i] = s
            buffers.append(s)
        for o in node.outputs:
            if not o:
                continue
            if step.view:
                b = storage[node.inputs[0]]
                if o in output_index and (b.kind != "arena" or any(x in output_index for x in b.tensors)):
                    nb = arena.Buffer(_nbytes(g, o), i, end, "output", output_index[o], tensors=[o])
                    storage[o] = nb
                    buffers.append(nb)
                    copies.append((node.inputs[0], o))
                    continue
                b.tensors.append(o)
                if o in output_index:
                    b.kind, b.index, b.last = "output", output_index[o], end
                storage[o] = b
                continue
            if o in output_index:
                b = arena.Buffer(_nbytes(g, o), i, end, "output", output_index[o], tensors=[o])
            else:
                shared = next((node.inputs[k] for k in step.inplace
                               if node.inputs[k] and dies_here(node.inputs[k], i)
                               and storage[node.inputs[k]].size >= _nbytes(g, o)), None)
                if shared is not None:
                    b = storage[shared]
                    b.tensors.append(o)
                    storage[o] = b
                    continue
                b = arena.Buffer(_nbytes(g, o), i, i, tensors=[o])
            storage[o] = b
            buffers.append(b)
    for b in buffers:
        if b.kind == "arena":
            b.last = max([b.first] + [last_read.get(t, b.first) for t in b.tensors])
    for name in g.outputs:
        if name not in storage:
            raise CExportError(f"graph output {name!r} is a constant (it does not depend on the inputs); "
                               "nothing to generate")
        if storage[name].kind == "input":
            raise CExportError(f"graph output {name!r} is a graph input's bytes; nothing to generate")
    return buffers, storage, scratch, copies


def tensor_pointer(m: CModel, name: str) -> str:
    """The C expression of a tensor's bytes inside ``<prefix>_invoke``."""
    b = m.storage[name]
    if b.kind == "input":
        return f"in{b.index}"
    if b.kind == "output":
        return f"out{b.index}"
    return f"(a + {b.offset})"
