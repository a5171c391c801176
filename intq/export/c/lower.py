"""Lower each integer node to one call of the C runtime, with its constants taken from the kernel's
own ``prepare`` (DESIGN decision 7: the C code re-derives no multiplier, shift, table or rounding).

:func:`lower_node` returns a :class:`Step`: the C statement (buffer pointers as ``{in0}``,
``{out0}``, ``{scratch}`` placeholders), the runtime blocks it needs (``csrc/*.c``), the constant
definitions (weights, per-channel multipliers and shifts, tables, the parameter struct — all
``static const``: flash on a microcontroller) and what the arena planner may do with it (run in
place over an input, a scratch buffer, a view that needs no code).

A node, prepared parameter type or dtype the C backend does not implement raises
:class:`CExportError` naming the node, before anything is written.

Elementwise unary operators (LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, RELU*, int8 QUANTIZE) become a
256-entry table: the kernel's own ``run`` evaluated on every int8 code, exact by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.kernels import KernelContext, Target, activation_of, lookup

INT8 = np.dtype(np.int8)
MAX_RANK = 6  # INTQ_MAX_RANK in csrc/elementwise.c and the index boxes of copy.c / pool.c
BLOCKS = (8, 4, 1)  # output channels per step of intq_conv (csrc/conv.c): blocks of 8, one of 4, singles


class CExportError(IntqError, ValueError):
    """A graph the C backend cannot generate (an operator, dtype or variant it does not implement,
    or an arena over the caller's budget); the message names the node and the fix."""


@dataclass
class Step:
    """One node's C: ``call`` runs it; ``data`` defines its constants; ``blocks`` are the runtime
    functions it needs. ``inplace``: inputs whose bytes the output may overwrite when they die
    here; ``scratch``: bytes of a temporary buffer; ``view``: output 0 is input 0's bytes."""

    node: Node
    call: str = ""
    blocks: tuple[str, ...] = ()
    data: list[str] = field(default_factory=list)
    inplace: tuple[int, ...] = ()
    scratch: int = 0
    view: bool = False
    status: bool = False  # the call returns an int status (non-zero: the model cannot continue)
    pad: tuple[int, int] = (0, 0)  # rows above / columns left of input 0 that an absorbed PAD added


@dataclass(frozen=True)
class AbsorbedPad:
    """A PAD with the input's zero point in front of a convolution, read by the convolution instead:
    its taps outside the unpadded input read Z_x, which is exactly what the PAD wrote there."""

    pad: Node
    top: int
    left: int
    source: str  # the PAD's input: what the convolution reads now


# ------------------------------------------------------------------------------------ C literals

def c_array(ctype: str, name: str, values: np.ndarray, per_line: int = 32) -> str:
    """``static const <ctype> <name>[n] = {...};`` (at least one element: C has no empty arrays)."""
    flat = np.asarray(values).reshape(-1)
    if flat.size == 0:
        flat = np.zeros(1, flat.dtype)
    items = [str(v) for v in flat.tolist()]
    if ctype == "int32_t":
        items = ["INT32_MIN" if v == "-2147483648" else v for v in items]  # -2147483648 is unsigned in C
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

def _prepare(node: Node, graph: Graph, target: Target):
    """The node's kernel and its prepared parameters for ``target`` (as the interpreter selects them)."""
    first = graph.tensors[node.inputs[0]] if node.inputs and node.inputs[0] else None
    kernel = lookup(node.op_type, activation_of(first.dtype if first is not None else None))
    ctx = KernelContext(node, tuple(graph.tensors[i] if i else None for i in node.inputs),
                        tuple(graph.tensors[o] for o in node.outputs), target)
    return kernel, kernel.prepare(ctx)


def _error(node: Node, message: str) -> CExportError:
    return CExportError(f"node {node.name!r} ({node.op_type}): {message}")


def _expect(node: Node, params, *types) -> None:
    """The C backend implements exactly these prepared parameter classes of the node's kernel."""
    if type(params) not in types:
        raise _error(node, f"the kernel prepared {type(params).__name__} for this target; the C backend implements "
                           f"{', '.join(t.__name__ for t in types)} (use target 'tflite')")


def _requant(node: Node, r, channels: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """(multiplier int32 [C], shift int8 [C], zero point, act_min, act_max) of a gemmlowp
    double-rounding requantizer (intq.kernels.requantize.DoubleRounding), broadcast to ``channels``."""
    from intq.kernels.requantize import DoubleRounding

    if type(r) is not DoubleRounding or r.out_dtype != INT8:
        raise _error(node, f"requantization {type(r).__name__} to {r.out_dtype} is not implemented in C "
                           "(the C backend implements gemmlowp double rounding to int8: target 'tflite')")
    m = np.broadcast_to(r.multiplier, (channels,)).astype(np.int32)
    s = np.broadcast_to(r.shift, (channels,)).astype(np.int8)
    return m, s, r.zero_point, r.act_min, r.act_max


def _int32(node: Node, values, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.int64)
    if v.size and (v.min() < -(2**31) or v.max() > 2**31 - 1):
        raise _error(node, f"{what} does not fit int32")
    return v.astype(np.int32)


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in graph.tensors[name].shape)


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


def _box_fields(node: Node, dims, *strides) -> list:
    if len(dims) > MAX_RANK:
        raise _error(node, f"an index box of rank {len(dims)} (at most {MAX_RANK} after merging)")
    pad = MAX_RANK - len(dims)
    return [list(dims) + [1] * pad, *[list(s) + [0] * pad for s in strides]]


# ------------------------------------------------------------------------------------ operators

def _conv(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """CONV_2D / FULLY_CONNECTED (csrc/conv.c); an absorbed PAD (``step.pad``) moves the window's
    origin and the input is the PAD's (smaller) input."""
    from intq.kernels import conv_2d, fully_connected

    kernel, p = _prepare(node, graph, target)
    if node.op_type == "CONV_2D":
        _expect(node, p, conv_2d.Conv2DParams)
        w = graph.tensors[node.inputs[1]].data
        c_out, kh, kw, c_g = w.shape
        g = p.im2col
        n, h, wd, c_in = _shape(graph, step.node.inputs[0])  # the absorbed PAD's input, if any
        geom = dict(batch=n, in_h=h, in_w=wd, in_c=c_in, out_h=g.out_h, out_w=g.out_w, out_c=c_out, kh=kh, kw=kw,
                    stride_h=g.stride_h, stride_w=g.stride_w, dil_h=g.dilation_h, dil_w=g.dilation_w,
                    pad_top=g.padded.top + step.pad[0], pad_left=g.padded.left + step.pad[1], groups=c_in // c_g)
    else:
        _expect(node, p, fully_connected.FullyConnectedParams)
        w = graph.tensors[node.inputs[1]].data
        c_out, k = w.shape
        rows = int(np.prod(_shape(graph, node.inputs[0]))) // k
        w = w.reshape(c_out, 1, 1, k)
        geom = dict(batch=1, in_h=rows, in_w=1, in_c=k, out_h=rows, out_w=1, out_c=c_out, kh=1, kw=1, stride_h=1,
                    stride_w=1, dil_h=1, dil_w=1, pad_top=0, pad_left=0, groups=1)
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    m, s, zp, lo, hi = _requant(node, p.requant, c_out)
    step.data += [c_array("int8_t", f"{sym}_w", pack_conv_weights(w, geom["groups"])),
                  c_array("int32_t", f"{sym}_offset", _int32(node, p.offset, "the folded bias")),
                  c_array("int32_t", f"{sym}_mult", m), c_array("int8_t", f"{sym}_shift", s),
                  c_struct("intq_conv_params", sym, [*geom.items(), ("in_zp", zx), ("out_zp", zp), ("act_min", lo),
                           ("act_max", hi), ("w", f"{sym}_w"), ("offset", f"{sym}_offset"),
                           ("mult", f"{sym}_mult"), ("shift", f"{sym}_shift")])]
    step.blocks = ("intq_conv",)
    step.call = f"intq_conv(&{sym}, {{in0}}, {{out0}});"


def pack_conv_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """Weights ``[C_out, KH, KW, C_g]`` in intq_conv's order (csrc/conv.c): per group, blocks of
    :data:`BLOCKS` output channels (8, then at most one of 4, then single channels), each block
    interleaved ``[tap][channel][block]``. A reordering only: no value changes."""
    c_out = w.shape[0]
    opg = c_out // groups
    k = int(np.prod(w.shape[1:]))
    flat = w.reshape(c_out, k)
    parts = []
    for g in range(groups):
        wg = flat[g * opg:(g + 1) * opg]
        o = 0
        for size in BLOCKS:
            while o + size <= opg and (size != 4 or o + 8 > opg):
                parts.append(wg[o:o + size].T.reshape(-1))  # [k][size]
                o += size
                if size == 4:
                    break
    return np.concatenate(parts).astype(np.int8) if parts else np.zeros(0, np.int8)


def _depthwise(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels import depthwise_conv_2d

    kernel, p = _prepare(node, graph, target)
    _expect(node, p, depthwise_conv_2d.DepthwiseConv2DParams)
    if p.tail is not None:
        raise _error(node, "two requantizations per layer (LiteRT's optimized kernel) are not implemented in C")
    t = p.taps
    n, h, wd, c = _shape(graph, step.node.inputs[0])  # the absorbed PAD's input, if any
    top, left = t.padded.top + step.pad[0], t.padded.left + step.pad[1]
    _, oh, ow, cm = p.out_shape
    taps, _, mult = t.weights.shape
    w = graph.tensors[node.inputs[1]].data  # [1, KH, KW, C*M]
    kh, kw = w.shape[1], w.shape[2]
    dil_h = int(t.tap_rows[kw]) if kh > 1 else 1  # tap rows are i * dilation_h (prepare_taps)
    dil_w = int(t.tap_cols[1]) if kw > 1 else 1
    plane_h = max(top + h, (oh - 1) * t.stride_h + (kh - 1) * dil_h + 1)
    plane_w = max(left + wd, (ow - 1) * t.stride_w + (kw - 1) * dil_w + 1)
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    m, s, zp, lo, hi = _requant(node, p.requant, cm)
    step.data += [c_array("int8_t", f"{sym}_w", w.reshape(-1)),
                  c_array("int32_t", f"{sym}_offset", _int32(node, t.offset, "the folded bias")),
                  c_array("int32_t", f"{sym}_mult", m), c_array("int8_t", f"{sym}_shift", s),
                  c_struct("intq_depthwise_params", sym, [
                      ("batch", n), ("in_h", h), ("in_w", wd), ("in_c", c), ("out_h", oh), ("out_w", ow),
                      ("mult", mult), ("kh", kh), ("kw", kw), ("stride_h", t.stride_h), ("stride_w", t.stride_w),
                      ("dil_h", dil_h), ("dil_w", dil_w), ("pad_top", top), ("pad_left", left),
                      ("plane_h", plane_h), ("plane_w", plane_w), ("in_zp", zx), ("out_zp", zp), ("act_min", lo),
                      ("act_max", hi), ("w", f"{sym}_w"), ("offset", f"{sym}_offset"), ("mult_q", f"{sym}_mult"),
                      ("shift", f"{sym}_shift")])]
    step.blocks = ("intq_depthwise",)
    step.call = f"intq_depthwise(&{sym}, {{in0}}, {{out0}}, {{scratch}});"
    step.scratch = plane_h * plane_w
    if mult == 1:
        step.inplace = (0,)


UNARY_TABLE_OPS = frozenset({"LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1",
                             "QUANTIZE"})


def _unary_table(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """y = table[x]: the kernel's own run on every int8 code (an int8 -> int8 elementwise operator)."""
    from intq.kernels._elementwise_common import INT8_BY_BITS

    x, y = graph.tensors[node.inputs[0]], graph.tensors[node.outputs[0]]
    if x.dtype != INT8 or y.dtype != INT8 or _shape(graph, x.name) != _shape(graph, y.name):
        raise _error(node, f"{x.dtype.name} -> {y.dtype.name} is not implemented in C (int8 -> int8 of one shape)")
    kernel, p = _prepare(node, graph, target)
    extra = [None] * (len(node.inputs) - 1)
    table = np.asarray(kernel.run(p, INT8_BY_BITS.astype(np.int8), *extra)[0])
    assert table.shape == (256,) and table.dtype == INT8, (node.name, table.shape, table.dtype)
    n = int(np.prod(_shape(graph, y.name)))
    step.data.append(c_array("int8_t", f"{sym}_table", table))
    step.blocks = ("intq_lut",)
    step.call = f"intq_lut({sym}_table, {n}, {{in0}}, {{out0}});"
    step.inplace = (0,)


def _broadcast(node: Node, graph: Graph, sym: str) -> tuple[str, list[str]]:
    """``("NULL", [])`` for equal input shapes, else the name and definition of an intq_bcast."""
    a, b, y = (_shape(graph, t) for t in (*node.inputs[:2], node.outputs[0]))
    if a == b:
        return "NULL", []
    rank = len(y)
    ea, eb = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    sa = [0 if d == 1 else s for d, s in zip(ea, contiguous_strides(ea))]
    sb = [0 if d == 1 else s for d, s in zip(eb, contiguous_strides(eb))]
    dims, (sa, sb) = merge_box(y, sa, sb)
    rank = len(dims)
    dims, sa, sb = _box_fields(node, dims, sa, sb)
    return f"&{sym}_bc", [c_struct("intq_bcast", f"{sym}_bc", [("rank", rank), ("dims", dims), ("sa", sa),
                                                               ("sb", sb)])]


def _binary(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels import add, mul
    from intq.kernels._elementwise_common import StoredValueParams

    for t in (*node.inputs[:2], node.outputs[0]):
        if graph.tensors[t].dtype != INT8:
            raise _error(node, f"{t!r} is {graph.tensors[t].dtype.name}; the C backend implements int8")
    kernel, p = _prepare(node, graph, target)
    n = int(np.prod(_shape(graph, node.outputs[0])))
    bc, bc_data = _broadcast(node, graph, sym)
    step.data += bc_data
    if node.op_type in ("ADD", "SUB"):
        _expect(node, p, add.AddParams)
        m, s, zp, lo, hi = _requant(node, p.output, 1)
        step.data += [c_array("int32_t", f"{sym}_ta", p.table_a), c_array("int32_t", f"{sym}_tb", p.table_b),
                      c_struct("intq_add_params", sym, [("n", n), ("bc", bc), ("table_a", f"{sym}_ta"),
                               ("table_b", f"{sym}_tb"), ("mult", int(m[0])), ("shift", int(s[0])), ("out_zp", zp),
                               ("act_min", lo), ("act_max", hi)])]
        step.blocks, fn = ("intq_add",), "intq_add"
    elif node.op_type == "MUL":
        _expect(node, p, mul.MulParams)
        m, s, zp, lo, hi = _requant(node, p.output, 1)
        step.data.append(c_struct("intq_mul_params", sym, [("n", n), ("bc", bc), ("zp_a", p.zero_point_a),
                                  ("zp_b", p.zero_point_b), ("mult", int(m[0])), ("shift", int(s[0])),
                                  ("out_zp", zp), ("act_min", lo), ("act_max", hi)]))
        step.blocks, fn = ("intq_mul",), "intq_mul"
    else:  # MAXIMUM / MINIMUM
        _expect(node, p, StoredValueParams)
        step.data.append(c_struct("intq_minmax_params", sym, [("n", n), ("bc", bc),
                                  ("maximum", int(node.op_type == "MAXIMUM"))]))
        step.blocks, fn = ("intq_minmax",), "intq_minmax"
    step.call = f"{fn}(&{sym}, {{in0}}, {{in1}}, {{out0}});"
    y = _shape(graph, node.outputs[0])
    step.inplace = tuple(i for i in (0, 1) if _shape(graph, node.inputs[i]) == y)


def _pool(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels._pool_common import PoolWindow
    from intq.kernels.average_pool_2d import AveragePool2DParams

    kernel, p = _prepare(node, graph, target)
    if node.op_type == "MAX_POOL_2D":
        _expect(node, p, PoolWindow)
        window, fn = p, "intq_max_pool"
    else:
        _expect(node, p, AveragePool2DParams)
        window, fn = p.pool, "intq_average_pool"
    if graph.tensors[node.inputs[0]].dtype != INT8:
        raise _error(node, "the C backend implements int8 pooling")
    g = window.geometry
    n, in_h, in_w, c = _shape(graph, step.node.inputs[0])  # an absorbed PAD's input, if any
    step.data.append(c_struct("intq_pool_params", sym, [
        ("batch", n), ("in_h", in_h), ("in_w", in_w), ("channels", c), ("out_h", g.out_h), ("out_w", g.out_w),
        ("filter_h", g.filter_h), ("filter_w", g.filter_w), ("stride_h", g.stride_h), ("stride_w", g.stride_w),
        ("pad_top", g.pad_h + step.pad[0]), ("pad_left", g.pad_w + step.pad[1]), ("act_min", window.act_min),
        ("act_max", window.act_max)]))
    step.blocks = (fn,)
    step.call = f"{fn}(&{sym}, {{in0}}, {{out0}});"


def _mean(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels._pool_common import QuantizedSumParams

    kernel, p = _prepare(node, graph, target)
    _expect(node, p, QuantizedSumParams)
    if p.bytes_as_uint8 or graph.tensors[node.inputs[0]].dtype != INT8:
        raise _error(node, "the C backend implements the int8 MEAN")
    shape = _shape(graph, node.inputs[0])
    strides = contiguous_strides(shape)
    kept = [k for k in range(len(shape)) if k not in p.axes]
    red = [k for k in range(len(shape)) if k in p.axes]
    kd, (ks,) = merge_box([shape[k] for k in kept], [strides[k] for k in kept]) if kept else ([1], [[0]])
    rd, (rs,) = merge_box([shape[k] for k in red], [strides[k] for k in red]) if red else ([1], [[0]])
    kept_rank, red_rank = (len(kd) if kept else 0), len(rd)
    kd, ks = _box_fields(node, kd, ks)
    rd, rs = _box_fields(node, rd, rs)
    step.data.append(c_struct("intq_mean_params", sym, [
        ("kept_rank", kept_rank), ("kept_dims", kd), ("kept_strides", ks),
        ("red_rank", red_rank), ("red_dims", rd), ("red_strides", rs),
        ("input_offset", p.input_offset), ("mult", p.multiplier), ("shift", p.shift), ("out_zp", p.zero_point)]))
    step.blocks = ("intq_mean",)
    step.call = f"intq_mean(&{sym}, {{in0}}, {{out0}});"


def _softmax(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels.softmax import SoftmaxParams

    kernel, p = _prepare(node, graph, target)
    _expect(node, p, SoftmaxParams)
    rows = int(np.prod(_shape(graph, node.inputs[0]))) // p.depth
    step.data += [c_array("int32_t", f"{sym}_exp_q0", _int32(node, p.exp_q0, "exp table")),
                  c_array("int32_t", f"{sym}_exp_q12", _int32(node, p.exp_q12, "exp table")),
                  c_struct("intq_softmax_params", sym, [("rows", rows), ("depth", p.depth), ("radius", p.radius),
                           ("exp_q0", f"{sym}_exp_q0"), ("exp_q12", f"{sym}_exp_q12")])]
    step.blocks = ("intq_softmax",)
    step.call = f"intq_softmax(&{sym}, {{in0}}, {{out0}})"
    step.status = True


def _copy_struct(node: Node, sym: str, dims, ss, ds, src_base: int = 0, dst_base: int = 0) -> str:
    dims, (ss, ds) = merge_box(dims, ss, ds)
    rank = len(dims)
    dims, ss, ds = _box_fields(node, dims, ss, ds)
    return c_struct("intq_copy_params", sym, [("rank", rank), ("dims", dims), ("ss", ss), ("ds", ds),
                                              ("src_base", src_base), ("dst_base", dst_base)])


def _data_movement(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    kernel, p = _prepare(node, graph, target)  # the kernel checks the contract (dtypes, shapes, runtime rules)
    for t in (*[i for i in node.inputs[:1]], *node.outputs):
        if graph.tensors[t].dtype != INT8:
            raise _error(node, f"{t!r} is {graph.tensors[t].dtype.name}; the C backend moves int8 data")
    x_shape, y_shape = _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0])
    op = node.op_type
    if op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        step.view = True
        return
    if op == "TRANSPOSE":
        xs = contiguous_strides(x_shape)
        step.data.append(_copy_struct(node, sym, y_shape, [xs[a] for a in p.perm], contiguous_strides(y_shape)))
        step.blocks, step.call = ("intq_copy",), f"intq_copy(&{sym}, {{in0}}, {{out0}});"
    elif op in ("PAD", "PADV2"):
        if p.value is None:
            raise _error(node, "a non-constant pad value is not implemented in C")
        ys = contiguous_strides(y_shape)
        base = sum(a * s for (a, _), s in zip(p.widths, ys))
        n = int(np.prod(y_shape))
        step.data.append(_copy_struct(node, sym, x_shape, contiguous_strides(x_shape), ys, 0, base))
        step.blocks = ("intq_copy", "intq_fill")
        step.call = f"intq_fill({{out0}}, {n}, (int8_t){int(p.value)}); intq_copy(&{sym}, {{in0}}, {{out0}});"
    elif op == "CONCATENATION":
        if any(t is not None for t in p.tables):
            raise _error(node, "rescaling uint8 inputs is not implemented in C")
        ys = contiguous_strides(y_shape)
        calls, at = [], 0
        for i, name in enumerate(node.inputs):
            shape = _shape(graph, name)
            step.data.append(_copy_struct(node, f"{sym}_{i}", shape, contiguous_strides(shape), ys, 0,
                                          at * ys[p.axis] if y_shape else 0))
            calls.append(f"intq_copy(&{sym}_{i}, {{in{i}}}, {{out0}});")
            at += shape[p.axis]
        step.blocks, step.call = ("intq_copy",), " ".join(calls)
    else:
        raise _error(node, "not implemented in the C backend")


LOWERINGS = {
    "CONV_2D": _conv, "FULLY_CONNECTED": _conv, "DEPTHWISE_CONV_2D": _depthwise,
    "ADD": _binary, "SUB": _binary, "MUL": _binary, "MAXIMUM": _binary, "MINIMUM": _binary,
    "MAX_POOL_2D": _pool, "AVERAGE_POOL_2D": _pool, "MEAN": _mean, "SOFTMAX": _softmax,
    "RESHAPE": _data_movement, "SQUEEZE": _data_movement, "EXPAND_DIMS": _data_movement,
    "TRANSPOSE": _data_movement, "PAD": _data_movement, "PADV2": _data_movement, "CONCATENATION": _data_movement,
    **{op: _unary_table for op in UNARY_TABLE_OPS},
}


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
            _, p = _prepare(node, graph, target)
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
    fn = LOWERINGS.get(node.op_type)
    if fn is None:
        raise _error(node, f"the C backend does not implement {node.op_type}; it implements "
                           f"{', '.join(sorted(LOWERINGS))}")
    step = Step(node)
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
