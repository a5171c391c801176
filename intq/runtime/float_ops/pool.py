"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (N-d, float32).

Window geometry (strides, dilations, explicit pads, ceil_mode) as in ``_windows``. Pools run
tap by tap over strided views of the padded input: prod(kernel) vectorised passes over chunks
of (image, channel) planes sized to stay in cache, never a Python loop over pixels.

Input contract: X (N, C, *spatial), float32 (MaxPool also accepts int8/uint8, as ONNX does).
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError

from ._checks import ints
from ._windows import Geometry, channel_chunks, geometry, pad, taps
from .registry import FLOAT_OPS


def _geometry(op: str, X: np.ndarray, kernel_shape, **kw) -> Geometry:
    if X.ndim < 3:
        raise GraphError(f"{op}: input must be (N, C, *spatial), got shape {list(X.shape)}")
    kernel = ints(kernel_shape)
    if not kernel:
        raise GraphError(f"{op}: the kernel_shape attribute is required")
    return geometry(op, X.shape[2:], kernel, **kw)


def _planes(X: np.ndarray) -> np.ndarray:
    """(N, C, *sp) -> (1, N*C, *sp): every image-channel plane pools alike."""
    return X.reshape((1, X.shape[0] * X.shape[1]) + X.shape[2:])


def _reduce_taps(xp: np.ndarray, g: Geometry, ufunc: np.ufunc) -> np.ndarray:
    """``out[0, p, o] = ufunc.reduce over taps t of xp[0, p, o*s + t*d]``, chunked over planes."""
    planes = xp.shape[1]
    out = np.empty((1, planes) + g.out_shape, xp.dtype)
    in_size = int(np.prod(xp.shape[2:], dtype=np.int64))
    out_size = int(np.prod(g.out_shape, dtype=np.int64))
    for cs in channel_chunks(planes, xp.itemsize * (in_size + out_size)):
        acc = out[:, cs]
        for t, view in taps(xp[:, cs], g):
            if t == 0:
                np.copyto(acc, view)
            else:
                ufunc(acc, view, out=acc)
    return out


def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


@FLOAT_OPS.register()
def MaxPool(X, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, pads=None,
            storage_order=0, strides=None, return_indices=False):
    """ONNX MaxPool: ``Y[n, c, o] = max_t Xpad[n, c, o*s + t*d]``, padding never wins.

    Returns (Y,), or (Y, Indices) when asked with ``return_indices=True`` (not an ONNX
    attribute: the caller passes it when the node binds the optional second output, which
    costs several times the pooling itself). Indices (int64) is the flat index of the first
    maximum (in tap order) into the unpadded input, ``(n*C + c) * prod(spatial)`` plus the
    row-major spatial index (column-major over the spatial axes when storage_order == 1).
    """
    g = _geometry("MaxPool", X, kernel_shape, strides=strides, dilations=dilations, pads=pads,
                  auto_pad=auto_pad, ceil_mode=ceil_mode)
    if int(storage_order) not in (0, 1):
        raise GraphError(f"MaxPool: storage_order={storage_order} must be 0 or 1")
    xp = pad(_planes(X), g.pads_begin, g.reach_end, _lowest(X.dtype), scratch="pool.pad")
    y = _reduce_taps(xp, g, np.maximum)
    n, c = X.shape[:2]
    out_shape = (n, c) + g.out_shape
    if not return_indices:
        return (y.reshape(out_shape),)
    indices = _argmax_indices(xp, y, g, int(storage_order))
    return y.reshape(out_shape), indices.reshape(out_shape)


def _argmax_indices(xp: np.ndarray, y: np.ndarray, g: Geometry, storage_order: int) -> np.ndarray:
    """Flat input index of the first tap whose value equals the maximum ``y`` (see MaxPool)."""
    nd = len(g.kernel)
    if storage_order == 0:
        place = [int(np.prod(g.in_shape[a + 1 :], dtype=np.int64)) for a in range(nd)]
    else:
        place = [int(np.prod(g.in_shape[:a], dtype=np.int64)) for a in range(nd)]
    grids = np.meshgrid(*[np.arange(o, dtype=np.int64) * s for o, s in zip(g.out_shape, g.strides)],
                        indexing="ij")
    found = np.full(y.shape, -1, np.int64)
    # reverse tap order: the last write is the first tap that attains the maximum
    views = list(taps(xp, g))
    for (t, view), tap in zip(reversed(views), reversed(list(np.ndindex(*g.kernel)))):
        spatial = sum((grid + (ti * d - b)) * p
                      for grid, ti, d, b, p in zip(grids, tap, g.dilations, g.pads_begin, place))
        np.copyto(found, spatial, where=view == y)
    plane = int(np.prod(g.in_shape, dtype=np.int64))
    found += (np.arange(y.shape[1], dtype=np.int64) * plane).reshape((1, -1) + (1,) * nd)
    return found


@FLOAT_OPS.register()
def AveragePool(X, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                kernel_shape=None, pads=None, strides=None):
    """ONNX AveragePool: ``Y[n, c, o] = sum_t Xpad[n, c, o*s + t*d] / count[o]``.

    ``count[o]`` = number of taps inside the input, or, with count_include_pad, inside the
    input plus its declared pads (taps in the extra ceil_mode overhang never count). The count
    is separable, a product over axes of per-axis counts.
    """
    g = _geometry("AveragePool", X, kernel_shape, strides=strides, dilations=dilations,
                  pads=pads, auto_pad=auto_pad, ceil_mode=ceil_mode)
    xp = pad(_planes(X), g.pads_begin, g.reach_end, 0, scratch="pool.pad")
    y = _reduce_taps(xp, g, np.add)
    count = np.ones((), np.float64)
    for a in range(len(g.kernel)):
        start = np.arange(g.out_shape[a]) * g.strides[a] - g.pads_begin[a]
        pos = start[:, None] + np.arange(g.kernel[a]) * g.dilations[a]  # (out, k) input indices
        lo, hi = (-g.pads_begin[a], g.in_shape[a] + g.pads_end[a]) if count_include_pad else (0, g.in_shape[a])
        per_axis = ((pos >= lo) & (pos < hi)).sum(axis=1)
        count = np.multiply.outer(count, per_axis)
    np.divide(y, count.astype(y.dtype), out=y)
    n, c = X.shape[:2]
    return (y.reshape((n, c) + g.out_shape),)


def _global(op: str, X: np.ndarray, reduce) -> np.ndarray:
    if X.ndim < 3:
        raise GraphError(f"{op}: input must be (N, C, *spatial), got shape {list(X.shape)}")
    n, c = X.shape[:2]
    y = reduce(X.reshape(n, c, -1), axis=2)
    return y.reshape((n, c) + (1,) * (X.ndim - 2))


@FLOAT_OPS.register()
def GlobalAveragePool(X):
    """``Y[n, c, 1, ...] = mean over all spatial positions of X[n, c]``."""
    return (_global("GlobalAveragePool", X, np.mean),)


@FLOAT_OPS.register()
def GlobalMaxPool(X):
    """``Y[n, c, 1, ...] = max over all spatial positions of X[n, c]``."""
    return (_global("GlobalMaxPool", X, np.max),)
