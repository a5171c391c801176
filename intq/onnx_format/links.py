"""QDQ links: an int8 QDQ model in the form onnxruntime fuses whole on every CPU.

onnxruntime fuses ``DequantizeLinear -> op -> QuantizeLinear`` into its integer kernels at its
graph optimizations (``ORT_ENABLE_BASIC`` and above). On ARM64 it fuses int8 units as written. On
x86-64 (every CPU class: ``QDQIsInt8Allowed()`` is false there) it fuses an int8 Conv or MatMul only
after its ``QDQS8ToU8Transformer`` rewrote the unit's tensors to uint8, and that transformer rewrites
a QuantizeLinear only when its output has exactly one consumer, a DequantizeLinear, and is no graph
output (onnxruntime ``qdq_s8_to_u8.cc``; a DequantizeLinear read by several nodes is first duplicated
by ``EnsureUniqueDQForNodeUnit``, so a tensor with several readers never qualifies). A unit whose
input was rewritten and whose output was not (or the reverse) has mixed types and stays a *float*
Conv between DequantizeLinear and QuantizeLinear: not onnxruntime's integer arithmetic, and not
what target ``ort`` computes (MobileNetV2 at 96x96: 165 of 1000 outputs differed on 1 sample of 4).

:func:`link` rewrites a QDQ model with int8 activations so that every 8-bit activation tensor a
unit reads or writes is a *link* — written by one QuantizeLinear, read by one DequantizeLinear, no
graph output — without changing one value:

1. Data movement on codes (Transpose, Reshape, Pad, MaxPool, Clip, Gather, Slice, Concat of equal
   parameters, ...; :data:`FLOAT_MOVES`) becomes ``DequantizeLinear -> op -> QuantizeLinear`` on
   floats with the same parameters: exact (the op moves, selects or compares dequantized values,
   each ``float32(q - Z) * s``, and QuantizeLinear gives each its code back: ``rint(float32(
   float32((q - Z) s) / s)) = q - Z`` for ``|q - Z| <= 255``); onnxruntime drops the pair again where
   it has the integer form (``DropQDQNodesRules``: Transpose, Reshape, MaxPool, Gather, Slice...).
2. A tensor read by several nodes (or read by an operator on codes, or a graph output, or written
   by something other than a QuantizeLinear) is dequantized once, into an *anchor* — ``Max`` of
   that one input, the identity, which no optimizer of onnxruntime removes (an ``Identity`` or an
   ``Add`` of 0 is removed, and the readers' QuantizeLinear nodes would then share a DequantizeLinear
   again; a ``DequantizeLinear -> QuantizeLinear`` pair of equal parameters is removed too, by
   ``QDQFinalCleanupTransformer``, before the int8 links are rewritten) — and each reader gets its
   own ``QuantizeLinear -> DequantizeLinear`` link from it (the identity again). The readers' QuantizeLinear nodes differ in their ``axis`` attribute (which a
   per-tensor QuantizeLinear ignores), so that common-subexpression elimination does not merge them
   back into one node with several readers; beyond ``2 * rank`` readers a further anchor (``Max`` of
   the anchor) gives more.

3. A constant operand of an Add or a Mul (``DequantizeLinear`` of an int8 initializer) is linked
   the same way: onnxruntime rewrites only ``QuantizeLinear -> DequantizeLinear`` pairs to uint8,
   never a constant, and a QLinearAdd / QLinearMul with a uint8 activation and an int8 constant
   has mixed types and stays a float Add / Mul (PP-OCR's classifier: 9 of 16 ADD and 9 of 18 MUL,
   its hard-sigmoids' ``x * alpha + beta``). The constant gets its own link from an anchor that
   onnxruntime cannot fold: ``Max(Min(t, c), c)``, ``c`` the dequantized constant and ``t`` the
   ``ReduceMin`` of the first graph input (computed at run time; ``Min(t, c) <= c``, so the anchor
   is ``c`` exactly for every finite input); a ``Max`` of the constant alone is folded (constant
   folding folds a DequantizeLinear of a constant that feeds no QDQ unit), and the constant's
   link with it, back to a constant int8 operand. The ``ReduceMin`` reads the input once (a NaN
   input, which quantizes to no defined code anyway, would make the anchor NaN).

The model computes the same values on every runtime and at every optimization level; what changes
is that onnxruntime on x86 fuses every unit (the uint8 arithmetic of targets ``ort-u8-vnni`` /
``ort-u8s8-avx2``, which :func:`intq.runtime.oracles.ort.host_target` reads from the graph it runs).
Models with uint8 activations need no links (onnxruntime fuses uint8 units as written).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from intq.ir.names import claim

#: Operators on 8-bit codes that move, select or compare them, and their inputs holding codes (None:
#: every input): in float between DequantizeLinear and QuantizeLinear with the same parameters they
#: compute the same codes.
FLOAT_MOVES: dict[str, tuple[int, ...] | None] = {
    "Transpose": (0,), "Reshape": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Flatten": (0,), "Identity": (0,),
    "MaxPool": (0,), "Pad": (0, 2), "Clip": (0, 1, 2), "Gather": (0,), "Slice": (0,), "Expand": (0,), "Split": (0,),
    "ReduceMax": (0,), "ReduceMin": (0,), "Concat": None, "Max": None, "Min": None, "Where": (1, 2),
}
#: Operators writing 8-bit codes whose quantization parameters are their own inputs: op -> the indices
#: of the output's scale and zero point.
_WRITES_PARAMS = {"QuantizeLinear": (1, 2), "QLinearGlobalAveragePool": (3, 4), "QLinearAveragePool": (3, 4),
                  "QLinearConv": (6, 7), "QLinearMatMul": (6, 7), "QLinearAdd": (6, 7), "QLinearMul": (6, 7),
                  "QLinearSigmoid": (3, 4), "QLinearLeakyRelu": (3, 4), "QLinearSoftmax": (3, 4),
                  "QLinearConcat": (0, 1)}


class _Graph:
    """The model's nodes and tensors, mutable: producers, readers, element types, initializers."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.nodes: list[onnx.NodeProto] = list(g.node)
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.new_inits: dict[str, np.ndarray] = {}
        self.types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]
                      if v.type.HasField("tensor_type")}
        self.ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in [*g.input, *g.value_info, *g.output]
                      if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
        self.inputs = {v.name for v in g.input}
        self.input_order = [v.name for v in g.input if v.name not in self.inits]
        self.runtime_nodes: list[onnx.NodeProto] = []
        self.outputs = [v.name for v in g.output]
        self.names = {n for node in self.nodes for n in (*node.input, *node.output)} | set(self.inits) | self.inputs
        self.node_names = {n.name for n in self.nodes}

    def unique(self, hint: str) -> str:
        return claim(hint, self.names)

    def node_name(self, hint: str) -> str:
        return claim(hint, self.node_names)

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.unique(hint)
        self.new_inits[name] = np.asarray(value)
        return name

    def value(self, name: str) -> np.ndarray | None:
        if name in self.inits:
            return self.inits[name]
        return self.new_inits.get(name)

    def producers(self) -> dict[str, onnx.NodeProto]:
        return {o: n for n in self.nodes for o in n.output if o}

    def readers(self) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
        out: dict[str, list] = defaultdict(list)
        for n in self.nodes:
            for k, i in enumerate(n.input):
                if i:
                    out[i].append((n, k))
        return out

    def is_codes(self, name: str) -> bool:
        """An int8 activation (not a constant)."""
        return self.types.get(name) == TensorProto.INT8 and name not in self.inits


