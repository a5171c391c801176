"""LiteRT's optimized int8 MUL (``litert-opt``; ``xnnpack`` where XNNPACK declines; measured, explained
from ``optimized_integer_ops::MulElementwise``): ``M`` as ``litert-ref``; with equal input shapes
the flattened elements ``[0, 16 floor(n/16))`` are computed by the vector code, ``v = MBQM((a -
Z_a)(b - Z_b), M)`` (the same double rounding), then **saturated to int16, ``Z_y`` added in int16
with wrap-around**, saturated to int8 and clamped (a saturated ``v`` flips: ``v <= -32768`` with
``Z_y = -1`` wraps to 32767 and gives 127, measured); the last ``n mod 16`` elements are the
reference arithmetic. Broadcasting MULs run ``BinaryBroadcastFiveFold``: the output is written in
runs, each by one call of the elementwise or scalar-broadcast kernel (the same vector code), so the
split applies per run (:func:`intq.kernels.litert_opt.lanes.optimized_vector_lanes`); shapes that do
not fold run the reference kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_MAX, INT8_MIN, fused_activation_range, int8_binary, make_rescale, output_requantizer, scale_of, scale_ratio,
    zero_point_of)
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.litert_opt.lanes import optimized_vector_lanes
from intq.kernels.mul import OP, MulParams, max_left
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant


VECTOR_BLOCK = 16  # optimized MulElementwise: one int8x16 register per step


@dataclass(frozen=True)
class OptimizedMulParams(MulParams):
    """LiteRT's optimized MUL (``litert-opt``; ``xnnpack`` where XNNPACK declines): the vector lanes
    requantize without zero point into int32, then narrow as NEON does (module docstring)."""

    unclamped: Requantizer  # the same multiplier, no zero point, int32 out
    vector_lanes: np.ndarray  # bool over the flat output: the vector-computed elements


def optimized(ctx: KernelContext, a, b, za: int, zb: int, real: float, max_left: int, qy) -> OptimizedMulParams:
    """LiteRT's optimized MulElementwise / MulSimpleBroadcast (module docstring)."""
    if not (a.is_static and b.is_static):
        raise ctx.error(f"target {ctx.target.name!r}: LiteRT's optimized MUL needs static input shapes here")
    lanes = optimized_vector_lanes(a, b, VECTOR_BLOCK, VECTOR_BLOCK) != 0  # MulSimpleBroadcast: the same code
    make_rescale(ctx, real, "output", Requant.DOUBLE, max_left_shift=max_left)
    lo, hi = fused_activation_range(ctx, qy)
    out = output_requantizer(ctx, real, Requant.DOUBLE, qy, lo, hi)
    unclamped = make_requantizer(real, Requant.DOUBLE, 0, -(2**31), 2**31 - 1, np.int32)
    return OptimizedMulParams(za, zb, out, unclamped, lanes)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OptimizedMulParams:
    """``M`` in the target's Prepare arithmetic (LiteRT's float32)."""
    io = int8_binary(ctx)
    qa, qb, qy = io.qa, io.qb, io.qy
    real = scale_ratio(ctx.target.scales, (scale_of(qa), scale_of(qb)), scale_of(qy))
    za, zb = zero_point_of(qa), zero_point_of(qb)
    return optimized(ctx, io.a, io.b, za, zb, real, max_left(za, zb), qy)


def run(p: OptimizedMulParams, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    prod = (a.astype(np.int64) - p.zero_point_a) * (b.astype(np.int64) - p.zero_point_b)  # |prod| <= 65025
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
