"""ADD: ``y = clamp(R_out(R_1((a - Z_a) << 20) + R_2((b - Z_b) << 20)) + Z_y)``, numpy broadcasting.

TFLite's 8-bit ADD (reference_integer_ops::AddFunc / BroadcastAdd6DSlow, prepared by
tflite/kernels/add.cc Prepare and TFLM's CalculateOpDataAdd, which agree):
``left_shift = 20``; with ``T = 2 * max(s_a, s_b)`` (double), the inputs are rescaled by
``s_a / T`` and ``s_b / T`` (both <= 1/2) and the sum by ``T / (2^20 * s_y)``, every multiplier
through QuantizeMultiplierSmallerThanOneExp and applied with
MultiplyByQuantizedMultiplierSmallerThanOneExp (gemmlowp double rounding). The fused
activation becomes the clamp (CalculateActivationRangeQuantized).

Contract (spec 003): both inputs and the output int8, per tensor. Every multiplier must be in
(0, 1): the runtimes abort otherwise (an output scale below ``2 * max(s_a, s_b) / 2^20``).

No int32 overflow: ``|a - Z_a| <= 255``, so ``(a - Z_a) << 20`` < 2^28; each rescaled input is at
most half that, so the sum stays below 2^28.

Run: an input's rescaled value depends on that int8 alone, so prepare evaluates
:func:`scaled_input` on all 256 values and run looks both operands up (one gather each, the same
integers) before requantizing the sum.

**16x8** (int16 activations, int8 weights): int16 inputs and
output, numpy broadcasting (``reference_ops::AddGeneralParamScale`` / ``AddElementwise``, and
``BroadcastAdd6DSlow`` when broadcasting): as the int8 ADD with ``left_shift = 15`` instead of 20 —
with ``T = 2 * max(s_a, s_b)`` (double),

    a' = MBQM((a << 15), s_a / T)    b' = MBQM((b << 15), s_b / T)
    y  = clamp(MBQM(a' + b', T / (2^15 * s_y)))

every multiplier from QuantizeMultiplierSmallerThanOneExp (must be in (0, 1)) and applied with
gemmlowp double rounding. ``|a| << 15 <= 2^30``; each rescaled input is at most half that, so the
sum fits int32.

Contract: int16 per tensor, zero point 0 everywhere (both runtimes check it).

"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.kernels._elementwise_common import (
    INT8_BY_BITS,
    Int8Binary,
    Rescale,
    fused_activation_range,
    int8_binary,
    int8_table,
    lookup,
    make_rescale,
    output_requantizer,
    requant_mode,
    rescale,
    scale_of,
    zero_point_of,
)
from intq.kernels._int16_common import binary_int16, check_16x8, scale64
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.requantize import DoubleRounding, Requantizer, requantize
from intq.qmath import QuantParams, quantize_multiplier
from intq.qmath.compiled import mbqm_right_scalar, mbqm_scalar
from intq.qmath.raw import mbqm

OP = "ADD"
LEFT_SHIFT = 20  # TFLite's 8-bit headroom: 255 << 20 < 2^28, sums of two fit int32


@dataclass(frozen=True, eq=False)
class AddParams:
    """The reference kernel (TFLM; LiteRT's reference, and its optimized kernel's scalar code). SUB
    uses it too, with ``table_b`` holding the negated rescale of ``b`` (:mod:`intq.kernels.sub`)."""

    zero_point_a: int
    zero_point_b: int
    rescale_a: Rescale  # s_a / (2 max(s_a, s_b))
    rescale_b: Rescale  # s_b / (2 max(s_a, s_b))
    output: Requantizer  # 2 max(s_a, s_b) / (2^20 s_y), + Z_y, clamp to the fused activation
    table_a: np.ndarray  # int32 [256]: scaled_input(rescale_a, Z_a, a) for every int8 a (see lookup)
    table_b: np.ndarray


@kernel(OP)
def prepare(ctx: KernelContext) -> AddParams:
    io = int8_binary(ctx)
    ctx.check_emulated()
    return prepare_reference(ctx, io, negate_b=False)


def real_multipliers(io: Int8Binary) -> tuple[float, float, float]:
    """``(s_a / T, s_b / T, T / (2^20 s_y))`` with ``T = 2 max(s_a, s_b)``, in double from the float32
    scales (LiteRT's add.cc / sub.cc and the tflite-micro package intq tests against)."""
    s_a, s_b, s_y = (float(scale_of(q)) for q in (io.qa, io.qb, io.qy))
    twice_max = 2.0 * max(s_a, s_b)
    return s_a / twice_max, s_b / twice_max, twice_max / (float(1 << LEFT_SHIFT) * s_y)


def prepare_reference(ctx: KernelContext, io: Int8Binary, *, negate_b: bool) -> AddParams:
    """The reference kernel's parameters; ``negate_b`` (SUB): ``table_b`` holds ``-R_2((b - Z_b) << 20)``,
    so ``table_a[a] + table_b[b]`` is SUB's difference. Every multiplier must be in (0, 1)."""
    mode = requant_mode(ctx)
    real_a, real_b, real_out = real_multipliers(io)
    make_rescale(ctx, real_out, "output", mode, smaller_than_one=True)  # the runtimes' check
    lo, hi = fused_activation_range(ctx, io.qy)
    za, zb = zero_point_of(io.qa), zero_point_of(io.qb)
    ra = make_rescale(ctx, real_a, "input 0", mode, smaller_than_one=True)
    rb = make_rescale(ctx, real_b, "input 1", mode, smaller_than_one=True)
    sign_b = -1 if negate_b else 1
    return AddParams(
        zero_point_a=za,
        zero_point_b=zb,
        rescale_a=ra,
        rescale_b=rb,
        output=output_requantizer(ctx, real_out, mode, io.qy, lo, hi),
        table_a=int8_table(scaled_input(ra, za, INT8_BY_BITS), np.int32),
        table_b=int8_table(sign_b * scaled_input(rb, zb, INT8_BY_BITS), np.int32),
    )


def scaled_input(r: Rescale, zero_point: int, x: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp((x - Z) << 20, m, shift)``: |result| < 2^27."""
    return rescale(r, (np.asarray(x, dtype=np.int64) - zero_point) << LEFT_SHIFT)


def run(p: AddParams, a, b):
    return (run_reference(p, a, b),)


def run_reference(p: AddParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``clamp(R_out(table_a[a] + table_b[b]) + Z_y)``: the reference kernel (ADD and SUB)."""
    r = p.output
    if a.shape == b.shape and type(r) is DoubleRounding and r.multiplier.size == 1 and a.ndim > 0:
        out = np.empty(a.shape, r.out_dtype)  # the common case (residual adds): one fused pass
        _fused_add(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8), p.table_a, p.table_b,
                   int(r.multiplier[0]), int(r.left[0]), int(r.right[0]), r.zero_point, r.act_min, r.act_max,
                   out.reshape(-1))
        return out
    shape = np.broadcast_shapes(a.shape, b.shape)
    acc = lookup(p.table_a, a) + lookup(p.table_b, b)  # int32: |acc| < 2^28
    return requantize(r, acc).reshape(shape)


@njit(cache=True, nogil=True)
def _fused_add(a, b, table_a, table_b, mult, left, right, zp, lo, hi, out):
    """``out = clamp(mbqm(table_a[a] + table_b[b]) + zp)``, the double rounding of
    :func:`intq.qmath.compiled.mbqm_scalar` (``left`` is 0: ADD's output multiplier is < 1; then the
    branch-free :func:`intq.qmath.compiled.mbqm_right_scalar`, which vectorizes)."""
    if left == 0:
        nudge = (np.int64(1) << right) >> 1
        toward = 1 if right > 0 else 0
        for i in range(a.size):
            y = mbqm_right_scalar(table_a[a[i]] + table_b[b[i]], mult, nudge, toward, right) + zp
            out[i] = min(max(y, lo), hi)
        return
    for i in range(a.size):
        y = mbqm_scalar(np.int64(table_a[a[i]] + table_b[b[i]]), mult, left, right, 1) + zp
        out[i] = lo if y < lo else (hi if y > hi else y)


# -------------------------------------------------------------------------------- 16x8

LEFT_SHIFT_16 = 15  # int16 headroom: 2^15 << 15 = 2^30, and the sum of two halves fits int32


@dataclass(frozen=True)
class Add16x8Params:
    multiplier_a: int
    shift_a: int  # <= 0 (QuantizeMultiplierSmallerThanOneExp)
    multiplier_b: int
    shift_b: int
    multiplier_out: int
    shift_out: int
    act_min: int
    act_max: int
    out_shape: tuple[int, ...]


def _smaller_than_one(ctx: KernelContext, real: float, what: str) -> tuple[int, int]:
    qm = quantize_multiplier(real)
    if not (0.0 < real < 1.0 and int(qm.shift) <= 0):
        raise ctx.error(f"the {what} multiplier {real:.6g} must be in (0, 1) as TFLite requires "
                        f"(QuantizeMultiplierSmallerThanOneExp); the output scale is too small for the inputs'")
    return int(qm.multiplier), int(qm.shift)


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Add16x8Params:
    return general_add_sub(ctx, int16_operands(ctx))


@dataclass(frozen=True)
class Int16Operands:
    """The checked int16 operands of an ADD / SUB (:func:`int16_operands`)."""

    qa: QuantParams
    qb: QuantParams
    qy: QuantParams
    shape: tuple[int, ...]  # the broadcast output shape
    act_min: int
    act_max: int


def int16_operands(ctx: KernelContext) -> Int16Operands:
    """The 16x8 contract: int16 per tensor, zero point 0 everywhere, the inputs broadcasting to the
    output (:func:`intq.kernels._int16_common.binary_int16`); the fused activation's clamp."""
    check_16x8(ctx)
    qa, qb, qy, shape = binary_int16(ctx)
    lo, hi = fused_activation_range(ctx, qy)
    return Int16Operands(qa, qb, qy, shape, lo, hi)


def general_add_sub(ctx: KernelContext, io: Int16Operands) -> Add16x8Params:
    """ADD's parameters (module docstring), or SUB's (the same rescales, the difference in place of
    the sum)."""
    s_a, s_b, s_y = scale64(io.qa), scale64(io.qb), scale64(io.qy)
    twice_max = 2.0 * max(s_a, s_b)
    ma, sha = _smaller_than_one(ctx, s_a / twice_max, "input 0")
    mb, shb = _smaller_than_one(ctx, s_b / twice_max, "input 1")
    mo, sho = _smaller_than_one(ctx, twice_max / (float(1 << LEFT_SHIFT_16) * s_y), "output")
    return Add16x8Params(ma, sha, mb, shb, mo, sho, io.act_min, io.act_max, io.shape)


def run_int16(p: Add16x8Params, a, b):
    return (np.broadcast_to(combine(p, a, b, 1), p.out_shape),)


def combine(p: Add16x8Params, a, b, sign: int) -> np.ndarray:
    """``a + sign * b`` on the common grid (ADD: ``sign = 1``; SUB: -1), requantized and clamped, in
    the reference arithmetic (numpy broadcasting of ``a`` and ``b``)."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    scaled = (mbqm(a64 << LEFT_SHIFT_16, p.multiplier_a, p.shift_a)
              + sign * mbqm(b64 << LEFT_SHIFT_16, p.multiplier_b, p.shift_b))
    y = mbqm(scaled, p.multiplier_out, p.shift_out)  # |scaled| <= 2^30
    return np.clip(y, p.act_min, p.act_max).astype(np.int16)
