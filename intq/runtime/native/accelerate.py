"""Which prepared integer nodes the native library runs, and their bound native ``run``.

:func:`native_run` is asked by the execution plan for every integer node once, after the kernel's
``prepare``: it returns a callable computing exactly the kernel's ``run`` on the node's inputs, or
None (the plan then binds the kernel's own ``run``). It accepts a node when its prepared
parameters are one of the int8 variants ``native.c`` implements (exact types, never subclasses)
and every requantization is the fixed-point double rounding (``Requant.DOUBLE``: ties away from
zero; ``Requant.DOUBLE_HALF_UP``: ties up) to int8:

* CONV_2D (:class:`~intq.kernels.conv_2d.Conv2DParams`, grouped included: the block-diagonal
  matrix of :func:`~intq.kernels._conv_common.conv_matrix`) and FULLY_CONNECTED
  (:class:`~intq.kernels.fully_connected.FullyConnectedParams`, as the 1x1 convolution of its
  rows), no left shift (every real multiplier below 1), when the library's matrix path was measured
  faster than the kernels' exact GEMM here, or is forced by ``INTQ_NATIVE_PATH``
  (:attr:`intq.runtime.native.Native.gemm`, :mod:`intq.runtime.native.measure`); the weights packed
  for that path (int16 for AVX2's VPMADDWD);
* DEPTHWISE_CONV_2D with depth multiplier 1 (:class:`~intq.kernels.depthwise_conv_2d.DepthwiseConv2DParams`;
  ``litert-opt``'s two channel groups become a per-channel tie rule), no left shift;
* MUL (:class:`~intq.kernels.mul.MulParams`, the reference kernel: per-tensor multiplier, left
  shifts included) and ADD / SUB (:class:`~intq.kernels.add.AddParams`: the operand tables), each
  operand the output's shape, one row [1, C] or one value;
* MAX_POOL_2D (:class:`~intq.kernels._pool_common.PoolWindow`, the reference kernel) and int8
  TRANSPOSE and PAD / PADV2 (constant value) of rank <= 4 (data movement: the same bytes);
* the table ops (HARD_SWISH, LEAKY_RELU, LOGISTIC, TANH, RELU, RELU6, RELU_N1_TO_1): the kernel's
  own 256-entry int8 table, looked up natively;
* PRELU (:class:`~intq.kernels.prelu.PreluParams`) with a constant slope of one value or one per
  channel (the last axis): each channel's function of x tabulated at plan time from the kernel's own
  run on all 256 int8 values, looked up natively (one table, or one table per channel);
* SOFTMAX over rows of two values (:class:`~intq.kernels.softmax.SoftmaxParams`): the kernel's own
  run tabulated on all 65536 rows at plan time, looked up with numpy (no C library needed).

The rest (XNNPACK's and onnxruntime's float32 requantization, TPU-MLIR's multiplier/rshift, the
optimized targets' ADD and MUL, 16x8, other operators) keep the kernels' own run paths.

:func:`programs` groups the plan's consecutive native steps for its hot path: one C call per run
of steps (:class:`Program`), their outputs views of one fresh buffer per run.

Prepared here, once: the packed weights, the per-channel requantization arrays (padded to 32
channels), the C parameter structure and its scratch buffers. Not re-entrant (one run at a time
per plan), as the kernels' own im2col buffers.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import partial

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Node
from intq.runtime import native

_PAD = 32  # per-channel arrays are padded to a multiple of 32 (the widest vector read in native.c)
_MB = 32  # output pixels per block (native.c MB)
#: the int8 dtype object: the bound calls test ``x.dtype is _INT8`` (an equal dtype that is another
#: object takes the checked path, which converts nothing)
_INT8 = np.dtype(np.int8)


def _padded(values, n: int, dtype=np.int32) -> np.ndarray:
    out = np.zeros(-(-max(n, 1) // _PAD) * _PAD, dtype)
    out[:n] = np.broadcast_to(np.asarray(values), (n,))
    return out


def _requant_arrays(parts, channels: int):
    """``(mult, exponent, away, zp, lo, hi)`` from ``parts`` = [(requantizer, n channels), ...] in
    channel order, or None if any part is not a fixed-point double rounding without left shift to
    int8, or the parts disagree on the output side."""
    from intq.kernels.requantize import DoubleRounding, DoubleRoundingHalfUp

    mult, expo, away = [], [], []
    outside = None
    for r, n in parts:
        if type(r) not in (DoubleRounding, DoubleRoundingHalfUp) or r.any_left or r.out_dtype != np.int8:
            return None
        right = np.broadcast_to(r.right, (n,))
        if int(right.max(initial=0)) > 31:
            return None
        side = (r.zero_point, r.act_min, r.act_max)
        if outside is not None and side != outside:
            return None
        outside = side
        mult.append(np.broadcast_to(r.multiplier, (n,)))
        expo.append(right)
        away.append(np.full(n, r.away))
    m, e, a = (np.concatenate(v) for v in (mult, expo, away))
    if m.size != channels or int(m.min(initial=0)) < 0 or int(m.max(initial=0)) >= 2**31:
        return None
    return _padded(m, channels), _padded(e, channels), _padded(a, channels), *outside


def _int32(values) -> np.ndarray | None:
    v = np.asarray(values, dtype=np.int64)
    if v.size and (int(v.min()) < -(2**31) or int(v.max()) > 2**31 - 1):
        return None
    return v


class _Bound:
    """A native call bound to its C parameter structure and the arrays it points into (kept alive)."""

    def __init__(self, fn, params: ctypes.Structure, keep: list, in_size: int, out_shape: tuple[int, ...]):
        self.fn = fn
        self.params = params
        self.address = ctypes.addressof(params)
        self.keep = keep
        self.in_size = in_size
        self.out_shape = out_shape

    fn_obj = None  # the entry point taking the array objects (native.Native.objects), when usable

    def __call__(self, x, *_constants):
        if type(x) is not np.ndarray or x.dtype is not _INT8 or not x.flags.c_contiguous or x.size != self.in_size:
            if np.asarray(x).size != self.in_size:
                raise ValueError(f"native kernel: input of {np.asarray(x).size} elements, prepared for {self.in_size}")
            x = np.ascontiguousarray(x, dtype=np.int8)
        y = np.empty(self.out_shape, _INT8)
        if self.fn_obj is not None:
            self.fn_obj(self.address, x, y)
        else:
            self.fn(self.address, x.ctypes.data, y.ctypes.data)
        return (y,)


def _rq_struct(offset: np.ndarray, arrays, keep: list) -> native.Requant:
    mult, expo, away, zp, lo, hi = arrays
    keep += [offset, mult, expo, away]
    return native.Requant(offset.ctypes.data, mult.ctypes.data, expo.ctypes.data, away.ctypes.data, zp, lo, hi)


def _gemm_operands(lib, matrix: np.ndarray, offset: np.ndarray, keep: list, path: str):
    """Packed weights (and the AVX2 path's int16 ones) and the two offsets (signed path; VNNI's
    x + 128 path) of ``matrix`` [N, K], or None when an offset leaves int32."""
    n, k = matrix.shape
    packed = np.empty(int(lib.intq_packed_bytes(k, n)), np.int8)
    w = np.ascontiguousarray(matrix, dtype=np.int8)
    lib.intq_pack(k, n, w.ctypes.data, packed.ctypes.data)
    sums = matrix.astype(np.int64).sum(axis=1)
    off = _int32(offset)
    off_u8 = _int32(offset - 128 * sums)  # sum((x + 128) w) = sum(x w) + 128 sum(w)
    if off is None or off_u8 is None:
        return None
    keep.append(packed)
    packed16 = None
    if path == "avx2":  # VPMADDWD multiplies int16: its own packing (native.c intq_pack16)
        packed16 = np.empty(int(lib.intq_packed16_bytes(k, n)) // 2, np.int16)
        lib.intq_pack16(k, n, w.ctypes.data, packed16.ctypes.data)
        keep.append(packed16)
    return packed, packed16, _padded(off, n), _padded(off_u8, n)


def _conv_struct(lib, matrix, offset, arrays, geometry: dict, zx: int, keep: list,
                 path: str) -> native.ConvParams | None:
    ops = _gemm_operands(lib, matrix, offset, keep, path)
    if ops is None:
        return None
    packed, packed16, off, off_u8 = ops
    n, k = matrix.shape
    kp = -(-k // 64) * 64
    a = np.zeros((_MB, kp), np.int8)
    c = np.zeros((_MB, 32), np.int32)
    a16 = np.zeros((_MB, kp), np.int16) if packed16 is not None else None
    keep += [off_u8, a, c] + ([a16] if a16 is not None else [])
    return native.ConvParams(**geometry, k=k, kp=kp, in_zp=zx, w=packed.ctypes.data, rq=_rq_struct(off, arrays, keep),
                             offset_u8=off_u8.ctypes.data, a=a.ctypes.data, c=c.ctypes.data,
                             w16=None if packed16 is None else packed16.ctypes.data,
                             a16=None if a16 is None else a16.ctypes.data)


def _conv_2d(lib, node: Node, graph: Graph, p, path: str) -> _Bound | None:
    from intq.kernels._conv_common import conv_matrix

    g = p.im2col
    n, oh, ow, c_out = p.out_shape
    arrays = _requant_arrays([(p.requant, c_out)], c_out)
    if arrays is None:
        return None
    w = graph.tensors[node.inputs[1]].data
    matrix, _ = conv_matrix(None, w, g.c)  # checked by prepare: no error path is taken
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    geometry = dict(batch=g.n, in_h=g.padded.h, in_w=g.padded.w, in_c=g.c, out_h=oh, out_w=ow, out_c=c_out,
                    kh=g.kh, kw=g.kw, stride_h=g.stride_h, stride_w=g.stride_w, dil_h=g.dilation_h,
                    dil_w=g.dilation_w, pad_top=g.padded.top, pad_left=g.padded.left)
    if (g.kh, g.kw, g.stride_h, g.stride_w, g.padded.top, g.padded.left, g.padded.h, g.padded.w) == (
            1, 1, 1, 1, 0, 0, oh, ow):
        # a 1x1 convolution reading every pixel once: output pixel i reads input pixel i, so the
        # whole batch is one row of pixels (the same products; native.c's direct path takes any
        # 16 consecutive pixels as one tile)
        geometry.update(batch=1, in_h=1, in_w=g.n * oh * ow, out_h=1, out_w=g.n * oh * ow)
    keep: list = []
    params = _conv_struct(lib, matrix, p.offset, arrays, geometry, zx, keep, path)
    if params is None:
        return None
    span = g.kw * g.c
    k4, pixels = g.kh * -(-span // 4) * 4, g.n * oh * ow
    if matrix.shape[1] == g.kh * span and _direct_pays(k4, c_out, pixels):
        # the weights per tap row: native.c's AMX direct path (taken where its geometry fits)
        rows = np.empty(int(lib.intq_packed_rows_bytes(g.kh, span, c_out)), np.int8)
        lib.intq_pack_rows(g.kh, span, c_out, np.ascontiguousarray(matrix, dtype=np.int8).ctypes.data, rows.ctypes.data)
        keep.append(rows)
        params.w_rows, params.span4 = rows.ctypes.data, -(-span // 4) * 4
    return _Bound(lib.intq_conv, params, keep, g.n * g.padded.h * g.padded.w * g.c, tuple(p.out_shape))


#: where native.c's AMX direct convolution beats im2col (measured per layer on MobileNetV2 and
#: MobileNetV3-small, minimum of 100 runs): K (per tap row rounded to 4, times kh) at most 160,
#: at least 128 output pixels and at most 256 output channels (it loads one input tile per 16
#: output channels: deep K, many channels or few pixels favour im2col's 32x32 blocks, e.g. 7x7x960
#: -> 160 26 us direct against 17 us). Tests set ``(10**9, 0, 10**9)`` (always where it fits).
DIRECT_LIMITS = (160, 128, 256)


def _direct_pays(k4: int, channels: int, pixels: int) -> bool:
    max_k, min_pixels, max_channels = DIRECT_LIMITS
    return k4 <= max_k and pixels >= min_pixels and channels <= max_channels


def _fully_connected(lib, node: Node, graph: Graph, p, path: str) -> _Bound | None:
    w = graph.tensors[node.inputs[1]].data  # [N, K]
    n_out, k = w.shape
    out_size = int(np.prod(p.out_shape))
    if out_size % n_out:
        return None
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    return _matrix(lib, w, p.offset, p.requant, out_size // n_out, zx, path, tuple(p.out_shape))


def _matrix(lib, w: np.ndarray, offset, requant, rows: int, zx: int, path: str, out_shape) -> _Bound | None:
    """``intq_conv`` as the product of ``rows`` input rows by ``w`` [N, K] (a 1x1 convolution of a
    rows x 1 image): y = requant(x @ w.T + offset), or None where native.c does not take it."""
    n_out, k = w.shape
    arrays = _requant_arrays([(requant, n_out)], n_out)
    if arrays is None:
        return None
    geometry = dict(batch=1, in_h=rows, in_w=1, in_c=k, out_h=rows, out_w=1, out_c=n_out, kh=1, kw=1, stride_h=1,
                    stride_w=1, dil_h=1, dil_w=1, pad_top=0, pad_left=0)
    keep: list = []
    params = _conv_struct(lib, w, np.asarray(offset, dtype=np.int64), arrays, geometry, zx, keep, path)
    if params is None:
        return None
    return _Bound(lib.intq_conv, params, keep, rows * k, out_shape)


def bind_matrix(nat: native.Native, w: np.ndarray, offset, requant, rows: int, zx: int) -> _Bound:
    """The native product of ``rows`` int8 rows by ``w`` [N, K] int8 on ``nat``'s path, requantized
    by ``requant`` (a per-channel fixed-point double rounding) after ``+ offset``: FULLY_CONNECTED's
    call, for :mod:`intq.runtime.native.measure`."""
    bound = _matrix(nat.lib, w, offset, requant, rows, zx, nat.path, (rows, w.shape[0]))
    assert bound is not None, "a double-rounding requantizer to int8 without left shift binds"
    return bound


def _depthwise(lib, node: Node, graph: Graph, p) -> _Bound | None:
    t = p.taps
    taps, c, mult = t.weights.shape
    if mult != 1 or t.weights.dtype != np.int32 or int(np.abs(t.weights).max(initial=0)) > 2**15 - 1:
        return None  # native.c's depthwise multiplies int16 pairs
    parts = [(p.requant, p.split)] + ([(p.tail, c - p.split)] if p.tail is not None else [])
    arrays = _requant_arrays(parts, c)
    if arrays is None:
        return None
    n, oh, ow, _ = p.out_shape
    kh, kw = graph.tensors[node.inputs[1]].data.shape[1:3]
    cp = -(-c // 16) * 16
    w = np.zeros((taps, cp), np.int32)
    w[:, :c] = t.weights[:, :, 0] & 0xFFFF  # the int16 bits, high half zero (native.c intq_depthwise)
    offset = _padded(t.offset, c)
    acc = np.zeros(cp, np.int32)
    # prefix[i, j] = sum of w over the taps [0, i) x [0, j) (native.c: a clipped window's offset)
    prefix = np.zeros((kh + 1, kw + 1, cp), np.int64)
    prefix[1:, 1:, :c] = t.weights[:, :, 0].astype(np.int64).reshape(kh, kw, c).cumsum(0).cumsum(1)
    prefix = np.ascontiguousarray(prefix.astype(np.int32))  # |sum| <= taps * 2^15: fits
    keep = [w, acc, prefix]
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    dil_h = int(t.tap_rows[kw]) if kh > 1 else 1  # tap rows are i * dilation_h (prepare_taps)
    dil_w = int(t.tap_cols[1]) if kw > 1 else 1
    padded, pad_h, pad_w = _border_copy(t.padded.h, t.padded.w, oh, ow, kh, kw, t.stride_h, t.stride_w, dil_h, dil_w,
                                        t.padded.top, t.padded.left, c)
    if padded is not None:
        keep.append(padded)
    params = native.DepthwiseParams(
        batch=n, in_h=t.padded.h, in_w=t.padded.w, c=c, out_h=oh, out_w=ow, kh=kh, kw=kw, stride_h=t.stride_h,
        stride_w=t.stride_w, dil_h=dil_h, dil_w=dil_w, pad_top=t.padded.top, pad_left=t.padded.left, in_zp=zx,
        w=w.ctypes.data, rq=_rq_struct(offset, arrays, keep), acc=acc.ctypes.data, prefix=prefix.ctypes.data,
        padded=None if padded is None else padded.ctypes.data, pad_h=pad_h, pad_w=pad_w)
    return _Bound(lib.intq_depthwise, params, keep, n * t.padded.h * t.padded.w * c, tuple(p.out_shape))


#: a depthwise map with clipped windows runs from a copy of each image inside a border of Z_x
#: (native.c dw_from_padded: every pixel on all its taps, four at a time) when that is at most this
#: many times the multiply-adds of the in-image taps alone (the clipped windows' path, about twice
#: the cost per tap). Measured: 7x7 and 14x14 maps with 5x5 taps (ratio 1.46, 1.20) faster bordered,
#: 2x96 and 3x96 maps with 5x5 taps (2.5, 1.67) faster clipped. Tests set 0 (never) and 1e9 (always).
PADDED_MAX_WORK_RATIO = 1.5
_PADDED_MAX_BYTES = 4 << 20


def _border_copy(in_h, in_w, out_h, out_w, kh, kw, sh, sw, dh, dw, top, left, c):
    """``(scratch or None, pad_h, pad_w)``: the bordered image buffer native.c's depthwise uses
    when it saves work (:data:`PADDED_MAX_WORK_RATIO`)."""
    def taps_inside(out, stride, pad, dil, k, size):  # per output position: its taps inside the image
        return [sum(1 for i in range(k) if 0 <= o * stride - pad + i * dil < size) for o in range(out)]

    rows, cols = taps_inside(out_h, sh, top, dh, kh, in_h), taps_inside(out_w, sw, left, dw, kw, in_w)
    clipped = any(r < kh for r in rows) or any(q < kw for q in cols)
    pad_h = max(top + in_h, (out_h - 1) * sh + (kh - 1) * dh + 1)
    pad_w = max(left + in_w, (out_w - 1) * sw + (kw - 1) * dw + 1)
    if (not clipped or out_h * out_w * kh * kw > PADDED_MAX_WORK_RATIO * sum(rows) * sum(cols)
            or pad_h * pad_w * c > _PADDED_MAX_BYTES):
        return None, 0, 0
    return np.zeros(pad_h * pad_w * c, np.int8), pad_h, pad_w


class _BoundBinary:
    """A native two-operand call (MUL, ADD, SUB) bound to its parameter structure."""

    def __init__(self, fn, params: ctypes.Structure, keep: list, sizes: tuple[int, int], out_shape: tuple[int, ...]):
        self.fn = fn
        self.params = params
        self.address = ctypes.addressof(params)
        self.keep = keep
        self.sizes = sizes
        self.out_shape = out_shape

    fn_obj = None  # as _Bound.fn_obj

    def __call__(self, a, b):
        ops = []
        for v, size in zip((a, b), self.sizes):
            if type(v) is not np.ndarray or v.dtype is not _INT8 or not v.flags.c_contiguous or v.size != size:
                if np.asarray(v).size != size:
                    raise ValueError(f"native kernel: operand of {np.asarray(v).size} elements, prepared for {size}")
                v = np.ascontiguousarray(v, dtype=np.int8)
            ops.append(v)
        y = np.empty(self.out_shape, _INT8)
        if self.fn_obj is not None:
            self.fn_obj(self.address, ops[0], ops[1], y)
        else:
            self.fn(self.address, ops[0].ctypes.data, ops[1].ctypes.data, y.ctypes.data)
        return (y,)


def _scalar_requant(r):
    """``(mult, left, right, away)`` of a per-tensor fixed-point double rounding to int8, or None."""
    from intq.kernels.requantize import DoubleRounding, DoubleRoundingHalfUp

    if type(r) not in (DoubleRounding, DoubleRoundingHalfUp) or r.out_dtype != np.int8 or r.multiplier.size != 1:
        return None
    mult, left, right = int(r.multiplier.reshape(-1)[0]), int(r.left.reshape(-1)[0]), int(r.right.reshape(-1)[0])
    if not (0 <= mult < 2**31 and 0 <= left <= 31 and 0 <= right <= 31):
        return None
    return mult, left, right, int(r.away)


def _rows_of(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, int] | None:
    """An operand of ``shape`` as ``(rows, cols)`` of the output ``out`` ([rows, C], one row [1, C]
    or one value [1, 1]: what intq.kernels.mul's fused loop takes), or None."""
    size = int(np.prod(shape, dtype=np.int64))
    if tuple(shape) == tuple(out):
        return size // out[-1], out[-1]
    if size == 1:
        return 1, 1
    if size == out[-1] and shape and shape[-1] == size:
        return 1, size
    return None


def _binary_layout(node: Node, graph: Graph):
    """``(out shape, rows/cols of a, rows/cols of b)`` for a binary op the native loop takes: static
    shapes that broadcast to the non-empty output, each operand a full tensor, a row or one value
    (:func:`_rows_of`); None otherwise."""
    shapes = [graph.tensors[t].shape for t in node.inputs[:2]]
    out = graph.tensors[node.outputs[0]].shape
    if not out or 0 in out or any(s is None for s in shapes) or tuple(np.broadcast_shapes(*shapes)) != tuple(out):
        return None
    ra, rb = _rows_of(shapes[0], out), _rows_of(shapes[1], out)
    return None if ra is None or rb is None else (out, ra, rb)


def _mul(lib, node: Node, graph: Graph, p) -> _BoundBinary | None:
    from intq.kernels.mul import MulParams

    if type(p) is not MulParams:
        return None
    rq, layout = _scalar_requant(p.output), _binary_layout(node, graph)
    if rq is None or layout is None:
        return None
    out, ra, rb = layout
    mult, left, right, away = rq
    r = p.output
    params = native.BinaryParams(
        rows=int(np.prod(out[:-1], dtype=np.int64)), cols=out[-1], a_rows=ra[0], a_cols=ra[1], b_rows=rb[0],
        b_cols=rb[1], za=p.zero_point_a, zb=p.zero_point_b, table_a=None, table_b=None, mult=mult, left=left,
        right=right, away=away, out_zp=r.zero_point, act_min=r.act_min, act_max=r.act_max)
    return _BoundBinary(lib.intq_mul, params, [], (ra[0] * ra[1], rb[0] * rb[1]), tuple(out))


def _add(lib, node: Node, graph: Graph, p) -> _BoundBinary | None:
    from intq.kernels.add import AddParams

    if type(p) is not AddParams:
        return None
    rq, layout = _scalar_requant(p.output), _binary_layout(node, graph)
    if rq is None or rq[1] != 0 or layout is None:
        return None
    out, ra, rb = layout
    mult, _, right, away = rq
    r = p.output
    ta, tb = (np.ascontiguousarray(t, dtype=np.int32) for t in (p.table_a, p.table_b))
    params = native.BinaryParams(
        rows=int(np.prod(out[:-1], dtype=np.int64)), cols=out[-1], a_rows=ra[0], a_cols=ra[1], b_rows=rb[0],
        b_cols=rb[1], za=0, zb=0, table_a=ta.ctypes.data, table_b=tb.ctypes.data, mult=mult, left=0, right=right,
        away=away, out_zp=r.zero_point, act_min=r.act_min, act_max=r.act_max)
    return _BoundBinary(lib.intq_add, params, [ta, tb], (ra[0] * ra[1], rb[0] * rb[1]), tuple(out))


class _BoundTable:
    """A native 256-entry table lookup (``y = table[uint8(x)]``) bound to its table."""

    def __init__(self, lib, table: np.ndarray, shape: tuple[int, ...]):
        self.fn, self.fn_obj = lib.intq_lut, None
        self.table = table
        self.address = table.ctypes.data
        self.size = int(np.prod(shape, dtype=np.int64))
        self.shape = shape

    def __call__(self, x, *_constants):
        if type(x) is not np.ndarray or x.dtype is not _INT8 or not x.flags.c_contiguous or x.size != self.size:
            if np.asarray(x).size != self.size:
                raise ValueError(f"native kernel: input of {np.asarray(x).size} elements, prepared for {self.size}")
            x = np.ascontiguousarray(x, dtype=np.int8)
        y = np.empty(self.shape, _INT8)
        if self.fn_obj is not None:
            self.fn_obj(self.address, self.size, x, y)
        else:
            self.fn(self.address, self.size, x.ctypes.data, y.ctypes.data)
        return (y,)


def _table_classes() -> tuple[type, ...]:
    """The prepared variants whose ``run`` is exactly ``table[uint8(x)]`` (int8 [256] ``table``):
    their modules' ``run`` is ``lookup(p.table, x)`` or ``p.table[x.view(np.uint8)]``."""
    from intq.kernels import hard_swish, leaky_relu
    from intq.kernels._elementwise_common import ReluParams
    from intq.kernels._fixedpoint_lut import LutParams

    return hard_swish.HardSwishParams, leaky_relu.LeakyReluParams, ReluParams, LutParams


#: ops with one int8 data input (their other inputs are int32 constants: perm, paddings, PADV2's value,
#: MEAN's axes)
_ONE_INPUT = frozenset({"MAX_POOL_2D", "TRANSPOSE", "PAD", "PADV2", "MEAN"})

#: ops whose int8 kernel may be a table (:func:`_table_classes`)
_TABLE_OPS = frozenset({"HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1"})


def _table(lib, node: Node, graph: Graph, p) -> _BoundTable | None:
    if type(p) not in _table_classes():
        return None
    table = getattr(p, "table", None)
    shape = graph.tensors[node.outputs[0]].shape
    if (not isinstance(table, np.ndarray) or table.dtype != np.int8 or table.shape != (256,) or shape is None
            or graph.tensors[node.inputs[0]].shape != shape):
        return None
    return _BoundTable(lib, np.ascontiguousarray(table), tuple(shape))


class _BoundChannelTables:
    """A native lookup with one 256-entry table per channel (``y[r, c] = tables[c, uint8(x[r, c])]``)."""

    def __init__(self, lib, tables: np.ndarray, shape: tuple[int, ...]):
        self.fn, self.fn_obj = lib.intq_lut_channels, None
        self.tables = tables  # int8 [C, 256]
        self.address = tables.ctypes.data
        self.size = int(np.prod(shape, dtype=np.int64))
        self.cols = int(shape[-1])
        self.rows = self.size // self.cols
        self.shape = shape

    def __call__(self, x, *_constants):
        if type(x) is not np.ndarray or x.dtype is not _INT8 or not x.flags.c_contiguous or x.size != self.size:
            if np.asarray(x).size != self.size:
                raise ValueError(f"native kernel: input of {np.asarray(x).size} elements, prepared for {self.size}")
            x = np.ascontiguousarray(x, dtype=np.int8)
        y = np.empty(self.shape, _INT8)
        if self.fn_obj is not None:
            self.fn_obj(self.address, self.rows, self.cols, x, y)
        else:
            self.fn(self.address, self.rows, self.cols, x.ctypes.data, y.ctypes.data)
        return (y,)


def _prelu(lib, node: Node, graph: Graph, p) -> _BoundTable | _BoundChannelTables | None:
    """PRELU of the reference kernel with a constant slope that is one value or one per channel (a
    [..., C] tensor whose other axes are 1): the kernel's ``run`` is then, per channel, a function of
    x alone, tabulated here on all 256 values (index: the uint8 bits of x)."""
    from intq.kernels import prelu

    x, alpha = graph.tensors[node.inputs[0]], graph.tensors[node.inputs[1]]
    shape = graph.tensors[node.outputs[0]].shape
    if (type(p) is not prelu.PreluParams or not alpha.is_constant or alpha.data is None or not shape or 0 in shape
            or x.shape is None or tuple(x.shape) != tuple(shape)):
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
        return _BoundTable(lib, np.ascontiguousarray(got[:, 0]), tuple(shape))
    return _BoundChannelTables(lib, np.ascontiguousarray(got.T), tuple(shape))


class _PairTable:
    """SOFTMAX over rows of two int8 values as one lookup: ``table[(uint8(a) << 8) | uint8(b)]`` is
    the kernel's own output row for the input row ``(a, b)``, evaluated at plan time on all 65536
    rows (the reference kernel computes each row from that row alone). numpy only: no C needed."""

    def __init__(self, table: np.ndarray, shape: tuple[int, ...]):
        self.table = table  # int8 [65536, 2]
        self.shape = shape

    def __call__(self, x, *_constants):
        if type(x) is np.ndarray and x.size == 2 and x.dtype == np.int8:  # one row (a batch-1 head): no array math
            a, b = x.reshape(2).view(np.uint8).tolist()
            return (self.table[(a << 8) | b].reshape(self.shape),)
        bits = np.ascontiguousarray(x, dtype=np.int8).reshape(-1, 2).view(np.uint8)
        index = (bits[:, 0].astype(np.intp) << 8) | bits[:, 1]
        return (self.table[index].reshape(self.shape),)


def _softmax_pairs(node: Node, graph: Graph, p) -> _PairTable | None:
    from intq.kernels import softmax

    shape = graph.tensors[node.outputs[0]].shape
    if type(p) is not softmax.SoftmaxParams or p.depth != 2 or not shape or graph.tensors[node.inputs[0]].shape != shape:
        return None
    bits = np.arange(65536, dtype=np.uint16)
    rows = np.stack([(bits >> 8).astype(np.uint8), (bits & 0xFF).astype(np.uint8)], axis=1).view(np.int8)
    try:
        table = np.ascontiguousarray(softmax.run(p, rows)[0], dtype=np.int8)
    except IntqError:  # a row the runtime refuses: the kernel's run reports it per input
        return None
    return _PairTable(table, tuple(shape))


def _max_pool(lib, node: Node, graph: Graph, p) -> _Bound | None:
    from intq.kernels._pool_common import PoolWindow

    if type(p) is not PoolWindow:
        return None
    g = p.geometry
    shape = graph.tensors[node.inputs[0]].shape
    out = graph.tensors[node.outputs[0]].shape
    if shape is None or out is None or len(shape) != 4 or tuple(out) != (shape[0], g.out_h, g.out_w, shape[3]):
        return None
    params = native.PoolParams(batch=shape[0], in_h=g.in_h, in_w=g.in_w, c=shape[3], out_h=g.out_h, out_w=g.out_w,
                               filter_h=g.filter_h, filter_w=g.filter_w, stride_h=g.stride_h, stride_w=g.stride_w,
                               pad_h=g.pad_h, pad_w=g.pad_w, act_min=p.act_min, act_max=p.act_max)
    return _Bound(lib.intq_max_pool, params, [], int(np.prod(shape)), tuple(out))


def _transpose(lib, node: Node, graph: Graph, p) -> _Bound | None:
    from intq.kernels.transpose import TransposeParams

    shape = graph.tensors[node.inputs[0]].shape
    out = graph.tensors[node.outputs[0]].shape
    if type(p) is not TransposeParams or shape is None or out is None or not 1 <= len(shape) <= 4 or 0 in shape:
        return None
    perm = tuple(p.perm)
    if tuple(out) != tuple(shape[k] for k in perm):
        return None
    pad = 4 - len(shape)
    strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
    params = native.TransposeParams((ctypes.c_int64 * 4)(*([1] * pad + list(out))),
                                    (ctypes.c_int64 * 4)(*([0] * pad + [strides[k] for k in perm])))
    return _Bound(lib.intq_transpose, params, [], int(np.prod(shape)), tuple(out))


def _pad(lib, node: Node, graph: Graph, p) -> _Bound | None:
    from intq.kernels.pad import PadParams

    shape = graph.tensors[node.inputs[0]].shape
    out = graph.tensors[node.outputs[0]].shape
    if (type(p) is not PadParams or p.value is None or not -128 <= int(p.value) <= 127 or shape is None
            or out is None or not 1 <= len(shape) <= 4 or 0 in shape):
        return None
    if tuple(out) != tuple(d + a + b for d, (a, b) in zip(shape, p.widths)):
        return None
    pad = 4 - len(shape)
    c4 = ctypes.c_int64 * 4
    params = native.PadParams(c4(*([1] * pad + list(shape))), c4(*([1] * pad + list(out))),
                              c4(*([0] * pad + [a for a, _ in p.widths])), int(p.value))
    return _Bound(lib.intq_pad, params, [], int(np.prod(shape)), tuple(out))


def _mean(lib, node: Node, graph: Graph, p) -> _Bound | None:
    """MEAN over axes {1, 2} of a rank-4 tensor on the reference kernel (its ``run``'s compiled
    spatial mean), the multiplier without left shift."""
    from intq.kernels._pool_common import QuantizedSumParams

    shape = graph.tensors[node.inputs[0]].shape
    if (type(p) is not QuantizedSumParams or p.bytes_as_uint8 or sorted(p.axes) != [1, 2] or shape is None or len(shape) != 4
            or 0 in shape or p.shift > 0 or -p.shift > 31 or not 0 <= p.multiplier < 2**31
            or 256 * p.count >= 2**31 or int(np.prod(p.out_shape)) != shape[0] * shape[3]):
        return None  # 256 count < 2^31: every partial sum from -Z_in count fits int32 in native.c
    acc = np.zeros(shape[3], np.int32)
    params = native.MeanParams(batch=shape[0], pixels=shape[1] * shape[2], c=shape[3], offset=int(p.input_offset),
                               mult=int(p.multiplier), right=-int(p.shift), out_zp=int(p.zero_point),
                               acc=acc.ctypes.data)
    return _Bound(lib.intq_mean, params, [acc], int(np.prod(shape)), tuple(p.out_shape))


class _BoundWithTable:
    """A native convolution (CONV_2D, FULLY_CONNECTED, DEPTHWISE_CONV_2D) whose output a table op
    reads next: one C call computes the convolution's output ``y`` and ``z = table[uint8(y)]``
    from each finished block while it is in cache. Returns ``(y,)`` and keeps ``(y, z)`` for the
    table step (:class:`_TableAfter`), which returns ``z`` when given that same ``y`` object."""

    def __init__(self, conv: _Bound, fused_fn, table: _BoundTable):
        self.conv, self.fused_fn, self.table = conv, fused_fn, table
        self.last: tuple[np.ndarray, np.ndarray] | None = None

    def __call__(self, x, *_constants):
        conv = self.conv
        if type(x) is not np.ndarray or x.dtype is not _INT8 or not x.flags.c_contiguous or x.size != conv.in_size:
            self.last = None
            return conv(x)
        y = np.empty(conv.out_shape, _INT8)
        z = np.empty(conv.out_shape, _INT8)
        self.fused_fn(conv.address, self.table.address, x, y, z)
        self.last = (y, z)
        return (y,)


class _TableAfter:
    """The table step of a fused pair: the values its convolution computed with ``y`` (the same
    array object, as the plan passes it), else its own lookup."""

    def __init__(self, producer: _BoundWithTable):
        self.producer = producer

    def __call__(self, x, *constants):
        last = self.producer.last
        if last is not None and x is last[0]:
            self.producer.last = None
            return (last[1],)
        return self.producer.table(x, *constants)


def fuse_tables(runs: list, args: list[tuple[int, ...]], outs: list[tuple[int, ...]]) -> list:
    """The plan's runs with each native convolution whose output slot a native table step reads
    bound as a fused pair (:class:`_BoundWithTable` + :class:`_TableAfter`); other runs as given.
    The convolution's output is still produced (other readers, ``tensors()``)."""
    producer = {o[0]: i for i, o in enumerate(outs) if len(o) == 1 and isinstance(runs[i], _Bound)}
    runs = list(runs)
    for j, table in enumerate(runs):
        if type(table) is not _BoundTable or table.fn_obj is None or not args[j]:
            continue
        i = producer.get(args[j][0])
        conv = runs[i] if i is not None else None
        if type(conv) is not _Bound or conv.fn_obj is None or int(np.prod(conv.out_shape)) != table.size:
            continue
        fused_fn = {"intq_conv": "intq_conv_lut_obj", "intq_depthwise": "intq_depthwise_lut_obj"}.get(conv.fn.__name__)
        if fused_fn is None:
            continue
        lib = native.library()
        if lib is None or getattr(lib.lib, conv.fn.__name__, None) is not conv.fn:
            continue  # a test's other build: its own entry points only
        fused = _BoundWithTable(conv, getattr(lib.lib, fused_fn), table)
        runs[i], runs[j] = fused, _TableAfter(fused)
    return runs


def _constant_operand_table(lib, node: Node, graph: Graph, params, kernel_run) -> _BoundTable | None:
    """MUL / ADD / SUB of the data input 0 and a one-value constant (a hard sigmoid's scale and
    offset): an int8 -> int8 function of each element alone, tabulated at plan time from the
    kernel's own run on all 256 values (taken only where native.c implements the variant: the
    reference kernels, whose result does not depend on an element's position)."""
    x, c = (graph.tensors[t] for t in node.inputs[:2])
    shape = graph.tensors[node.outputs[0]].shape
    if (x.is_constant or not c.is_constant or c.data is None or np.asarray(c.data).size != 1 or not shape
            or x.shape is None or tuple(x.shape) != tuple(shape)):
        return None
    size = int(np.prod(shape, dtype=np.int64))
    values = np.arange(-128, 128, dtype=np.int64)
    table = np.empty(256, np.int8)
    try:
        for start in range(0, 256, size):
            chunk = np.resize(values[start:start + size], size)  # the last piece repeats values: harmless
            got = np.asarray(kernel_run(chunk.astype(np.int8).reshape(shape), c.data)[0]).reshape(-1)
            if got.dtype != np.int8:
                return None
            n = min(size, 256 - start)
            table[start:start + n] = got[:n]
    except (IntqError, ValueError):
        return None
    return _BoundTable(lib, np.ascontiguousarray(np.roll(table, -128)), tuple(shape))


def native_run(node: Node, graph: Graph, params, lib: native.Native | None = None) -> Callable | None:
    """The native ``run`` of a prepared integer node (module docstring), or None; ``lib`` defaults
    to the process's library (:func:`intq.runtime.native.library`)."""
    from intq.kernels import conv_2d, depthwise_conv_2d, fully_connected

    if node.op_type == "SOFTMAX" and graph.tensors[node.outputs[0]].dtype == np.int8:
        return _softmax_pairs(node, graph, params)  # numpy: taken with or without the C library
    lib = lib or native.library()
    if lib is None:
        return None
    builders = {depthwise_conv_2d.DepthwiseConv2DParams: _depthwise}
    if lib.gemm:  # measured faster than the kernels' own GEMM here (intq.runtime.native.measure), or forced
        builders.update({conv_2d.Conv2DParams: partial(_conv_2d, path=lib.path),
                         fully_connected.FullyConnectedParams: partial(_fully_connected, path=lib.path)})
    build = builders.get(type(params))
    if build is None:
        build = {"MUL": _mul, "ADD": _add, "SUB": _add, "PRELU": _prelu, "MAX_POOL_2D": _max_pool,
                 "TRANSPOSE": _transpose, "PAD": _pad, "PADV2": _pad, "MEAN": _mean}.get(node.op_type)
        if (node.op_type in _TABLE_OPS or node.op_type in _ONE_INPUT) and len(node.outputs) == 1:
            build = build or _table
        elif build is None or len(node.inputs) != 2 or len(node.outputs) != 1:
            return None
        data = node.inputs[:1] if node.op_type in _ONE_INPUT else node.inputs  # TRANSPOSE's perm, PAD's paddings
        if any(not t or graph.tensors[t].dtype != np.int8 or graph.tensors[t].qparams is None for t in data):
            return None
    x = graph.tensors[node.inputs[0]]
    if x.dtype != np.int8 or x.qparams is None or graph.tensors[node.outputs[0]].dtype != np.int8:
        return None
    bound = build(lib.lib, node, graph, params)
    if bound is not None and node.op_type in ("MUL", "ADD", "SUB"):
        from intq.kernels.base import reference

        table = _constant_operand_table(lib.lib, node, graph, params, partial(reference(node.op_type).run, params))
        bound = table or bound
    if bound is not None and lib.objects:
        bound.fn_obj = getattr(lib.lib, bound.fn.__name__ + "_obj")
    return bound


# ------------------------------------------------------------------------------ step programs

#: native.c's step kinds (intq_run_program), by entry point
_KIND = {"intq_conv": 0, "intq_depthwise": 1, "intq_mul": 4, "intq_add": 5, "intq_lut": 6, "intq_max_pool": 7,
         "intq_transpose": 8, "intq_pad": 9, "intq_mean": 10, "intq_lut_channels": 11}
_FUSED_KIND = {0: 2, 1: 3}  # a convolution computing its table op's output too
_MAX_DYNAMIC = 4  # array objects intq_run_program takes
_ARENA_CAP = 8 << 20  # bytes of step outputs per program run (one buffer per run); a bigger step runs alone
_ALIGN = 64


class _NotProgram(Exception):
    """A program's input is not what the plan verified (dtype, layout, size): the plan's hot path
    falls back to its step loop, which handles (or reports) it step by step."""


class Program:
    """Consecutive native steps of a plan as one C call (``intq_run_program``): their outputs are
    views of one fresh int8 buffer per run (so a run's tensors stay valid after the next run), the
    calls the steps' own, in their order, on the same bytes. ``__call__(*inputs)`` takes the
    program's inputs from outside it (checked: int8, C-contiguous, their sizes) and returns every
    output of its steps, in :attr:`outs` order."""

    def __init__(self, fn, steps: list, dynamic: list[int], constants: list[np.ndarray],
                 views: list[tuple[int, int, tuple[int, ...]]], total: int, outs: tuple[int, ...], keep: list):
        self.fn = fn
        self.sizes = tuple(dynamic)
        self.step_array = (native.Step * len(steps))(*steps)
        self.ext = (ctypes.c_void_p * (len(dynamic) + len(constants)))(
            *([None] * len(dynamic)), *(c.ctypes.data for c in constants))
        self.struct = native.Program(len(steps), len(dynamic), ctypes.addressof(self.step_array),
                                     ctypes.addressof(self.ext))
        self.address = ctypes.addressof(self.struct)
        self.views = tuple((a, a + n, shape) for a, n, shape in views)
        self.total = max(total, 1)
        self.outs = outs
        self.padding = (None,) * (_MAX_DYNAMIC - len(dynamic))
        self.keep = keep + constants  # the parameter structures, tables and constants the steps point to

    def __call__(self, *xs):
        for x, size in zip(xs, self.sizes):
            if type(x) is not np.ndarray or x.dtype is not _INT8 or not x.flags.c_contiguous or x.size != size:
                raise _NotProgram
        arena = np.empty(self.total, _INT8)
        self.fn(self.address, arena, *xs, *self.padding)
        return [arena[a:b].reshape(shape) for a, b, shape in self.views]


class _Builder:
    """One program under construction (:func:`programs`)."""

    def __init__(self):
        self.steps: list = []  # native.Step
        self.members: list[int] = []  # plan step indices taken
        self.dynamic: list[int] = []  # slots read from outside, in call order
        self.dynamic_sizes: list[int] = []
        self.constants: list[np.ndarray] = []
        self.constant_codes: dict[int, int] = {}
        self.offsets: dict[int, tuple[int, int]] = {}  # out slot -> (arena offset, size)
        self.views: list = []
        self.outs: list[int] = []
        self.total = 0
        self.keep: list = []
        self.fusable: dict[int, tuple[int, object]] = {}  # conv output slot -> (its Step index, _BoundWithTable)


def _operand(b: _Builder, slot: int, size: int, constants: dict[int, object], trial: dict) -> int | None:
    """The operand code of ``slot`` (``size`` int8 values) in ``b``, or None when it cannot be one;
    new dynamic inputs and constants are recorded in ``trial`` (committed when the step is taken)."""
    if slot in b.offsets:
        return b.offsets[slot][0] if b.offsets[slot][1] == size else None
    if slot in constants:
        data = np.asarray(constants[slot])
        if data.dtype != np.int8 or data.size != size:
            return None
        if slot not in b.constant_codes and slot not in trial["const"]:
            trial["const"][slot] = np.ascontiguousarray(data)
        return ("const", slot)  # resolved at finish: constants follow the dynamic inputs
    if slot <= 0:
        return None
    if slot in b.dynamic:
        k = b.dynamic.index(slot)
        return -1 - k if b.dynamic_sizes[k] == size else None
    if slot in trial["dyn"]:
        k = trial["dyn"].index(slot)
        return -1 - (len(b.dynamic) + k) if trial["dyn_sizes"][k] == size else None
    trial["dyn"].append(slot)
    trial["dyn_sizes"].append(size)
    return -1 - (len(b.dynamic) + len(trial["dyn"]) - 1)


def _describe(run, lib) -> tuple | None:
    """``(kind, params address, n, data input sizes, output shape, bound)`` of a native step run a
    program can take (the process library's own entry points), or None."""
    conv = run.conv if type(run) is _BoundWithTable else run
    if type(conv) in (_Bound, _BoundBinary, _BoundTable, _BoundChannelTables):
        kind = _KIND.get(conv.fn.__name__)
        if kind is None or getattr(lib, conv.fn.__name__, None) is not conv.fn:
            return None
        if type(conv) is _Bound:
            return kind, conv.address, 0, (conv.in_size,), conv.out_shape, conv
        if type(conv) is _BoundBinary:
            return kind, conv.address, 0, conv.sizes, conv.out_shape, conv
        if type(conv) is _BoundChannelTables:  # n: rows (the step's cols: channels, set by _take)
            return kind, conv.address, conv.rows, (conv.size,), conv.shape, conv
        return kind, conv.address, conv.size, (conv.size,), conv.shape, conv
    return None


def programs(flat: tuple, constants: dict[int, object]) -> tuple:
    """The plan's hot-path steps ``(run, args, outs)`` with each run of consecutive native steps
    as one :class:`Program` step (its args: the slots it reads from outside; its outs: every slot
    its steps write); other steps as given. ``constants``: slot -> data of the plan's constants.
    Unchanged without the process library or its array-object reading."""
    lib = native.library()
    if lib is None or not lib.objects or not hasattr(lib.lib, "intq_run_program"):
        return flat
    out: list = []
    b = _Builder()

    def close():
        nonlocal b
        if len(b.members) >= 2:
            codes = {slot: -1 - (len(b.dynamic) + k) for k, slot in enumerate(b.constant_codes)}
            for s in b.steps:  # the constants' codes, now that the dynamic inputs are known
                for field in ("in0", "in1"):
                    v = getattr(s, field)
                    if v <= -(1 << 40):
                        setattr(s, field, codes[-(v + (1 << 40))])
            consts = [b.constant_codes[slot] for slot in b.constant_codes]
            prog = Program(lib.lib.intq_run_program, b.steps, b.dynamic_sizes, consts, b.views, b.total,
                           tuple(b.outs), b.keep)
            out.append((prog, tuple(b.dynamic), tuple(b.outs)))
        else:
            out.extend(flat[i] for i in b.members)
        b = _Builder()

    for i, (run, args, outs) in enumerate(flat):
        step = _take(b, i, run, args, outs, constants, lib.lib)
        if step is None and b.members:
            close()
            step = _take(b, i, run, args, outs, constants, lib.lib)
        if step is None:
            out.append(flat[i])
    close()
    return tuple(out)


def _take(b: _Builder, i: int, run, args, outs, constants, lib) -> bool | None:
    """Add plan step ``i`` to ``b`` if it fits (True), else None (``b`` unchanged)."""
    if type(run) is _TableAfter:
        producer = run.producer
        fused = b.fusable.get(args[0]) if args else None
        if fused is not None and fused[1] is producer and len(outs) == 1:
            size = b.offsets[args[0]][1]
            if b.total + size > _ARENA_CAP:
                return None
            k = fused[0]
            s = b.steps[k]
            s.kind, s.table = _FUSED_KIND[s.kind], producer.table.address
            s.out1 = _arena(b, outs[0], size, producer.conv.out_shape)
            del b.fusable[args[0]]
            b.members.append(i)
            return True
        run = producer.table  # its own lookup on whatever array it reads
    desc = _describe(run, lib)
    if desc is None or len(outs) != 1:
        return None
    kind, address, n, sizes, shape, bound = desc
    data = args[:len(sizes)]
    if len(data) != len(sizes):
        return None
    size = int(np.prod(shape, dtype=np.int64))
    if b.members and b.total + size > _ARENA_CAP:
        return None
    trial = {"dyn": [], "dyn_sizes": [], "const": {}}
    codes = []
    for slot, want in zip(data, sizes):
        code = _operand(b, slot, want, constants, trial)
        if code is None:
            return None
        codes.append(code)
    if len(b.dynamic) + len(trial["dyn"]) > _MAX_DYNAMIC:
        return None
    b.dynamic += trial["dyn"]
    b.dynamic_sizes += trial["dyn_sizes"]
    b.constant_codes.update(trial["const"])
    codes = [-(1 << 40) - c[1] if isinstance(c, tuple) else c for c in codes]  # constants: resolved in close()
    step = native.Step(kind=kind, params=address, table=None, n=n, in0=codes[0], in1=codes[1] if len(codes) > 1 else 0,
                       out0=0, out1=0)
    if type(bound) is _BoundChannelTables:
        step.cols = bound.cols
    step.out0 = _arena(b, outs[0], size, shape)
    b.steps.append(step)
    b.keep.append(bound)
    b.members.append(i)
    if type(desc[5]) is _Bound and kind in _FUSED_KIND and type(run) is _BoundWithTable:
        b.fusable[outs[0]] = (len(b.steps) - 1, run)
    return True


def _arena(b: _Builder, slot: int, size: int, shape) -> int:
    """A fresh arena region of ``size`` bytes for output ``slot``: its offset."""
    offset = b.total
    b.total = offset + -(-max(size, 1) // _ALIGN) * _ALIGN
    b.offsets[slot] = (offset, size)
    b.views.append((offset, size, tuple(shape)))
    b.outs.append(slot)
    return offset
