"""AVERAGE_POOL_2D: the rounded mean of each window's *valid* input pixels, NHWC.

Formula (LiteRT ``reference_integer_ops::AveragePool``, TFLM's copy of it, identical for int8):
for each output pixel and channel, ``acc = sum of q_in over the window clipped to the image``,
``count`` = the number of those pixels (padding is not counted), then

    y = (acc + count // 2) // count     if acc > 0      (C division, truncating)
    y = (acc - count // 2) // count     otherwise

— the quotient rounded half away from zero — clamped to the fused activation's range. The zero
point is never subtracted: input and output share scale and zero point (spec 003), so the mean
of the raw integers is the raw integer of the mean.

Window placement: Pool2DOptions (``padding`` SAME/VALID, ``stride_h/w``, ``filter_height/width``)
through padding.h (:func:`intq.kernels._pool_common.pool_geometry`); a window that hangs over the
edge averages only the pixels inside. Contract: int8 per-tensor input and output with the same
zero point and scales within 1e-6 (TFLM ``PoolingPrepare``; LiteRT only DCHECKs it).
``litert-ref`` and ``tflite`` compute the same function (LiteRT accumulates in int64, TFLM in
int32; an int8 window sum fits either).

Run: the input is padded with zeros to whole windows; the window sum is separable, so it is
formed with one shifted strided add per filter column, then one per filter row (no loop over
pixels or channels). |acc| <= 128 * filter_h * filter_w, exact in int32 (checked at prepare).
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

OP = "AVERAGE_POOL_2D"


@dataclass(frozen=True, eq=False)
class AveragePool2DParams:
    geometry: PoolGeometry
    count: np.ndarray  # int32 [out_h, out_w, 1]: valid pixels per window
    half_count: np.ndarray  # int32, count // 2
    act_min: int
    act_max: int


@kernel(OP)
def prepare(ctx: KernelContext) -> AveragePool2DParams:
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = ctx.per_tensor(x, "input")
    out_qp = ctx.per_tensor(y, "output")
    require_same_qparams(ctx, in_qp, out_qp, exact=False)
    shape = static_shape(ctx, x, "input")
    g = pool_geometry(ctx, shape)
    check_output_shape(ctx, (shape[0], g.out_h, g.out_w, shape[3]))
    lo, hi = fused_activation_range(ctx, out_qp)
    if 128 * g.filter_h * g.filter_w > 2**31 - 1:
        raise ctx.error(f"a {g.filter_h}x{g.filter_w} window can overflow the int32 window sum")
    count = g.valid_counts().astype(np.int32)
    return AveragePool2DParams(g, count, count // 2, lo, hi)


def run(p: AveragePool2DParams, x):
    g = p.geometry
    xp = np.pad(x.astype(np.int32), ((0, 0), (g.pad_h, g.pad_bottom), (g.pad_w, g.pad_right), (0, 0)))
    span_h, span_w = (g.out_h - 1) * g.stride_h + 1, (g.out_w - 1) * g.stride_w + 1
    cols = xp[:, :, 0:span_w:g.stride_w]  # [N, Hp, out_w, C]: window column sums, tap by tap
    for fx in range(1, g.filter_w):
        cols = cols + xp[:, :, fx:fx + span_w:g.stride_w]
    acc = cols[:, 0:span_h:g.stride_h]  # [N, out_h, out_w, C]
    for fy in range(1, g.filter_h):
        acc = acc + cols[:, fy:fy + span_h:g.stride_h]
    q = (np.abs(acc) + p.half_count) // p.count  # |acc| rounded half up = acc rounded half away
    y = np.where(acc < 0, -q, q)
    return (np.clip(y, p.act_min, p.act_max).astype(np.int8),)
