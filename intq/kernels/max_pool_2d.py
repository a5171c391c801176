"""MAX_POOL_2D: the largest input value of each window's valid pixels, NHWC.

Formula (LiteRT ``reference_integer_ops::MaxPool`` and TFLM's copy, identical): ``y = clamp(max
over the window clipped to the image, act_min, act_max)``; the running maximum starts at -128,
so padding never wins. Window placement: Pool2DOptions through padding.h
(:func:`intq.kernels._pool_common.pool_geometry`), as AVERAGE_POOL_2D. Contract: int8 per-tensor
input and output with the same zero point and scales within 1e-6 (TFLM ``PoolingPrepare``).
``litert-ref`` and ``tflite`` compute the same function.

Run: the input is padded with -128 to whole windows; the window maximum is separable, formed with
one shifted strided maximum per filter column, then one per filter row
(:func:`intq.kernels._pool_common.window_reduce`).

**16x8** (int16 activations, int8 weights): the maximum of each window's in-image int16 values, clamped to the fused
activation's range. LiteRT (``reference_integer_ops::MaxPool`` for int16) and TFLM (the same
function) agree. Contract: int16 NHWC per tensor, zero point 0, input and output with the same
scale; Pool2DOptions as the int8 kernel.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import PoolWindow, prepare_pool, window_reduce
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_common import INT16_MIN, io_int16, check_16x8

OP = "MAX_POOL_2D"

_INT8_LOWEST = -128  # std::numeric_limits<int8_t>::lowest(): the running maximum's start


@kernel(OP)
def prepare(ctx: KernelContext) -> PoolWindow:
    return prepare_pool(ctx, ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output"))


def run(p: PoolWindow, x):
    m = window_reduce(p.geometry, x, _INT8_LOWEST, np.maximum)  # padding never wins
    return (np.clip(m, p.act_min, p.act_max).astype(np.int8),)


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> PoolWindow:
    check_16x8(ctx)
    return prepare_pool(ctx, *io_int16(ctx))


def run_int16(p: PoolWindow, x):
    m = window_reduce(p.geometry, x, INT16_MIN, np.maximum)  # padding never wins
    return (np.clip(m, p.act_min, p.act_max).astype(np.int16),)
