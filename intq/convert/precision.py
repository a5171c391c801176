"""Mixed precision: int16 (16x8) or float where int8 cannot represent a tensor.

A join (CONCATENATION, ADD) of tensors whose ranges differ a lot gets one int8 scale set by the
widest: a YOLO head's box coordinates (0..320) beside class scores (0..1) leave the scores one
step of 1.25 — every score reads 0. In int16 the same range has 256 times finer steps (scores keep
about 100 levels). This module chooses such tensors and checks that an int16 region is one the
runtimes run:

* an **int16 region** is a join node (Concat; ADD is not offered: its int16 kernel needs the
  16x8 conventions of a whole region) whose output, and the data-movement ops after it (Reshape,
  Flatten, Squeeze, Unsqueeze, Transpose, Identity: they keep their input's parameters), reach
  the graph outputs and nothing else. Its int8 inputs are requantized to its symmetric int16
  parameters by QUANTIZE (int8 -> int16, TFLite's Requantize), the output is DEQUANTIZEd from int16
  (or returned as int16 with ``output_type="int8"``). LiteRT and TFLite Micro run CONCATENATION,
  RESHAPE, QUANTIZE and DEQUANTIZE on int16 with these semantics (zero point 0);
* **by choice**: ``precision={name: "int16"}`` (a node or its output tensor; a JSON or text table
  file with :func:`load_precision`);
* a **float island** (``precision={name: "float"}``) is a node and everything its output reaches,
  when all of it is made of :data:`FLOAT_ISLAND_OPS` and ends at the graph outputs: where even
  int16 cannot represent a tensor (YOLOv8's class scores, all far below 1/256, in one output with
  box coordinates up to 320). Its integer inputs are DEQUANTIZEd; its nodes stay intq float ops
  (ONNX names, float32 tensors) that the ``.tflite`` writer exports as TFLite float builtins
  (:mod:`intq.tflite.float_builtins`). Each op of :data:`FLOAT_ISLAND_OPS` computes in intq what
  LiteRT's reference kernels and TensorFlow Lite Micro compute, bit for bit (measured: float
  LOGISTIC on 20,000+ values incl. both cutoffs, ``tests/tflite/test_float_builtins.py``, see
  :func:`intq.runtime.float_ops._libm.logistic`; the data movement and IEEE float32
  ADD/SUB/MUL/DIV are exact by construction); LiteRT's optimized
  kernels and XNNPACK compute LOGISTIC otherwise (up to 1.8e-7 apart), so a graph with a float island
  equals the targets ``tflite`` and ``litert-ref`` only. Not island ops, because intq's float op
  and the runtimes' float kernels differ: Softmax (summation order), Tanh, Exp-based activations
  other than the sigmoid, and every op with a reduction (Conv, MatMul, pooling, means);
* **int16 layers**: any :data:`INT16_NODES` node (``precision={"/model.22/cv3.*": "int16"}``,
  glob patterns allowed) is converted with its 16x8 kernels (int16 activations, symmetric; int8
  weights; int64 bias); where an int8 tensor feeds it, or it feeds an int8 node, the converter
  inserts one QUANTIZE (int8 <-> int16, TFLite's Requantize) per tensor and type
  (:meth:`~intq.convert.context.ConversionContext.coerced`). LiteRT and TFLite Micro run all of
  them (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, LOGISTIC, MUL, CONCATENATION, SPLIT(_V),
  RESHAPE, TRANSPOSE, PAD, QUANTIZE, DEQUANTIZE on int16; ``tests/convert/test_precision.py``);
* **automatically**: :func:`auto_precision` adds the range-mismatched joins (inputs' ranges
  differ by more than ``ratio``, default 32) one at a time, most mismatched first, until the
  output SQNR on the calibration samples (:func:`intq.analysis.sensitivity.output_sqnr`: per
  output channel, capped, averaged) reaches ``target_sqnr``: the fewest int16 joins that reach it;
  if they do not, the float islands that start at a LOGISTIC-like fixed-range op (Sigmoid) and
  reach the outputs in a few island ops, smallest first; if still short, an int16 region grown
  backwards from the outputs and islands, level by level (:func:`int16_levels`), by the fewest
  levels that reach the target, less the deepest level's layers it does not need (or the best
  depth tried).

When the search ends below the target, :func:`target_shortfall` says why, per graph output below it:
the best SQNR found beside the output's **weight-only bound**
(:func:`intq.analysis.weight_bound.weight_only_bound`: int8 weights, every activation float). Below
the target, no activation precision can reach it; at or above it, the layers that stayed int8 could
(the ops among them that have no 16x8 kernel in intq are named).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from intq.calibration import CalibrationTable
from intq.convert.context import ConversionContext, ConversionError, identity
from intq.ir import Graph, Node, Tensor

#: Float ops an int16 region may hold: the join, and the data movement after it.
INT16_JOINS = frozenset({"Concat"})
MOVEMENT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})
#: Float ops a single node in int16 may be (16x8: int16 activations, int8 weights, int64 biases):
#: their rules emit only builtins that have a 16x8 kernel in intq (the kernels' ``INT16`` entries (:data:`intq.kernels.KERNELS`)) and
#: that LiteRT and TFLite Micro run on int16 — CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
#: LOGISTIC + MUL (SiLU), LOGISTIC, ADD, MUL, MAX_POOL_2D, CONCATENATION, SPLIT / SPLIT_V and the
#: data movement. Int8 neighbours are requantized by QUANTIZE (int8 <-> int16) where the types change.
INT16_NODES = frozenset({"Conv", "Gemm", "SiLU", "Sigmoid", "Add", "Mul", "MaxPool", "Concat", "Split", "Gelu"}) | MOVEMENT
#: Characters that make a precision table's name a glob pattern over node names (fnmatch).
GLOB_CHARS = frozenset("*?[")
DEFAULT_RATIO = 32.0  # a join whose inputs' ranges differ by more than this is "range-mismatched"
PRECISIONS = ("int8", "int16", "float")
#: Float ops a float island may hold (see the module docstring: each exports as a TFLite float
#: builtin that LiteRT's reference kernels and TensorFlow Lite Micro compute bit for bit as intq).
FLOAT_ISLAND_OPS = frozenset({"Sigmoid", "Concat", "Add", "Sub", "Mul", "Div"}) | MOVEMENT
#: Float islands :func:`auto_precision` tries: at most this many nodes, starting at these ops.
AUTO_ISLAND_NODES = 6
AUTO_ISLAND_STARTS = frozenset({"Sigmoid"})
#: The int16 growth of :func:`auto_precision` tries to leave int8 each layer of its deepest level
#: when that level has at most this many (one conversion and run each).
MAX_PRUNED = 8


def load_precision(path: str | Path) -> dict[str, str]:
    """A precision table: JSON ``{"name": "int16", ...}`` or text lines ``name=int16`` (``#``
    comments). Names are nodes or tensors of the simplified float graph."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConversionError(f"{path}: cannot read the precision table ({e})") from None
    if path.suffix == ".json":
        try:
            table = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{path}: not JSON ({e})") from None
        if not isinstance(table, dict):
            raise ConversionError(f"{path}: a precision table is an object {{name: precision}}")
        return {str(k): str(v) for k, v in table.items()}
    table = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConversionError(f"{path}:{n}: expected NAME=int16, got {line!r}")
        k, v = (s.strip() for s in line.split("=", 1))
        table[k] = v
    return table