def _params(g: _Graph) -> dict[str, tuple[str, str]]:
    """(scale, zero point) initializer names of each int8 activation: the ones its writer states
    (QuantizeLinear, onnxruntime's QLinear operators), else those of a DequantizeLinear reading it,
    carried through data movement (:data:`FLOAT_MOVES`) both ways."""
    prod, readers = g.producers(), g.readers()
    params: dict[str, tuple[str, str]] = {}
    for name, p in prod.items():
        if p.op_type in _WRITES_PARAMS and g.is_codes(name):
            s, z = _WRITES_PARAMS[p.op_type]
            if len(p.input) > z and p.input[z]:
                params[name] = (p.input[s], p.input[z])
    changed = True
    while changed:
        changed = False
        for name in [n for n in g.names if g.is_codes(n) and n not in params]:
            for r, k in readers.get(name, []):
                if r.op_type == "DequantizeLinear" and k == 0 and len(r.input) > 2 and r.input[2]:
                    params[name] = (r.input[1], r.input[2])
                    changed = True
                    break
        for n in g.nodes:
            if n.op_type not in FLOAT_MOVES:
                continue
            ins = [n.input[k] for k in _code_inputs(n) if k < len(n.input) and n.input[k] and g.is_codes(n.input[k])]
            outs = [o for o in n.output if o and g.is_codes(o)]
            known = [params[x] for x in ins + outs if x in params]
            if known:
                for x in ins + outs:
                    if x not in params:
                        params[x] = known[0]
                        changed = True
    return params


