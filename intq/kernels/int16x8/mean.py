"""MEAN, 16x8: the mean of an int16 tensor over constant axes, requantized to the output's scale.

Formula (``reference_ops::QuantizedMeanOrSum<int16_t, int32_t>``, ``compute_sum = false``, run by
LiteRT 2.3's ``BUILTIN_REF`` MEAN and by TFLM's ``EvalMeanHelper`` for int16 — measured to agree,
as for int8)::

    acc = sum over the reduced axes of x                    (int32)
    y   = clamp(MBQM(acc, m', shift'), -32768, 32767)

with ``(m', shift')`` the Q0.31 pair of ``double(s_in) / double(s_out)`` with ``1/N`` folded in by
integer division (``k = min(floor(log2 N), 32, 31 + shift)``, ``m' = (m << k) // N``,
``shift' = shift - k``): :func:`intq.kernels._pool_common.quantized_sum`, shared with the int8
MEAN and SUM. Zero points are 0. Contract: ``32768 * N`` (shifted left by a positive ``shift'``)
must fit int32 (the runtimes' accumulator).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import QuantizedSumParams, quantized_sum
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import INT16_MAX, INT16_MIN, io_int16, runtime_16x8
from intq.qmath.raw import mbqm

OP = "MEAN"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> QuantizedSumParams:
    runtime_16x8(ctx)
    return quantized_sum(ctx, *io_int16(ctx), mean=True, max_diff=1 << 15)  # |q| <= 2^15, Z_in = 0


def run(p: QuantizedSumParams, x, axis=None):
    acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # |acc| <= 2^15 N < 2^31; Z = 0
    y = np.clip(mbqm(acc, p.multiplier, p.shift), INT16_MIN, INT16_MAX)
    return (y.astype(np.int16).reshape(p.out_shape),)