def _region(graph: Graph, node: Node) -> list[str] | None:
    """The tensors of the int16 region a join starts: its output and the movement chain after it,
    if that chain reaches only graph outputs; None otherwise."""
    region, stack = [], [node.outputs[0]]
    while stack:
        t = stack.pop()
        region.append(t)
        readers = graph.consumers(t)
        if not readers and t not in graph.outputs:
            return None
        for r in readers:
            if r.op_type not in MOVEMENT:
                return None
            stack.append(r.outputs[0])
    return region


def _node_named(graph: Graph, name: str) -> Node:
    """The node called ``name``, or the node writing the tensor ``name``."""
    node = next((n for n in graph.nodes if n.name == name), None) or next(
        (n for n in graph.nodes if name in n.outputs), None)
    if node is None:
        raise ConversionError(f"precision table: {name!r} is neither a node nor a tensor of graph {graph.name!r}")
    return node


def _nodes_named(graph: Graph, name: str) -> list[Node]:
    """:func:`_node_named`, or every node whose name matches ``name`` when it is a glob pattern
    (``*``, ``?``, ``[...]``: ``/model.22/cv3.*`` is a detector head's class branch)."""
    if not GLOB_CHARS & set(name):
        return [_node_named(graph, name)]
    from fnmatch import fnmatchcase

    nodes = [n for n in graph.nodes if fnmatchcase(n.name, name)]
    if not nodes:
        raise ConversionError(f"precision table: the pattern {name!r} matches no node of graph {graph.name!r}")
    return nodes