def _code_inputs(n: onnx.NodeProto) -> tuple[int, ...]:
    which = FLOAT_MOVES[n.op_type]
    return tuple(range(len(n.input))) if which is None else which


def _same(g: _Graph, a: tuple[str, str], b: tuple[str, str]) -> bool:
    return a == b or all(np.array_equal(g.value(x), g.value(y)) and g.value(x).dtype == g.value(y).dtype
                         for x, y in zip(a, b))


def _dequantized(g: _Graph, codes: np.ndarray, p: tuple[str, str]) -> np.ndarray:
    """What DequantizeLinear computes from constant codes: ``float32(q - Z) * s`` in float32."""
    s, z = np.float32(g.value(p[0])), g.value(p[1]).astype(np.int64)
    return (codes.astype(np.int64) - z).astype(np.float32) * s


def _floatify(g: _Graph, params: dict[str, tuple[str, str]]) -> None:
    """Data movement on int8 codes -> DequantizeLinear -> the op on floats -> QuantizeLinear."""
    out = []
    for n in g.nodes:
        if n.op_type not in FLOAT_MOVES or not _floatable(g, n, params):
            out.append(n)
            continue
        p = params[next(o for o in n.output if o)]
        moved = onnx.NodeProto()
        moved.CopyFrom(n)
        for k in _code_inputs(n):
            if k >= len(n.input) or not n.input[k]:
                continue
            x = n.input[k]
            if x in g.inits:  # constant codes (a Pad value, Clip bounds): their float values
                moved.input[k] = g.const(f"{x}/float", _dequantized(g, g.inits[x], p))
                continue
            f = g.unique(f"{x}/dequantized")
            out.append(helper.make_node("DequantizeLinear", [x, *params[x]], [f], name=g.node_name(f"{n.name}/dq{k}")))
            g.types[f] = TensorProto.FLOAT
            moved.input[k] = f
        quantizers = []
        for k, y in enumerate(n.output):
            if not y:
                continue
            f = g.unique(f"{y}/float")
            g.types[f] = TensorProto.FLOAT
            moved.output[k] = f
            quantizers.append(helper.make_node("QuantizeLinear", [f, *params[y]], [y], name=g.node_name(f"{n.name}/q{k}")))
        out.append(moved)
        out.extend(quantizers)
    g.nodes = out


def _floatable(g: _Graph, n: onnx.NodeProto, params) -> bool:
    """Every code input and output of ``n`` is int8 with known parameters, all the same."""
    outs = [o for o in n.output if o]
    if not outs or not all(g.is_codes(o) and o in params for o in outs):
        return False
    p = params[outs[0]]
    for k in _code_inputs(n):
        if k >= len(n.input) or not n.input[k]:
            continue
        x = n.input[k]
        if x in g.inits:
            if g.inits[x].dtype != np.int8:
                return False
            continue
        if not g.is_codes(x) or x not in params or not _same(g, params[x], p):
            return False
    return all(_same(g, params[o], p) for o in outs)


