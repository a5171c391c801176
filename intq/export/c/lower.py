"""Lower each integer node to one call of the C runtime, with its constants taken from the kernel's
own ``prepare`` (DESIGN decision 7: the C code re-derives no multiplier, shift, table or rounding).

:func:`lower_node` returns a :class:`Step`: the C statement (buffer pointers as ``{in0}``,
``{out0}``, ``{scratch}`` placeholders), the runtime blocks it needs (``csrc/*.c``), the constant
definitions (weights, per-channel multipliers and shifts, tables, the parameter struct — all
``static const``: flash on a microcontroller) and what the arena planner may do with it (run in
place over an input, a scratch buffer, a view that needs no code, strided copies whose inputs or
outputs may alias).

A node binds to C through the kernel registry, as the interpreter binds it to a ``run``: the
kernel :func:`intq.kernels.select_kernel` picks for the target (``tflite``: the reference kernels;
``litert-ref``: the ``litert`` family's variants where LiteRT computes otherwise) has a C form when
:data:`LOWERINGS` holds a lowering under the same key (op, activation dtype, family); a kernel
without one (a 16x8 kernel, another family's variant) is refused by name. The lowering reads the
kernel's prepared parameters, and the requantization contract they hold names its C output stage
(:data:`REQUANT_C`; the C fixed-point primitives and the intq rule each implements:
:data:`intq.export.c.rules.C_RULES`).

The lowerings live in one module per family of operators, each registering its lowerings in
:data:`LOWERINGS` with ``@lowering(OP, ..., families=...)``: :mod:`~intq.export.c.lower_conv` (CONV_2D, FULLY_CONNECTED,
DEPTHWISE_CONV_2D, TRANSPOSE_CONV, BATCH_MATMUL), :mod:`~intq.export.c.lower_elementwise` (tables,
ADD/SUB/MUL, comparisons, SELECT_V2, PRELU, ...), :mod:`~intq.export.c.lower_reduce` (pooling,
reductions, SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, resizes) and
:mod:`~intq.export.c.lower_movement` (every data-movement operator, :mod:`intq.export.c.movement`).

A node, prepared parameter type or dtype the C backend does not implement raises
:class:`CExportError` naming the node, before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node
from intq.kernels import INT8 as INT8_ACTIVATIONS
from intq.kernels import REFERENCE, KernelContext, Target, select_kernel
from intq.export.c.rules import REQUANT_C
from intq.registry import Registry

INT8 = np.dtype(np.int8)
MAX_RANK = 6  # INTQ_MAX_RANK in csrc/elementwise.c and the index boxes of copy.c / pool.c

#: numpy dtype -> the C type of its elements (bool is one byte, 0 or 1, as TFLite stores it)
C_TYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.bool_): "uint8_t",
           np.dtype(np.int16): "int16_t", np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t"}

#: What ``<prefix>_invoke`` returns when the model cannot continue (the runtimes fail the invocation there).
STATUS = {"softmax_range": 1, "rsqrt_negative": 2, "gather_index": 3}


class CExportError(IntqError, ValueError):
    """A graph the C backend cannot generate (an operator, dtype or variant it does not implement,
    or an arena over the caller's budget); the message names the node and the fix."""


@dataclass
class Step:
    """One node's C: ``call`` runs it; ``data`` defines its constants; ``blocks`` are the runtime
    functions it needs. ``inplace``: inputs whose bytes the output may overwrite when they die
    here; ``scratch``: bytes of a temporary buffer; ``view``: output 0 is input 0's bytes;
    ``movements``: a data-movement node's copies per output (:mod:`intq.export.c.movement`), its
    call written after the arena plan (some copies vanish when a buffer aliases another)."""

    node: Node
    call: str = ""
    blocks: tuple[str, ...] = ()
    data: list[str] = field(default_factory=list)
    inplace: tuple[int, ...] = ()
    scratch: int = 0
    scratch_if_inplace: bool = False  # the scratch is needed only when the output overwrites an input ("NULL" else)
    view: bool = False
    status: bool = False  # the call returns an int status (non-zero: the model cannot continue, STATUS)
    pad: tuple[int, int] = (0, 0)  # rows above / columns left of input 0 that an absorbed PAD added
    movements: tuple | None = None  # per output: intq.export.c.movement.Movement
    sym: str = ""  # the prefix of its constants' C names


@dataclass(frozen=True)
class AbsorbedPad:
    """A PAD with the input's zero point in front of a convolution, read by the convolution instead:
    its taps outside the unpadded input read Z_x, which is exactly what the PAD wrote there."""

    pad: Node
    top: int
    left: int
    source: str  # the PAD's input: what the convolution reads now


#: (op, activation dtype, family) -> the lowering ``fn(step, node, graph, target, sym)`` of the kernel
#: :data:`intq.kernels.KERNELS` holds under that key; filled by the lower_* modules.
LOWERINGS: Registry = Registry("C lowering", CExportError)


def lowering(*ops: str, families: tuple[str, ...] = (REFERENCE,), activations: tuple[str, ...] = (INT8_ACTIVATIONS,)):
    """Register the decorated function as the C form of the kernels of ``ops`` for ``activations``
    (default int8; ``"int16"`` for the few 16x8 kernels the C implements) in ``families`` (default:
    the reference kernels; ``"litert"`` too where the lowering implements that family's variant,
    whose parameters it reads the same way)."""
    return LOWERINGS.register(*((op, a, f) for op in ops for a in activations for f in families))


def lowered_ops() -> frozenset[str]:
    """Every operator with at least one C form."""
    return frozenset(op for op, _, _ in LOWERINGS)


# ------------------------------------------------------------------------------------ C literals

def c_type(dtype) -> str:
    return C_TYPES[np.dtype(dtype)]


def _literal(v: int, ctype: str) -> str:
    if ctype == "int64_t":
        return "INT64_MIN" if v == -(2**63) else f"INT64_C({v})"
    if ctype == "int32_t" and v == -(2**31):
        return "INT32_MIN"  # -2147483648 is unsigned in C
    return str(v)


def c_array(ctype: str, name: str, values: np.ndarray, per_line: int = 32) -> str:
    """``static const <ctype> <name>[n] = {...};`` (at least one element: C has no empty arrays)."""
    flat = np.asarray(values).reshape(-1)
    if flat.size == 0:
        flat = np.zeros(1, np.int64)
    items = [_literal(int(v), ctype) for v in flat.tolist()]
    body = ",\n".join(",".join(items[i:i + per_line]) for i in range(0, len(items), per_line))
    return f"static const {ctype} {name}[{flat.size}] = {{\n{body}\n}};"


def c_struct(ctype: str, name: str, fields: Sequence[tuple[str, object]]) -> str:
    """``static const <ctype> <name> = {.a = 1, ...};`` (designated initializers, C99)."""
    body = ", ".join(f".{k} = {_c_value(v)}" for k, v in fields)
    return f"static const {ctype} {name} = {{{body}}};"


def _c_value(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return "{" + ", ".join(_c_value(x) for x in v) + "}"
    v = int(v)
    return "INT32_MIN" if v == -(2**31) else str(v)


# ------------------------------------------------------------------------------------ helpers

def context(node: Node, graph: Graph, target: Target) -> KernelContext:
    return KernelContext(node, tuple(graph.tensors[i] if i else None for i in node.inputs),
                         tuple(graph.tensors[o] for o in node.outputs), target)


def prepare(node: Node, graph: Graph, target: Target):
    """The node's kernel and its prepared parameters for ``target`` (as the interpreter selects them)."""
    ctx = context(node, graph, target)
    kernel = select_kernel(ctx)
    return kernel, kernel.prepare(ctx)


def error(node: Node, message: str) -> CExportError:
    return CExportError(f"node {node.name!r} ({node.op_type}): {message}")


def expect(node: Node, params, *types) -> None:
    """The C backend implements exactly these prepared parameter classes of the node's kernel."""
    if type(params) not in types:
        raise error(node, f"the kernel prepared {type(params).__name__} for this target; the C backend implements "
                          f"{', '.join(t.__name__ for t in types)} (use target 'tflite')")


def require_int8(node: Node, graph: Graph, names) -> None:
    """Every tensor in ``names`` is int8 (the arithmetic operators of TFLite's int8 scheme)."""
    for t in names:
        if t and graph.tensors[t].dtype != INT8:
            raise error(node, f"{t!r} is {graph.tensors[t].dtype.name}; the C backend implements this operator on "
                              "int8 tensors (TFLite's int8 scheme, not 16x8)")


def requant(node: Node, r, channels: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """(multiplier int32 [C], shift int8 [C], zero point, act_min, act_max) of a gemmlowp
    double-rounding requantizer (intq.kernels.requantize.DoubleRounding), broadcast to ``channels``."""
    from intq.kernels.requantize import DoubleRounding

    if REQUANT_C.get(r.mode) != "intq_requant" or type(r) is not DoubleRounding or r.out_dtype != INT8:
        raise error(node, f"requantization {type(r).__name__} to {r.out_dtype} is not implemented in C "
                          "(the C backend implements gemmlowp double rounding to int8: target 'tflite')")
    m = np.broadcast_to(r.multiplier, (channels,)).astype(np.int32)
    s = np.broadcast_to(r.shift, (channels,)).astype(np.int8)
    return m, s, r.zero_point, r.act_min, r.act_max


def double_product(node: Node, r, channels: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """(mant int64 [C], k int32 [C], zero point, act_min, act_max) of LiteRT's reference double
    product (intq.kernels.requantize.DoubleProduct, target ``litert-ref``): each prepared double
    ``M = mant * 2^-k`` exactly (``mant < 2^53``), which csrc's ``intq_double_product`` multiplies
    and rounds in integers as the double multiplication and ``std::round`` do."""
    import math

    if r.out_dtype != INT8:
        raise error(node, f"the double-product requantization to {r.out_dtype} is not implemented in C")
    mant, k = [], []
    for m in np.broadcast_to(np.asarray(r.real, np.float64), (channels,)).tolist():
        if not (math.isfinite(m) and 0.0 <= m < 2.0**31):
            raise error(node, f"the output multiplier {m!r} is outside [0, 2^31) (not implemented in C)")
        frac, exp = math.frexp(m)  # m = frac * 2^exp, frac in [0.5, 1) (0.0: 0, 0)
        mant.append(int(frac * 2**53))  # exact: a double has 53 significant bits
        k.append(53 - exp)
    return np.array(mant, np.int64), np.array(k, np.int32), r.zero_point, r.act_min, r.act_max


def double_rounding(node: Node, r, what: str) -> tuple[int, int]:
    """``(multiplier, shift)`` of a gemmlowp double-rounding Rescale (intq.kernels._elementwise_common)."""
    if r.single_rounding:
        raise error(node, f"the {what} rescale rounds once (single rounding); the C backend implements gemmlowp "
                          "double rounding (target 'tflite')")
    return int(r.multiplier), int(r.shift)


def int32(node: Node, values, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.int64)
    if v.size and (v.min() < -(2**31) or v.max() > 2**31 - 1):
        raise error(node, f"{what} does not fit int32")
    return v.astype(np.int32)


def shape_of(graph: Graph, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in graph.tensors[name].shape)


def numel(graph: Graph, name: str) -> int:
    return int(np.prod(shape_of(graph, name), dtype=np.int64))


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s *= int(d)
    return strides[::-1]


def merge_box(dims: Sequence[int], *strides: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dimensions and merge neighbours that are contiguous in every stride list
    (``s[k] == s[k+1] * dims[k+1]``): the same index box with fewer, longer dimensions (at least one)."""
    keep = [k for k, d in enumerate(dims) if d != 1]
    out_dims: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for k in keep:
        if out_dims and all(st[k] * dims[k] == ost[-1] for st, ost in zip(strides, out_strides)):
            out_dims[-1] *= dims[k]
            for st, ost in zip(strides, out_strides):
                ost[-1] = st[k]
            continue
        out_dims.append(int(dims[k]))
        for st, ost in zip(strides, out_strides):
            ost.append(int(st[k]))
    if not out_dims:
        return [1], [[0] for _ in strides]
    return out_dims, out_strides


def box_fields(node: Node, dims, *strides) -> list:
    if len(dims) > MAX_RANK:
        raise error(node, f"an index box of rank {len(dims)} (at most {MAX_RANK} after merging)")
    pad = MAX_RANK - len(dims)
    return [list(dims) + [1] * pad, *[list(s) + [0] * pad for s in strides]]


def broadcast_struct(node: Node, graph: Graph, sym: str, operands: Sequence[str], ctype: str = "intq_bcast"):
    """``("NULL", [])`` when every operand has the output's shape, else the name and definition of
    an ``intq_bcast`` (two operands) or ``intq_bcast3`` (three): output dims and each operand's
    element strides, 0 along a broadcast dimension, merged where contiguous."""
    y = shape_of(graph, node.outputs[0])
    shapes = [shape_of(graph, t) for t in operands]
    if all(s == y for s in shapes):
        return "NULL", []
    rank = len(y)
    strides = []
    for s in shapes:
        e = (1,) * (rank - len(s)) + s
        strides.append([0 if d == 1 else st for d, st in zip(e, contiguous_strides(e))])
    dims, merged = merge_box(y, *strides)
    fields = box_fields(node, dims, *merged)
    names = ("sa", "sb", "sc")
    return f"&{sym}_bc", [c_struct(ctype, f"{sym}_bc", [("rank", len(dims)), ("dims", fields[0]),
                                                       *zip(names, fields[1:])])]


# ------------------------------------------------------------------------------------ nodes

def absorbable_pads(graph: Graph, target: Target) -> dict[str, AbsorbedPad]:
    """Window node name -> the PAD it reads and can absorb: a PAD (its parameters from its kernel's
    prepare) of the height and width only, whose output only that node reads, as its input 0: a
    CONV_2D / DEPTHWISE_CONV_2D with the input's zero point as the pad value, or a MAX_POOL_2D with -128."""
    found: dict[str, AbsorbedPad] = {}
    for node in graph.nodes:
        if node.op_type not in ("PAD", "PADV2") or node.outputs[0] in graph.outputs:
            continue
        readers = graph.consumers(node.outputs[0])
        if len(readers) != 1 or readers[0].op_type not in ("CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D"):
            continue
        conv = readers[0]
        if conv.inputs[0] != node.outputs[0] or node.outputs[0] in conv.inputs[1:]:
            continue
        x = graph.tensors[node.inputs[0]]
        if x.dtype != INT8 or x.qparams is None or x.shape is None or len(x.shape) != 4:
            continue
        try:
            _, p = prepare(node, graph, target)
        except IntqError:
            continue  # lowering the PAD itself reports the problem
        (n0, n1), (top, bottom), (left, right), (c0, c1) = p.widths
        # a convolution's outside taps read Z_x; MAX_POOL_2D's clipped window is a window padded with
        # -128, where its running maximum starts (padding never wins)
        value = -128 if conv.op_type == "MAX_POOL_2D" else x.qparams.tensor_zero_point
        if n0 or n1 or c0 or c1 or p.value != value:
            continue
        found[conv.name] = AbsorbedPad(node, top, left, node.inputs[0])
    return found


def lower_node(node: Node, graph: Graph, target: Target, sym: str, absorbed: AbsorbedPad | None = None) -> Step:
    """The :class:`Step` of one integer node; ``sym`` prefixes its constants' C names. With
    ``absorbed``, the step reads the PAD's input (``step.node`` says so) and pads itself."""
    ops = lowered_ops()
    if node.op_type not in ops:
        raise error(node, f"the C backend does not implement {node.op_type}; it implements {', '.join(sorted(ops))}")
    try:
        key = select_kernel(context(node, graph, target)).key
    except CExportError:
        raise
    except IntqError as e:  # the registry refused the node: the same message, as a C export error
        raise CExportError(str(e)) from None
    fn = LOWERINGS.get(key)
    if fn is None:
        op, act, family = key
        has = sorted(f"{a}/{f}" for o, a, f in LOWERINGS if o == op)
        raise error(node, f"the C backend implements {op}'s kernels {', '.join(has)}, not the {act} kernel of "
                          f"family {family!r} that target {target.name!r} runs here"
                          + (" (TFLite's int8 scheme, not 16x8)" if act != INT8_ACTIVATIONS else ""))
    step = Step(node, sym=sym)
    if absorbed is not None:
        step.node = node.with_(inputs=(absorbed.source, *node.inputs[1:]))
        step.pad = (absorbed.top, absorbed.left)
    try:
        fn(step, node, graph, target, sym)
    except CExportError:
        raise
    except IntqError as e:  # the kernel refused the node (its contract): the same message, as a C export error
        raise CExportError(str(e)) from None
    return step


# the operator families register their lowerings on import
from intq.export.c import lower_conv, lower_elementwise, lower_movement, lower_reduce  # noqa: E402,F401