def _check_precisions(precision: Mapping[str, str]) -> None:
    for name, prec in precision.items():
        if prec not in PRECISIONS:
            raise ConversionError(f"precision of {name!r} must be one of {', '.join(PRECISIONS)}, got {prec!r}")


def float_island(graph: Graph, node: Node) -> list[Node]:
    """The nodes of the float island ``node`` starts: ``node`` and every node its output reaches,
    in graph order. Raises :class:`ConversionError` naming the first node that is not a
    :data:`FLOAT_ISLAND_OPS` op."""
    reached, stack = {node.name}, [node]
    while stack:
        n = stack.pop()
        if n.op_type not in FLOAT_ISLAND_OPS:
            raise ConversionError(
                f"precision table: float island from {node.op_type} {node.name!r} reaches {n.op_type} {n.name!r}; "
                f"a float island holds only {', '.join(sorted(FLOAT_ISLAND_OPS))} (ops whose TFLite float kernels "
                f"intq computes bit for bit) up to the graph outputs")
        for o in n.outputs:
            for r in graph.consumers(o) if o else ():
                if r.name not in reached:
                    reached.add(r.name)
                    stack.append(r)
    return [n for n in graph.nodes if n.name in reached]


def float_nodes(graph: Graph, precision: Mapping[str, str] | None) -> frozenset[str]:
    """The names of the nodes a precision table puts in float islands (``"float"`` entries, each
    with everything its output reaches: :func:`float_island`)."""
    if not precision:
        return frozenset()
    _check_precisions(precision)
    out: set[str] = set()
    for name, prec in precision.items():
        if prec == "float":
            for node in _nodes_named(graph, name):
                out.update(n.name for n in float_island(graph, node))
    return frozenset(out)


def int16_tensors(graph: Graph, precision: Mapping[str, str] | None) -> frozenset[str]:
    """The float tensors to hold in int16 for a precision table (names of nodes, tensors or glob
    patterns of node names -> ``"int8"`` / ``"int16"`` / ``"float"``); raises
    :class:`ConversionError` naming what cannot be int16. A join (Concat) whose output reaches the
    graph outputs through data movement only brings that movement along (the detector's output
    concat); any other :data:`INT16_NODES` node is int16 alone (its outputs), e.g. the convolutions
    of a class branch: the converter requantizes between int8 and int16 where types change.
    Tensors a float island computes (:func:`float_nodes`) are float, not int16."""
    if not precision:
        return frozenset()
    _check_precisions(precision)
    out: set[str] = set()
    for name, prec in precision.items():
        if prec != "int16":
            continue
        for node in _nodes_named(graph, name):
            if node.op_type not in INT16_NODES:
                raise ConversionError(
                    f"precision table: {node.name!r} is a {node.op_type}, which intq cannot convert to int16 (16x8); "
                    f"int16 nodes are {', '.join(sorted(INT16_NODES))}")
            region = _region(graph, node) if node.op_type in INT16_JOINS else None
            out.update(region if region is not None else [o for o in node.outputs if o])
    islands = float_nodes(graph, precision)
    return frozenset(out) - {o for n in graph.nodes if n.name in islands for o in n.outputs}


def island_tensors(graph: Graph, precision: Mapping[str, str] | None) -> frozenset[str]:
    """The float tensors the float islands of ``precision`` compute (no range is used for them)."""
    islands = float_nodes(graph, precision)
    return frozenset(o for n in graph.nodes if n.name in islands for o in n.outputs if o)


