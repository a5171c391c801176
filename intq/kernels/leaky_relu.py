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

``xnnpack`` (measured, explained from XNNPACK's ``xnn_init_qs8_lrelu_scalar_params`` and its qs8
``vlrelu`` kernels): XNNPACK takes the node when ``P = float32(s_in / s_out)`` lies in [2^-8, 2^7]
and ``N = float32(P * alpha)`` satisfies ``2^-8 <= |N|``, ``-0x1.FFFCp+6 <= N <= 2^7`` (its
asserts; the delegate's acceptance coincides, measured), and computes with 8-bit fixed-point
multipliers ``m_p = lrintf(256 P)``, ``m_n = lrintf(256 N)`` (half to even)::

    y = clamp(((v * (v >= 0 ? m_p : m_n) + 128) >> 8) + Z_out)           (integers only)

Otherwise LiteRT's kernel runs, which for LEAKY_RELU is the reference one (``litert-opt`` too).

Contract: int8 per-tensor input and output of the same shape; ``alpha`` a finite float
(attribute, default 0.2). |v| <= 255: the multipliers may shift left by up to 22 bits.

``tpu-mlir`` target: TPU-MLIR's float ``tpu.LeakyRelu`` (its asymmetric models keep LeakyReLU in
float16; the symmetric int8 form is imported as a table), :mod:`intq.kernels.tpu_mlir.activation`.

Run: the output depends on one int8, so prepare evaluates :func:`leaky_relu` (the integer
arithmetic above) on all 256 values and run is a table lookup, bit for bit the same.
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
    runtime_of,
    scale_of,
    scale_ratio,
    zero_point_of,
)
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel
from intq.kernels.targets import Runtime as _Runtime
from intq.kernels.tpu_mlir import activation as tpu_mlir_activation
from intq.kernels.requantize import Requantizer, requantize

OP = "LEAKY_RELU"
_MAX_LEFT_SHIFT = 22  # |x - Z| <= 255 < 2^8 and 2^8 << 22 = 2^30


@dataclass(frozen=True, eq=False)
class LeakyReluParams:
    zero_point_in: int
    zero_point_out: int
    identity: Requantizer | None  # v >= 0: v * s_in / s_out + Z_out, clamped to int8 (None: xnnpack table)
    alpha: Rescale | None  # v < 0: v * |alpha| s_in / s_out ...
    alpha_sign: int  # ... times the sign of alpha (+1 or -1)
    table: np.ndarray | None = None  # int8 [256]: leaky_relu(self, x) for every int8 x (see lookup)


@kernel(OP)
def prepare(ctx: KernelContext) -> LeakyReluParams | tpu_mlir_activation.TpuMlirFloatLeakyReluParams:
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_activation.prepare_float_leaky_relu(ctx)
    ctx.check_emulated()
    alpha = ctx.attr("alpha", 0.2)  # TFLite's LeakyReluOptions default
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha):
        raise ctx.error(f"alpha must be a finite number, got {alpha!r}")
    if _ort.is_ort(ctx):  # QLinearLeakyRelu: a per-code table in float32
        return _ort.prepare_unary(ctx, _ort.leaky_relu(alpha))
    io = int8_unary(ctx)
    qx, qy = io.qx, io.qy
    mode = requant_mode(ctx)
    s_in, s_out = scale_of(qx), scale_of(qy)
    real_identity = scale_ratio(runtime_of(ctx), (s_in,), s_out)
    real_alpha = scale_ratio(runtime_of(ctx), (s_in, fp32(alpha)), s_out)
    if ctx.target.xnnpack:
        table = xnnpack_leaky_relu_table(s_in, s_out, fp32(alpha), zero_point_of(qx), zero_point_of(qy))
        if table is not None:
            return LeakyReluParams(zero_point_of(qx), zero_point_of(qy), None, None, 1, table)
    make_rescale(ctx, real_identity, "identity", mode, max_left_shift=_MAX_LEFT_SHIFT)
    p = LeakyReluParams(
        zero_point_in=zero_point_of(qx),
        zero_point_out=zero_point_of(qy),
        identity=output_requantizer(ctx, real_identity, mode, qy, INT8_MIN, INT8_MAX, "identity"),
        alpha=make_rescale(ctx, abs(real_alpha), "alpha", mode, max_left_shift=_MAX_LEFT_SHIFT),
        alpha_sign=-1 if real_alpha < 0 else 1,
    )
    return replace(p, table=int8_table(leaky_relu(p, INT8_BY_BITS), np.int8))


def xnnpack_leaky_relu_table(s_in, s_out, alpha, z_in: int, z_out: int) -> np.ndarray | None:
    """XNNPACK's qs8 LEAKY_RELU on every int8 (module docstring), or None where XNNPACK declines."""
    positive = np.float32(np.float32(s_in) / np.float32(s_out))
    negative = np.float32(positive * np.float32(alpha))
    if not (2.0**-8 <= positive <= 2.0**7 and abs(negative) >= 2.0**-8
            and -float.fromhex("0x1.FFFCp+6") <= negative <= 2.0**7):
        return None
    m_p, m_n = (int(np.rint(np.float32(256) * v)) for v in (positive, negative))  # lrintf
    v = INT8_BY_BITS - z_in
    y = ((v * np.where(v >= 0, m_p, m_n) + 128) >> 8) + z_out
    return int8_table(np.clip(y, INT8_MIN, INT8_MAX), np.int8)


def leaky_relu(p: LeakyReluParams, x: np.ndarray) -> np.ndarray:
    """reference_ops::QuantizeLeakyRelu on int8 values ``x`` (int64 in, int8-range int64 out)."""
    v = np.asarray(x, dtype=np.int64) - p.zero_point_in
    negative = np.clip(p.alpha_sign * rescale(p.alpha, v) + p.zero_point_out, INT8_MIN, INT8_MAX)
    return np.where(v >= 0, requantize(p.identity, v), negative)


def run(p: LeakyReluParams | _ort.OrtLut | tpu_mlir_activation.TpuMlirFloatLeakyReluParams, x):
    if type(p) is tpu_mlir_activation.TpuMlirFloatLeakyReluParams:
        return tpu_mlir_activation.run_float_leaky_relu(p, x)
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (lookup(p.table, x),)
