"""From an integer graph to a :class:`CModel`: the lowered steps, the buffers and the arena plan.

1. Constant subgraphs are evaluated once with the kernels (SHAPE of a static tensor, and whatever
   reads only constants: the dynamic-batch shape arithmetic of converter models).
2. The float boundary is cut: a float graph input read by QUANTIZE becomes that QUANTIZE's int8
   output, a float graph output written by DEQUANTIZE becomes its int8 input; the generated
   ``<prefix>_invoke`` takes and returns int8 tensors, and the optional float helpers
   (``<prefix>_quantize_input_i`` / ``<prefix>_dequantize_output_i``) compute those two boundary
   operators exactly as intq.qmath.quantize / dequantize do.
3. Every remaining node is lowered (:mod:`intq.export.c.lower`); then buffers and the arena plan
   (:mod:`intq.export.c.plan`): views, in-place outputs, slices that are runs of their input and
   concatenation inputs written into place, pointwise convolutions over their input. The plan is made
   with and without each of the last two (placing inputs into their concatenation lengthens the
   output's life; a pointwise convolution in place needs a one-pixel scratch and copies each pixel)
   and the smallest arena is kept (on a tie, the one without pixel copies).

Graph inputs and outputs that are not float are taken and returned as they are: int8, and the
integer or bool tensors of TFLite's int8 models (GATHER indices, ARG_MAX's int32 indices, ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.kernels import KernelContext, Target, get_target, select_kernel
from intq.export.c import plan as arena
from intq.export.c.lower import C_TYPES, INT8, CExportError, Step, absorbable_pads, lower_node, lowered_ops
from intq.export.c.lower_movement import COPIES, VIEWS

#: The targets whose arithmetic the generated C implements: ``tflite`` (TensorFlow Lite Micro) and
#: ``litert-ref`` (LiteRT's reference kernels: the same gemmlowp double rounding, FULLY_CONNECTED's
#: double product (csrc intq_double_product) and the kernels' other litert-ref parameters, all taken
#: from prepare). The optimized targets are refused whole: some of their kernels (litert-opt's
#: QUANTIZE, lane-dependent) prepare the same parameter class as tflite's and compute otherwise.
C_TARGETS = ("tflite", "litert-ref")

MOVES_ANY_DTYPE = frozenset((*COPIES, *VIEWS, "SELECT_V2"))  # operators that move elements of any type
#: the 16x8 operators the C backend implements on int16 tensors (csrc/elementwise.c intq_minmax16,
#: intq_lut16_checked); every other int16-writing operator is refused by name
C_16X8 = frozenset({"RSQRT", "MAXIMUM", "MINIMUM"})


@dataclass(frozen=True)
class Port:
    """One input or output of the generated function (int8, or another integer or bool dtype), and
    the float tensor it stands for."""

    name: str  # the integer tensor
    shape: tuple[int, ...]
    scale: float  # 0.0: not quantized (e.g. int32 indices)
    zero_point: int
    float_name: str | None  # the graph's float tensor (None: the graph's I/O is integer already)
    dtype: np.dtype = INT8

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


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
    elided: dict[int, set[tuple[int, int]]] = field(default_factory=dict)  # step -> (output, box) not copied
    arena_without_aliases: int = 0  # the plan without concatenation into place, for the report

    @property
    def arena_align(self) -> int:
        """The alignment the caller's arena needs (8 when an int64 tensor lives there)."""
        return max([4] + [b.align for b in self.buffers if b.kind == "arena"])


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
        ctx = KernelContext(node, tuple(graph.tensors[i] if i else None for i in node.inputs),
                            tuple(graph.tensors[o] for o in node.outputs), target)
        kernel = select_kernel(ctx)
        args = []
        for i in node.inputs:
            if not i:
                args.append(None)
            elif i in values:
                args.append(values[i])
            else:  # SHAPE's input: only its static shape matters
                t = graph.tensors[i]
                args.append(np.zeros(t.shape, t.dtype))
        params = kernel.prepare(ctx)
        outs = kernel.run_for(params)(params, *args)
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
        if t.dtype in C_TYPES:
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
        if t.dtype in C_TYPES:
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
    if qp is not None and qp.per_axis:
        raise CExportError(f"tensor {name!r} needs per-tensor quantization parameters")
    if qp is None and t.dtype == INT8:
        raise CExportError(f"int8 tensor {name!r} has no quantization parameters")
    scale, zp = (float(qp.tensor_scale), int(qp.tensor_zero_point)) if qp is not None else (0.0, 0)
    return Port(name, tuple(int(d) for d in t.shape), scale, zp, float_name, t.dtype)


# ------------------------------------------------------------------------------ building