def emit_float_node(cx: ConversionContext, node: Node) -> None:
    """Emit ``node`` of a float island as itself (an intq float op on float32 tensors, in the float
    graph's layout): integer inputs are DEQUANTIZEd once (from their identity layout), constants
    are copied, and outputs that are graph outputs keep their names."""
    inputs = []
    for name in node.inputs:
        if not name:
            inputs.append("")
            continue
        const = cx.constant(name)
        if const is not None:
            if name not in cx.tensors:
                cx.tensors[name] = Tensor(name, data=const)
            inputs.append(name)
            continue
        inputs.append(_float_value(cx, name))
    outputs = []
    for o in node.outputs:
        shape = cx.shape(o)
        if o in cx.float_graph.outputs:
            cx.tensors[o] = Tensor(o, np.dtype(np.float32), shape)
            out = o
        else:
            out = cx.add_tensor(o, shape, np.float32)
        cx.define(o, out, identity(len(shape)))
        outputs.append(out)
    cx.emit(node.op_type, node.name, inputs, outputs, dict(node.attrs))


def _float_value(cx: ConversionContext, name: str) -> str:
    """The float32 tensor standing for the float tensor ``name`` (identity layout)."""
    v = cx.value(name)
    t = cx.tensors[v.name]
    if t.qparams is None and np.issubdtype(t.dtype, np.floating):
        return cx.value_as(name, identity(len(cx.shape(name))))
    if name not in cx.dequantized:
        x = cx.value_as(name, identity(len(cx.shape(name))))
        f = cx.add_tensor(f"{name}/dequantized", cx.shape(name), np.float32)
        cx.emit("DEQUANTIZE", f"{name}/dequantize", [x], [f])
        cx.dequantized[name] = f
    return cx.dequantized[name]


def mismatched_joins(graph: Graph, table: CalibrationTable, ratio: float = DEFAULT_RATIO) -> list[tuple[Node, float]]:
    """Joins that can be int16 regions and whose inputs' ranges (max |x|) differ by more than
    ``ratio``, most mismatched first: ``(node, ratio)``."""
    found = []
    for n in graph.nodes:
        if n.op_type not in INT16_JOINS or _region(graph, n) is None:
            continue
        spans = [max(abs(table[i][0]), abs(table[i][1])) for i in n.inputs if i in table]
        spans = [s for s in spans if s > 0]
        if len(spans) >= 2 and max(spans) > ratio * min(spans):
            found.append((n, max(spans) / min(spans)))
    return sorted(found, key=lambda t: -t[1])


def island_candidates(graph: Graph, max_nodes: int = AUTO_ISLAND_NODES) -> list[Node]:
    """Nodes :func:`auto_precision` may start a float island at: fixed-output-range ops
    (:data:`AUTO_ISLAND_STARTS`: a Sigmoid's int8 output has steps of 1/256 whatever its values)
    whose island (:func:`float_island`) exists and has at most ``max_nodes`` nodes; smallest first."""
    found = []
    for n in graph.nodes:
        if n.op_type not in AUTO_ISLAND_STARTS:
            continue
        try:
            size = len(float_island(graph, n))
        except ConversionError:
            continue
        if size <= max_nodes:
            found.append((size, n))
    return [n for _, n in sorted(found, key=lambda t: t[0])]


def int16_levels(graph: Graph, precision: Mapping[str, str] | None, max_levels: int = 64) -> list[list[Node]]:
    """The layers an int16 region can grow by, backwards from the outputs, level by level: level 1
    is the :data:`INT16_NODES` nodes writing the graph outputs or the inputs of the nodes
    ``precision`` already puts in int16 or in float islands, level ``k + 1`` the ones writing the
    inputs of level ``k``. A node of another op type ends the growth along its path (it stays int8;
    QUANTIZE ops join the types). At most ``max_levels`` levels."""
    region = float_nodes(graph, precision)
    in16 = int16_tensors(graph, precision)
    region |= {n.name for n in graph.nodes if any(o in in16 for o in n.outputs if o)}
    writer = {o: n for n in graph.nodes for o in n.outputs if o}

    def writers(names) -> list[Node]:
        found = {}
        for t in names:
            n = writer.get(t)
            if n is not None and n.name not in seen and n.name not in found:
                found[n.name] = n
        return list(found.values())

    seen = set(region)
    current = writers([*graph.outputs, *(i for n in graph.nodes if n.name in region for i in n.inputs if i)])
    levels: list[list[Node]] = []
    while current and len(levels) < max_levels:
        level = [n for n in current if n.op_type in INT16_NODES]
        if not level:
            break
        seen.update(n.name for n in level)
        levels.append(level)
        current = writers(i for n in level for i in n.inputs if i and graph.constant(i) is None)
    return levels


