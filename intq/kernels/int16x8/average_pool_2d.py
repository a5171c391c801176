"""AVERAGE_POOL_2D, 16x8: the rounded mean of each window's in-image int16 values.

``acc`` = the sum over the window clipped to the image (int64 in LiteRT's
``reference_integer_ops::AveragePool`` for int16, int32 in TFLM's — equal while
``2^15 * filter_h * filter_w < 2^31``, checked), ``count`` = the pixels summed, then
``(acc + count/2) / count`` if ``acc > 0`` else ``(acc - count/2) / count`` (C division: the
quotient rounded half away from zero), clamped to the fused activation's range. Contract: int16
NHWC per tensor, zero point 0, input and output with the same scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._pool import PreparedPool, prepare_pool, window_reduce

OP = "AVERAGE_POOL_2D"


@dataclass(frozen=True, eq=False)
class AveragePool16x8Params:
    pool: PreparedPool
    count: np.ndarray  # int64 [out_h, out_w, 1]: in-image pixels per window
    half_count: np.ndarray


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> AveragePool16x8Params:
    p = prepare_pool(ctx)
    g = p.geometry
    if (1 << 15) * g.filter_h * g.filter_w > 2**31 - 1:
        raise ctx.error(f"a {g.filter_h}x{g.filter_w} window can overflow TFLite Micro's int32 window sum")
    count = g.valid_counts().astype(np.int64)
    return AveragePool16x8Params(p, count, count // 2)


def run(p: AveragePool16x8Params, x):
    acc = window_reduce(p.pool.geometry, x.astype(np.int64), 0, np.add)
    q = (np.abs(acc) + p.half_count) // p.count  # |acc| rounded half up = acc rounded half away
    y = np.where(acc < 0, -q, q)
    return (np.clip(y, p.pool.act_min, p.pool.act_max).astype(np.int16),)
