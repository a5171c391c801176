"""MAX_POOL_2D: the largest input value of each window's valid pixels, NHWC.

Formula (LiteRT ``reference_integer_ops::MaxPool`` and TFLM's copy, identical): ``y = clamp(max
over the window clipped to the image, act_min, act_max)``; the running maximum starts at -128,
so padding never wins. Window placement: Pool2DOptions through padding.h
(:func:`intq.kernels._pool_common.pool_geometry`), as AVERAGE_POOL_2D. Contract: int8 per-tensor
input and output with the same zero point and scales within 1e-6 (TFLM ``PoolingPrepare``).
``litert-ref`` and ``tflite`` compute the same function.

Run: the input is padded with -128 to whole windows; the window maximum is separable, so it is
formed with one shifted strided maximum per filter column, then one per filter row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import (
    PoolGeometry,
    check_output_shape,
    fused_activation_range,
    pool_geometry,
    require_same_qparams,
    static_shape,
)
from intq.kernels.base import KernelContext, kernel

OP = "MAX_POOL_2D"

_INT8_LOWEST = -128  # std::numeric_limits<int8_t>::lowest(): the running maximum's start


@dataclass(frozen=True)
class MaxPool2DParams:
    geometry: PoolGeometry
    act_min: int
    act_max: int


@kernel(OP)
def prepare(ctx: KernelContext) -> MaxPool2DParams:
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = ctx.per_tensor(x, "input")
    out_qp = ctx.per_tensor(y, "output")
    require_same_qparams(ctx, in_qp, out_qp, exact=False)
    shape = static_shape(ctx, x, "input")
    g = pool_geometry(ctx, shape)
    check_output_shape(ctx, (shape[0], g.out_h, g.out_w, shape[3]))
    lo, hi = fused_activation_range(ctx, out_qp)
    return MaxPool2DParams(g, lo, hi)


def run(p: MaxPool2DParams, x):
    g = p.geometry
    xp = np.pad(x, ((0, 0), (g.pad_h, g.pad_bottom), (g.pad_w, g.pad_right), (0, 0)), constant_values=_INT8_LOWEST)
    span_h, span_w = (g.out_h - 1) * g.stride_h + 1, (g.out_w - 1) * g.stride_w + 1
    cols = xp[:, :, 0:span_w:g.stride_w]  # [N, Hp, out_w, C]: window column maxima, tap by tap
    for fx in range(1, g.filter_w):
        cols = np.maximum(cols, xp[:, :, fx:fx + span_w:g.stride_w])
    m = cols[:, 0:span_h:g.stride_h]  # [N, out_h, out_w, C]
    for fy in range(1, g.filter_h):
        m = np.maximum(m, cols[:, fy:fy + span_h:g.stride_h])
    return (np.clip(m, p.act_min, p.act_max).astype(np.int8),)