#: Units whose every 8-bit operand onnxruntime requires of one type to fuse them (QLinearAdd,
#: QLinearMul): a constant operand is linked like an activation (module docstring, 3).
_LINKED_CONSTANT_READERS = frozenset({"Add", "Mul"})


def _link_constants(g: _Graph) -> None:
    """A DequantizeLinear of constant int8 codes read by an Add or a Mul (a binary unit with a
    constant operand) -> that DequantizeLinear, an anchor (``Max`` of it), and per reader its own
    ``QuantizeLinear -> DequantizeLinear`` link with the same parameters (the identity; module
    docstring, 3)."""
    readers = g.readers()
    out: list[onnx.NodeProto] = []
    runtime: str | None = None
    for n in g.nodes:
        out.append(n)
        if n.op_type != "DequantizeLinear" or n.input[0] not in g.inits or g.inits[n.input[0]].dtype != np.int8 \
                or len(n.input) < 3 or not n.input[2] or np.size(g.value(n.input[1])) != 1:
            continue
        reads = [(r, k) for r, k in readers.get(n.output[0], []) if r.op_type in _LINKED_CONSTANT_READERS]
        if not reads or not g.input_order:
            continue
        if runtime is None:  # one float scalar known only at run time, computed first
            runtime = _runtime_scalar(g)
        name = n.input[0]
        lower = g.unique(f"{name}/at_most")
        anchor = g.unique(f"{name}/anchor")
        out.append(helper.make_node("Min", [runtime, n.output[0]], [lower], name=g.node_name(lower)))
        out.append(helper.make_node("Max", [lower, n.output[0]], [anchor], name=g.node_name(anchor)))
        g.types[lower] = g.types[anchor] = TensorProto.FLOAT
        for r, k in reads:
            link = g.unique(f"{name}/link")
            view = g.unique(f"{name}/link/dequantized")
            out.append(helper.make_node("QuantizeLinear", [anchor, n.input[1], n.input[2]], [link],
                                        name=g.node_name(f"{link}/quantize")))
            out.append(helper.make_node("DequantizeLinear", [link, n.input[1], n.input[2]], [view],
                                        name=g.node_name(f"{link}/dequantize")))
            g.types[link], g.types[view] = TensorProto.INT8, TensorProto.FLOAT
            r.input[k] = view
    g.nodes = out
    if runtime is not None:
        g.nodes[0:0] = g.runtime_nodes


def _runtime_scalar(g: _Graph) -> str:
    """``ReduceMin`` of the first graph input (as float): a finite scalar onnxruntime cannot fold,
    so that ``Max(Min(t, c), c) = c`` is a constant it computes at run time (``Min(t, c) <= c``)."""
    x = g.input_order[0]
    nodes = []
    if g.types.get(x) != TensorProto.FLOAT:
        f = g.unique(f"{x}/as_float")
        nodes.append(helper.make_node("Cast", [x], [f], name=g.node_name(f), to=TensorProto.FLOAT))
        g.types[f] = TensorProto.FLOAT
        x = f
    t = g.unique("intq/run_time_scalar")
    nodes.append(helper.make_node("ReduceMin", [x], [t], name=g.node_name(t), keepdims=0))
    g.types[t] = TensorProto.FLOAT
    g.runtime_nodes = nodes
    return t