def build(graph: Graph, target="tflite", prefix: str = "model") -> CModel:
    """Lower ``graph`` and plan its arena. Raises :class:`CExportError` naming the first node the
    C backend cannot generate (its operator, dtype or prepared variant)."""
    target = get_target(target)
    if target.name not in C_TARGETS:
        raise CExportError(f"target {target.name!r}: the C backend implements the arithmetic of the targets "
                           f"{', '.join(C_TARGETS)} (their kernels are tested equal to the runtime); "
                           f"{target.name!r}'s kernels differ from them on operators it would not refuse by name")
    source = graph
    g = fold_constants(graph, target)
    for node in g.nodes:  # an operator without a lowering is named first, whatever else is wrong
        boundary = node.op_type in ("QUANTIZE", "DEQUANTIZE") and any(
            g.tensors[t].dtype == np.float32 for t in (*node.inputs[:1], *node.outputs[:1]))
        if node.op_type not in lowered_ops() and not boundary:
            raise CExportError(f"node {node.name!r} ({node.op_type}): the C backend does not implement "
                               f"{node.op_type}; it implements {', '.join(sorted(lowered_ops()))}")
        for o in node.outputs:
            dtype = g.tensors[o].dtype if o else INT8
            if dtype == np.int16 and node.op_type not in MOVES_ANY_DTYPE and node.op_type not in C_16X8:
                raise CExportError(f"node {node.name!r} ({node.op_type}) writes {o!r} as int16; the C backend "
                                   "implements TFLite's int8 scheme, not 16x8 (int16 activations)")
            if dtype not in C_TYPES and not (node.op_type == "DEQUANTIZE" and dtype == np.float32):
                raise CExportError(f"node {node.name!r} ({node.op_type}) writes {o!r} as {dtype.name}; the C backend "
                                   "implements integer and bool tensors (float only at the model's boundary)")
    g, inputs, outputs = cut_float_boundary(g)
    for name, t in g.tensors.items():
        if not t.is_constant and not t.is_static:
            raise CExportError(f"tensor {name!r} has shape {t.shape}; the C backend needs static shapes")
    for node in g.nodes:
        for o in node.outputs:
            if o and g.tensors[o].dtype not in C_TYPES:
                raise CExportError(f"node {node.name!r} ({node.op_type}) writes {o!r} as {g.tensors[o].dtype.name}; "
                                   "the C backend implements integer and bool tensors")
    absorbed = absorbable_pads(g, target)
    dropped = {a.pad.name for a in absorbed.values()}
    steps = [lower_node(node, g, target, f"{prefix}_n{i}", absorbed.get(node.name))
             for i, node in enumerate(g.nodes) if node.name not in dropped]
    plans = []
    options = ((True, False), (False, False), (True, True), (False, True))  # on a tie: no pixel copies
    for into_place, pixels_in_place in options:
        planned = _buffers(g, steps, into_place, pixels_in_place)
        plans.append((arena.place(planned[0]), planned))
    size, (buffers, storage, scratch, copies, elided) = min(plans, key=lambda p: p[0])
    size_plain = min(p[0] for p, (into, _) in zip(plans, options) if not into)
    return CModel(g, source, target, steps, inputs, outputs, buffers, storage, scratch, size,
                  arena.lower_bound(buffers, len(steps)), copies, elided, size_plain)


def _nbytes(g: Graph, name: str) -> int:
    return int(np.prod(g.tensors[name].shape)) * g.tensors[name].dtype.itemsize


def _numel(g: Graph, name: str) -> int:
    return int(np.prod(g.tensors[name].shape))


