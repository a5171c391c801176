"""MUL, 16x8: ``y = clamp(MultiplyByQuantizedMultiplier(a * b, M))``, int16, numpy broadcasting.

Both runtimes run the general elementwise MUL on int16 (LiteRT 2.3 ``mul.cc`` EvalQuantized →
``reference_integer_ops::Mul<int16_t>`` / ``BroadcastMul6DSlow``, TFLM ``mul_common.cc`` + the
same functions): ``a * b`` (at most 2^30 in magnitude, int32), MultiplyByQuantizedMultiplier
(gemmlowp double rounding, ``x * 2^left`` in int32 as the C code, wrapping) with
``M = s_a * s_b / s_y``, then the fused activation's clamp. Zero points must be 0 (LiteRT checks).

Where the targets differ (as for int8): LiteRT's Prepare evaluates ``M`` in float32
(``float(float(s_a * s_b) / s_y)``), TFLM in double (measured on the int8 kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import binary_int16, fused_activation_range, runtime_16x8
from intq.qmath.raw import mbqm
from intq.kernels.targets import Runtime
from intq.qmath import quantize_multiplier

OP = "MUL"


@dataclass(frozen=True)
class Mul16x8Params:
    multiplier: int
    shift: int
    act_min: int
    act_max: int
    out_shape: tuple[int, ...]


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Mul16x8Params:
    runtime = runtime_16x8(ctx)
    qa, qb, qy, shape = binary_int16(ctx)
    s_a, s_b, s_y = (np.float32(q.tensor_scale) for q in (qa, qb, qy))
    if runtime is Runtime.LITERT:
        real = float(np.float32(np.float32(s_a * s_b) / s_y))
    else:
        real = float(s_a) * float(s_b) / float(s_y)
    qm = quantize_multiplier(real)
    if int(qm.shift) > 30:
        raise ctx.error(f"s_a * s_b / s_y = {real:.6g} is too large for TFLite's fixed-point multiplier")
    lo, hi = fused_activation_range(ctx, qy)
    return Mul16x8Params(int(qm.multiplier), int(qm.shift), lo, hi, shape)


def run(p: Mul16x8Params, a, b):
    product = a.astype(np.int64) * b.astype(np.int64)  # |a * b| <= 2^30: int32 in the runtimes
    y = np.clip(mbqm(product, p.multiplier, p.shift), p.act_min, p.act_max)
    return (np.broadcast_to(y, p.out_shape).astype(np.int16),)
