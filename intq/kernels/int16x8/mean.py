"""MEAN, 16x8: the mean of an int16 tensor over constant axes, requantized to the output's scale.

Formula (``reference_ops::QuantizedMeanOrSum<int16_t, int32_t>``, ``compute_sum = false``, run by
LiteRT 2.3's ``BUILTIN_REF`` MEAN and by TFLM's ``EvalMeanHelper`` for int16 — measured to agree,
as for int8)::

    acc = sum over the reduced axes of x                    (int32)
    y   = clamp(MBQM(acc, m', shift'), -32768, 32767)

with ``(m', shift')`` the Q0.31 pair of ``double(s_in) / double(s_out)`` with ``1/N`` folded in by
integer division (``k = min(floor(log2 N), 32, 31 + shift)``, ``m' = (m << k) // N``,
``shift' = shift - k``; :func:`intq.kernels._pool_common.prepare_quantized_sum`'s arithmetic).
Zero points are 0. Contract: ``32768 * N`` must fit int32 (the runtimes' accumulator).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import check_output_shape, constant_axes, reduced_shape
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import INT16_MAX, INT16_MIN, INT32_MAX, io_int16, reference_runtime, static_shape
from intq.qmath.raw import mbqm
from intq.qmath import quantize_multiplier

OP = "MEAN"


@dataclass(frozen=True)
class Mean16x8Params:
    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]
    multiplier: int
    shift: int


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Mean16x8Params:
    reference_runtime(ctx)
    in_qp, out_qp = io_int16(ctx)
    shape = static_shape(ctx, ctx.input(0), "input")
    if not shape or min(shape) < 1:
        raise ctx.error(f"input must have rank >= 1 and no empty dimension, got shape {list(shape)}")
    axes = constant_axes(ctx, 1, len(shape))
    keep = bool(ctx.attr("keep_dims", False))
    out_shape = check_output_shape(ctx, reduced_shape(shape, axes, keep))
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if count * (1 << 15) > INT32_MAX:
        raise ctx.error(f"reducing {count} elements can overflow the runtime's int32 accumulator; split the reduction")
    real = in_qp.tensor_scale / out_qp.tensor_scale
    multiplier, shift = (int(v) for v in quantize_multiplier(real))
    if shift > 30:
        raise ctx.error(f"s_in / s_out = {real:.6g} is too large for TFLite's fixed-point multiplier")
    k = min(count.bit_length() - 1, 32, 31 + shift)  # 63 - CountLeadingZeros(count), clamped
    multiplier = (multiplier << k) // count
    shift -= k
    return Mean16x8Params(axes, keep, out_shape, multiplier, shift)


def run(p: Mean16x8Params, x, axis=None):
    acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # |acc| <= 2^15 N < 2^31
    y = np.clip(mbqm(acc, p.multiplier, p.shift), INT16_MIN, INT16_MAX)
    return (y.astype(np.int16).reshape(p.out_shape),)