def auto_precision(graph: Graph, table: CalibrationTable, samples, target_sqnr: float, *,
                   ratio: float = DEFAULT_RATIO, convert_options: Mapping | None = None,
                   base: Mapping[str, str] | None = None) -> tuple[dict[str, str], float]:
    """The fewest range-mismatched joins in int16, added to ``base`` (the user's choices), that
    bring the output SQNR on ``samples`` to ``target_sqnr`` dB (see the module docstring), then,
    if they do not, float islands (:func:`island_candidates`, smallest first) until it does:
    ``(precision table, SQNR reached)``. ``table`` is the calibration table *before*
    :func:`~intq.calibration.reconcile_ranges` (a Concat's union hides its inputs' ranges). If
    every candidate together does not reach the target, all of them are returned with the SQNR
    they give. A candidate that does not raise the SQNR is not kept."""
    from intq.analysis.sensitivity import output_sqnr
    from intq.calibration import reconcile_ranges
    from intq.convert import convert
    from intq.runtime import Interpreter

    samples = list(samples)
    ref_it = Interpreter(graph)
    ref: dict[str, list] = {o: [] for o in graph.outputs}
    for s in samples:
        for k, v in ref_it.run(s).items():
            ref[k].append(v)

    def score(precision: dict[str, str]) -> float:
        keep = int16_tensors(graph, precision) | island_tensors(graph, precision)
        q = convert(graph, reconcile_ranges(graph, table, keep=keep), precision=precision,
                    **dict(convert_options or {}))
        it = Interpreter(q)
        got: dict[str, list] = {o: [] for o in graph.outputs}
        for s in samples:
            for k, v in it.run(s).items():
                got[k].append(v)
        return output_sqnr(ref, got)

    chosen: dict[str, str] = dict(base or {})
    reached = score(chosen)
    candidates = [(n, "int16") for n, _ in mismatched_joins(graph, table, ratio)]
    candidates += [(n, "float") for n in island_candidates(graph)]
    for node, prec in candidates:
        if reached >= target_sqnr:
            break
        if node.name in chosen or node.outputs[0] in chosen or (prec == "int16" and node.name in float_nodes(graph, chosen)):
            continue
        trial = {**chosen, node.name: prec}
        if prec == "float":  # an int16 join the island swallows is no longer a choice
            inside = float_nodes(graph, trial)
            trial = {k: v for k, v in trial.items() if v != "int16" or _node_named(graph, k).name not in inside}
        got = score(trial)
        if got > reached:
            chosen, reached = trial, got
    if reached < target_sqnr:
        chosen, reached = _grow_int16(graph, chosen, reached, target_sqnr, score)
    return chosen, reached


def _grow_int16(graph: Graph, chosen: dict[str, str], reached: float, target_sqnr: float, score):
    """Grow an int16 region backwards from the outputs (:func:`int16_levels`) by the fewest levels
    that reach ``target_sqnr``: levels 1, 2, 4, 8... until one reaches it, then bisection between
    the last two (the SQNR is taken to grow with the region, as int16 replaces int8 noise by 256
    times less), then each layer of the deepest level that the target does not need is left int8
    (at most :data:`MAX_PRUNED` tries); if no depth reaches it, the depth of highest SQNR among
    those tried (the least of equals). ``(chosen, reached)`` unchanged when no depth raises the
    SQNR."""
    levels = int16_levels(graph, chosen)
    tried: dict[int, float] = {}

    def table(depth: int) -> dict[str, str]:
        return {**chosen, **{n.name: "int16" for level in levels[:depth] for n in level}}

    def at(depth: int) -> float:
        if depth not in tried:
            tried[depth] = score(table(depth))
        return tried[depth]

    lo, hi, depth = 0, None, 1
    while depth <= len(levels):
        if at(depth) >= target_sqnr:
            hi = depth
            break
        lo = depth
        depth = len(levels) if depth < len(levels) < 2 * depth else 2 * depth
    if hi is not None:
        while hi - lo > 1:  # the smallest depth in (lo, hi] reaching the target
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if at(mid) >= target_sqnr else (mid, hi)
        best, got = table(hi), tried[hi]
        last = levels[hi - 1]
        if len(last) <= MAX_PRUNED:  # then drop the deepest level's layers the target does not need
            for node in reversed(last):
                trial = {k: v for k, v in best.items() if k != node.name}
                reached_without = score(trial)
                if reached_without >= target_sqnr:
                    best, got = trial, reached_without
        return best, got
    if not tried:
        return chosen, reached
    best = max(tried, key=lambda d: (tried[d], -d))
    return (table(best), tried[best]) if tried[best] > reached else (chosen, reached)


