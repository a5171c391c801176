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

``tpu-mlir`` target: TPU-MLIR's max ``tpu.Pool2D`` (:mod:`intq.kernels.tpu_mlir.pool`).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import PoolWindow, prepare_pool, window_reduce
from intq.kernels.base import KernelContext, kernel
from intq.kernels.tpu_mlir import pool as tpu_mlir_pool
from intq.kernels.targets import Runtime as _Runtime

OP = "MAX_POOL_2D"

_INT8_LOWEST = -128  # std::numeric_limits<int8_t>::lowest(): the running maximum's start


@kernel(OP)
def prepare(ctx: KernelContext) -> PoolWindow:
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_pool.prepare_max(ctx)
    return prepare_pool(ctx, ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output"))


def run(p: PoolWindow, x):
    if type(p) is tpu_mlir_pool.TpuMlirMaxPoolParams:
        return tpu_mlir_pool.run_max(p, x)
    m = window_reduce(p.geometry, x, _INT8_LOWEST, np.maximum)  # padding never wins
    return (np.clip(m, p.act_min, p.act_max).astype(np.int8),)
