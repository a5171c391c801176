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

**16x8** (int16 activations, int8 weights): ``y = clamp(MultiplyByQuantizedMultiplier(a * b, M))``,
int16, numpy broadcasting.

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
from numba import njit

from intq.kernels._elementwise_common import (
    INT8_MAX,
    INT8_MIN,
    fused_activation_range,
    int8_binary,
    make_rescale,
    output_requantizer,
    requant_mode,
    scale_of,
    scale_ratio,
    zero_point_of,
)
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_common import binary_int16, check_16x8
from intq.kernels.requantize import DoubleRounding, Requantizer, requantize
from intq.qmath import quantize_multiplier
from intq.qmath.compiled import mbqm_scalar
from intq.qmath.raw import mbqm

OP = "MUL"


@dataclass(frozen=True)
class MulParams:
    """The reference kernel's (a variant may prepare it with another ``output`` contract)."""

    zero_point_a: int
    zero_point_b: int
    output: Requantizer  # s_a s_b / s_y, + Z_y, clamp to the fused activation


@kernel(OP)
def prepare(ctx: KernelContext) -> MulParams:
    io = int8_binary(ctx)
    qa, qb, qy = io.qa, io.qb, io.qy
    ctx.check_emulated()
    mode = requant_mode(ctx)
    real = scale_ratio(ctx.target.scales, (scale_of(qa), scale_of(qb)), scale_of(qy))
    za, zb = zero_point_of(qa), zero_point_of(qb)
    make_rescale(ctx, real, "output", mode, max_left_shift=max_left(za, zb))
    lo, hi = fused_activation_range(ctx, qy)
    return MulParams(za, zb, output_requantizer(ctx, real, mode, qy, lo, hi))


def _as_rows(v: np.ndarray, shape: tuple[int, ...]):
    """``v`` as a 2-D ``[rows, C]`` operand of the output ``shape`` (``C = shape[-1]``): itself when it
    has the output's shape, one row ``[1, C]`` or ``[1, 1]`` when it only varies along the last axis
    (or not at all); None for other broadcasts (the whole-array path takes those)."""
    if v.shape == shape:
        return np.ascontiguousarray(v).reshape(-1, shape[-1])
    if v.size in (1, shape[-1]) and (v.ndim == 0 or v.shape[-1] == v.size):
        return np.ascontiguousarray(v).reshape(1, -1)
    return None


@njit(cache=True, nogil=True)
def _fused_mul(a, b, za, zb, mult, left, right, zp, lo, hi, out):
    """``out[i, c] = clamp(mbqm((a - Z_a)(b - Z_b)) + Z_y)`` with the double rounding of
    :func:`intq.qmath.compiled.mbqm_scalar`; ``a``/``b`` are ``[rows, C]`` or one broadcast row
    (``[1, C]``, ``[1, 1]``). ``|(a - Z_a)(b - Z_b)| << left`` fits int32 (:func:`max_left` at prepare)."""
    rows, cols = out.shape
    for i in range(rows):
        ia = i if a.shape[0] > 1 else 0
        ib = i if b.shape[0] > 1 else 0
        for c in range(cols):
            x = (np.int64(a[ia, c if a.shape[1] > 1 else 0]) - za) * (np.int64(b[ib, c if b.shape[1] > 1 else 0]) - zb)
            y = mbqm_scalar(x, mult, left, right, 1) + zp
            out[i, c] = lo if y < lo else (hi if y > hi else y)


def max_left(za: int, zb: int) -> int:
    """The largest left shift of ``M`` that keeps ``(a - Z_a)(b - Z_b) << shift`` inside int32."""
    bound = max(INT8_MAX - za, za - INT8_MIN) * max(INT8_MAX - zb, zb - INT8_MIN)  # |(a - Z_a)(b - Z_b)|
    return max(s for s in range(31) if bound << s <= 2**31 - 1)


def run(p: MulParams, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    r = p.output
    if type(r) is DoubleRounding and r.multiplier.size == 1 and shape:
        rows = _as_rows(a, shape), _as_rows(b, shape)  # the common cases: equal shapes, a per-channel scale
        if rows[0] is not None and rows[1] is not None:
            out = np.empty(shape, r.out_dtype)
            _fused_mul(rows[0], rows[1], p.zero_point_a, p.zero_point_b, int(r.multiplier[0]), int(r.left[0]),
                       int(r.right[0]), r.zero_point, r.act_min, r.act_max, out.reshape(-1, shape[-1]))
            return (out,)
    prod = (a.astype(np.int64) - p.zero_point_a) * (b.astype(np.int64) - p.zero_point_b)  # |prod| <= 65025
    return (requantize(r, prod).reshape(shape),)


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True)
class Mul16x8Params:
    multiplier: int
    shift: int
    act_min: int
    act_max: int
    out_shape: tuple[int, ...]


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Mul16x8Params:
    check_16x8(ctx)
    qa, qb, qy, shape = binary_int16(ctx)
    s_a, s_b, s_y = (np.float32(q.tensor_scale) for q in (qa, qb, qy))
    real = scale_ratio(ctx.target.scales, (s_a, s_b), s_y)  # the target's Prepare arithmetic
    qm = quantize_multiplier(real)
    if int(qm.shift) > 30:
        raise ctx.error(f"s_a * s_b / s_y = {real:.6g} is too large for TFLite's fixed-point multiplier")
    lo, hi = fused_activation_range(ctx, qy)
    return Mul16x8Params(int(qm.multiplier), int(qm.shift), lo, hi, shape)


def run_int16(p: Mul16x8Params, a, b):
    product = a.astype(np.int64) * b.astype(np.int64)  # |a * b| <= 2^30: int32 in the runtimes
    y = np.clip(mbqm(product, p.multiplier, p.shift), p.act_min, p.act_max)
    return (np.broadcast_to(y, p.out_shape).astype(np.int16),)
