"""The native forms of the elementwise operators: ADD, SUB, SQUARED_DIFFERENCE, MUL (native.c
``intq_add``, ``intq_mul``), the int8 functions of one input (one 256-entry table, ``intq_lut``: the table ops,
GELU, RSQRT, an int8 QUANTIZE, a binary op with a one-value constant), PRELU with a constant slope
(one table per channel, ``intq_lut_channels``) and SOFTMAX (pairs: a numpy lookup; longer rows:
``intq_softmax``).

A table is either the kernel's own prepared table (``params.table``: its run is that lookup) or the
kernel's own run evaluated at plan time on all 256 int8 values (:func:`tabulated`), which is exact
for a run that computes each element from that element alone — the reference kernels of these
operators; a variant whose result depends on an element's position (LiteRT's optimized vector
lanes) registers no such form.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node
from intq.kernels import REFERENCE, add, mul, prelu, quantize, softmax, sub
from intq.kernels.add import AddParams
from intq.kernels.mul import MulParams
from intq.kernels.prelu import PreluParams
from intq.kernels.quantize import RequantizeParams
from intq.kernels.rsqrt import RsqrtParams
from intq.kernels.softmax import SoftmaxParams
from intq.kernels.squared_difference import SquaredDifferenceParams
from intq.kernels.targets import Requant
from intq.runtime import native
from intq.runtime.native.bound import BoundBinary, BoundChannelTables, BoundChecked, BoundTable, PairTable
from intq.runtime.native.registry import NATIVE_REQUANT, int8_io, native_form, scalar_requant

ALL_INT8 = np.arange(-128, 128, dtype=np.int64)


# ------------------------------------------------------------------------------ ADD, SUB, SQUARED_DIFFERENCE, MUL


def _rows_of(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, int] | None:
    """An operand of ``shape`` as ``(rows, cols)`` of the output ``out`` seen as rows of its last
    axis: the whole tensor ``[rows, C]``, one row ``[1, C]`` or one value ``[1, 1]`` broadcast over
    every row, or one value per row ``[rows, 1]`` (a LayerNorm's mean or scale: the operand's shape
    is the output's with the last axis 1) — what native.c's binary loops take; None otherwise."""
    size = int(np.prod(shape, dtype=np.int64))
    rows = int(np.prod(out[:-1], dtype=np.int64))
    if tuple(shape) == tuple(out):
        return rows, out[-1]
    if size == 1:
        return 1, 1
    if size == out[-1] and shape and shape[-1] == size:
        return 1, size
    full = (1,) * (len(out) - len(shape)) + tuple(shape)
    if full == (*out[:-1], 1):
        return rows, 1
    return None


def _binary_layout(node: Node, graph: Graph):
    """``(out shape, rows/cols of a, rows/cols of b)`` for a binary op the native loop takes: static
    shapes that broadcast to the non-empty output, each operand one of :func:`_rows_of`'s forms;
    None otherwise."""
    shapes = [graph.tensors[t].shape for t in node.inputs[:2]]
    out = graph.tensors[node.outputs[0]].shape
    if not out or 0 in out or any(s is None for s in shapes) or tuple(np.broadcast_shapes(*shapes)) != tuple(out):
        return None
    ra, rb = _rows_of(shapes[0], out), _rows_of(shapes[1], out)
    return None if ra is None or rb is None else (out, ra, rb)


def _binary(fn, node: Node, graph: Graph, rq: tuple[int, int, int, int] | None, side: tuple[int, int, int],
            zero_points, tables, square: int = 0) -> BoundBinary | None:
    """``fn`` (``intq_mul`` / ``intq_add``) bound to the node's layout: ``rq`` = ``(mult, left, right,
    away)`` of native.c's requantization (None: not one native.c implements), ``side`` = ``(Z_y,
    act_min, act_max)``, MUL's input zero points, ADD's int32 operand tables, ``square`` = 1 for
    SQUARED_DIFFERENCE; None where native.c's loop does not take the layout."""
    layout = _binary_layout(node, graph)
    if not int8_io(node, graph, 2) or rq is None or layout is None:
        return None
    out, ra, rb = layout
    mult, left, right, away = rq
    keep = [t for t in tables if t is not None]
    params = native.BinaryParams(
        rows=int(np.prod(out[:-1], dtype=np.int64)), cols=out[-1], a_rows=ra[0], a_cols=ra[1], b_rows=rb[0],
        b_cols=rb[1], za=zero_points[0], zb=zero_points[1],
        table_a=None if tables[0] is None else tables[0].ctypes.data,
        table_b=None if tables[1] is None else tables[1].ctypes.data, mult=mult, left=left, right=right, away=away,
        out_zp=side[0], act_min=side[1], act_max=side[2], square=square)
    return BoundBinary(fn, params, keep, (ra[0] * ra[1], rb[0] * rb[1]), tuple(out))


