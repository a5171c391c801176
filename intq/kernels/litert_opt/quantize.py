"""LiteRT's optimized QUANTIZE (measured on LiteRT 2.3 x86_64, explained from tflite/kernels/quantize.cc
and internal/optimized/optimized_ops.h): ``optimized_ops::AffineQuantize`` / ``optimized_ops::Requantize``
process the flattened tensor in vector blocks, then a scalar tail, which round differently.

Float input: elements ``[0, 8 floor(n/8))`` compute ``rint(x * float32(1/S))`` (float32 product
with the float32 reciprocal, round half to even: an exact tie ``x = 2.5 S`` gives 2 where the
reference gives 3), the tail ``round_half_away(double(x) / double(S))``; then ``+ Z``
and the clamp, in int32 (an input beyond the int32 range converts to INT32_MIN, and adding ``Z``
wraps around, measured: -3e9 S with ``Z = -5`` gives 127). Int8 input: elements
``[0, 16 floor(n/16))`` requantize with both rounding
steps half up (NEON ``vqrdmulh`` + ``vrshl``, :data:`Requant.DOUBLE_HALF_UP`), the tail with
gemmlowp double rounding; ``M`` as the reference (the double quotient of the scales).

int16 output (16x8 models; XNNPACK takes no int16 tensor, so ``xnnpack`` computes what
``litert-opt`` does): float input as the int8 one above — ``optimized_ops::AffineQuantize<int16_t>``
has the same vector head and scalar tail — clamped to int16; int8 input: ``Requantize<int8_t,
int16_t>`` has no optimized specialization, the reference runs (measured equal). uint8 outputs
and uint8 inputs are refused by the optimized targets (not measured).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import quantize as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.quantize import FloatQuantizeParams, RequantizeParams
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import Rounding, round_float


FLOAT_BLOCK = 8  # optimized AffineQuantize: two float32x4 registers per step


INT8_BLOCK = 16  # optimized Requantize<int8, int8>: one int8x16 register per step


@dataclass(frozen=True, eq=False)
class OptimizedFloatQuantizeParams(FloatQuantizeParams):
    """Float input, LiteRT's optimized AffineQuantize (``block > 0``: the vector head, then the
    reference tail) or XNNPACK's ``xnn_f32_qs8_vcvt`` (``block == 0``: every element, saturating)."""

    reciprocal: np.float32  # float32(1 / S)
    block: int  # leading elements done by the vector code come in multiples of this; 0: XNNPACK


@dataclass(frozen=True, eq=False)
class OptimizedRequantizeParams(RequantizeParams):
    """LiteRT's optimized Requantize<int8, int8>: the first ``block * floor(n / block)`` elements with
    ``rescale_vector`` (both roundings half up), the tail with the reference ``rescale``."""

    rescale_vector: Requantizer
    block: int


def quantize_optimized(p: OptimizedFloatQuantizeParams, x: np.ndarray) -> np.ndarray:
    """The float boundary of the optimized targets (see the module docstring)."""
    if np.any(np.isnan(x)):
        raise ValueError("QUANTIZE: the input contains NaN, which has no quantized value")
    zp = p.output.tensor_zero_point
    xnnpack = p.block == 0
    flat = x.reshape(-1)
    cut = flat.size if xnnpack else flat.size - flat.size % p.block
    with np.errstate(over="ignore"):
        head = np.rint(flat[:cut] * p.reciprocal)  # float32 product, ties to even
        tail_q = flat[cut:].astype(np.float64) / p.output.tensor_scale
        tail = round_float(tail_q, Rounding.HALF_AWAY_FROM_ZERO)  # std::round
    q = np.concatenate([head.astype(np.float64), tail])
    lo, hi = p.output.qmin, p.output.qmax
    if xnnpack:  # clamps in float before converting: saturates
        q = np.clip(q, lo - 1 - zp, hi + 1 - zp).astype(np.int64) + zp
    else:  # LiteRT: float -> int32 gives INT32_MIN out of range (x86 cvtps2dq / cvttsd2si), + Z wraps
        big = (q >= 2.0**31) | (q < -(2.0**31))
        q = np.where(big, -(2**31), np.where(big, 0, q).astype(np.int64)) + zp
        q = ((q + 2**31) & 0xFFFFFFFF) - 2**31
    return np.clip(q, lo, hi).astype(p.output.dtype).reshape(x.shape)


def check_measured(ctx: KernelContext, x, y) -> None:
    """The optimized QUANTIZE is emulated for float32 or int8 input and int8 or int16 output only."""
    if y.dtype == np.uint8 or not (np.issubdtype(x.dtype, np.floating) or x.dtype == np.int8):
        raise ctx.error(f"target {ctx.target.name!r}: the optimized QUANTIZE is emulated for float32 or int8 input "
                        f"and int8 or int16 output only ({x.dtype.name} -> {y.dtype.name} not measured)")


def reciprocal(out_qp) -> np.float32:
    """``float32(1 / S)``: ``float32(1) / s_out`` for every float32 scale."""
    return np.float32(1.0 / float(out_qp.tensor_scale))


@variant(reference.OP, family=FAMILY,
         run={OptimizedFloatQuantizeParams: "run_float", RequantizeParams: reference.run,
              OptimizedRequantizeParams: "run_requantize"})
def prepare(ctx: KernelContext) -> OptimizedFloatQuantizeParams | RequantizeParams | OptimizedRequantizeParams:
    x, y, out_qp = reference.operands(ctx)
    check_measured(ctx, x, y)
    if np.issubdtype(x.dtype, np.floating):
        return OptimizedFloatQuantizeParams(out_qp, reciprocal(out_qp), FLOAT_BLOCK)
    ref = reference.requantize_params(ctx, x, y, out_qp)
    if y.dtype != np.int8:  # Requantize<int8_t, int16_t>: the reference, under every resolver
        return ref
    _, real = reference.requantize_real(ctx, x, out_qp)
    rv = make_requantizer(real, Requant.DOUBLE_HALF_UP, out_qp.tensor_zero_point, out_qp.qmin, out_qp.qmax, y.dtype)
    return OptimizedRequantizeParams(ref.input_zero_point, ref.rescale, rv, INT8_BLOCK)


def run_float(p: OptimizedFloatQuantizeParams, x):
    return (quantize_optimized(p, np.asarray(x, np.float32)),)


def run_requantize(p: OptimizedRequantizeParams, x):
    flat = x.astype(np.int64).reshape(-1) - p.input_zero_point
    cut = flat.size - flat.size % p.block
    out = np.concatenate([requantize(p.rescale_vector, flat[:cut]), requantize(p.rescale, flat[cut:])])
    return (out.reshape(x.shape),)
