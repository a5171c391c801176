"""The native forms of the convolutions and matrix products: CONV_2D, FULLY_CONNECTED,
DEPTHWISE_CONV_2D, BATCH_MATMUL (native.c ``intq_conv``, ``intq_depthwise``, ``intq_batch_matmul``).

Prepared here, once: the weights packed for the library's matrix path (int16 for AVX2's VPMADDWD),
the per-channel requantization arrays (padded to 32 channels), the C parameter structure and its
scratch buffers. Every requantization is a contract of
:data:`~intq.runtime.native.registry.NATIVE_REQUANT` without left shift (every real multiplier
below 1), else the kernel's run stays.
"""

from __future__ import annotations

import numpy as np

from intq.ir import Graph, Node
from intq.kernels import REFERENCE
from intq.kernels._conv_common import conv_matrix
from intq.kernels.batch_matmul import BatchMatMulParams
from intq.kernels.conv_2d import Conv2DParams
from intq.kernels.depthwise_conv_2d import DepthwiseConv2DParams
from intq.kernels.fully_connected import FullyConnectedParams
from intq.runtime import native
from intq.runtime.native.bound import Bound, BoundBinary
from intq.runtime.native.registry import (channel_requant, int32_or_none, int8_io, native_form, padded,
                                          scalar_requant)

