"""LiteRT's optimized int8 ADD (and ``xnnpack`` where XNNPACK declines; measured, explained from
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
(:func:`intq.kernels.litert_opt.lanes.optimized_vector_lanes`). ``AddScalarBroadcast``'s vector
code does 8 elements at a time and rescales each input as the reference, except that its second
step is a **truncating** shift: ``SRDHM((q - Z) << 20, m_i) >> -shift_i`` (``vshlq_s32`` by a
negative amount), then the sum as above (including the int16 narrowing). Shapes that do not fold
run the reference kernel.

**16x8** (XNNPACK takes no int16 tensor, so ``xnnpack`` runs it too; measured, explained from
``optimized_integer_ops::AddElementwiseInt16``, built without ``__AVX2__`` on x86_64, so its NEON
code through NEON_2_SSE): with general scales and equal input shapes, the flattened elements
``[0, 16 floor(n/16))`` rescale each input with **one** rounding, ``SRDHM(x << (15 + shift_i),
m_i)`` (``vshlq_s32`` by the combined shift — a negative one truncates — then ``vqrdmulhq``;
the reference rounds twice), then the sum as the reference (``vqrdmulhq``, gemmlowp's
RoundingDivideByPOT), the clamp and a saturating narrow; the last ``n mod 16`` elements are the
reference arithmetic (:class:`OptimizedAdd16x8Params`). Broadcasting ADDs
(``BroadcastAdd6DSlow``) and the power-of-two path run the reference under every resolver. The
int8 kernel's vector part is the same idea (:mod:`intq.kernels.add`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from intq.kernels._elementwise_common import INT8_BY_BITS, Int8Binary, Rescale, int8_binary, int8_table, lookup
from intq.kernels.add import (
    LEFT_SHIFT, LEFT_SHIFT_16, OP, Add16x8Params, AddParams, combine, general_add_sub, int16_operands, prepare_reference,
    real_multipliers)
from intq.kernels.add import run_int16 as run_general
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert.add import PotAdd16x8Params, power_of_two, run_pot
from intq.kernels.litert_opt import FAMILY
from intq.kernels.litert_opt.lanes import LANE_ELEMENTWISE, LANE_REFERENCE, optimized_vector_lanes
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import raw
from intq.qmath.raw import rdbp, srdhm


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


def optimized(ctx: KernelContext, io: Int8Binary, reference: AddParams) -> OptimizedAddParams:
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


def run_optimized(p: OptimizedAddParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
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


# ------------------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True)
class OptimizedAdd16x8Params(Add16x8Params):
    """LiteRT's optimized general int16 ADD on equal shapes (module docstring): the vector code's
    one-rounding input rescale on the first ``vector_elements`` flat elements, the reference after."""

    vector_elements: int  # 16 floor(n / 16)


VECTOR_BLOCK_16 = 16  # AddElementwiseInt16: 16 int16 values per step


def optimized_add_16x8(p: OptimizedAdd16x8Params, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """AddElementwiseInt16 on flat equal-shape operands: the vector head, the reference tail."""
    cut = p.vector_elements
    head = vector_rescale_16x8(a[:cut], p.multiplier_a, p.shift_a) + vector_rescale_16x8(b[:cut], p.multiplier_b, p.shift_b)
    y = rdbp(srdhm(head, p.multiplier_out), -p.shift_out)  # vqrdmulhq, RoundingDivideByPOT; |head| <= 2^30
    out = np.empty(a.size, np.int16)
    out[:cut] = np.clip(y, p.act_min, p.act_max)  # the clamp, then vqmovn_s32 (no effect inside int16)
    out[cut:] = combine(p, a[cut:], b[cut:], 1)  # the scalar loop: the reference arithmetic
    return out


def vector_rescale_16x8(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """``SRDHM(x << (15 + shift), m)``: ``vshlq_s32`` by the combined shift (a negative one shifts
    right, truncating), then ``vqrdmulhq`` — one rounding where the reference has two."""
    v = x.astype(np.int64)
    combined = LEFT_SHIFT_16 + shift
    v = v << combined if combined >= 0 else v >> -combined
    return srdhm(v, multiplier)


@variant(OP, family=FAMILY, activations=(INT16,),
         run={OptimizedAdd16x8Params: "run_int16", PotAdd16x8Params: run_pot, Add16x8Params: run_general})
def prepare_int16(ctx: KernelContext) -> OptimizedAdd16x8Params | PotAdd16x8Params | Add16x8Params:
    """LiteRT's path choice (:mod:`intq.kernels.litert.add`), then the vector lanes of the general
    path on equal input shapes."""
    io = int16_operands(ctx)
    pot = power_of_two(ctx, io, subtract=False)
    if pot is not None:
        return pot
    p = general_add_sub(ctx, io)
    if tuple(ctx.input(0).shape) != tuple(ctx.input(1).shape):
        return p  # BroadcastAdd6DSlow: the reference
    n = int(np.prod(io.shape))
    return OptimizedAdd16x8Params(**{f.name: getattr(p, f.name) for f in dataclasses.fields(Add16x8Params)},
                                  vector_elements=n - n % VECTOR_BLOCK_16)


def run_int16(p: OptimizedAdd16x8Params, a, b):
    return (optimized_add_16x8(p, a.reshape(-1), b.reshape(-1)).reshape(p.out_shape),)


# ------------------------------------------------------------------------------------------- int8

@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OptimizedAddParams:
    io = int8_binary(ctx)
    ctx.check_emulated()
    return optimized(ctx, io, prepare_reference(ctx, io, negate_b=False))


def run(p: OptimizedAddParams, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    flat_a, flat_b = (np.broadcast_to(v, shape).reshape(-1) for v in (a, b))
    return (run_optimized(p, flat_a, flat_b).reshape(shape),)
