"""SQUARED_DIFFERENCE: ``y = clamp(R_out((R_a((a - Z_a) << L) - R_b((b - Z_b) << L))^2) + Z_y)``, broadcasting.

TFLite's quantized SquaredDifference (LiteRT ``tflite/kernels/squared_difference.cc``, TFLM
``micro/kernels/squared_difference.cc``; the same per-element function ``SquaredDifference(x, y,
params)`` run by ``reference_integer_ops::ElementWise`` or ``BroadcastBinaryFunction4DSlow``).
ADD's scale alignment with a square in place of the sum: with ``T = 2 * max(s_a, s_b)`` (the
float32 scales, doubled in float32, then double),

    a' = MBQM((a - Z_a) << L, s_a / T)          b' = MBQM((b - Z_b) << L, s_b / T)
    y  = clamp(MBQM((a' - b')^2, T^2 / (2^(2L) s_y)) + Z_y)

each input multiplier from QuantizeMultiplierSmallerThanOneExp (``<= 1/2``), every multiply with
gemmlowp double rounding (:func:`intq.qmath.raw.mbqm`). One rounding of the difference (on a grid
``2^L`` times finer than the coarser input's) and one of the square: ``(x - mean)^2`` of a
LayerNorm loses less here than in SUB then MUL(d, d), which rounds ``d`` to its own 8-bit grid first.

The two runtimes, from their sources and measured (``tests/kernels/test_squared_difference.py``):

* **int8** (``L = 7``): both. Prepare is double arithmetic in both (``(1 << 14) * s_y`` is an exact
  float32 product), so the multipliers agree; they differ in the output multiplier's contract:
  LiteRT takes it through QuantizeMultiplierSmallerThanOneExp, whose TFLITE_CHECK aborts the
  process at ``M_out >= 1`` (intq refuses such a node for the LiteRT targets), TFLM through
  QuantizeMultiplier and MultiplyByQuantizedMultiplier, a left shift of the square (intq allows it
  while the shifted square stays in int32, the bound computed from the tables below).
* **int16** (16x8, ``L = 0``, zero points 0): **TFLM only**. LiteRT 2.3's Prepare computes no
  parameters for int16 and its Eval fails ("SquaredDifference only supports FLOAT32 and INT32
  now"): the LiteRT targets refuse the node; the ``tflite`` target equals TFLM.

Overflow: int8: ``|a - Z_a| <= 255``, ``255 << 7`` halved at most: ``|a' - b'| <= 32640``, its
square ``< 2^30``; int16: ``|a| <= 2^15``, halved: ``|a' - b'| <= 2^15``, the square ``<= 2^30``.

Broadcasting: ``BroadcastBinaryFunction4DSlow`` extends both shapes to rank 4 with a TFLITE_CHECK
(a rank-5 broadcast aborts the process): refused above rank 4. Equal shapes run flat, any rank.

Run: ``a'`` and ``b'`` depend on one input code each, so prepare evaluates them on every code
(256 for int8, 65536 for int16) with :func:`intq.qmath.raw.mbqm`; run looks them up, squares the
difference and requantizes in one compiled pass (:func:`intq.qmath.compiled.mbqm_scalar`, the same
function element by element).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numba import njit

from intq.kernels._elementwise_common import INT8_BY_BITS, INT8_MAX, INT8_MIN, int8_binary
from intq.kernels._int16_common import INT16_MAX, INT16_MIN, binary_int16, check_16x8, scale64
from intq.kernels.base import INT16, KernelContext, kernel
from intq.qmath import quantize_multiplier
from intq.qmath.compiled import mbqm_scalar
from intq.qmath.raw import mbqm

OP = "SQUARED_DIFFERENCE"
LEFT_SHIFT_INT8 = 7  # (255 << 7)^2 / 4 < 2^31: the runtimes' left_shift for int8
LEFT_SHIFT_INT16 = 0  # int16 values are already 16 bits: 2^30 at most after the square
MAX_BROADCAST_RANK = 4  # BroadcastBinaryFunction4DSlow: RuntimeShape::ExtendedShape(4, ...) checks it
INT16_BY_BITS = np.arange(1 << 16, dtype=np.uint16).view(np.int16).astype(np.int64)
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, eq=False)
class SquaredDifferenceParams:
    """``table_a[code]`` = ``a'`` for every input code in bit order (int8: 256, int16: 65536), the
    same for ``b``; the output requantization; the clamp."""

    table_a: np.ndarray  # int32
    table_b: np.ndarray
    multiplier: int  # M_out = T^2 / (2^(2L) s_y)
    shift: int  # positive: a left shift (TFLM only)
    zero_point_out: int
    act_min: int
    act_max: int
    out_shape: tuple[int, ...] | None


def _smaller_than_one(ctx: KernelContext, real: float, what: str) -> tuple[int, int]:
    """QuantizeMultiplierSmallerThanOneExp: the runtimes' TFLITE_CHECK (``0 < real < 1``) as a refusal."""
    qm = quantize_multiplier(real)
    if not (0.0 < real < 1.0 and int(qm.shift) <= 0):
        raise ctx.error(f"the {what} multiplier {real:.6g} must be in (0, 1) (QuantizeMultiplierSmallerThanOneExp "
                        "aborts otherwise); check the tensors' scales")
    return int(qm.multiplier), int(qm.shift)


def _scaled(codes: np.ndarray, zero_point: int, left_shift: int, m: int, shift: int) -> np.ndarray:
    """``MBQM((code - Z) << L, m, shift)`` for every code: one input's term of the difference."""
    table = np.asarray(mbqm((codes - zero_point) << left_shift, m, shift), np.int32)
    table.setflags(write=False)
    return table