def _side(r) -> tuple[int, int, int]:
    return r.zero_point, r.act_min, r.act_max


@native_form("MUL")
def mul_form(nat: native.Native, node: Node, graph: Graph, p: MulParams):
    """MUL (the reference kernel: per-tensor multiplier, left shifts included), or the table of a
    one-value constant operand (:func:`constant_operand_table`)."""
    return constant_operand_table(nat.lib, node, graph, p, mul.run) or _binary(
        nat.lib.intq_mul, node, graph, scalar_requant(p.output), _side(p.output), (p.zero_point_a, p.zero_point_b),
        (None, None))


def _tables(*tables) -> tuple[np.ndarray, ...]:
    return tuple(np.ascontiguousarray(t, dtype=np.int32) for t in tables)


def _add_sub(nat: native.Native, node: Node, graph: Graph, p: AddParams, kernel_run: Callable):
    rq = scalar_requant(p.output)
    return constant_operand_table(nat.lib, node, graph, p, kernel_run) or _binary(
        nat.lib.intq_add, node, graph, rq if rq is None or rq[1] == 0 else None, _side(p.output), (0, 0),
        _tables(p.table_a, p.table_b))


@native_form("ADD")
def add_form(nat: native.Native, node: Node, graph: Graph, p: AddParams):
    """ADD (the reference kernel: the operand tables of its rescaled inputs, no left shift)."""
    return _add_sub(nat, node, graph, p, add.run)


@native_form("SUB")
def sub_form(nat: native.Native, node: Node, graph: Graph, p: AddParams):
    """SUB (ADD's kernel with ``table_b`` negated)."""
    return _add_sub(nat, node, graph, p, sub.run)


@native_form("SQUARED_DIFFERENCE")
def squared_difference_form(nat: native.Native, node: Node, graph: Graph, p: SquaredDifferenceParams):
    """SQUARED_DIFFERENCE int8 (its one kernel, both runtimes' parameters: LiteRT's output multiplier
    below 1, TFLM's with a left shift): ``intq_add`` squaring the difference of the kernel's prepared
    tables, then ``MBQM(square, M_out)`` with gemmlowp's rounding (the kernel's
    :func:`~intq.qmath.compiled.mbqm_scalar` with ties away from zero: native.c's ``away`` = 1)."""
    if type(p) is not SquaredDifferenceParams or p.table_a.shape != (256,) or not -31 <= p.shift <= 31:
        return None
    rq = (p.multiplier, max(p.shift, 0), max(-p.shift, 0), NATIVE_REQUANT[Requant.DOUBLE])
    return _binary(nat.lib.intq_add, node, graph, rq, (p.zero_point_out, p.act_min, p.act_max), (0, 0),
                   _tables(p.table_a, p.table_b), square=1)


# ------------------------------------------------------------------------------ tables


