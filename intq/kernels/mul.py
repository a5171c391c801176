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
optimized kernel (``litert-opt``; measured, explained from ``optimized_integer_ops::MulElementwise``):
``M`` as ``litert-ref``; with equal input shapes the flattened elements ``[0, 16 floor(n/16))``
are computed by the vector code, ``v = MBQM((a - Z_a)(b - Z_b), M)`` (the same double rounding),
then **saturated to int16, ``Z_y`` added in int16 with wrap-around**, saturated to int8 and
clamped (a saturated ``v`` flips: ``v <= -32768`` with ``Z_y = -1`` wraps to 32767 and gives 127,
measured); the last ``n mod 16`` elements are the
reference arithmetic. Broadcasting MULs run ``BinaryBroadcastFiveFold``: the output is written in
runs, each by one call of the elementwise or scalar-broadcast kernel (the same vector code), so the
split applies per run (:func:`intq.kernels._elementwise_common.optimized_vector_lanes`); shapes
that do not fold run the reference kernel.

Contract (spec 003): inputs and output int8, per tensor. ``|a - Z_a|, |b - Z_b| <= 255``, so the
product is below 2^16 in magnitude; a left shift of ``M`` is allowed while the shifted product
still fits int32 (checked at prepare from the zero points).

``tpu-mlir`` target: TPU-MLIR's ``tpu.Mul`` (:mod:`intq.kernels.tpu_mlir.eltwise`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.kernels._elementwise_common import (
    INT8_MAX,
    INT8_MIN,
    Runtime,
    fused_activation_range,
    int8_binary,
    make_rescale,
    optimized_vector_lanes,
    output_requantizer,
    requant_mode,
    runtime_of,
    scale_of,
    scale_ratio,
    zero_point_of,
)
from intq.errors import IntqError
from intq.kernels.base import KernelContext, kernel
from intq.kernels.tpu_mlir import eltwise as tpu_mlir_eltwise
from intq.kernels.targets import Runtime as _Runtime
from intq.kernels.requantize import (
    DoubleRounding,
    Requantizer,
    make_requantizer,
    requantize,
    xnnpack_activation_range,
)
from intq.qmath.compiled import mbqm_scalar
from intq.kernels import _ort
from intq.kernels.targets import Requant

OP = "MUL"


VECTOR_BLOCK = 16  # optimized MulElementwise: one int8x16 register per step


@dataclass(frozen=True)
class MulParams:
    """The reference kernel (and XNNPACK's, whose float32 requantization is the ``output`` contract)."""

    zero_point_a: int
    zero_point_b: int
    output: Requantizer  # s_a s_b / s_y, + Z_y, clamp to the fused activation


@dataclass(frozen=True)
class OptimizedMulParams(MulParams):
    """LiteRT's optimized MUL (``litert-opt``; ``xnnpack`` where XNNPACK declines): the vector lanes
    requantize without zero point into int32, then narrow as NEON does (module docstring)."""

    unclamped: Requantizer  # the same multiplier, no zero point, int32 out
    vector_lanes: np.ndarray  # bool over the flat output: the vector-computed elements


def _optimized(ctx: KernelContext, a, b, za: int, zb: int, real: float, max_left: int, qy) -> OptimizedMulParams:
    """LiteRT's optimized MulElementwise / MulSimpleBroadcast (module docstring)."""
    if not (a.is_static and b.is_static):
        raise ctx.error(f"target {ctx.target.name!r}: LiteRT's optimized MUL needs static input shapes here")
    lanes = optimized_vector_lanes(a, b, VECTOR_BLOCK, VECTOR_BLOCK) != 0  # MulSimpleBroadcast: the same code
    make_rescale(ctx, real, "output", Requant.DOUBLE, max_left_shift=max_left)
    lo, hi = fused_activation_range(ctx, qy)
    out = output_requantizer(ctx, real, Requant.DOUBLE, qy, lo, hi)
    unclamped = make_requantizer(real, Requant.DOUBLE, 0, -(2**31), 2**31 - 1, np.int32)
    return OptimizedMulParams(za, zb, out, unclamped, lanes)


