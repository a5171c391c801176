"""MUL: ``y = clamp(MultiplyByQuantizedMultiplier((a - Z_a) * (b - Z_b), M) + Z_y)``, broadcasting.

TFLite's 8-bit MUL (reference_integer_ops::MulElementwise / BroadcastMul6DSlow in LiteRT,
BroadcastMul4DSlow in TFLM): the product of the offset inputs is requantized once with
``M = s_a * s_b / s_y`` (QuantizeMultiplier, gemmlowp double rounding; ``M`` may exceed 1, a
left shift) and clamped to the fused activation's range.

The targets differ in Prepare's arithmetic for ``M``:

* ``litert-ref`` (tflite/kernels/mul.cc Prepare): float32, ``float(float(s_a * s_b) / s_y)``;
* ``tflite`` (TFLM mul_common.cc CalculateOpDataMul): double, ``s_a * s_b / s_y``.

Contract (spec 003): inputs and output int8, per tensor. ``|a - Z_a|, |b - Z_b| <= 255``, so the
product is below 2^16 in magnitude; a left shift of ``M`` is allowed while the shifted product
still fits int32 (checked at prepare from the zero points).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_MAX,
    INT8_MIN,
    Runtime,
    broadcast_shape,
    check_arity,
    fused_activation_range,
    int8_input,
    int8_output,
    make_rescale,
    output_requantizer,
    requant_mode,
    runtime_of,
    scale_of,
    zero_point_of,
)
from intq.kernels.base import KernelContext
from intq.kernels.requantize import Requantizer, requantize

OP = "MUL"


@dataclass(frozen=True)
class MulParams:
    zero_point_a: int
    zero_point_b: int
    output: Requantizer  # s_a s_b / s_y, + Z_y, clamp to the fused activation


def prepare(ctx: KernelContext) -> MulParams:
    check_arity(ctx, 2)
    a, qa = int8_input(ctx, 0, "input 0")
    b, qb = int8_input(ctx, 1, "input 1")
    y, qy = int8_output(ctx)
    broadcast_shape(ctx, a, b, y)
    mode = requant_mode(ctx)
    s_a, s_b, s_y = scale_of(qa), scale_of(qb), scale_of(qy)
    if runtime_of(ctx) is Runtime.LITERT:
        real = float(s_a * s_b / s_y)  # float32 throughout
    else:
        real = float(s_a) * float(s_b) / float(s_y)
    za, zb = zero_point_of(qa), zero_point_of(qb)
    bound = max(INT8_MAX - za, za - INT8_MIN) * max(INT8_MAX - zb, zb - INT8_MIN)  # |(a - Z_a)(b - Z_b)|
    max_left = max(s for s in range(31) if bound << s <= 2**31 - 1)
    make_rescale(ctx, real, "output", mode, max_left_shift=max_left)
    lo, hi = fused_activation_range(ctx, qy)
    return MulParams(za, zb, output_requantizer(ctx, real, mode, qy, lo, hi))


def run(p: MulParams, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    prod = (a.astype(np.int64) - p.zero_point_a) * (b.astype(np.int64) - p.zero_point_b)  # |prod| <= 65025
    return (requantize(p.output, prod).reshape(shape),)