def tabulated(kernel_run: Callable, shape: tuple[int, ...], *constants) -> np.ndarray | None:
    """``kernel_run`` (a run computing each element from that element alone, on an int8 input of
    ``shape``; ``constants``: its other inputs) on all 256 int8 values, as the int8 table indexed by
    the input's uint8 bits; None where the run fails on some value or is not int8 -> int8."""
    size = int(np.prod(shape, dtype=np.int64))
    table = np.empty(256, np.int8)
    try:
        for start in range(0, 256, size):
            chunk = np.resize(ALL_INT8[start:start + size], size)  # the last piece repeats values: harmless
            got = np.asarray(kernel_run(chunk.astype(np.int8).reshape(shape), *constants)[0]).reshape(-1)
            if got.dtype != np.int8:
                return None
            n = min(size, 256 - start)
            table[start:start + n] = got[:n]
    except (IntqError, ValueError):
        return None
    return np.ascontiguousarray(np.roll(table, -128))  # index: the uint8 bits


def constant_operand_table(lib, node: Node, graph: Graph, params, kernel_run: Callable) -> BoundTable | None:
    """MUL / ADD / SUB of the data input 0 and a one-value constant (a hard sigmoid's scale and
    offset): an int8 -> int8 function of each element alone, tabulated from the kernel's own run."""
    x, c = (graph.tensors[t] for t in node.inputs[:2])
    shape = graph.tensors[node.outputs[0]].shape
    if (x.is_constant or not c.is_constant or c.data is None or np.asarray(c.data).size != 1 or not shape
            or x.shape is None or tuple(x.shape) != tuple(shape) or not int8_io(node, graph, 2)):
        return None
    table = tabulated(lambda v, k: kernel_run(params, v, k), tuple(shape), c.data)
    return None if table is None else BoundTable(lib, table, tuple(shape))


def _lookup(lib, node: Node, graph: Graph, table) -> BoundTable | None:
    """``y = table[uint8(x)]`` for a one-input node of equal input and output shapes."""
    shape = graph.tensors[node.outputs[0]].shape
    if (not isinstance(table, np.ndarray) or table.dtype != np.int8 or table.shape != (256,) or shape is None
            or graph.tensors[node.inputs[0]].shape != shape or not int8_io(node, graph)):
        return None
    return BoundTable(lib, np.ascontiguousarray(table), tuple(shape))


