"""MAX_POOL_2D, 16x8: the maximum of each window's in-image int16 values, clamped to the fused
activation's range. LiteRT (``reference_integer_ops::MaxPool`` for int16) and TFLM (the same
function) agree. Contract: int16 NHWC per tensor, zero point 0, input and output with the same
scale; Pool2DOptions as the int8 kernel.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import PoolWindow, prepare_pool, window_reduce
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import INT16_MIN, io_int16, runtime_16x8

OP = "MAX_POOL_2D"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> PoolWindow:
    runtime_16x8(ctx)
    return prepare_pool(ctx, *io_int16(ctx))


def run(p: PoolWindow, x):
    m = window_reduce(p.geometry, x, INT16_MIN, np.maximum)  # padding never wins
    return (np.clip(m, p.act_min, p.act_max).astype(np.int16),)
