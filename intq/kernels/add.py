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

Where the targets differ: ``xnnpack`` — XNNPACK takes an int8 ADD whose input-to-output scale
ratios lie in [2^-10, 2^8) and computes its own single-rounding form
(:class:`intq.kernels._elementwise_common.XnnpackAdd`: 21-bit multipliers, one shift, ties up;
clamp from ``xnn_qs8_quantize``); other ADDs fall back to LiteRT's optimized kernel.

``litert-opt`` (and ``xnnpack`` where XNNPACK declines; measured, explained from
``optimized_integer_ops::AddElementwise``): with equal input shapes the flattened elements
``[0, 16 floor(n/16))`` are computed by the vector code, which rescales each input with **one**
rounding, ``SRDHM((q - Z) << (20 + shift_i), m_i)`` (``vshl`` by the combined shift, then
``vqrdmulh``; the reference rounds twice: ``RDBPOT(SRDHM((q - Z) << 20, m_i), -shift_i)``),
requantizes the sum as the reference (``vqrdmulh`` then gemmlowp's RoundingDivideByPOT), then
**narrows to int16 by truncation** (``vmovn_s32``: wraps), adds ``Z_y`` in int16 (wraps),
saturates to int8 and clamps; the last ``n mod 16`` elements are the reference arithmetic. A
broadcasting ADD runs ``BinaryBroadcastFiveFold``: runs of the elementwise kernel over the
innermost common dimensions, or of the scalar-broadcast kernel ``AddScalarBroadcast`` when no
trailing dimension is shared; the split applies per run
(:func:`intq.kernels._elementwise_common.optimized_vector_lanes`). ``AddScalarBroadcast``'s vector
code does 8 elements at a time and rescales each input as the reference, except that its second
step is a **truncating** shift: ``SRDHM((q - Z) << 20, m_i) >> -shift_i`` (``vshlq_s32`` by a
negative amount), then the sum as above (including the int16 narrowing). Shapes that do not fold
run the reference kernel.

Run: an input's rescaled value depends on that int8 alone, so prepare evaluates
:func:`scaled_input` on all 256 values and run looks both operands up (one gather each, the same
integers) before requantizing the sum.

``tpu-mlir`` target: TPU-MLIR's ``tpu.Add`` (:mod:`intq.kernels.tpu_mlir.eltwise`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.kernels._elementwise_common import (
    INT8_BY_BITS,
    LANE_ELEMENTWISE,
    LANE_REFERENCE,
    Int8Binary,
    Rescale,
    XnnpackAdd,
    fused_activation_range,
    int8_binary,
    int8_table,
    lookup,
    make_rescale,
    optimized_vector_lanes,
    output_requantizer,
    requant_mode,
    rescale,
    run_xnnpack_add,
    scale_of,
    xnnpack_add,
    zero_point_of,
)
from intq.kernels.base import KernelContext, kernel
from intq.kernels.tpu_mlir import eltwise as tpu_mlir_eltwise
from intq.kernels.targets import Runtime as _Runtime
from intq.kernels.requantize import DoubleRounding, Requantizer, make_requantizer, requantize
from intq.kernels import _ort
from intq.kernels.targets import Requant
from intq.qmath import raw
from intq.qmath.compiled import mbqm_right_scalar, mbqm_scalar

OP = "ADD"
LEFT_SHIFT = 20  # TFLite's 8-bit headroom: 255 << 20 < 2^28, sums of two fit int32


@dataclass(frozen=True, eq=False)
class AddParams:
    """The reference kernel (TFLM, LiteRT's reference and optimized scalar code). SUB uses it too,
    with ``table_b`` holding the negated rescale of ``b`` (:mod:`intq.kernels.sub`)."""

    zero_point_a: int
    zero_point_b: int
    rescale_a: Rescale  # s_a / (2 max(s_a, s_b))
    rescale_b: Rescale  # s_b / (2 max(s_a, s_b))
    output: Requantizer  # 2 max(s_a, s_b) / (2^20 s_y), + Z_y, clamp to the fused activation
    table_a: np.ndarray  # int32 [256]: scaled_input(rescale_a, Z_a, a) for every int8 a (see lookup)
    table_b: np.ndarray


@dataclass(frozen=True, eq=False)
class OptimizedAddParams(AddParams):
    """LiteRT's optimized ADD (``litert-opt``, and ``xnnpack`` where XNNPACK declines): the reference
    tables for the scalar tail, plus the vector code's own rescales (module docstring)."""

    vector_a: np.ndarray  # int32 [256]: the vector code's one-rounding rescale of a
    vector_b: np.ndarray
    vector_output: Requantizer  # the output multiplier, zero point 0, int32 out, no clamp
    vector_lanes: np.ndarray  # int8 over the flat output: LANE_* (optimized_vector_lanes)
    scalar_a: np.ndarray  # int32 [256]: AddScalarBroadcast's vector rescale of a
    scalar_b: np.ndarray


VECTOR_BLOCK = 16  # optimized AddElementwise: one int8x16 register per step
SCALAR_BROADCAST_BLOCK = 8  # optimized AddScalarBroadcast: one int8x8 register per step


