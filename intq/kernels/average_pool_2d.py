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

Run: the input is padded with zeros to whole windows and summed in int32 with one shifted strided
add per filter column, then one per filter row (:func:`intq.kernels._pool_common.window_reduce`,
shared with MAX_POOL_2D and the 16x8 pools). |acc| <= 128 * filter_h * filter_w, exact in int32
(checked at prepare).

**16x8** (int16 activations, int8 weights): the rounded mean of each window's in-image int16 values.

``acc`` = the sum over the window clipped to the image (int64 in LiteRT's
``reference_integer_ops::AveragePool`` for int16, int32 in TFLM's and here — equal while
``2^15 * filter_h * filter_w < 2^31``, checked), ``count`` = the pixels summed, then
``(acc + count/2) / count`` if ``acc > 0`` else ``(acc - count/2) / count`` (C division: the
quotient rounded half away from zero), clamped to the fused activation's range. Contract: int16
NHWC per tensor, zero point 0, input and output with the same scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import PoolWindow, WindowCounts, prepare_pool, rounded_average, window_counts, window_reduce
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_common import io_int16, check_16x8

OP = "AVERAGE_POOL_2D"


@dataclass(frozen=True, eq=False)
class AveragePool2DParams:
    pool: PoolWindow
    counts: WindowCounts  # valid pixels per window


@kernel(OP)
def prepare(ctx: KernelContext) -> AveragePool2DParams:
    pool = prepare_pool(ctx, ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output"))
    return AveragePool2DParams(pool, window_counts(ctx, pool.geometry, 128))  # |q| <= 128


def run(p: AveragePool2DParams, x):
    acc = window_reduce(p.pool.geometry, x.astype(np.int32), 0, np.add)  # |acc| < 2^31 (prepare)
    return (np.clip(rounded_average(acc, p.counts), p.pool.act_min, p.pool.act_max).astype(np.int8),)


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True, eq=False)
class AveragePool16x8Params:
    pool: PoolWindow
    counts: WindowCounts  # in-image pixels per window


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> AveragePool16x8Params:
    check_16x8(ctx)
    pool = prepare_pool(ctx, *io_int16(ctx))
    return AveragePool16x8Params(pool, window_counts(ctx, pool.geometry, 1 << 15))  # |q| <= 2^15


def run_int16(p: AveragePool16x8Params, x):
    acc = window_reduce(p.pool.geometry, x.astype(np.int32), 0, np.add)  # |acc| < 2^31 (prepare)
    return (np.clip(rounded_average(acc, p.counts), p.pool.act_min, p.pool.act_max).astype(np.int16),)
