"""AVERAGE_POOL_2D, 16x8: the rounded mean of each window's in-image int16 values.

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
from intq.kernels.int16x8._common import io_int16, runtime_16x8

OP = "AVERAGE_POOL_2D"


@dataclass(frozen=True, eq=False)
class AveragePool16x8Params:
    pool: PoolWindow
    counts: WindowCounts  # in-image pixels per window


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> AveragePool16x8Params:
    runtime_16x8(ctx)
    pool = prepare_pool(ctx, *io_int16(ctx))
    return AveragePool16x8Params(pool, window_counts(ctx, pool.geometry, 1 << 15))  # |q| <= 2^15


def run(p: AveragePool16x8Params, x):
    acc = window_reduce(p.pool.geometry, x.astype(np.int32), 0, np.add)  # |acc| < 2^31 (prepare)
    return (np.clip(rounded_average(acc, p.counts), p.pool.act_min, p.pool.act_max).astype(np.int16),)
