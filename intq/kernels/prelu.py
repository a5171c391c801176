"""PRELU: ``y = clamp(Z_out + (v >= 0 ? R_1(v) : R_2(v * (alpha - Z_alpha))))``, ``v = x - Z_in``.

TFLite's quantized PRelu (reference_ops::BroadcastPrelu4DSlow / Prelu): the alpha tensor is
int8 with its own per-tensor quantization and broadcasts against the input (numpy rules; the
output has the input's shape). ``R_1 = s_in / s_out``, ``R_2 = s_in * s_alpha / s_out``, both
quantized with QuantizeMultiplier and applied with MultiplyByQuantizedMultiplier (double
rounding); the result is clamped to int8. The targets differ in Prepare's arithmetic:

* ``litert-ref`` (activations.cc PreluPrepare): float32, ``float(s_in / s_out)`` and
  ``float(float(s_in * s_alpha) / s_out)``;
* ``tflite`` (TFLM prelu_common.cc CalculatePreluParams): double.

Contract: int8 per-tensor input, alpha and output; alpha may be a constant or a run-time input.
|v| <= 255 and |v * (alpha - Z_alpha)| <= 65025: left shifts up to 22 and 15 bits fit int32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_MAX,
    INT8_MIN,
    Rescale,
    int8_binary,
    make_rescale,
    requant_mode,
    rescale,
    scale_of,
    scale_ratio,
    zero_point_of,
)
from intq.kernels.base import KernelContext, kernel

OP = "PRELU"


@dataclass(frozen=True)
class PreluParams:
    zero_point_in: int
    zero_point_alpha: int
    zero_point_out: int
    positive: Rescale  # s_in / s_out
    negative: Rescale  # s_in s_alpha / s_out, applied to v * (alpha - Z_alpha)


@kernel(OP)
def prepare(ctx: KernelContext) -> PreluParams:
    io = int8_binary(ctx, "input", "alpha")
    x, alpha, qx, qa, qy = io.a, io.b, io.qa, io.qb, io.qy
    if io.shape is not None and tuple(io.shape) != tuple(x.shape):
        raise ctx.error(f"alpha {alpha.name!r} {list(alpha.shape)} must broadcast to the input's shape {list(x.shape)}")
    mode = requant_mode(ctx)
    s_in, s_alpha, s_out = scale_of(qx), scale_of(qa), scale_of(qy)
    real_1 = scale_ratio(ctx.target.scales, (s_in,), s_out)
    real_2 = scale_ratio(ctx.target.scales, (s_in, s_alpha), s_out)
    return PreluParams(
        zero_point_in=zero_point_of(qx),
        zero_point_alpha=zero_point_of(qa),
        zero_point_out=zero_point_of(qy),
        positive=make_rescale(ctx, real_1, "positive", mode, max_left_shift=22),  # 255 << 22 < 2^31
        negative=make_rescale(ctx, real_2, "negative", mode, max_left_shift=15),  # 65025 << 15 < 2^31
    )


def run(p: PreluParams, x, alpha):
    v = x.astype(np.int64) - p.zero_point_in
    prod = v * (alpha.astype(np.int64) - p.zero_point_alpha)  # broadcast to the input's shape
    out = np.where(v >= 0, rescale(p.positive, v), rescale(p.negative, prod)) + p.zero_point_out
    return (np.asarray(np.clip(out, INT8_MIN, INT8_MAX), dtype=np.int8),)
