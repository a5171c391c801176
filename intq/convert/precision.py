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
* a **float island** (``precision={name: "float"}``) is a :data:`FLOAT_ISLAND_OPS` node and every
  such node its output reaches through them: where even int16 cannot represent a tensor (YOLOv8's
  class scores, all far below 1/256, in one output with box coordinates up to 320). Its integer
  inputs are DEQUANTIZEd; where another node reads its result, that tensor is QUANTIZEd back onto
  its calibrated parameters (DEQUANTIZE -> float builtins -> QUANTIZE); its nodes stay intq float ops
  (ONNX names, float32 tensors) that the ``.tflite`` writer exports as TFLite float builtins
  (:mod:`intq.tflite.float_builtins`). Each op of :data:`FLOAT_ISLAND_OPS` computes in intq what
  LiteRT's reference kernels and TensorFlow Lite Micro compute, bit for bit (measured: float
  LOGISTIC on 20,000+ values incl. both cutoffs, ``tests/tflite/test_float_builtins.py``, see
  :func:`intq.runtime.float_ops._libm.logistic`; the data movement and IEEE float32
  ADD/SUB/MUL/DIV are exact by construction); LiteRT's optimized
  kernels and XNNPACK compute LOGISTIC otherwise (up to 1.8e-7 apart), so a graph with a float island
  equals the targets ``tflite`` and ``litert-ref`` only. :data:`ISLAND_BUILTINS` maps each TFLite
  builtin an island writes to its float op; :data:`NOT_ISLANDS` says, for every other operator of
  the kernel registry, why it cannot be one (sums in another order, layout, no writer yet...);