def _relink(g: _Graph, params: dict[str, tuple[str, str]]) -> None:
    """Give every int8 activation that is not already a link one link per reader (module docstring, 2)."""
    prod, readers = g.producers(), g.readers()
    added: list[tuple[onnx.NodeProto | None, list[onnx.NodeProto]]] = []  # (after this node, the new nodes)
    renamed_outputs: dict[str, str] = {}
    for name in sorted(n for n in g.names if g.is_codes(n)):
        if name not in params:
            continue
        p = prod.get(name)
        reads = readers.get(name, [])
        is_output = name in g.outputs
        if not reads and not is_output:
            continue
        if p is not None and p.op_type == "QuantizeLinear" and not is_output and len(reads) == 1 \
                and reads[0][0].op_type == "DequantizeLinear" and reads[0][1] == 0:
            continue
        src = name
        if is_output:  # the producer writes an internal tensor; the graph output gets its own QuantizeLinear
            src = g.unique(f"{name}/linked")
            for node in g.nodes:
                for k, o in enumerate(node.output):
                    if o == name:
                        node.output[k] = src
            g.types[src] = TensorProto.INT8
            if name in g.ranks:
                g.ranks[src] = g.ranks[name]
            renamed_outputs[name] = src
        s, z = params[name]
        nodes = []
        view = g.unique(f"{name}/view")
        nodes.append(helper.make_node("DequantizeLinear", [src, s, z], [view], name=g.node_name(f"{name}/view")))
        targets: list[tuple[onnx.NodeProto | None, int]] = list(reads) + ([(None, -1)] if is_output else [])
        rank = g.ranks.get(name, 0)
        axes = list(range(rank)) + list(range(-rank, 0)) or [None]
        anchor, free = _anchor(g, nodes, view, name), list(axes)
        for node, k in targets:
            if not free:
                anchor = _anchor(g, nodes, anchor, name)
                free = list(axes)
            axis = free.pop(0) if free else None
            link = name if node is None else g.unique(f"{name}/link")
            attrs = {} if axis is None else {"axis": axis}
            nodes.append(helper.make_node("QuantizeLinear", [anchor, s, z], [link], name=g.node_name(f"{link}/quantize"),
                                          **attrs))
            g.types[link] = TensorProto.INT8
            if node is not None:
                node.input[k] = link
        added.append((p, nodes))
    for p, nodes in added:
        at = g.nodes.index(p) + 1 if p is not None else 0
        g.nodes[at:at] = nodes


def _anchor(g: _Graph, nodes: list, src: str, name: str) -> str:
    out = g.unique(f"{name}/anchor")
    nodes.append(helper.make_node("Max", [src], [out], name=g.node_name(f"{name}/anchor")))
    g.types[out] = TensorProto.FLOAT
    return out


def separate(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with an anchor (``Max`` of one input, the identity) between every DequantizeLinear and
    the one QuantizeLinear reading it (a requantization): onnxruntime's ``DoubleQDQPairsRemover``
    replaces ``Q1 -> DQ1 -> Q2 -> DQ2`` (single readers) by one pair with new parameters (the
    intersection of both ranges, its own scale and zero point), which changes the values."""
    g = _Graph(model)
    readers = g.readers()
    out = []
    for n in g.nodes:
        r = readers.get(n.output[0], []) if n.op_type == "DequantizeLinear" else []
        if len(r) == 1 and r[0][0].op_type == "QuantizeLinear" and n.input[0] not in g.inits \
                and n.output[0] not in g.outputs:
            anchor = g.unique(f"{n.output[0]}/anchor")
            out += [n, helper.make_node("Max", [n.output[0]], [anchor], name=g.node_name(f"{n.name}/anchor"))]
            r[0][0].input[0] = anchor
            continue
        out.append(n)
    return _rebuilt(model, g, out)


def _rebuilt(model: onnx.ModelProto, g: _Graph, nodes: list) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in g.new_inits.items())
    del out.graph.value_info[:]  # inferred again by the caller
    return out


def link(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (QDQ, int8 activations, shapes inferred) with links (module docstring): the same
    values, every unit fusable by onnxruntime on x86. Nodes stay in topological order."""
    g = _Graph(model)
    params = _params(g)
    _floatify(g, params)
    _relink(g, params)
    _link_constants(g)
    return _rebuilt(model, g, g.nodes)