def _prepare(ctx: KernelContext, scales, zero_points, shapes, left_shift: int, codes: np.ndarray,
             act: tuple[int, int], out_shape) -> SquaredDifferenceParams:
    (s_a, s_b, s_y), (z_a, z_b, z_y) = scales, zero_points
    if out_shape is not None and tuple(shapes[0]) != tuple(shapes[1]) and len(out_shape) > MAX_BROADCAST_RANK:
        raise ctx.error(f"a broadcast of rank {len(out_shape)}: the runtimes' BroadcastBinaryFunction4DSlow takes "
                        f"rank {MAX_BROADCAST_RANK} at most (the process aborts); reshape to rank 4 first")
    twice_max = 2.0 * max(s_a, s_b)  # float32 doubled: exact; then double, as both sources write it
    ma, sha = _smaller_than_one(ctx, s_a / twice_max, "input 0")
    mb, shb = _smaller_than_one(ctx, s_b / twice_max, "input 1")
    table_a = _scaled(codes, z_a, left_shift, ma, sha)
    table_b = _scaled(codes, z_b, left_shift, mb, shb)
    real_out = (twice_max * twice_max) / float(np.float32(float(1 << (2 * left_shift)) * np.float32(s_y)))
    if ctx.target.rules.tables == "litert":
        mo, sho = _smaller_than_one(ctx, real_out, "output")
    else:  # TFLM: QuantizeMultiplier, a left shift allowed while the shifted square fits int32
        if not (np.isfinite(real_out) and real_out > 0):
            raise ctx.error(f"the output multiplier is {real_out}; check the tensors' scales")
        qm = quantize_multiplier(real_out)
        mo, sho = int(qm.multiplier), int(qm.shift)
        diff = int(np.abs(table_a.astype(np.int64)).max()) + int(np.abs(table_b.astype(np.int64)).max())
        if sho > 0 and (diff * diff) << sho > _INT32_MAX:
            raise ctx.error(f"the output multiplier {real_out:.6g} shifts the square left by {sho} bits, beyond int32 "
                            f"for a difference of {diff}; the output scale {s_y:.6g} is too small for the inputs'")
    return SquaredDifferenceParams(table_a, table_b, mo, sho, z_y, act[0], act[1], out_shape)


def _run(p: SquaredDifferenceParams, a: np.ndarray, b: np.ndarray, index_dtype, dtype) -> np.ndarray:
    """``clamp(MBQM((table_a[a] - table_b[b])^2) + Z_y)``, numpy broadcasting; the codes index the
    tables by their bits (``index_dtype``: uint8 or uint16)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    out = np.empty(a.shape, dtype)
    _squared_difference_loop(np.ascontiguousarray(a).view(index_dtype).reshape(-1),
                             np.ascontiguousarray(b).view(index_dtype).reshape(-1), p.table_a, p.table_b,
                             p.multiplier, max(p.shift, 0), max(-p.shift, 0), p.zero_point_out, p.act_min, p.act_max,
                             out.reshape(-1))
    return out


@njit(cache=True, nogil=True)
def _squared_difference_loop(ia, ib, table_a, table_b, multiplier, left, right, zero_point, lo, hi, out):
    """One compiled pass: the two table lookups, the square (< 2^31 with its left shift: prepare's
    bound), gemmlowp's MBQM (:func:`intq.qmath.compiled.mbqm_scalar`), the zero point and the clamp."""
    for i in range(out.size):
        d = np.int64(table_a[ia[i]]) - np.int64(table_b[ib[i]])
        y = mbqm_scalar(d * d, multiplier, left, right, 1) + zero_point
        out[i] = min(max(y, lo), hi)


@kernel(OP)
def prepare(ctx: KernelContext) -> SquaredDifferenceParams:
    io = int8_binary(ctx)
    ctx.check_emulated()
    return _prepare(ctx, (io.qa.tensor_scale, io.qb.tensor_scale, io.qy.tensor_scale),
                    (io.qa.tensor_zero_point, io.qb.tensor_zero_point, io.qy.tensor_zero_point),
                    (io.a.shape, io.b.shape), LEFT_SHIFT_INT8, INT8_BY_BITS, (INT8_MIN, INT8_MAX), io.shape)


def run(p: SquaredDifferenceParams, a, b):
    return (_run(p, np.asarray(a, np.int8), np.asarray(b, np.int8), np.uint8, np.int8),)


# ------------------------------------------------------------------------------------------ 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> SquaredDifferenceParams:
    check_16x8(ctx)
    ctx.check_emulated()
    if ctx.target.rules.tables == "litert":
        raise ctx.error(f"target {ctx.target.name!r}: LiteRT has no int16 SQUARED_DIFFERENCE (its kernel takes float32, "
                        "int32 and int8, and fails the invocation on int16); TensorFlow Lite Micro has one (target "
                        "'tflite'), or keep this node in int8")
    qa, qb, qy, shape = binary_int16(ctx)
    return _prepare(ctx, (scale64(qa), scale64(qb), scale64(qy)), (0, 0, 0), (ctx.input(0).shape, ctx.input(1).shape),
                    LEFT_SHIFT_INT16, INT16_BY_BITS, (INT16_MIN, INT16_MAX), shape)


def run_int16(p: SquaredDifferenceParams, a, b):
    return (_run(p, np.asarray(a, np.int16), np.asarray(b, np.int16), np.uint16, np.int16),)
