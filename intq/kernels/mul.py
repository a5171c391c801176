"""MUL: ``y = clamp(MultiplyByQuantizedMultiplier((a - Z_a) * (b - Z_b), M) + Z_y)``, broadcasting.

TFLite's 8-bit MUL (reference_integer_ops::MulElementwise / BroadcastMul6DSlow in LiteRT,
BroadcastMul4DSlow in TFLM): the product of the offset inputs is requantized once with
``M = s_a * s_b / s_y`` (QuantizeMultiplier, gemmlowp double rounding; ``M`` may exceed 1, a
left shift) and clamped to the fused activation's range.

The targets differ in Prepare's arithmetic for ``M``:

* ``litert-ref`` (tflite/kernels/mul.cc Prepare): float32, ``float(float(s_a * s_b) / s_y)``;
* ``tflite`` (TFLM mul_common.cc CalculateOpDataMul): double, ``s_a * s_b / s_y``.

``xnnpack``: XNNPACK takes an int8 MUL whose ``float(float(s_a * s_b) / s_y)`` lies in
[2^-16, 2^8) and requantizes in float32 (``xnn_qs8_vmul_minmax_fp32``: ``rint(float((a - Z_a)(b -
Z_b)) * S)``, half to even; clamp from ``xnn_qs8_quantize``). Every other MUL runs LiteRT's
optimized kernel, which is not emulated (its vector part narrows to int16 with saturation and
then adds the output zero point with wrap-around, measured: saturated products flip from -128 to
127), so ``litert-opt`` refuses MUL and ``xnnpack`` refuses the MULs XNNPACK declines.

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
from intq.errors import IntqError
from intq.kernels.base import KernelContext
from intq.kernels.requantize import Requantizer, make_requantizer, requantize, xnnpack_activation_range
from intq.kernels.targets import Requant

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
    s_a, s_b, s_y = scale_of(qa), scale_of(qb), scale_of(qy)
    if ctx.target.xnnpack:
        scale = np.float32(np.float32(s_a * s_b) / s_y)
        if not 2.0**-16 <= float(scale) < 2.0**8:
            raise ctx.error(f"target {ctx.target.name!r}: XNNPACK declines this MUL (product scale {float(scale):.3g} "
                            "outside [2^-16, 2^8)) and LiteRT's optimized MUL, which then runs, is not emulated")
        try:
            lo, hi = xnnpack_activation_range(ctx.attr("fused_activation_function", "NONE"), qy)
        except IntqError as e:
            raise ctx.error(str(e)) from None
        r = make_requantizer(float(scale), Requant.FLOAT32_RNE, zero_point_of(qy), lo, hi, np.int8)
        return MulParams(zero_point_of(qa), zero_point_of(qb), r)
    ctx.check_emulated()
    mode = requant_mode(ctx)
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