_MB = 32  # output pixels per block (native.c MB)


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
    off = int32_or_none(offset)
    off_u8 = int32_or_none(offset - 128 * sums)  # sum((x + 128) w) = sum(x w) + 128 sum(w)
    if off is None or off_u8 is None:
        return None
    keep.append(packed)
    packed16 = None
    if path == "avx2":  # VPMADDWD multiplies int16: its own packing (native.c intq_pack16)
        packed16 = np.empty(int(lib.intq_packed16_bytes(k, n)) // 2, np.int16)
        lib.intq_pack16(k, n, w.ctypes.data, packed16.ctypes.data)
        keep.append(packed16)
    return packed, packed16, padded(off, n), padded(off_u8, n)


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


@native_form("CONV_2D", families=(REFERENCE, "litert", "litert_opt"))
def conv_2d(nat: native.Native, node: Node, graph: Graph, p: Conv2DParams) -> Bound | None:
    """CONV_2D (grouped included: the block-diagonal matrix of
    :func:`~intq.kernels._conv_common.conv_matrix`) on ``nat``'s matrix path, where that path was
    measured faster than the kernels' exact GEMM (or forced); LiteRT's reference (``litert``) and
    optimized grouped (``litert_opt``, ties up) variants prepare the same parameters."""
    if not nat.gemm or not int8_io(node, graph):
        return None
    lib, path = nat.lib, nat.path
    g = p.im2col
    n, oh, ow, c_out = p.out_shape
    arrays = channel_requant([(p.requant, c_out)], c_out)
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
    return Bound(lib.intq_conv, params, keep, g.n * g.padded.h * g.padded.w * g.c, tuple(p.out_shape))


#: where native.c's AMX direct convolution beats im2col (measured per layer on MobileNetV2 and
#: MobileNetV3-small, minimum of 100 runs): K (per tap row rounded to 4, times kh) at most 160,
#: at least 128 output pixels and at most 256 output channels (it loads one input tile per 16
#: output channels: deep K, many channels or few pixels favour im2col's 32x32 blocks, e.g. 7x7x960
#: -> 160 26 us direct against 17 us). Tests set ``(10**9, 0, 10**9)`` (always where it fits).
DIRECT_LIMITS = (160, 128, 256)


def _direct_pays(k4: int, channels: int, pixels: int) -> bool:
    max_k, min_pixels, max_channels = DIRECT_LIMITS
    return k4 <= max_k and pixels >= min_pixels and channels <= max_channels


@native_form("FULLY_CONNECTED")
def fully_connected(nat: native.Native, node: Node, graph: Graph, p: FullyConnectedParams) -> Bound | None:
    """FULLY_CONNECTED as the 1x1 convolution of its rows (CONV_2D's matrix path, the same choice)."""
    if not nat.gemm or not int8_io(node, graph):
        return None
    w = graph.tensors[node.inputs[1]].data  # [N, K]
    n_out, k = w.shape
    out_size = int(np.prod(p.out_shape))
    if out_size % n_out:
        return None
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    return _matrix(nat.lib, w, p.offset, p.requant, out_size // n_out, zx, nat.path, tuple(p.out_shape))


def _matrix(lib, w: np.ndarray, offset, requant, rows: int, zx: int, path: str, out_shape) -> Bound | None:
    """``intq_conv`` as the product of ``rows`` input rows by ``w`` [N, K] (a 1x1 convolution of a
    rows x 1 image): y = requant(x @ w.T + offset), or None where native.c does not take it."""
    n_out, k = w.shape
    arrays = channel_requant([(requant, n_out)], n_out)
    if arrays is None:
        return None
    geometry = dict(batch=1, in_h=rows, in_w=1, in_c=k, out_h=rows, out_w=1, out_c=n_out, kh=1, kw=1, stride_h=1,
                    stride_w=1, dil_h=1, dil_w=1, pad_top=0, pad_left=0)
    keep: list = []
    params = _conv_struct(lib, w, np.asarray(offset, dtype=np.int64), arrays, geometry, zx, keep, path)
    if params is None:
        return None
    return Bound(lib.intq_conv, params, keep, rows * k, out_shape)


def bind_matrix(nat: native.Native, w: np.ndarray, offset, requant, rows: int, zx: int) -> Bound:
    """The native product of ``rows`` int8 rows by ``w`` [N, K] int8 on ``nat``'s path, requantized
    by ``requant`` (a per-channel fixed-point double rounding) after ``+ offset``: FULLY_CONNECTED's
    call, for :mod:`intq.runtime.native.measure`."""
    bound = _matrix(nat.lib, w, offset, requant, rows, zx, nat.path, (rows, w.shape[0]))
    assert bound is not None, "a double-rounding requantizer to int8 without left shift binds"
    return bound


@native_form("DEPTHWISE_CONV_2D", families=(REFERENCE, "litert_opt"))
def depthwise_conv_2d(nat: native.Native, node: Node, graph: Graph, p: DepthwiseConv2DParams) -> Bound | None:
    """DEPTHWISE_CONV_2D with depth multiplier 1 and int16-sized weights; ``litert_opt``'s two channel
    groups (its vector lanes and scalar tail, :mod:`intq.kernels.litert_opt.depthwise_conv_2d`) are
    a per-channel tie rule."""
    if not int8_io(node, graph):
        return None
    lib = nat.lib
    t = p.taps
    taps, c, mult = t.weights.shape
    if mult != 1 or t.weights.dtype != np.int32 or int(np.abs(t.weights).max(initial=0)) > 2**15 - 1:
        return None  # native.c's depthwise multiplies int16 pairs
    parts = [(p.requant, p.split)] + ([(p.tail, c - p.split)] if p.tail is not None else [])
    arrays = channel_requant(parts, c)
    if arrays is None:
        return None
    n, oh, ow, _ = p.out_shape
    kh, kw = graph.tensors[node.inputs[1]].data.shape[1:3]
    cp = -(-c // 16) * 16
    w = np.zeros((taps, cp), np.int32)
    w[:, :c] = t.weights[:, :, 0] & 0xFFFF  # the int16 bits, high half zero (native.c intq_depthwise)
    offset = padded(t.offset, c)
    acc = np.zeros(cp, np.int32)
    # prefix[i, j] = sum of w over the taps [0, i) x [0, j) (native.c: a clipped window's offset)
    prefix = np.zeros((kh + 1, kw + 1, cp), np.int64)
    prefix[1:, 1:, :c] = t.weights[:, :, 0].astype(np.int64).reshape(kh, kw, c).cumsum(0).cumsum(1)
    prefix = np.ascontiguousarray(prefix.astype(np.int32))  # |sum| <= taps * 2^15: fits
    keep = [w, acc, prefix]
    zx = graph.tensors[node.inputs[0]].qparams.tensor_zero_point
    dil_h = int(t.tap_rows[kw]) if kh > 1 else 1  # tap rows are i * dilation_h (prepare_taps)
    dil_w = int(t.tap_cols[1]) if kw > 1 else 1
    border, pad_h, pad_w = _border_copy(t.padded.h, t.padded.w, oh, ow, kh, kw, t.stride_h, t.stride_w, dil_h, dil_w,
                                        t.padded.top, t.padded.left, c)
    if border is not None:
        keep.append(border)
    params = native.DepthwiseParams(
        batch=n, in_h=t.padded.h, in_w=t.padded.w, c=c, out_h=oh, out_w=ow, kh=kh, kw=kw, stride_h=t.stride_h,
        stride_w=t.stride_w, dil_h=dil_h, dil_w=dil_w, pad_top=t.padded.top, pad_left=t.padded.left, in_zp=zx,
        w=w.ctypes.data, rq=_rq_struct(offset, arrays, keep), acc=acc.ctypes.data, prefix=prefix.ctypes.data,
        padded=None if border is None else border.ctypes.data, pad_h=pad_h, pad_w=pad_w)
    return Bound(lib.intq_depthwise, params, keep, n * t.padded.h * t.padded.w * c, tuple(p.out_shape))


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


@native_form("BATCH_MATMUL")
def batch_matmul(nat: native.Native, node: Node, graph: Graph, p: BatchMatMulParams) -> BoundBinary | None:
    """BATCH_MATMUL (the reference kernel; attention's two products, both operands activations):
    each operand's batch axes either the output's or all 1 (broadcast whole), a per-tensor
    multiplier below 1 (no left shift) of a :data:`~intq.runtime.native.registry.NATIVE_REQUANT`
    contract; other broadcasts keep the kernel's run."""
    rq = scalar_requant(p.requant)
    if (not int8_io(node, graph, 2) or rq is None or rq[1] or len(node.inputs) != 2
            or (p.requant.act_min, p.requant.act_max) != (-128, 127)):
        return None
    mult, _, right, away = rq
    shapes = [graph.tensors[t].shape for t in node.inputs]
    out = tuple(p.out_shape)
    if any(s is None for s in shapes) or 0 in out:
        return None
    batch, batches = out[:-2], int(np.prod(out[:-2], dtype=np.int64))
    m, n = out[-2:]
    a_shape, b_shape = (tuple(s) for s in shapes)
    k = a_shape[-2] if p.adj_x else a_shape[-1]
    steps = []
    for shape, size in ((a_shape, m * k), (b_shape, k * n)):
        lead = (1,) * (len(batch) - len(shape[:-2])) + shape[:-2]
        if lead == batch:
            steps.append(size)
        elif all(d == 1 for d in lead):
            steps.append(0)
        else:
            return None  # a partial broadcast of the batch axes
    a_row, a_col = (1, m) if p.adj_x else (k, 1)  # A[i, q] = a[i * a_row + q * a_col]
    b_row, b_col = (1, k) if p.adj_y else (n, 1)  # B[q, j] = b[q * b_row + j * b_col]
    n_padded = -(-n // 32) * 32  # native.c's np: B's rows padded with zeros to whole vectors
    sa, sb = np.zeros(m * k, np.int16), np.zeros(k * n_padded, np.int32)
    acc = np.zeros(n_padded, np.int32)
    params = native.BatchMatMulParams(
        batches=batches, m=m, k=k, n=n, a_step=steps[0], b_step=steps[1], a_row=a_row, a_col=a_col, b_row=b_row,
        b_col=b_col, za=p.lhs_zero_point, zb=p.rhs_zero_point, mult=mult, right=right, away=away,
        out_zp=p.requant.zero_point, sa=sa.ctypes.data, sb=sb.ctypes.data, acc=acc.ctypes.data)
    sizes = (int(np.prod(a_shape, dtype=np.int64)), int(np.prod(b_shape, dtype=np.int64)))
    return BoundBinary(nat.lib.intq_batch_matmul, params, [sa, sb, acc], sizes, out)