@dataclass(frozen=True)
class OutputShortfall:
    """One graph output below ``--target-sqnr``: what the search reached, what int8 weights allow."""

    output: str
    reached_db: float  # its score with the chosen precision (output_sqnrs)
    bound_db: float  # its weight-only bound (int8 weights, float activations)
    capped_channels: tuple[int, ...]  # its axis-1 channels whose weight-only bound is below the target
    message: str


@dataclass(frozen=True)
class TargetShortfall:
    """Why ``target_sqnr`` was not reached (``quantize(...).metadata["target_shortfall"]``)."""

    target_db: float
    reached_db: float  # the mean over outputs, the score the search compares with the target
    outputs: tuple[OutputShortfall, ...]  # the outputs below the target, worst first
    int8_ops: tuple[str, ...]  # ops left int8 that have no 16x8 kernel in intq (cannot join the region)
    samples: int


def target_shortfall(graph: Graph, table: CalibrationTable, samples, target_sqnr: float,
                     precision: Mapping[str, str], *, per_channel: bool = True) -> TargetShortfall:
    """The outputs of ``graph`` whose score with ``precision`` stays below ``target_sqnr`` on
    ``samples`` (the ones :func:`auto_precision` searched on; ``table`` before
    :func:`~intq.calibration.reconcile_ranges`), each with its weight-only bound and a message: when
    the bound is below the target, "int8 weights alone cap it at B dB ... no int8/int16 activation
    choice can reach T"; otherwise that more int16 layers could, with the ops that stayed int8 for
    want of a 16x8 kernel. One conversion and two float runs per sample."""
    from intq.analysis.sensitivity import output_sqnr, output_sqnrs
    from intq.analysis.weight_bound import weight_only_bound
    from intq.calibration import reconcile_ranges
    from intq.convert import convert
    from intq.runtime import Interpreter

    samples = list(samples)
    keep = int16_tensors(graph, precision) | island_tensors(graph, precision)
    q = convert(graph, reconcile_ranges(graph, table, keep=keep), precision=dict(precision), per_channel=per_channel)
    runs = {}
    for key, g in (("float", graph), ("int", q)):
        it = Interpreter(g)
        runs[key] = {o: [] for o in graph.outputs}
        for s in samples:
            for k, v in it.run(s).items():
                runs[key][k].append(v)
    reached = output_sqnrs(runs["float"], runs["int"])
    bound = weight_only_bound(graph, samples, per_channel=per_channel)
    outside = float_nodes(graph, precision)
    int8_ops = sorted({n.op_type for n in graph.nodes if n.op_type not in INT16_NODES and n.name not in outside
                       and not any(o in keep for o in n.outputs if o)})
    rows = []
    for name in sorted(graph.outputs, key=lambda o: reached[o]):
        s, b = reached[name], bound[name].bound_db
        if s >= target_sqnr:
            continue
        head = f"target {target_sqnr:g} dB not reached on output {name}: best found {s:.1f} dB; "
        if b < target_sqnr:
            msg = (head + f"int8 weights alone cap it at {b:.1f} dB (every activation in float), so no int8/int16 "
                   f"activation choice can reach {target_sqnr:g}")
        else:
            msg = (head + f"int8 weights alone allow {b:.1f} dB (every activation in float), so more int16 layers "
                   "could reach it" + (f"; ops with no 16x8 kernel in intq stayed int8: {', '.join(int8_ops)}"
                                       if int8_ops else ""))
        capped = tuple(i for i, db in enumerate(bound[name].channels_db) if db < target_sqnr)
        if capped:
            msg += (f"; int8 weights alone hold {len(capped)} of its {len(bound[name].channels_db)} channels (axis 1) "
                    f"below {target_sqnr:g} dB: {_spans(capped)}")
        rows.append(OutputShortfall(name, s, b, capped, msg))
    return TargetShortfall(target_sqnr, output_sqnr(runs["float"], runs["int"]), tuple(rows), tuple(int8_ops),
                           len(samples))


def _spans(indices: tuple[int, ...]) -> str:
    """``0, 4-83``: sorted indices as runs."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
