"""Conv and ConvTranspose (N-d: 1-D, 2-D, 3-D, ...) on float32, without Python pixel loops.

Conv, for output channel m in group g and output position o::

    Y[n, m, o] = B[m] + sum_{c in group g, t in kernel} W[m, c, t] * Xpad[n, c, o*s + t*d]

computed per image as im2col (a strided window view of the padded input, copied into a
(C/group * prod(kernel), prod(out)) matrix) followed by one BLAS matmul per group; a large
matrix is built and multiplied in blocks of output rows that stay in cache. A 1x1 kernel needs
no im2col at all. Depthwise convolution (group == C, one input channel per group) instead
accumulates ``W[:, t] * window_t`` tap by tap over cache-sized channel chunks: prod(kernel)
vectorised passes and no im2col copy. Temporaries live in reused work buffers (``_scratch``).

Input contract: X (N, C, *spatial) float32; W (M, C/group, *kernel); B (M,) or None; the
sliding-window attributes as in ONNX (see ``_windows`` for the size formulas).
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError
from intq.ir.windows import pads_of

from . import _scratch
from ._checks import ints, output_size
from ._windows import Geometry, channel_chunks, geometry, pad, per_axis, taps, windows
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


#: im2col matrices above this size are built and multiplied in blocks of output rows ...
_IM2COL_WHOLE_LIMIT = 4 << 20
#: ... of about this size, which stay in the L2 cache between the copy and the GEMM (measured
#: 20-30% faster on 56x56 and 112x112 ResNet layers; small matrices are faster whole, since a
#: GEMM with few columns runs below BLAS peak).
_IM2COL_BLOCK = 1 << 20


def _im2col_gemm(X: np.ndarray, W: np.ndarray, g: Geometry, group: int) -> np.ndarray:
    """General (grouped) convolution: per image, im2col copies and one matmul per group over
    all output positions, or per block of output rows when the im2col matrix is large."""
    n, c = X.shape[:2]
    m = W.shape[0]
    rows = (c // group) * g.taps  # reduction length of one group's GEMM
    positions = int(np.prod(g.out_shape, dtype=np.int64))
    w = W.reshape(group, m // group, rows)  # (group, M/group, C/group * K)
    y = np.empty((n, group, m // group, positions), X.dtype)
    if g.taps == 1 and not any(g.pads_begin) and not any(g.reach_end):
        # 1x1 kernel: the input (subsampled by the strides) is the matrix; a copy only if strided
        step = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in g.strides)
        for i in range(n):
            np.matmul(w, X[i : i + 1][step].reshape(group, rows, positions), out=y[i])
        return y.reshape((n, m) + g.out_shape)
    out0 = g.out_shape[0]
    per_out_row = X.itemsize * group * rows * (positions // max(out0, 1))
    block = out0
    if per_out_row * out0 > _IM2COL_WHOLE_LIMIT:
        block = max(1, _IM2COL_BLOCK // per_out_row)
    inner = g.out_shape[1:]
    for i in range(n):  # a loop over images bounds the im2col matrix (memory, cache)
        xp = pad(X[i : i + 1], g.pads_begin, g.reach_end, scratch="conv.pad")
        view = windows(xp, g)  # (1, C, *K, *out), no copy
        yi = y[i].reshape((group, m // group, out0) + inner)
        for r0 in range(0, out0, block):
            part = view[(Ellipsis, slice(r0, r0 + block)) + (slice(None),) * len(inner)]
            cols = _scratch.buffer("conv.im2col", part.shape, X.dtype)
            np.copyto(cols, part)  # the im2col copy (of one block of output rows)
            cols = cols.reshape(group, rows, -1)
            if block >= out0:
                np.matmul(w, cols, out=y[i])
            else:
                prod = _scratch.buffer("conv.block", (group, m // group, cols.shape[2]), X.dtype)
                np.matmul(w, cols, out=prod)
                yi[:, :, r0 : r0 + block] = prod.reshape((group, m // group, -1) + inner)
    return y.reshape((n, m) + g.out_shape)


def _depthwise(X: np.ndarray, W: np.ndarray, g: Geometry) -> np.ndarray:
    """group == C: ``Y[n, c*mult + j, o] = sum_t W[c*mult + j, 0, t] * Xpad[n, c, o*s + t*d]``.

    Tap-by-tap multiply-accumulate over chunks of channels whose working set stays in cache.
    Stride 1 works on long contiguous rows ("wide" outputs): with the padded image of channel
    c flattened (row-major strides P_a over padded sizes Pd_a), output o reads
    ``flat[off_t + q]`` with ``off_t = sum_a t_a*d_a*P_a`` and ``q = sum_a o_a*P_a``. Computing
    every q in [0, out_0 * P_0) yields all outputs plus ``Pd_a - out_a`` junk columns on the
    inner axes, cropped at the end, so each tap is one vectorised pass over whole channels.
    Other strides use strided tap views (the wide form would waste a factor ~stride).
    """
    n, c = X.shape[:2]
    mult = W.shape[0] // c
    w = W.reshape(c, mult, g.taps, 1)
    if any(s != 1 for s in g.strides):
        return _depthwise_taps(X, w, g)
    pd = g.padded_shape
    rowlen = [int(np.prod(pd[a + 1 :], dtype=np.int64)) for a in range(len(pd))]  # P_a
    offs = [sum(ti * d * p for ti, d, p in zip(t, g.dilations, rowlen)) for t in np.ndindex(*g.kernel)]
    q = g.out_shape[0] * rowlen[0]
    flat_len = max(int(np.prod(pd, dtype=np.int64)), max(offs) + q)
    flat = _scratch.buffer("depthwise.flat", (n, c, flat_len), X.dtype)
    flat.fill(0)
    interior = tuple(slice(b, b + i) for b, i in zip(g.pads_begin, g.in_shape))
    flat[:, :, : int(np.prod(pd, dtype=np.int64))].reshape((n, c) + pd)[(slice(None),) * 2 + interior] = X
    wide = _scratch.buffer("depthwise.wide", (n, c, mult, q), X.dtype)
    chunks = channel_chunks(c, X.itemsize * (flat_len + 2 * mult * q))
    scratch = _scratch.buffer("depthwise.tmp", (chunks[0].stop, mult, q), X.dtype)
    for i in range(n):
        for cs in chunks:
            rows = flat[i, cs, None, :]  # (c, 1, flat_len)
            acc = wide[i, cs]  # (c, mult, q)
            tmp = scratch[: acc.shape[0]]
            wc = w[cs]
            for t, off in enumerate(offs):
                view = rows[:, :, off : off + q]
                if t == 0:
                    np.multiply(view, wc[:, :, 0], out=acc)
                else:
                    np.multiply(view, wc[:, :, t], out=tmp)
                    np.add(acc, tmp, out=acc)
    crop = (slice(None),) * 4 + tuple(slice(0, o) for o in g.out_shape[1:])
    y = wide.reshape((n, c, mult, g.out_shape[0]) + pd[1:])[crop]
    # a copy even when the crop keeps everything (a 1x1 kernel): ``wide`` is a scratch buffer the
    # next depthwise layer overwrites, so the result must not be a view of it
    return np.array(y, copy=True, order="C").reshape((n, c * mult) + g.out_shape)


def _depthwise_taps(X: np.ndarray, w: np.ndarray, g: Geometry) -> np.ndarray:
    """Depthwise convolution with strides > 1: accumulate strided tap views per chunk."""
    n, c = X.shape[:2]
    mult = w.shape[1]
    nd = len(g.kernel)
    w = w.reshape(c, mult, g.taps, *(1,) * nd)
    xp = pad(X, g.pads_begin, g.reach_end, scratch="conv.pad")
    y = np.empty((n, c, mult) + g.out_shape, X.dtype)
    out_size = int(np.prod(g.out_shape, dtype=np.int64))
    in_size = int(np.prod(xp.shape[2:], dtype=np.int64))
    chunks = channel_chunks(c, X.itemsize * (in_size + 2 * mult * out_size))
    scratch = _scratch.buffer("depthwise.tmp", (chunks[0].stop, mult) + g.out_shape, X.dtype)
    for i in range(n):
        for cs in chunks:
            acc = y[i, cs]
            tmp = scratch[: acc.shape[0]]
            for t, view in taps(xp[i : i + 1, cs], g):
                view = view[0][:, None]  # (c, 1, *out)
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
    Computed as one matmul per group (``W_g^T @ X_g``, the "columns") and a col2im that adds
    each tap's columns into a strided view of the output: prod(kernel) vectorised adds.
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
    K = int(np.prod(kernel, dtype=np.int64))
    positions = int(np.prod(in_sp, dtype=np.int64))
    w = W.astype(dtype, copy=False).reshape(group, c // group, mg * K).transpose(0, 2, 1)
    x = X.astype(dtype, copy=False).reshape(n, group, c // group, positions)
    canvas_shape = (m,) + tuple(full)
    crop = (slice(None),) + tuple(slice(b, b + o) for b, o in zip(begin, out))
    y = np.empty((n, m) + tuple(out), dtype)
    for i in range(n):
        cols = _scratch.buffer("convtranspose.cols", (group, mg * K, positions), dtype)
        np.matmul(w, x[i], out=cols)  # the "columns": W_g^T @ X_g
        cols = cols.reshape((m,) + kernel + tuple(in_sp))  # (M, *K, *in)
        canvas = _scratch.buffer("convtranspose.canvas", canvas_shape, dtype)
        canvas.fill(0)
        for t in np.ndindex(*kernel):  # col2im: each tap's columns land on a strided view
            sl = tuple(slice(ti * d, ti * d + (j - 1) * s + 1, s)
                       for ti, d, j, s in zip(t, dilations, in_sp, strides))
            canvas[(slice(None),) + sl] += cols[(slice(None),) + t]
        y[i] = canvas[crop]
    if B is not None:
        if B.shape != (m,):
            raise GraphError(f"ConvTranspose: bias shape {list(B.shape)} must be [{m}]")
        y += B.astype(dtype, copy=False).reshape((m,) + (1,) * nd)
    return (y,)
