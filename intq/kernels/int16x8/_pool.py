"""Window sums and maxima of the 16x8 pooling kernels (no ``OP``). Integer-only at run time.

The geometry is :func:`intq.kernels._pool_common.pool_geometry` (TFLite's padding.h); the input
is padded to whole windows, then reduced with one strided pass per filter column and per filter
row (separable), as the int8 kernels do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import (
    PoolGeometry,
    check_output_shape,
    pool_geometry,
    require_same_qparams,
)
from intq.kernels.base import KernelContext
from intq.kernels.int16x8._common import fused_activation_range, io_int16, reference_runtime, static_shape


@dataclass(frozen=True)
class PreparedPool:
    geometry: PoolGeometry
    act_min: int
    act_max: int


def prepare_pool(ctx: KernelContext) -> PreparedPool:
    """Contract: int16 NHWC in and out, zero point 0, the same scale (within TFLM's 1e-6)."""
    reference_runtime(ctx)
    in_qp, out_qp = io_int16(ctx)
    require_same_qparams(ctx, in_qp, out_qp, exact=False)
    shape = static_shape(ctx, ctx.input(0), "input")
    g = pool_geometry(ctx, shape)
    check_output_shape(ctx, (shape[0], g.out_h, g.out_w, shape[3]))
    lo, hi = fused_activation_range(ctx, out_qp)
    return PreparedPool(g, lo, hi)


def window_reduce(g: PoolGeometry, x: np.ndarray, fill: int, combine) -> np.ndarray:
    """``combine`` (np.add or np.maximum) over each window of ``x`` (int64 NHWC), padding ``fill``."""
    xp = np.pad(x, ((0, 0), (g.pad_h, g.pad_bottom), (g.pad_w, g.pad_right), (0, 0)), constant_values=fill)
    span_h, span_w = (g.out_h - 1) * g.stride_h + 1, (g.out_w - 1) * g.stride_w + 1
    cols = xp[:, :, 0:span_w:g.stride_w]
    for fx in range(1, g.filter_w):
        cols = combine(cols, xp[:, :, fx:fx + span_w:g.stride_w])
    acc = cols[:, 0:span_h:g.stride_h]
    for fy in range(1, g.filter_h):
        acc = combine(acc, cols[:, fy:fy + span_h:g.stride_h])
    return acc
