"""LEAKY_RELU, 16x8: ``y = clamp(v >= 0 ? MBQM(v, M_id) : sign(alpha) * MBQM(v, |M_alpha|))``, int16.

LiteRT 2.3 (``activations.cc`` LeakyReluPrepare/Eval → ``reference_ops::QuantizeLeakyRelu<int16_t>``)
and TFLM (``leaky_relu_common.cc``, the same reference function) compute, on ``v = x`` (zero
points 0, checked by both): the identity multiplier ``s_in / s_out`` for ``v >= 0``, the alpha
multiplier ``s_in * alpha / s_out`` otherwise, each through QuantizeMultiplier and
MultiplyByQuantizedMultiplier (gemmlowp double rounding; ``v * 2^left`` in int32 as in C), clamped
to int16. A negative alpha's sign is applied after the multiplication, as for int8.

Where the targets differ (as for int8): LiteRT's Prepare evaluates both reals in float32, TFLM in
double (measured on the int8 kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import INT16_MAX, INT16_MIN, io_int16, runtime_16x8, static_shape
from intq.qmath.raw import mbqm
from intq.kernels.targets import Runtime
from intq.qmath import quantize_multiplier

OP = "LEAKY_RELU"


@dataclass(frozen=True)
class LeakyRelu16x8Params:
    identity_multiplier: int
    identity_shift: int
    alpha_multiplier: int  # of |M_alpha|
    alpha_shift: int
    alpha_sign: int  # +1 or -1


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> LeakyRelu16x8Params:
    runtime = runtime_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    if static_shape(ctx, ctx.input(0), "input") != static_shape(ctx, ctx.outputs[0], "output"):
        raise ctx.error("input and output must have the same shape")
    alpha = ctx.attr("alpha", 0.2)  # TFLite's LeakyReluOptions default
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha):
        raise ctx.error(f"alpha must be a finite number, got {alpha!r}")
    s_in, s_out, a32 = np.float32(in_qp.tensor_scale), np.float32(out_qp.tensor_scale), np.float32(alpha)
    if runtime is Runtime.LITERT:
        real_identity = float(np.float32(s_in / s_out))  # float32 expressions, as the C++ source
        real_alpha = float(np.float32(np.float32(s_in * a32) / s_out))
    else:
        real_identity = float(s_in) / float(s_out)
        real_alpha = float(s_in) * float(a32) / float(s_out)
    ident = quantize_multiplier(real_identity)
    alph = quantize_multiplier(abs(real_alpha))
    if max(int(ident.shift), int(alph.shift)) > 30:
        raise ctx.error("s_in / s_out is too large for TFLite's fixed-point multiplier")
    return LeakyRelu16x8Params(int(ident.multiplier), int(ident.shift), int(alph.multiplier), int(alph.shift),
                               -1 if real_alpha < 0 else 1)


def run(p: LeakyRelu16x8Params, x):
    v = x.astype(np.int64)
    positive = mbqm(v, p.identity_multiplier, p.identity_shift)
    negative = p.alpha_sign * mbqm(v, p.alpha_multiplier, p.alpha_shift)
    return (np.clip(np.where(v >= 0, positive, negative), INT16_MIN, INT16_MAX).astype(np.int16),)