@native_form("HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "GELU")
@native_form("LOGISTIC", "TANH", "RELU6", families=("litert",))
@native_form("LEAKY_RELU", "LOGISTIC", "TANH", families=("xnnpack",))
def table_form(nat: native.Native, node: Node, graph: Graph, p):
    """The operators whose int8 kernel is its prepared 256-entry table, ``run = table[uint8(x)]``
    (HardSwishParams, LeakyReluParams, ReluParams, LutParams, GeluParams: each has ``table``)."""
    return _lookup(nat.lib, node, graph, getattr(p, "table", None))


@native_form("RSQRT")
def rsqrt_form(nat: native.Native, node: Node, graph: Graph, p: RsqrtParams):
    """RSQRT's table where no int8 input lies below the input zero point (``Z_in = -128``, a
    variance's range): the kernel's run refuses such an input, which a lookup would not."""
    return _lookup(nat.lib, node, graph, p.table) if p.zero_point_in == -128 else None


@native_form("QUANTIZE")
def quantize_form(nat: native.Native, node: Node, graph: Graph, p):
    """An int8 -> int8 QUANTIZE (a requantization, :class:`~intq.kernels.quantize.RequantizeParams`):
    the kernel's own run tabulated."""
    shape = graph.tensors[node.outputs[0]].shape
    if type(p) is not RequantizeParams or not shape or not int8_io(node, graph):
        return None
    return _lookup(nat.lib, node, graph, tabulated(lambda v: quantize.run(p, v), tuple(shape)))


@native_form("PRELU")
def prelu_form(nat: native.Native, node: Node, graph: Graph, p: PreluParams):
    """PRELU with a constant slope that is one value or one per channel (a [..., C] tensor whose
    other axes are 1): the kernel's ``run`` is then, per channel, a function of x alone, tabulated
    on all 256 values (index: the uint8 bits of x); one table, or one per channel."""
    x, alpha = graph.tensors[node.inputs[0]], graph.tensors[node.inputs[1]]
    shape = graph.tensors[node.outputs[0]].shape
    if (not alpha.is_constant or alpha.data is None or not shape or 0 in shape or x.shape is None
            or tuple(x.shape) != tuple(shape) or not int8_io(node, graph, 2)):
        return None
    a = np.asarray(alpha.data)
    c = shape[-1]
    if a.size not in (1, c) or (a.size == c and a.ndim and a.shape[-1] != c):
        return None
    values = np.arange(256, dtype=np.uint8).view(np.int8)  # index u holds the int8 of bits u
    try:
        got = np.asarray(prelu.run(p, np.repeat(values[:, None], c, axis=1), a.reshape(1, -1))[0])
    except (IntqError, ValueError):
        return None
    if got.dtype != np.int8 or got.shape != (256, c):
        return None
    if a.size == 1:
        return BoundTable(nat.lib, np.ascontiguousarray(got[:, 0]), tuple(shape))
    return BoundChannelTables(nat.lib, np.ascontiguousarray(got.T), tuple(shape))


# ------------------------------------------------------------------------------ SOFTMAX


def softmax_pairs(node: Node, graph: Graph, p: SoftmaxParams) -> PairTable | None:
    """SOFTMAX over rows of two values (a two-class head): the kernel's own run tabulated on all
    65536 rows (it computes each row from that row alone), looked up with numpy."""
    shape = graph.tensors[node.outputs[0]].shape
    if p.depth != 2 or not shape or graph.tensors[node.inputs[0]].shape != shape or not int8_io(node, graph):
        return None
    bits = np.arange(65536, dtype=np.uint16)
    rows = np.stack([(bits >> 8).astype(np.uint8), (bits & 0xFF).astype(np.uint8)], axis=1).view(np.int8)
    try:
        table = np.ascontiguousarray(softmax.run(p, rows)[0], dtype=np.int8)
    except IntqError:  # a row the runtime refuses: the kernel's run reports it per input
        return None
    return PairTable(table, tuple(shape))


def softmax_rows(nat: native.Native, node: Node, graph: Graph, p: SoftmaxParams) -> BoundChecked | None:
    """SOFTMAX over the last axis in native.c (``intq_softmax``: the kernel's prepared exp tables,
    the row sums, GetReciprocal and the output multiply per row); a row the kernel refuses (a sum
    of exps >= 512) is handed to the kernel's run, which raises its error."""
    shape = graph.tensors[node.outputs[0]].shape
    if not shape or 0 in shape or graph.tensors[node.inputs[0]].shape != shape or not int8_io(node, graph):
        return None
    if shape[-1] != p.depth or p.radius < 0:
        return None
    q0, q12 = (np.array(t, dtype=np.int32) for t in (p.exp_q0, p.exp_q12))
    radius = min(p.radius, 255)
    if q0.shape != (256,) or int(q0.min()) < 0:
        return None
    q0[radius + 1:] = 0  # a difference past the radius gives -128 (SRDHM of 0 is 0): the vector path's table
    size = int(np.prod(shape, dtype=np.int64))
    params = native.SoftmaxParams(rows=size // p.depth, depth=p.depth, radius=radius, exp_q0=q0.ctypes.data,
                                  exp_q12=q12.ctypes.data, masked=1)
    return BoundChecked(nat.lib.intq_softmax, params, [q0, q12], size, tuple(shape), lambda x: softmax.run(p, x))


@native_form("SOFTMAX", library=False)
def softmax_form(nat: native.Native | None, node: Node, graph: Graph, p: SoftmaxParams):
    """SOFTMAX (the reference kernel): rows of two values as a pair table (numpy: taken with or
    without the C library), other rows in native.c (:func:`softmax_rows`)."""
    pairs = softmax_pairs(node, graph, p)
    if pairs is not None or nat is None:
        return pairs
    return softmax_rows(nat, node, graph, p)