@kernel(OP)
def prepare(ctx: KernelContext) -> MulParams | OptimizedMulParams:
    if _ort.is_ort(ctx):
        return _ort.prepare_binary(ctx, _ort.qlinear_mul_table)
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_eltwise.prepare_mul(ctx)
    io = int8_binary(ctx)
    a, b, qa, qb, qy = io.a, io.b, io.qa, io.qb, io.qy
    s_a, s_b, s_y = scale_of(qa), scale_of(qb), scale_of(qy)
    if ctx.target.xnnpack:
        scale = scale_ratio(Runtime.LITERT, (s_a, s_b), s_y)  # XNNPACK's float32 scale, LiteRT's multiplier
        if not 2.0**-16 <= scale < 2.0**8:  # XNNPACK declines: LiteRT's optimized MUL runs
            return _optimized(ctx, a, b, zero_point_of(qa), zero_point_of(qb), scale,
                              _max_left(zero_point_of(qa), zero_point_of(qb)), qy)
        try:
            lo, hi = xnnpack_activation_range(ctx.attr("fused_activation_function", "NONE"), qy)
        except IntqError as e:
            raise ctx.error(str(e)) from None
        r = make_requantizer(scale, Requant.FLOAT32_RNE, zero_point_of(qy), lo, hi, np.int8)
        return MulParams(zero_point_of(qa), zero_point_of(qb), r)
    ctx.check_emulated()
    mode = requant_mode(ctx)
    real = scale_ratio(runtime_of(ctx), (s_a, s_b), s_y)
    za, zb = zero_point_of(qa), zero_point_of(qb)
    max_left = _max_left(za, zb)
    if ctx.target.optimized:
        return _optimized(ctx, a, b, za, zb, real, max_left, qy)
    make_rescale(ctx, real, "output", mode, max_left_shift=max_left)
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
    (``[1, C]``, ``[1, 1]``). ``|(a - Z_a)(b - Z_b)| << left`` fits int32 (``_max_left`` at prepare)."""
    rows, cols = out.shape
    for i in range(rows):
        ia = i if a.shape[0] > 1 else 0
        ib = i if b.shape[0] > 1 else 0
        for c in range(cols):
            x = (np.int64(a[ia, c if a.shape[1] > 1 else 0]) - za) * (np.int64(b[ib, c if b.shape[1] > 1 else 0]) - zb)
            y = mbqm_scalar(x, mult, left, right, 1) + zp
            out[i, c] = lo if y < lo else (hi if y > hi else y)


def _max_left(za: int, zb: int) -> int:
    bound = max(INT8_MAX - za, za - INT8_MIN) * max(INT8_MAX - zb, zb - INT8_MIN)  # |(a - Z_a)(b - Z_b)|
    return max(s for s in range(31) if bound << s <= 2**31 - 1)


def run(p: MulParams | OptimizedMulParams | _ort.OrtBinaryLut, a, b):
    if isinstance(p, _ort.OrtBinaryLut):
        return (_ort.lookup2(p, a, b),)
    if type(p) is tpu_mlir_eltwise.TpuMlirMulParams:
        return tpu_mlir_eltwise.run_mul(p, a, b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    r = p.output
    if type(p) is MulParams and type(r) is DoubleRounding and r.multiplier.size == 1 and shape:
        rows = _as_rows(a, shape), _as_rows(b, shape)  # the common cases: equal shapes, a per-channel scale
        if rows[0] is not None and rows[1] is not None:
            out = np.empty(shape, r.out_dtype)
            _fused_mul(rows[0], rows[1], p.zero_point_a, p.zero_point_b, int(r.multiplier[0]), int(r.left[0]),
                       int(r.right[0]), r.zero_point, r.act_min, r.act_max, out.reshape(-1, shape[-1]))
            return (out,)
    prod = (a.astype(np.int64) - p.zero_point_a) * (b.astype(np.int64) - p.zero_point_b)  # |prod| <= 65025
    if not isinstance(p, OptimizedMulParams):
        return (requantize(r, prod).reshape(shape),)
    flat = np.broadcast_to(prod, shape).reshape(-1)
    lanes = p.vector_lanes
    v = requantize(p.unclamped, flat[lanes]).astype(np.int64)  # the vector code: int32 lanes
    v = np.clip(v, -32768, 32767) + p.output.zero_point  # vqmovn_s32, then vaddq_s16: wraps
    v = ((v + 32768) & 0xFFFF) - 32768
    v = np.clip(np.clip(v, INT8_MIN, INT8_MAX), p.output.act_min, p.output.act_max)  # vqmovn_s16, clamp
    out = np.empty(flat.size, np.int8)
    out[lanes] = v
    out[~lanes] = requantize(p.output, flat[~lanes])
    return (out.reshape(shape),)