def _buffers(g: Graph, steps: list[Step], into_place: bool = True, pixels_in_place: bool = True):
    """Tensors -> buffers (views and in-place outputs share their input's; runs of an input and
    inputs written into their concatenation lie inside another buffer), with lifetimes; the copies
    of data-movement steps that aliasing makes unnecessary (``elided``). ``into_place``: place
    concatenation (and PAD) inputs into their output where the layout allows; ``pixels_in_place``: let
    a pointwise convolution overwrite its input (its one-pixel scratch is then needed) where its
    output is larger than that scratch."""
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
    elided: dict[int, set[tuple[int, int]]] = {}

    def family_dead(b: arena.Buffer, i: int) -> bool:
        """``b``'s bytes are free after step i: its root is arena and no member is read later."""
        r = b.root()
        return r.kind == "arena" and all(last_read.get(x, -1) <= i for f in r.family() for x in f.tensors)

    def new_buffer(o: str, i: int) -> arena.Buffer:
        if o in output_index:
            b = arena.Buffer(_nbytes(g, o), i, end, "output", output_index[o], tensors=[o])
        else:
            b = arena.Buffer(_nbytes(g, o), i, i, tensors=[o])
        b.align = 8 if g.tensors[o].dtype.itemsize == 8 else arena.ALIGN
        storage[o] = b
        buffers.append(b)
        return b

    scratch: dict[int, arena.Buffer] = {}
    for i, (node, step) in enumerate(zip(nodes, steps)):
        if step.scratch and not step.scratch_if_inplace:
            s = arena.Buffer(step.scratch, i, i)
            scratch[i] = s
            buffers.append(s)
        if step.movements is not None:
            for k, (o, mv) in enumerate(zip(node.outputs, step.movements)):
                if not o:
                    continue
                size = g.tensors[o].dtype.itemsize
                box = mv.boxes[0] if len(mv.boxes) == 1 else None
                if (o not in output_index and mv.fill is None and box is not None and box.contiguous()
                        and box.size == _numel(g, o) and node.inputs[box.source] in storage):
                    # the output is one run of an input: those bytes (a slice or split without a copy)
                    b = arena.Buffer(_nbytes(g, o), i, i, tensors=[o], align=storage[node.inputs[box.source]].align)
                    storage[node.inputs[box.source]].adopt(b, box.src_base * size)
                    storage[o] = b
                    buffers.append(b)
                    elided.setdefault(i, set()).add((k, 0))
                    continue
                out = new_buffer(o, i)
                if not into_place:
                    continue
                uses = Counter(b.source for b in mv.boxes)
                taken: set[int] = set()
                for j, b in enumerate(mv.boxes):
                    t = node.inputs[b.source]
                    src = storage.get(t)
                    if (uses[b.source] != 1 or not b.contiguous() or b.size != _numel(g, t) or src is None
                            or src.parent is not None or src.kind != "arena" or src.size != _nbytes(g, t)
                            or id(src) in taken):
                        continue
                    # the input's producer writes straight into its place in the output
                    taken.add(id(src))
                    out.adopt(src, b.dst_base * size)
                    elided.setdefault(i, set()).add((k, j))
            continue
        for o in node.outputs:
            if not o:
                continue
            if step.view:
                b = storage[node.inputs[0]]
                if o in output_index and (b.parent is not None or b.kind != "arena"
                                          or any(x in output_index for x in b.tensors)):
                    new_buffer(o, i)
                    copies.append((node.inputs[0], o))
                    continue
                b.tensors.append(o)
                if o in output_index:
                    b.kind, b.index, b.last = "output", output_index[o], end
                storage[o] = b
                continue
            pixels = step.scratch_if_inplace and (not pixels_in_place or _nbytes(g, o) <= step.scratch)
            if o not in output_index and not pixels:
                shared = None
                for k in step.inplace:
                    t = node.inputs[k]
                    if not t or t not in storage:
                        continue
                    b = storage[t]
                    others = {id(storage[x].root()) for j, x in enumerate(node.inputs) if j != k and x in storage}
                    if family_dead(b, i) and b.size >= _nbytes(g, o) and id(b.root()) not in others:
                        shared = b
                        break
                if shared is not None:
                    shared.tensors.append(o)
                    storage[o] = shared
                    if step.scratch_if_inplace:
                        scratch[i] = arena.Buffer(step.scratch, i, i)
                        buffers.append(scratch[i])
                    continue
            new_buffer(o, i)
    for b in buffers:
        if b.kind == "arena":
            b.last = max([b.first] + [last_read.get(t, b.first) for t in b.tensors])
    for name in g.outputs:
        if name not in storage:
            raise CExportError(f"graph output {name!r} is a constant (it does not depend on the inputs); "
                               "nothing to generate")
        if storage[name].root().kind == "input":
            raise CExportError(f"graph output {name!r} is a graph input's bytes; nothing to generate")
    return buffers, storage, scratch, copies, elided


def tensor_pointer(m: CModel, name: str) -> str:
    """The C expression of a tensor's first element inside ``<prefix>_invoke``, typed by its dtype
    (``in<k>`` / ``out<k>`` are the caller's buffers, ``a`` the arena)."""
    b = m.storage[name]
    root, rel = b.base()
    ctype = C_TYPES[m.graph.tensors[name].dtype]
    if root.kind == "input":
        port = m.inputs[root.index]
        if rel == 0 and C_TYPES[port.dtype] == ctype:
            return f"in{root.index}"
        return f"((const {ctype} *)(const void *)((const uint8_t *)in{root.index} + {rel}))"
    if root.kind == "output":
        port = m.outputs[root.index]
        if rel == 0 and C_TYPES[port.dtype] == ctype:
            return f"out{root.index}"
        return f"(({ctype} *)(void *)((uint8_t *)out{root.index} + {rel}))"
    if ctype == "int8_t":
        return f"(a + {root.offset + rel})"
    return f"(({ctype} *)(void *)(a + {root.offset + rel}))"