* **int16 layers**: any :data:`INT16_NODES` node (``precision={"/model.22/cv3.*": "int16"}``,
  glob patterns allowed) is converted with its 16x8 kernels (int16 activations, symmetric; int8
  weights; int64 bias); where an int8 tensor feeds it, or it feeds an int8 node, the converter
  inserts one QUANTIZE (int8 <-> int16, TFLite's Requantize) per tensor and type
  (:meth:`~intq.convert.context.ConversionContext.coerced`). LiteRT and TFLite Micro run all of
  them (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, LOGISTIC, MUL, CONCATENATION, SPLIT(_V),
  RESHAPE, TRANSPOSE, PAD, QUANTIZE, DEQUANTIZE on int16; ``tests/convert/test_precision.py``);
* **automatically**: :mod:`intq.ptq.precision` searches the fewest such choices that reach an
  output SQNR (``intq.quantize(..., target_sqnr=)``), and says why when none does.

This module applies a precision table; it never runs a graph.
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
#: LOGISTIC + MUL (SiLU), LOGISTIC, ADD, SUB, MUL (also Pow's x*x and Div's x * 1/c), MAX_POOL_2D,
#: CONCATENATION, SPLIT / SPLIT_V, the data movement, and the transformer ops BATCH_MATMUL (MatMul of
#: two activations), MEAN (ReduceMean), SOFTMAX (output 1/32768), the masked softmax (MINIMUM then
#: SOFTMAX on an int16 grid, its mask gathered int8 and requantized), TANH, RSQRT (LayerNorm's 1/sqrt; TFLite
#: Micro and LiteRT compute it differently, both emulated) (TFLite Micro has no int16 GELU: LiteRT only).
#: Int8 neighbours are requantized by QUANTIZE (int8 <-> int16) where the types change.
INT16_NODES = frozenset({"Conv", "Gemm", "SiLU", "Sigmoid", "Add", "Sub", "Mul", "Div", "Pow", "MaxPool", "Concat",
                         "Split", "Gelu", "MatMul", "ReduceMean", "Softmax", "Tanh", "Rsqrt",
                         "MaskedSoftmax"}) | MOVEMENT
#: Float ops an explicit precision table may also put in int16 although only LiteRT runs their 16x8 form:
#: Gather (an int16 embedding table, or int16 data by constant indices: LiteRT's GATHER moves every integer
#: dtype, TensorFlow Lite Micro's int8 only) and Sqrt (LiteRT's quantized SQRT; TFLM has none); intq's
#: ``tflite`` target refuses them by name. ``target_sqnr``'s search (:data:`INT16_NODES` only) never picks
#: them: the default target is TFLM.
LITERT_ONLY_INT16 = frozenset({"Gather", "Sqrt"})
#: Characters that make a precision table's name a glob pattern over node names (fnmatch).
GLOB_CHARS = frozenset("*?[")
PRECISIONS = ("int8", "int16", "float")
#: Float ops a float island may hold (see the module docstring: each exports as a TFLite float
#: builtin that LiteRT's reference kernels and TensorFlow Lite Micro compute bit for bit as intq).
FLOAT_ISLAND_OPS = frozenset({"Sigmoid", "Tanh", "Concat", "Add", "Sub", "Mul", "Div", "Relu", "Clip", "LeakyRelu",
                              "Max", "Min", "Rsqrt", "Sqrt", "PRelu", "ReduceMax", "ReduceMin"}) | MOVEMENT


#: TFLite builtin (an operator of the kernel registry) -> the float op a float island writes it from: each is
#: a float builtin LiteRT's reference kernels and TensorFlow Lite Micro compute as intq's float op, bit for bit
#: (``tests/convert/test_float_islands.py`` converts and runs one per builtin).
ISLAND_BUILTINS: dict[str, str] = {
    "LOGISTIC": "Sigmoid", "TANH": "Tanh", "ADD": "Add", "SUB": "Sub", "MUL": "Mul", "CONCATENATION": "Concat",
    "RESHAPE": "Reshape", "SQUEEZE": "Squeeze", "TRANSPOSE": "Transpose", "RELU": "Relu", "RELU6": "Clip",
    "RELU_N1_TO_1": "Clip", "LEAKY_RELU": "LeakyRelu", "MAXIMUM": "Max", "MINIMUM": "Min", "RSQRT": "Rsqrt",
    "SQRT": "Sqrt", "PRELU": "PRelu", "REDUCE_MAX": "ReduceMax", "REDUCE_MIN": "ReduceMin",
}
_SUM = ("a sum: intq's float op adds in its own order (im2col / BLAS / numpy's pairwise sums), LiteRT's and "
        "TensorFlow Lite Micro's float kernels in their loop order, so the results differ in the last bits")
_LAYOUT = ("spatial (NHWC in TFLite): a float island keeps the float graph's layout (NCHW) and intq writes no "
           "transposes around island ops yet")
_NOT_QUANTIZED = "its output is not a quantized activation (indices, booleans, a shape): nothing to keep in float"
_NO_WRITER = ("exact in float (data movement or comparisons) but intq.tflite.float_builtins has no writer for it "
              "yet: not an island op yet")
#: Operators of the kernel registry that cannot be a float island, and why (docs/engine.md, "Float islands").
NOT_ISLANDS: dict[str, str] = {
    **{op: _SUM for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED", "BATCH_MATMUL",
                           "MEAN", "SUM", "AVERAGE_POOL_2D", "L2_NORMALIZATION")},
    **{op: "exp and a row sum: " + _SUM for op in ("SOFTMAX", "LOG_SOFTMAX")},
    "GELU": ("intq's float Gelu (ONNX's erf / tanh formula in numpy) differs from LiteRT's float GELU (erfcf and "
             "float32 steps in its own order) in the last bit; TensorFlow Lite Micro has no GELU"),
    "HARD_SWISH": ("intq's float HardSwish (x * clip(x / 6 + 0.5, 0, 1)) orders its float32 steps otherwise than "
                   "LiteRT's float kernel"),
    **{op: _LAYOUT for op in ("MAX_POOL_2D", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE",
                              "SPACE_TO_DEPTH", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND")},
    **{op: _NO_WRITER for op in ("PAD", "PADV2", "SLICE", "STRIDED_SLICE", "GATHER", "SPLIT", "SPLIT_V",
                                 "PACK", "BROADCAST_TO", "SELECT_V2")},
    **{op: _NOT_QUANTIZED for op in ("ARG_MAX", "ARG_MIN", "EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS",
                                     "LESS_EQUAL", "SHAPE", "CAST")},
    "QUANTIZE": "the island's boundary itself (float -> integer)",
    "DEQUANTIZE": "the island's boundary itself (integer -> float)",
    **{op: "not a TFLite builtin (TPU-MLIR's table lookup, ONNX's integer-only ConvInteger / MatMulInteger): no "
           "float TFLite form" for op in ("LUT", "CONV_INTEGER", "MATMUL_INTEGER")},
    "SQUARED_DIFFERENCE": ("the converter makes it from a Sub and a square (Mul / Pow); put those in float instead "
                           "(Sub and Mul are island ops)"),
}


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


def int16_region(graph: Graph, node: Node) -> list[str] | None:
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


def node_named(graph: Graph, name: str) -> Node:
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
        return [node_named(graph, name)]
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
    """The nodes of the float island ``node`` starts: ``node`` and every :data:`FLOAT_ISLAND_OPS` node
    its output reaches through such nodes, in graph order. Where the island's output is read by
    any other node (or is a graph output), the converter QUANTIZEs it back onto its calibrated
    parameters (:func:`emit_float_node`): DEQUANTIZE -> float builtins -> QUANTIZE. Raises
    :class:`ConversionError` when ``node`` itself is not a :data:`FLOAT_ISLAND_OPS` op, naming it
    and why (:data:`NOT_ISLANDS`)."""
    if node.op_type not in FLOAT_ISLAND_OPS:
        raise ConversionError(
            f"precision table: float island from {node.op_type} {node.name!r} reaches {node.op_type} {node.name!r}; "
            f"a float island holds only {', '.join(sorted(FLOAT_ISLAND_OPS))} (ops whose TFLite float kernels "
            f"intq computes bit for bit; docs/engine.md lists the others and why)")
    reached, stack = {node.name}, [node]
    while stack:
        n = stack.pop()
        for o in n.outputs:
            for r in graph.consumers(o) if o else ():
                if r.name not in reached and r.op_type in FLOAT_ISLAND_OPS:
                    reached.add(r.name)
                    stack.append(r)
    return [n for n in graph.nodes if n.name in reached]


def island_is_open(graph: Graph, nodes: list[Node]) -> bool:
    """True when the island ``nodes`` ends at the graph outputs only (nothing outside it reads its
    tensors): no QUANTIZE back into the integer graph."""
    names = {n.name for n in nodes}
    return all(r.name in names for n in nodes for o in n.outputs if o for r in graph.consumers(o))


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
            if node.op_type not in INT16_NODES | LITERT_ONLY_INT16:
                raise ConversionError(
                    f"precision table: {node.name!r} is a {node.op_type}, which intq cannot convert to int16 (16x8); "
                    f"int16 nodes are {', '.join(sorted(INT16_NODES | LITERT_ONLY_INT16))}")
            region = int16_region(graph, node) if node.op_type in INT16_JOINS else None
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
    are copied, and outputs that are graph outputs keep their names. An output that a node outside
    the island reads is QUANTIZEd back onto its calibrated parameters (the integer nodes read that;
    the island's own readers keep the float tensor)."""
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
    for o, out in zip(node.outputs, outputs):
        if o and any(r.name not in cx.floats for r in cx.float_graph.consumers(o)):
            qp = cx.activation_qparams(o)
            q = cx.add_tensor(f"{o}/quantized", cx.shape(o), qp.dtype, qp)
            cx.emit("QUANTIZE", f"{o}/quantize", [out], [q])
            cx.dequantized[o] = out  # the island's readers (and a graph output) keep the float tensor
            cx.define(o, q, identity(len(cx.shape(o))))


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
