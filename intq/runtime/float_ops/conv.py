"""Conv and ConvTranspose (N-d: 1-D, 2-D, 3-D, ...) on float32, without Python pixel loops.

Conv, for output channel m in group g and output position o::

    Y[n, m, o] = B[m] + sum_{c in group g, t in kernel} W[m, c, t] * Xpad[n, c, o*s + t*d]

computed over blocks of the batch as im2col (a strided window view of the padded input, copied
into a (C/group * prod(kernel), positions) matrix per image) followed by BLAS: one GEMM per block
of images and group, no Python loop per image or per group. Small images share a block (and, when
they have few output positions, one GEMM over all of them); a large image is built and multiplied
in blocks of output rows that stay in cache. An unpadded 1x1 kernel needs no im2col at all.
Depthwise convolution (group == C, one input channel per group) instead accumulates
``W[:, t] * window_t`` tap by tap over cache-sized chunks of the batch's (image, channel) planes:
prod(kernel) vectorised passes per chunk and no im2col copy. Temporaries live in reused work
buffers (``_scratch``).

Input contract: X (N, C, *spatial) float32; W (M, C/group, *kernel); B (M,) or None; the
sliding-window attributes as in ONNX (see ``_windows`` for the size formulas).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.lib.stride_tricks import as_strided

from intq.errors import GraphError
from intq.ir.windows import pads_of

from . import _scratch
from ._checks import ints, output_size
from ._windows import Geometry, channel_chunks, fill_border, geometry, pad, per_axis, taps, windows
from .registry import FLOAT_OPS


def _check_kernel_shape(op: str, kernel_shape, kernel: tuple[int, ...]) -> None:
    if kernel_shape is not None and tuple(ints(kernel_shape)) != kernel:
        raise GraphError(f"{op}: kernel_shape={ints(kernel_shape)} disagrees with the weight's "
                         f"spatial shape {list(kernel)}")


@FLOAT_OPS.register()
def Conv(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
         pads=None, strides=None):
    """ONNX Conv (module docstring formula); returns (Y,) of shape (N, M, *out)."""
    if X.ndim < 3 or W.ndim != X.ndim:
        raise GraphError(f"Conv: input rank {X.ndim} and weight rank {W.ndim} must be equal and >= 3")
    n, c = X.shape[:2]
    m, cg = W.shape[:2]
    group = int(group)
    if group < 1 or c != cg * group or m % group:
        raise GraphError(f"Conv: input channels {c}, weight shape {list(W.shape)} and group={group} "
                         f"do not fit (need C == W.shape[1] * group and M % group == 0)")
    kernel = tuple(W.shape[2:])
    _check_kernel_shape("Conv", kernel_shape, kernel)
    g = geometry("Conv", X.shape[2:], kernel, strides=strides, dilations=dilations, pads=pads,
                 auto_pad=auto_pad)
    dtype = np.result_type(X.dtype, W.dtype)
    X = X.astype(dtype, copy=False)
    W = W.astype(dtype, copy=False)
    if group == c and cg == 1 and group > 1:
        y = _depthwise(X, W, g)
    else:
        y = _im2col_gemm(X, W, g, group)
    if B is not None:
        if B.shape != (m,):
            raise GraphError(f"Conv: bias shape {list(B.shape)} must be [{m}]")
        y += B.astype(dtype, copy=False).reshape((m,) + (1,) * len(kernel))
    return (y,)


#: Bytes of im2col matrix built and multiplied at a time. An image whose matrix is smaller shares
#: a block (and one stacked matmul) with the next images of the batch; a larger one is split into
#: blocks of output rows. Blocks of about this size stay in the L2 cache between the copy and the
#: GEMM (measured 20-30% faster than whole matrices on 56x56 and 112x112 ResNet layers).
_IM2COL_BLOCK = 2 << 20

#: Per-image GEMMs (numpy's stacked matmul: a C loop of one BLAS call per image) are used when an
#: image has at least this many columns. Below it, a block's images form one GEMM over all their
#: columns (a GEMM with few columns runs below BLAS peak: 49 columns, ResNet's 7x7 stage, measured
#: 20-30% slower per image), whose (M, images, columns) result is transposed into the output.
_STACKED_MIN_COLUMNS = 64

#: Cost model choosing the im2col layout (ns per element of the im2col matrix; measured with
#: OpenBLAS's Haswell sgemm on the development machine, ~100 GFLOP/s per core). It only picks
#: between two layouts of the same sums, so a host that differs moves the boundary, not the result.
_NS_PER_MAC = 0.02          # GEMM: 2 flops per multiply-accumulate at ~100 GFLOP/s
_NS_WIDE_COPY = 0.15        # copying contiguous rows (the "wide" layout)
_NS_WINDOW_COPY = 0.09      # copying window views: 0.09 + 8 / (innermost output length) ns,
_NS_WINDOW_ROW = 8.0        # numpy's strided copy pays per innermost run (8-wide rows: ~1.1 ns)


def _wide_pays(g: Geometry, mg: int) -> bool:
    """Whether the "wide" im2col layout is cheaper than window views for a stride-1 convolution.

    Wide: each (channel, tap) row of the matrix is one contiguous slice of the flattened padded
    plane (``flat[off_t : off_t + q]``, :class:`_Wide`), ``q = out_0 * Pd_1 * ...``
    columns of which ``Pd_a - out_a`` per inner row are junk (computed, then cropped). Windows:
    exactly ``prod(out)`` columns, copied from a strided view in runs of the innermost output
    length. Per reduction row the cost is ``columns * (mg * GEMM + copy)``.
    """
    if any(s != 1 for s in g.strides):
        return False  # the wide form would compute ~stride times the outputs it keeps
    positions = math.prod(g.out_shape)
    q = g.out_shape[0] * math.prod(g.padded_shape[1:])
    gemm = mg * _NS_PER_MAC
    return q * (gemm + _NS_WIDE_COPY) <= positions * (gemm + _NS_WINDOW_COPY + _NS_WINDOW_ROW / g.out_shape[-1])


def _im2col_gemm(X: np.ndarray, W: np.ndarray, g: Geometry, group: int) -> np.ndarray:
    """General (grouped) convolution as im2col + GEMM over blocks of the batch.

    ``Y[n, grp] = W[grp] (M/group, C/group*K) @ cols[n, grp] (C/group*K, columns)``. The batch is
    taken a block at a time (:data:`_IM2COL_BLOCK` bytes of im2col matrix: several images, or
    output rows of one large image): one padded copy per block of images, then per block one
    im2col copy and one (stacked) matmul whatever the number of groups: no Python loop per image,
    group or pixel. The matrix is laid out "wide" (contiguous rows of the padded planes, junk
    columns cropped: :class:`_Wide`) or from window views, whichever :func:`_wide_pays`. An unpadded 1x1 kernel
    needs no im2col: the input (subsampled by the strides) is the matrix of the whole batch.
    """
    n, c = X.shape[:2]
    m = W.shape[0]
    mg = m // group
    rows = (c // group) * g.taps  # reduction length of one group's GEMM
    positions = math.prod(g.out_shape)
    w = W.reshape(group, mg, rows)  # (group, M/group, C/group * K)
    y = np.empty((n, m) + g.out_shape, X.dtype)
    if g.taps == 1 and not any(g.pads_begin) and not any(g.reach_end) and positions >= _STACKED_MIN_COLUMNS:
        # 1x1 kernel: the input (subsampled by the strides) is the matrix; a copy only if strided
        step = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in g.strides)
        np.matmul(w, X[step].reshape(n, group, rows, positions), out=y.reshape(n, group, mg, positions))
        return y
    nd = len(g.kernel)
    wide = _Wide(g) if _wide_pays(g, mg) else None
    out0 = g.out_shape[0]
    row_shape = g.padded_shape[1:] if wide else g.out_shape[1:]  # the columns of one output row
    row = math.prod(row_shape)
    per_row = X.itemsize * group * rows * row  # im2col bytes of one output row of one image
    if per_row * out0 <= _IM2COL_BLOCK:
        images, block = max(1, min(n, _IM2COL_BLOCK // (per_row * out0))), out0
    else:
        images, block = 1, max(1, _IM2COL_BLOCK // per_row)
    crop = (Ellipsis,) + tuple(slice(0, o) for o in g.out_shape[1:])  # drops a wide row's junk
    # (b, C, *K, *cols) -> (C, *K, b, *cols): one GEMM's columns are every column of every image
    ncol_axes = 1 if wide else nd
    to_columns = (1, *range(2, 2 + nd), 0, *range(2 + nd, 2 + nd + ncol_axes))
    for n0 in range(0, n, images):
        xb = X[n0 : n0 + images]
        b = xb.shape[0]
        src = wide.planes(xb, g, "conv.flat") if wide else pad(xb, g.pads_begin, g.reach_end, scratch="conv.pad")
        for r0 in range(0, out0, block):
            rb = min(block, out0 - r0)
            ncols = rb * row
            if wide:  # (b, C, *K, ncols)
                view = wide.view(src, g, r0 * row, ncols)
            else:  # (b, C, *K, rb, *out[1:])
                view = windows(src, g)[(Ellipsis, slice(r0, r0 + rb)) + (slice(None),) * (nd - 1)]
            if b == 1 or ncols >= _STACKED_MIN_COLUMNS:
                cols = _scratch.buffer("conv.im2col", view.shape, X.dtype)
                np.copyto(cols, view)  # the im2col copy of the block
                cols = cols.reshape(b, group, rows, ncols)
                if not wide and rb == out0:  # whole images, no junk: the GEMM writes the output
                    np.matmul(w, cols, out=y[n0 : n0 + b].reshape(b, group, mg, positions))
                    continue
                res = _scratch.buffer("conv.block", (b, group, mg, ncols), X.dtype)
                np.matmul(w, cols, out=res)
                res = res.reshape((b, m, rb) + row_shape)
            else:
                view = view.transpose(to_columns)
                cols = _scratch.buffer("conv.im2col", view.shape, X.dtype)
                np.copyto(cols, view)
                res = _scratch.buffer("conv.block", (group, mg, b * ncols), X.dtype)
                np.matmul(w, cols.reshape(group, rows, b * ncols), out=res)
                res = res.reshape((m, b, rb) + row_shape).swapaxes(0, 1)
            y[n0 : n0 + b, :, r0 : r0 + rb] = res[crop]
    return y


class _Wide:
    """The "wide" im2col layout of one geometry: a padded plane of ``Pd`` flattened row-major
    (axis strides ``P_a``), tap t at offset ``off_t = sum_a t_a * d_a * P_a``, ``row = P_0``
    columns per output row (``Pd_a - out_a`` of them junk per inner axis), and the plane length
    ``L = max(prod(Pd), max off_t + out_0 * row)`` that keeps every row slice inside the buffer."""

    def __init__(self, g: Geometry):
        pd = g.padded_shape
        self.strides = [math.prod(pd[a + 1 :]) for a in range(len(pd))]  # P_a
        self.offsets = [sum(t * d * p for t, d, p in zip(tap, g.dilations, self.strides))
                        for tap in np.ndindex(*g.kernel)]
        self.row = self.strides[0]
        self.plane = math.prod(pd)
        self.length = max(self.plane, self.offsets[-1] + g.out_shape[0] * self.row)

    def planes(self, X: np.ndarray, g: Geometry, key: str) -> np.ndarray:
        """``X`` (b, C, *spatial) zero-padded and flattened per plane into the work buffer ``key``
        (b, C, L)."""
        b, c = X.shape[:2]
        flat = _scratch.buffer(key, (b, c, self.length), X.dtype)
        padded = flat[:, :, : self.plane].reshape((b, c) + g.padded_shape)
        fill_border(padded, g.pads_begin, g.in_shape)
        flat[:, :, self.plane :] = 0
        padded[(slice(None),) * 2 + tuple(slice(p, p + i) for p, i in zip(g.pads_begin, g.in_shape))] = X
        return flat

    def view(self, flat: np.ndarray, g: Geometry, start: int, ncols: int) -> np.ndarray:
        """Read-only ``v[n, c, *t, j] = flat[n, c, start + off_t + j]`` of shape (b, C, *K, ncols):
        tap axis a steps by ``d_a * P_a`` elements; no data copied."""
        item = flat.itemsize
        taps = tuple(p * d * item for p, d in zip(self.strides, g.dilations))
        return as_strided(flat[:, :, start:], flat.shape[:2] + g.kernel + (ncols,),
                          flat.strides[:2] + taps + (item,), writeable=False)


def _depthwise(X: np.ndarray, W: np.ndarray, g: Geometry) -> np.ndarray:
    """group == C: ``Y[n, c*mult + j, o] = sum_t W[c*mult + j, 0, t] * Xpad[n, c, o*s + t*d]``.

    Compiled loops (numba) over the batch's (image, channel) planes, each plane's output row
    accumulated tap by tap while it sits in the L1 cache, in the order of the formula:
    ``acc = w_0 * x_0``, then ``acc = acc + w_t * x_t`` for each further tap t in C order (float32
    products and sums, no fused multiply-add: the sums of the vectorised numpy form this replaced,
    bit for bit). Stride 1 works on long contiguous rows ("wide" outputs, :class:`_Wide`): with
    the padded image of channel c flattened (row-major strides P_a over padded sizes Pd_a),
    output o reads ``flat[off_t + q]`` with ``off_t = sum_a t_a*d_a*P_a`` and ``q = sum_a o_a*P_a``.
    Computing every q in [0, out_0 * P_0) yields all outputs plus ``Pd_a - out_a`` junk columns on
    the inner axes, cropped at the end. Other strides read the padded planes directly (1-D and 2-D;
    3-D and more: strided tap views, :func:`_depthwise_taps`).
    """
    n, c = X.shape[:2]
    mult = W.shape[0] // c
    w = np.ascontiguousarray(W.reshape(c, mult, g.taps))
    if any(s != 1 for s in g.strides):
        if len(g.kernel) > 2:
            return _depthwise_taps(X, np.tile(w.reshape(c, mult, g.taps, 1), (n, 1, 1, 1)), g)
        xp = np.ascontiguousarray(pad(X, g.pads_begin, g.reach_end, scratch="conv.pad"))
        shape2 = (1,) * (2 - len(g.kernel))  # a 1-D convolution as 2-D with one row
        kernel, strides, dilations = shape2 + g.kernel, shape2 + g.strides, shape2 + g.dilations
        out = shape2 + g.out_shape
        y = np.empty((n * c, mult) + out, X.dtype)
        _depthwise_strided(xp.reshape((n * c,) + shape2 + xp.shape[2:]), w.reshape(c, mult, *kernel),
                           strides[0], strides[1], dilations[0], dilations[1], y)
        return y.reshape((n, c * mult) + g.out_shape)
    layout = _Wide(g)
    q = g.out_shape[0] * layout.row
    flat = layout.planes(X, g, "depthwise.flat")
    wide = _scratch.buffer("depthwise.wide", (n * c, mult, q), X.dtype)
    _depthwise_wide(flat.reshape(n * c, -1), w, np.array(layout.offsets, np.int64), wide)
    crop = (slice(None),) * 4 + tuple(slice(0, o) for o in g.out_shape[1:])
    y = wide.reshape((n, c, mult, g.out_shape[0]) + g.padded_shape[1:])[crop]
    # a copy even when the crop keeps everything (a 1x1 kernel): ``wide`` is a scratch buffer the
    # next depthwise layer overwrites, so the result must not be a view of it
    return np.array(y, copy=True, order="C").reshape((n, c * mult) + g.out_shape)


@njit(cache=True, nogil=True)
def _depthwise_wide(planes, w, offsets, out):
    """``out[p, j, i] = sum_t w[p % C, j, t] * planes[p, offsets[t] + i]`` for planes p (image,
    channel), multiplier j, every wide column i; taps summed in order, t = 0 first. (Each tap reads
    a slice of the plane: indexing ``row[offset + i]`` instead keeps LLVM from vectorising the
    loop, 5.7x slower.)"""
    channels, mult, taps = w.shape
    q = out.shape[2]
    for p in range(planes.shape[0]):
        row = planes[p]
        c = p % channels
        for j in range(mult):
            acc = out[p, j]
            src = row[offsets[0] : offsets[0] + q]
            wt = w[c, j, 0]
            for i in range(q):
                acc[i] = wt * src[i]
            for t in range(1, taps):
                src = row[offsets[t] : offsets[t] + q]
                wt = w[c, j, t]
                for i in range(q):
                    acc[i] += wt * src[i]


@njit(cache=True, nogil=True)
def _depthwise_strided(xp, w, sy, sx, dy, dx, out):
    """``out[p, j, oy, ox] = sum_{ky, kx} w[p % C, j, ky, kx] * xp[p, oy*sy + ky*dy, ox*sx + kx*dx]``
    for padded planes ``xp`` (P, Hp, Wp); taps summed in C order, (0, 0) first."""
    channels, mult, kh, kw = w.shape
    oh, ow = out.shape[2], out.shape[3]
    span = (ow - 1) * sx + 1
    for p in range(xp.shape[0]):
        plane = xp[p]
        c = p % channels
        for j in range(mult):
            acc = out[p, j]
            for ky in range(kh):
                for kx in range(kw):
                    wt = w[c, j, ky, kx]
                    for oy in range(oh):
                        src = plane[oy * sy + ky * dy, kx * dx : kx * dx + span : sx]
                        dst = acc[oy]
                        if ky == 0 and kx == 0:
                            for ox in range(ow):
                                dst[ox] = wt * src[ox]
                        else:
                            for ox in range(ow):
                                dst[ox] += wt * src[ox]


def _depthwise_taps(X: np.ndarray, w: np.ndarray, g: Geometry) -> np.ndarray:
    """Depthwise convolution with strides > 1 and 3 or more spatial axes: accumulate strided tap views per chunk of
    (image, channel) planes; ``w`` is (N*C, mult, K, 1), one row of weights per plane."""
    n, c = X.shape[:2]
    mult = w.shape[1]
    nd = len(g.kernel)
    w = w.reshape(n * c, mult, g.taps, *(1,) * nd)
    xp = pad(X, g.pads_begin, g.reach_end, scratch="conv.pad")
    xp = xp.reshape((1, n * c) + xp.shape[2:])  # the planes as the channels of one image
    y = np.empty((n * c, mult) + g.out_shape, X.dtype)
    out_size = math.prod(g.out_shape)
    in_size = math.prod(xp.shape[2:])
    chunks = channel_chunks(n * c, X.itemsize * (in_size + 2 * mult * out_size))
    scratch = _scratch.buffer("depthwise.tmp", (chunks[0].stop, mult) + g.out_shape, X.dtype)
    for cs in chunks:
        acc = y[cs]
        tmp = scratch[: acc.shape[0]]
        for t, view in taps(xp[:, cs], g):
            view = view[0][:, None]  # (planes, 1, *out)
            if t == 0:
                np.multiply(view, w[cs, :, 0], out=acc)
            else:
                np.multiply(view, w[cs, :, t], out=tmp)
                np.add(acc, tmp, out=acc)
    return y.reshape((n, c * mult) + g.out_shape)


@FLOAT_OPS.register()
def ConvTranspose(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                  output_padding=None, output_shape=None, pads=None, strides=None):
    """ONNX ConvTranspose: the adjoint of Conv; returns (Y,) of shape (N, M, *out).

    ``Y[n, m, i*s + t*d - pad_begin] += sum_c X[n, c, i] * W[c, m', t]`` (m' = m within its group),
    with ``out = s*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end``.
    Computed over blocks of images as one stacked matmul (``W_g^T @ X_g`` per image and group, the
    "columns") and a col2im that adds each tap's columns into a strided view of the blocks'
    outputs: prod(kernel) vectorised adds per block.
    Pads are explicit (``auto_pad`` and ``output_shape`` are refused: :func:`intq.passes.explicit_pads`
    writes them as pads and output_padding).
    """
    if X.ndim < 3 or W.ndim != X.ndim:
        raise GraphError(f"ConvTranspose: input rank {X.ndim} and weight rank {W.ndim} must be "
                         f"equal and >= 3")
    n, c = X.shape[:2]
    group = int(group)
    if group < 1 or W.shape[0] != c or c % group:
        raise GraphError(f"ConvTranspose: input channels {c}, weight shape {list(W.shape)} and "
                         f"group={group} do not fit (need W.shape[0] == C, C % group == 0)")
    mg = W.shape[1]
    m = mg * group
    kernel = tuple(W.shape[2:])
    nd = len(kernel)
    _check_kernel_shape("ConvTranspose", kernel_shape, kernel)
    strides = per_axis("ConvTranspose", "strides", strides, nd, 1)
    dilations = per_axis("ConvTranspose", "dilations", dilations, nd, 1)
    in_sp = X.shape[2:]
    adj = ints(output_padding) or [0] * nd
    if len(adj) != nd or any(a < 0 for a in adj):
        raise GraphError(f"ConvTranspose: output_padding={adj} needs {nd} non-negative entries")
    full = [s * (i - 1) + (k - 1) * d + 1 + a
            for s, i, k, d, a in zip(strides, in_sp, kernel, dilations, adj)]
    begin, end = pads_of("ConvTranspose", {"auto_pad": auto_pad, "output_shape": ints(output_shape),
                                           "pads": ints(pads)}, nd)
    out = [f - b - e for f, b, e in zip(full, begin, end)]
    if any(o < 1 for o in out):
        raise GraphError(f"ConvTranspose: pads {begin + end} leave no output (full size {full})")
    dtype = np.result_type(X.dtype, W.dtype)
    output_size("ConvTranspose", (m,) + tuple(full), dtype, "full output before cropping")
    output_size("ConvTranspose", (n, m) + tuple(out), dtype)
    K = math.prod(kernel)
    positions = math.prod(in_sp)
    w = W.astype(dtype, copy=False).reshape(group, c // group, mg * K).transpose(0, 2, 1)
    x = X.astype(dtype, copy=False).reshape(n, group, c // group, positions)
    crop = (slice(None), slice(None)) + tuple(slice(b, b + o) for b, o in zip(begin, out))
    y = np.empty((n, m) + tuple(out), dtype)
    # images a block at a time (_IM2COL_BLOCK bytes of columns): one stacked matmul and one col2im
    # pass per tap for the whole block
    images = max(1, min(n, _IM2COL_BLOCK // (X.itemsize * m * K * positions)))
    for n0 in range(0, n, images):
        b = min(images, n - n0)
        cols = _scratch.buffer("convtranspose.cols", (b, group, mg * K, positions), dtype)
        np.matmul(w, x[n0 : n0 + b], out=cols)  # the "columns": W_g^T @ X_g, per image
        cols = cols.reshape((b, m) + kernel + tuple(in_sp))  # (b, M, *K, *in)
        canvas = _scratch.buffer("convtranspose.canvas", (b, m) + tuple(full), dtype)
        canvas.fill(0)
        for t in np.ndindex(*kernel):  # col2im: each tap's columns land on a strided view
            sl = tuple(slice(ti * d, ti * d + (j - 1) * s + 1, s)
                       for ti, d, j, s in zip(t, dilations, in_sp, strides))
            canvas[(slice(None), slice(None)) + sl] += cols[(slice(None), slice(None)) + t]
        y[n0 : n0 + b] = canvas[crop]
    if B is not None:
        if B.shape != (m,):
            raise GraphError(f"ConvTranspose: bias shape {list(B.shape)} must be [{m}]")
        y += B.astype(dtype, copy=False).reshape((m,) + (1,) * nd)
    return (y,)
