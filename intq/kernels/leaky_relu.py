"""LEAKY_RELU: ``y = clamp(Z_out + (v >= 0 ? R_id(v) : sign(alpha) * R_alpha(v)))``, ``v = x - Z_in``.

TFLite's quantized LeakyRelu (reference_ops::QuantizeLeakyRelu): two multipliers, identity
``s_in / s_out`` and alpha ``s_in * alpha / s_out``, quantized with QuantizeMultiplier and
applied with MultiplyByQuantizedMultiplier (gemmlowp double rounding). A negative alpha is
applied as ``-MultiplyByQuantizedMultiplier(v, |m_alpha|)`` (the reference's sign extraction; it
rounds ties differently from multiplying by a negative multiplier; both runtimes do it). The
result is clamped to int8 (LEAKY_RELU has no fused activation).

The targets differ in Prepare's arithmetic for the two reals:

* ``litert-ref`` (activations.cc LeakyReluPrepare): float32, ``float(s_in / s_out)`` and
  ``float(float(s_in * alpha) / s_out)``;
* ``tflite``: double. TFLM's leaky_relu_common.cc CalculateOpDataLeakyRelu is written with the
  same float32 expressions in recent sources, but the tflite-micro package intq tests against
  computes them in double (its machine code converts the scales and alpha with cvtss2sd and
  uses mulsd/divsd; measured: on scales where the two forms differ, TFLM equals the double one).

LiteRT's own kernels (its optimized resolver too) are this one. Runtimes that compute otherwise
replace this kernel with a variant in their family's folder (docs/engine.md).

Contract: int8 per-tensor input and output of the same shape; ``alpha`` a finite float
(attribute, default 0.2). |v| <= 255: the multipliers may shift left by up to 22 bits.

Run: the output depends on one int8, so prepare evaluates :func:`leaky_relu` (the integer
arithmetic above) on all 256 values and run is a table lookup, bit for bit the same.

**16x8** (int16 activations, int8 weights): ``y = clamp(v >= 0 ? MBQM(v, M_id) : sign(alpha) *
MBQM(v, |M_alpha|))``, int16.

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

from dataclasses import dataclass, replace

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_BY_BITS,
    INT8_MAX,
    INT8_MIN,
    Rescale,
    fp32,
    int8_table,
    int8_unary,
    lookup,
    make_rescale,
    output_requantizer,
    requant_mode,
    rescale,
    scale_of,
    scale_ratio,
    zero_point_of,
)
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels._int16_common import INT16_MAX, INT16_MIN, io_int16, check_16x8, static_shape
from intq.qmath.raw import mbqm
from intq.qmath import quantize_multiplier

OP = "LEAKY_RELU"
_MAX_LEFT_SHIFT = 22  # |x - Z| <= 255 < 2^8 and 2^8 << 22 = 2^30


@dataclass(frozen=True, eq=False)
class LeakyReluParams:
    zero_point_in: int
    zero_point_out: int
    identity: Requantizer | None  # v >= 0: v * s_in / s_out + Z_out, clamped to int8 (None: another runtime's table)
    alpha: Rescale | None  # v < 0: v * |alpha| s_in / s_out ...
    alpha_sign: int  # ... times the sign of alpha (+1 or -1)
    table: np.ndarray | None = None  # int8 [256]: leaky_relu(self, x) for every int8 x (see lookup)


@kernel(OP)
def prepare(ctx: KernelContext) -> LeakyReluParams:
    ctx.check_emulated()
    alpha = alpha_of(ctx)
    io = int8_unary(ctx)
    qx, qy = io.qx, io.qy
    mode = requant_mode(ctx)
    s_in, s_out = scale_of(qx), scale_of(qy)
    real_identity = scale_ratio(ctx.target.scales, (s_in,), s_out)
    real_alpha = scale_ratio(ctx.target.scales, (s_in, fp32(alpha)), s_out)
    make_rescale(ctx, real_identity, "identity", mode, max_left_shift=_MAX_LEFT_SHIFT)
    p = LeakyReluParams(
        zero_point_in=zero_point_of(qx),
        zero_point_out=zero_point_of(qy),
        identity=output_requantizer(ctx, real_identity, mode, qy, INT8_MIN, INT8_MAX, "identity"),
        alpha=make_rescale(ctx, abs(real_alpha), "alpha", mode, max_left_shift=_MAX_LEFT_SHIFT),
        alpha_sign=-1 if real_alpha < 0 else 1,
    )
    return replace(p, table=int8_table(leaky_relu(p, INT8_BY_BITS), np.int8))


def alpha_of(ctx: KernelContext) -> float:
    """The ``alpha`` attribute (TFLite's LeakyReluOptions default 0.2), a finite number."""
    alpha = ctx.attr("alpha", 0.2)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha):
        raise ctx.error(f"alpha must be a finite number, got {alpha!r}")
    return alpha


def leaky_relu(p: LeakyReluParams, x: np.ndarray) -> np.ndarray:
    """reference_ops::QuantizeLeakyRelu on int8 values ``x`` (int64 in, int8-range int64 out)."""
    v = np.asarray(x, dtype=np.int64) - p.zero_point_in
    negative = np.clip(p.alpha_sign * rescale(p.alpha, v) + p.zero_point_out, INT8_MIN, INT8_MAX)
    return np.where(v >= 0, requantize(p.identity, v), negative)


def run(p: LeakyReluParams, x):
    return (lookup(p.table, x),)


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True)
class LeakyRelu16x8Params:
    identity_multiplier: int
    identity_shift: int
    alpha_multiplier: int  # of |M_alpha|
    alpha_shift: int
    alpha_sign: int  # +1 or -1


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> LeakyRelu16x8Params:
    check_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    if static_shape(ctx, ctx.input(0), "input") != static_shape(ctx, ctx.outputs[0], "output"):
        raise ctx.error("input and output must have the same shape")
    alpha = alpha_of(ctx)
    s_in, s_out, a32 = np.float32(in_qp.tensor_scale), np.float32(out_qp.tensor_scale), np.float32(alpha)
    real_identity = scale_ratio(ctx.target.scales, (s_in,), s_out)  # the target's Prepare arithmetic
    real_alpha = scale_ratio(ctx.target.scales, (s_in, a32), s_out)
    ident = quantize_multiplier(real_identity)
    alph = quantize_multiplier(abs(real_alpha))
    if max(int(ident.shift), int(alph.shift)) > 30:
        raise ctx.error("s_in / s_out is too large for TFLite's fixed-point multiplier")
    return LeakyRelu16x8Params(int(ident.multiplier), int(ident.shift), int(alph.multiplier), int(alph.shift),
                               -1 if real_alpha < 0 else 1)


def run_int16(p: LeakyRelu16x8Params, x):
    v = x.astype(np.int64)
    positive = mbqm(v, p.identity_multiplier, p.identity_shift)
    negative = p.alpha_sign * mbqm(v, p.alpha_multiplier, p.alpha_shift)
    return (np.clip(np.where(v >= 0, positive, negative), INT16_MIN, INT16_MAX).astype(np.int16),)