def vector_scaled_input(r: Rescale, zero_point: int, x: np.ndarray) -> np.ndarray:
    """``SRDHM((x - Z) << (20 + shift), m)`` (``vshlq_s32`` by the combined shift — a negative one
    shifts right, truncating — then ``vqrdmulhq``): the optimized vector part's rescale."""
    v = np.asarray(x, dtype=np.int64) - zero_point
    combined = LEFT_SHIFT + r.shift
    v = v << combined if combined >= 0 else v >> -combined
    return raw.srdhm(v, r.multiplier)


def scalar_broadcast_scaled_input(r: Rescale, zero_point: int, x: np.ndarray) -> np.ndarray:
    """``SRDHM((x - Z) << 20, m) >> -shift``: AddScalarBroadcast's vector rescale (its second step
    ``vshlq_s32`` by a negative amount truncates)."""
    v = (np.asarray(x, dtype=np.int64) - zero_point) << LEFT_SHIFT
    return raw.srdhm(v, r.multiplier) >> -r.shift


@kernel(OP)
def prepare(ctx: KernelContext) -> AddParams | OptimizedAddParams | XnnpackAdd:
    if _ort.is_ort(ctx):
        return _ort.prepare_add(ctx)
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_eltwise.prepare_add(ctx)
    io = int8_binary(ctx)
    xnn = xnnpack_add(ctx, io, subtract=False)
    if xnn is not None:
        return xnn
    # XNNPACK declines (a scale ratio s_in / s_out outside [2^-10, 2^8)): LiteRT's optimized ADD runs
    ctx.check_emulated()
    reference = prepare_reference(ctx, io, negate_b=False)
    return _optimized(ctx, io, reference) if ctx.target.optimized else reference


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


def _optimized(ctx: KernelContext, io: Int8Binary, reference: AddParams) -> OptimizedAddParams:
    """LiteRT's optimized ADD: the reference tables plus the vector code's (module docstring)."""
    if not (io.a.is_static and io.b.is_static):
        raise ctx.error(f"target {ctx.target.name!r}: LiteRT's optimized ADD needs static input shapes here")
    ra, rb, za, zb = reference.rescale_a, reference.rescale_b, reference.zero_point_a, reference.zero_point_b
    return OptimizedAddParams(
        **{f.name: getattr(reference, f.name) for f in dataclasses.fields(AddParams)},
        vector_a=int8_table(vector_scaled_input(ra, za, INT8_BY_BITS), np.int32),
        vector_b=int8_table(vector_scaled_input(rb, zb, INT8_BY_BITS), np.int32),
        vector_output=make_requantizer(real_multipliers(io)[2], Requant.DOUBLE, 0, -(2**31), 2**31 - 1, np.int32),
        vector_lanes=optimized_vector_lanes(io.a, io.b, VECTOR_BLOCK, SCALAR_BROADCAST_BLOCK),
        scalar_a=int8_table(scalar_broadcast_scaled_input(ra, za, INT8_BY_BITS), np.int32),
        scalar_b=int8_table(scalar_broadcast_scaled_input(rb, zb, INT8_BY_BITS), np.int32))


def scaled_input(r: Rescale, zero_point: int, x: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp((x - Z) << 20, m, shift)``: |result| < 2^27."""
    return rescale(r, (np.asarray(x, dtype=np.int64) - zero_point) << LEFT_SHIFT)


def run(p: AddParams | OptimizedAddParams | XnnpackAdd | _ort.OrtBinaryLut, a, b):
    if isinstance(p, _ort.OrtBinaryLut):
        return (_ort.lookup2(p, a, b),)
    if type(p) is tpu_mlir_eltwise.TpuMlirAddParams:
        return tpu_mlir_eltwise.run_add(p, a, b)
    if type(p) is tpu_mlir_eltwise.TpuMlirFloatAddConstParams:
        return tpu_mlir_eltwise.run_float_add_const(p, a)
    if isinstance(p, XnnpackAdd):
        return (run_xnnpack_add(p, a, b).reshape(np.broadcast_shapes(a.shape, b.shape)),)
    if isinstance(p, OptimizedAddParams):
        shape = np.broadcast_shapes(a.shape, b.shape)
        flat_a, flat_b = (np.broadcast_to(v, shape).reshape(-1) for v in (a, b))
        return (_run_optimized(p, flat_a, flat_b).reshape(shape),)
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


def _run_optimized(p: AddParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LiteRT's optimized AddElementwise on the flat, broadcast operands (module docstring)."""
    kinds = p.vector_lanes
    lanes = kinds != LANE_REFERENCE
    elementwise = kinds[lanes] == LANE_ELEMENTWISE
    a_v, b_v = a[lanes], b[lanes]
    acc = np.where(elementwise, lookup(p.vector_a, a_v) + lookup(p.vector_b, b_v),
                   lookup(p.scalar_a, a_v) + lookup(p.scalar_b, b_v))  # int32: |acc| < 2^28
    v = requantize(p.vector_output, acc).astype(np.int64)
    v = ((v + 32768) & 0xFFFF) - 32768  # vmovn_s32: truncating narrow to int16
    v = v + p.output.zero_point
    v = ((v + 32768) & 0xFFFF) - 32768  # vaddq_s16 wraps
    v = np.clip(np.clip(v, -128, 127), p.output.act_min, p.output.act_max)  # vqmovn_s16, then the clamp
    out = np.empty(a.size, np.int8)
    out[lanes] = v
    out[~lanes] = requantize(p.output, lookup(p.table_a, a[~lanes]) + lookup(p.table_b, b[~lanes]))
    return out


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
