"""Shared arithmetic of LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX and L2_NORMALIZATION (no ``OP``: not a kernel).

Four parts:

1. **gemmlowp's fixed-point functions, vectorised** (``exp_on_negative_values``, ``logistic``,
   ``tanh``, the Newton-Raphson reciprocal of gemmlowp ``fixedpoint/fixedpoint.h`` and TFLite's
   ``kernels/internal/common.h``), built on the primitives of :mod:`intq.qmath.raw` (SRDHM, RDBP,
   saturating multiply by a power of two). A value of ``FixedPoint<int32_t, k>`` (``Qk.(31-k)``)
   is its raw int32 held in an int64 numpy array; every function takes and returns raws and
   reproduces the C function bit for bit, including gemmlowp's rounding, saturation and (where
   C's int32 arithmetic can wrap) wrapping. Integer-only: the kernels call these at run time.
2. **Row reductions** the kernels need per row: :func:`get_reciprocal` (TFLite's ``GetReciprocal``),
   :func:`inv_sqrt_multiplier` (``GetInvSqrtQuantizedMultiplierExp``) and
   :func:`log_x_for_x_greater_than_or_equal_to_1`. Integer-only.
3. **Prepare-time helpers** (floats allowed): LOGISTIC's and TANH's shared prepare
   (:func:`prepare_q4_table`: TFLM's fixed point on all 256 codes, :func:`tflm_q4_table`), LiteRT's
   float-built 256-entry table (:func:`litert_float_lut`, ``LUTPopulate<int8_t>``), TFLite's scaling preprocessing
   (:func:`softmax_scaling`, :func:`log_softmax_reverse_scaling`, :func:`input_radius`) and the
   output-parameter check of spec 003; XNNPACK's table (:func:`xnnpack_float_lut`) for its variants.
4. **LiteRT's optimized SOFTMAX / LOG_SOFTMAX** (``litert-opt``, ``xnnpack``): their float32 exp
   table (:func:`optimized_softmax_table`, prepare) and the float32 row sum their runs emulate
   (:func:`float32_row_sums`, a float emulation called only from those kernels' ``_float32_*``
   functions, which tests/kernels/test_integer_only.py exempts by name).

Names follow the C functions so the code can be read side by side with the runtimes' sources.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from intq.kernels.base import KernelContext
from intq.qmath import QuantParams, Rounding, quantize_multiplier, round_float
from intq.qmath.raw import INT32_MAX, INT32_MIN, mbqm, mul_by_pot, mul_by_pot_param, rdbp, srdhm, wrap32

_MASK32 = (1 << 32) - 1

# --------------------------------------------------------------------------------------------
# 1. gemmlowp fixed-point functions on int64 arrays holding int32 raws
# --------------------------------------------------------------------------------------------


def rescale(x, src_integer_bits: int, dst_integer_bits: int):
    """gemmlowp's Rescale: ``Q(src)`` raw -> ``Q(dst)`` raw (saturating, rounding)."""
    return mul_by_pot(x, src_integer_bits - dst_integer_bits)


def rounding_half_sum(a, b):
    """RoundingHalfSum: ``(a + b + sign(a + b)) / 2`` with C truncation (ties away from zero)."""
    s = a + b
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t >> 1, -((-t) >> 1))


def count_leading_zeros32(x):
    """CountLeadingZeros of ``uint32(x)`` (32 for 0), by a 5-step binary search."""
    y = np.asarray(x, dtype=np.int64) & _MASK32
    n = np.zeros(y.shape, dtype=np.int64)
    for bits, limit in ((16, 0xFFFF), (8, 0xFFFFFF), (4, 0xFFFFFFF), (2, 0x3FFFFFFF), (1, 0x7FFFFFFF)):
        small = y <= limit
        n += small * bits
        y = np.where(small, y << bits, y)
    return np.where(np.equal(x, 0), 32, n)


# Constants of gemmlowp's fixed-point functions (raw int32 values; the real each encodes).
_EXP_MINUS_ONE_EIGHTH = 1895147668  # exp(-1/8) in Q0.31
_ONE_THIRD = 715827883  # 1/3 in Q0.31
_EXP_BARREL = (  # (e, exp(-2^e) in Q0.31): multiply in when bit e of the remainder is set
    (-2, 1672461947),  # exp(-1/4)
    (-1, 1302514674),  # exp(-1/2)
    (0, 790015084),  # exp(-1)
    (1, 290630308),  # exp(-2)
    (2, 39332535),  # exp(-4)
    (3, 720401),  # exp(-8)
    (4, 242),  # exp(-16)
)
_48_OVER_17 = 1515870810  # 48/17 in Q2.29 (Newton-Raphson division start)
_NEG_32_OVER_17 = -1010580540  # -32/17 in Q2.29
_ONE_Q2 = 1 << 29  # 1.0 in Q2.29


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: 4th-order Taylor series around -1/8."""
    x = a + (1 << 28)  # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbp(x4, 2)
    poly = rdbp(srdhm(x4_over_4 + x3, _ONE_THIRD) + x2, 1)  # x^4/24 + x^3/6 + x^2/2
    return _EXP_MINUS_ONE_EIGHTH + srdhm(_EXP_MINUS_ONE_EIGHTH, x + poly)


def exp_on_negative_values(a, integer_bits: int):
    """gemmlowp's exp_on_negative_values: ``exp(a)`` for ``a <= 0`` in ``Q(integer_bits)``, result Q0.31.

    ``a = -(k/4 + r)``: exp of the fractional quarter by the Taylor series, then one multiply by
    ``exp(-2^e)`` per set bit ``e`` of the remainder (only bits below ``integer_bits``); inputs
    below -32 give 0 when ``integer_bits > 5``; ``exp(0)`` is the saturated one ``2^31 - 1``.
    """
    fractional_bits = 31 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = a_mod_quarter_minus_quarter - a
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder >> (fractional_bits + exponent)) & 1
            result = np.where(bit == 1, srdhm(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)  # a < -32: exp is 0
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal_of_half_denominator(half_denominator):
    """Three Newton-Raphson steps for ``1 / half_denominator`` (Q0.31 in, Q2.29 out)."""
    x = _48_OVER_17 + srdhm(half_denominator, _NEG_32_OVER_17)
    for _ in range(3):
        one_minus_half_denominator_times_x = _ONE_Q2 - srdhm(half_denominator, x)
        x = x + mul_by_pot(srdhm(x, one_minus_half_denominator_times_x), 2)
    return x


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp's ``1 / (1 + a)`` for ``a`` in [0, 1), Q0.31 in and out."""
    x = _newton_reciprocal_of_half_denominator(rounding_half_sum(a, INT32_MAX))
    return mul_by_pot(x, 1)  # Rescale<0>(ExactMulByPot<-1>(x)): Q1.30 -> Q0.31


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp's ``(1 - a) / (1 + a)`` for ``a`` in [0, 1), Q0.31 in and out."""
    x = _newton_reciprocal_of_half_denominator(rounding_half_sum(a, INT32_MAX))
    return mul_by_pot(x - _ONE_Q2, 2)  # Rescale<0>(x - 1): Q2.29 -> Q0.31


def logistic(a, integer_bits: int):
    """gemmlowp's logistic: ``1 / (1 + exp(-a))``, ``a`` in ``Q(integer_bits)``, result Q0.31."""
    positive = a > 0
    if_positive = one_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(-np.where(positive, a, -a), integer_bits))
    result = np.where(positive, if_positive, INT32_MAX - if_positive)
    return np.where(a == 0, 1 << 30, result)  # logistic(0) = 1/2


def tanh(a, integer_bits: int):
    """gemmlowp's tanh: ``(1 - exp(-2|a|)) / (1 + exp(-2|a|))`` with the sign of ``a``, result Q0.31."""
    negative = a < 0
    # exp(2n) for n = -|a| <= 0: the raw of n read with one more integer bit (ExactMulByPot<1>)
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(np.where(negative, a, -a), integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, -t, t))


# --------------------------------------------------------------------------------------------
# 2. Row reductions (TFLite common.h)
# --------------------------------------------------------------------------------------------

_LOG_2 = 1488522236  # log(2) in Q0.31
_SQRT_SQRT_HALF = 1805811301  # sqrt(sqrt(1/2))
_SQRT_HALF = 1518500250  # sqrt(1/2)
_ONE_QUARTER = 536870912  # 1/4
_ALPHA_N = 117049297  # 11/240 * sqrt(sqrt(2))
_ALPHA_D = 127690142  # 1/20 * sqrt(sqrt(2))
_ALPHA_I = 1057819769  # 2/sqrt(sqrt(2)) - sqrt(sqrt(2))
_ALPHA_F = 638450708  # 1/4 * sqrt(sqrt(2))


def _saturating_add(a, b):
    return np.clip(a + b, INT32_MIN, INT32_MAX)


def log_x_for_x_greater_than_or_equal_to_1(x, input_integer_bits: int, output_integer_bits: int):
    """TFLite's log_x_for_x_greater_than_or_equal_to_1_impl: ``log(x)``, Q(in) -> Q(out) raws.

    ``x = 2^z * r`` with ``r`` normalised two ways (around 1 and around sqrt(1/2)); ``log r`` from
    a rational (Pade-like) approximation whose denominator uses
    :func:`one_over_one_plus_x_for_x_in_0_1`; accumulated with one extra integer bit.
    Contract: ``x > 0``.
    """
    accum_bits = output_integer_bits + 1
    shifted_quarter = rescale(np.int64(_ONE_QUARTER), 0, accum_bits)
    z_a = x
    z_a_headroom_plus_1 = count_leading_zeros32(z_a)
    r_a_tmp = mul_by_pot_param(z_a, z_a_headroom_plus_1 - 1)
    r_a_raw = mul_by_pot_param(srdhm(r_a_tmp, _SQRT_HALF), 1)
    z_a_pow_2_adj = _saturating_add(
        mul_by_pot_param(input_integer_bits - z_a_headroom_plus_1, 31 - accum_bits), shifted_quarter)
    z_b = srdhm(z_a, _SQRT_HALF)
    z_b_headroom = count_leading_zeros32(z_b) - 1
    r_b_raw = mul_by_pot_param(z_a, z_b_headroom)
    z_b_pow_2_adj = _saturating_add(
        mul_by_pot_param(input_integer_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter)
    r = np.minimum(r_a_raw, r_b_raw)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)
    p = rounding_half_sum(r, _SQRT_SQRT_HALF)
    q = wrap32(r - _SQRT_SQRT_HALF)
    q = wrap32(q + q)
    common_sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, common_sq), _ALPHA_N))
    denom_minus_one = wrap32(
        srdhm(p, wrap32(_ALPHA_I + q + srdhm(_ALPHA_D, common_sq))) + srdhm(_ALPHA_F, q))
    recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    num_scaled = rescale(num, 0, accum_bits)
    total = wrap32(srdhm(z_pow_2_adj, _LOG_2) + srdhm(num_scaled, recip_denom))
    return rescale(total, accum_bits, output_integer_bits)


def get_reciprocal(x, integer_digits: int):
    """TFLite's GetReciprocal: ``(1 / (x * 2^-num_bits_over_unit)`` in Q0.31, ``num_bits_over_unit)``.

    ``x`` (Q(integer_digits), > 0) is normalised to [1, 2) by its leading zeros and
    ``1/(1 + (x' - 1))`` is computed by :func:`one_over_one_plus_x_for_x_in_0_1`.
    """
    headroom_plus_one = count_leading_zeros32(x)
    num_bits_over_unit = integer_digits - headroom_plus_one
    shifted_minus_one = wrap32(((x & _MASK32) << headroom_plus_one) - (1 << 31))  # uint32 arithmetic
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), num_bits_over_unit


_HALF_THREE_Q3 = (1 << 28) + (1 << 27)  # 1.5 in Q3.28


def inv_sqrt_multiplier(acc):
    """TFLite's GetInvSqrtQuantizedMultiplierExp with ``reverse_shift = -1``, per element of ``acc``.

    Returns ``(multiplier, shift)`` with ``1/sqrt(acc) ~= multiplier * 2^(shift - 31)`` (``shift``
    positive = left, as everywhere in intq). ``acc <= 1`` (0 is a row of zeros) gives
    ``(2^31 - 1, 0)``. Five Newton-Raphson steps in Q3.28 from the guess 1.
    Contract: ``acc`` in [0, 2^31).
    """
    tiny = acc <= 1
    value = np.where(tiny, 2, acc)
    big = value >= (1 << 29)
    value = np.where(big, value >> 2, value)
    shift = 11 + big.astype(np.int64)
    left_shift_bit_pairs = (count_leading_zeros32(value) - 1) // 2 - 1
    shift = shift - left_shift_bit_pairs
    value = value << (2 * left_shift_bit_pairs)  # now in [2^27, 2^29)
    fixed_input = value >> 1  # Q3.28
    half_input = rdbp(fixed_input, 1)
    x = np.full(value.shape, 1 << 28, dtype=np.int64)  # 1.0 in Q3.28
    for _ in range(5):
        x3 = mul_by_pot(srdhm(srdhm(x, x), x), 6)  # Rescale<3>(x*x*x): Q9 -> Q3
        x = mul_by_pot(srdhm(_HALF_THREE_Q3, x) - srdhm(half_input, x3), 3)  # Q6 -> Q3
    x = srdhm(x, _SQRT_HALF)  # * sqrt(2)/2
    negative = shift < 0
    x = np.where(negative, x << np.maximum(-shift, 0), x)
    shift = np.where(negative, 0, shift)
    return np.where(tiny, INT32_MAX, x), np.where(tiny, 0, -shift)


# --------------------------------------------------------------------------------------------
# 3. Prepare time (floats allowed)
# --------------------------------------------------------------------------------------------

def check_int8_io(ctx: KernelContext) -> tuple[QuantParams, QuantParams]:
    """One int8 per-tensor input and output of the same static shape; returns their params."""
    if len(ctx.inputs) != 1 or len(ctx.outputs) != 1:
        raise ctx.error(f"takes one input and one output, got {len(ctx.inputs)} and {len(ctx.outputs)}")
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = ctx.per_tensor(x, "input")
    out_qp = ctx.per_tensor(y, "output")
    same_shape = not x.is_static or tuple(x.shape) == tuple(y.shape)
    if not y.is_static or not same_shape:
        raise ctx.error(f"the output shape must be static and equal the input's, got {x.shape} -> {y.shape}")
    if len(y.shape) < 1 or int(np.prod(y.shape)) == 0:
        raise ctx.error(f"needs a non-empty tensor of rank >= 1, got shape {y.shape}")
    return in_qp, out_qp


def check_output_params(ctx: KernelContext, qp: QuantParams, scale: float, zero_point: int, scale_text: str):
    """Spec 003's fixed output parameters, compared exactly (each is a power of two in float32)."""
    got_scale, got_zp = qp.tensor_scale, qp.tensor_zero_point
    if got_scale != scale or got_zp != zero_point:
        raise ctx.error(
            f"the int8 output must have scale {scale_text} and zero point {zero_point} (TFLite int8 spec for "
            f"{ctx.op}), got scale {got_scale!r} and zero point {got_zp}; quantize the output with these "
            f"fixed parameters")


def input_radius(integer_bits: int, left_shift: int, total_signed_bits: int = 31) -> int:
    """TFLite's CalculateInputRadius: ``floor((2^ib - 1) * 2^(total - ib) / 2^left_shift)``.

    The largest ``|input|`` whose rescaled value stays inside ``Q(ib)``. Exact integer form of the
    double computation (both are exact for ``left_shift >= 0``).
    """
    assert left_shift >= 0, left_shift
    return (((1 << integer_bits) - 1) << (total_signed_bits - integer_bits)) >> left_shift


def frexp_multiplier(real: float) -> tuple[int, int]:
    """TFLM's logistic/tanh prepare: ``q, shift = frexp(real)``, ``multiplier = round(q * 2^31)``.

    Unlike :func:`intq.qmath.quantize_multiplier` there is no carry and no flush; for a float32
    input scale ``q * 2^31`` is an exact integer below 2^31.
    """
    q, shift = np.frexp(np.float64(real))
    m = int(np.float64(q) * 2.0**31)
    assert 2**30 <= m < 2**31, real
    return m, int(shift)


@dataclass(frozen=True)
class Q4Function:
    """LOGISTIC or TANH as TFLite defines it on int8: ``x - Z_in`` rescaled to Q4.27, a gemmlowp
    function giving Q0.31, and an output fixed at scale ``2^-output_bits``, zero point
    ``output_zero_point`` (spec 003)."""

    transform: str  # "logistic" or "tanh": the float tables' function (litert_float_lut, xnnpack_float_lut)
    fixed_point: Callable  # the gemmlowp function of a Q4.27 raw: logistic or tanh (above)
    output_bits: int  # the output scale is 2^-output_bits
    output_zero_point: int


@dataclass(frozen=True)
class LutParams:
    """An int8 function of one int8 input as a table: ``y = table[uint8(x)]``."""

    table: np.ndarray  # int8 [256], indexed by uint8(x)
    runtime: str  # whose algorithm built it: "tflm" (fixed point), "litert" or "xnnpack" (float-built tables)


_Q4_INTEGER_BITS = 4  # TFLM: the input is rescaled to Q4.27 (|x| < 16)


def check_q4_io(ctx: KernelContext, f: Q4Function) -> tuple[QuantParams, QuantParams]:
    """LOGISTIC's and TANH's contract: one int8 input, the fixed output parameters of ``f``."""
    ctx.check_emulated()
    in_qp, out_qp = check_int8_io(ctx)
    check_output_params(ctx, out_qp, 2.0**-f.output_bits, f.output_zero_point, f"1/{1 << f.output_bits}")
    return in_qp, out_qp


def prepare_q4_table(ctx: KernelContext, f: Q4Function) -> LutParams:
    """LOGISTIC's and TANH's prepare (TFLM): the contract (:func:`check_q4_io`), then TFLM's fixed
    point on all 256 input codes (:func:`tflm_q4_table`). Runtimes that build the table otherwise (in
    float32) do it in their families' variants."""
    in_qp, _ = check_q4_io(ctx, f)
    return LutParams(int8_table(tflm_q4_table(ctx, in_qp, f)), "tflm")


def tflm_q4_table(ctx: KernelContext, in_qp: QuantParams, f: Q4Function) -> np.ndarray:
    """TFLM's int8 LOGISTIC / TANH on every input code -128..127 (integer arithmetic after the setup).

    ``(m, shift) = frexp(s_in * 2^27)``; ``v = x - Z_in``; inside the radius
    ``floor(15 * 2^27 / 2^shift)``: ``clamp(RDBPOT(f(MBQM(v, m, shift)), 31 - output_bits) + Z_out)``,
    at or beyond it -128 / 127. Contract: ``s_in >= 2^-28`` (TFLM's radius needs ``shift >= 0``).
    """
    multiplier, shift = frexp_multiplier(in_qp.tensor_scale * float(1 << (31 - _Q4_INTEGER_BITS)))
    if shift < 0:  # CalculateInputRadius would shift by a negative amount (undefined in C)
        raise ctx.error(f"input scale {in_qp.tensor_scale!r} is below 2^-28, which TFLite Micro's fixed-point "
                        f"{ctx.op} does not handle")
    radius = input_radius(_Q4_INTEGER_BITS, shift)
    x = np.arange(-128, 128, dtype=np.int64) - in_qp.tensor_zero_point
    inside = (x > -radius) & (x < radius)
    q4 = mbqm(np.where(inside, x, 0), multiplier, shift)  # |x| < radius: fits
    y = np.clip(rdbp(f.fixed_point(q4, _Q4_INTEGER_BITS), 31 - f.output_bits) + f.output_zero_point, -128, 127)
    return np.where(inside, y, np.where(x <= -radius, -128, 127))


@dataclass(frozen=True)
class SoftmaxScaling:
    """``diff * beta * s_in`` as Q5.26: ``srdhm(diff << left_shift, multiplier)``, for ``diff >= diff_min``."""

    multiplier: int
    left_shift: int
    diff_min: int  # <= 0: smaller differences contribute exp ~ 0 and are skipped


SCALED_DIFF_INTEGER_BITS = 5  # kScaledDiffIntegerBits: the exp input is Q5.26


def softmax_scaling(ctx: KernelContext, beta: float, input_scale: float) -> SoftmaxScaling:
    """TFLite's PreprocessSoftmaxScaling (double-rounding build) + CalculateInputRadius.

    ``real = min(double(beta) * double(s_in) * 2^26, 2^31 - 1)``, quantized with
    QuantizeMultiplierGreaterThanOne; ``diff_min = -CalculateInputRadius(5, left_shift)``.
    Both runtimes abort when ``real <= 1`` (TFLITE_CHECK_GT); intq refuses it here.
    """
    real = min(float(np.float32(beta)) * float(np.float32(input_scale)) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)),
               float((1 << 31) - 1))
    if not real > 1.0:
        raise ctx.error(f"beta * input scale = {beta!r} * {input_scale!r} is too small (<= 2^-26) or not positive; "
                        f"TFLite's softmax scaling needs beta * scale * 2^26 > 1 (the runtimes abort)")
    m, shift = quantize_multiplier(real)
    return SoftmaxScaling(int(m), int(shift), -input_radius(SCALED_DIFF_INTEGER_BITS, int(shift)))


def log_softmax_reverse_scaling(ctx: KernelContext, scaling: SoftmaxScaling) -> tuple[int, int]:
    """PreprocessLogSoftmaxScalingExp's inverse: ``(2^(31 - left_shift) / multiplier)`` as a Q0.31 pair.

    Returns ``(multiplier, shift)`` with ``shift <= 0`` (QuantizeMultiplierSmallerThanOneExp).
    """
    real = float(1 << (31 - scaling.left_shift)) / float(scaling.multiplier)
    if not 0.0 <= real < 1.0:
        raise ctx.error(f"the reverse scaling {real!r} of the input is not below 1 (TFLite aborts)")
    m, shift = quantize_multiplier(real)
    assert shift <= 0, shift
    return int(m), int(shift)


# The C library's float functions (the float-built tables of the variants call them as the runtimes do).

@lru_cache(maxsize=1)
def c_math_library():
    """The platform C math library with ``expf``/``tanhf``/``logf``/``erfcf`` (float) and ``exp`` (double) typed, or
    None where it does not load (callers then fall back to numpy, which may differ in the last bit)."""
    path = ctypes.util.find_library("m")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        for name in ("expf", "tanhf", "logf", "erfcf"):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
        lib.exp.restype, lib.exp.argtypes = ctypes.c_double, [ctypes.c_double]
    except (OSError, AttributeError):
        return None
    return lib


def c_float32_function(name: str, x: np.ndarray) -> np.ndarray:
    """``expf`` / ``tanhf`` / ``logf`` of float32 values, as LiteRT's C++ ``std::exp(float)`` computes them.

    LiteRT calls the platform C library (glibc's ``expf`` is correctly rounded in practice, its
    ``tanhf`` is not always), so the table is built by calling the same functions through
    ctypes. Without a loadable C math library, the float64 function rounded to float32 is used
    (correctly rounded; may differ from a runtime's libm in the last bit).
    """
    lib = c_math_library()
    if lib is not None:
        fn = getattr(lib, name)
        return np.array([fn(float(v)) for v in x], dtype=np.float32)
    if name == "erfcf":  # numpy has no erfc
        return np.array([math.erfc(float(v)) for v in x], dtype=np.float32)
    with np.errstate(over="ignore"):  # expf overflows to inf as in C
        return getattr(np, name[:-1])(x.astype(np.float64)).astype(np.float32)


def lut_populate_int8(input_qp: QuantParams, output_qp: QuantParams,
                      transform: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """TFLite's ``LUTPopulate<int8_t>`` with the float32 function ``transform`` (float32 array in,
    float32 array out, as the C++ ``float (*)(float)`` computes it): the int8 result for every int8
    input, indexed by ``uint8(x)``. For each ``v`` in [-128, 127], all in float32:
    ``d = s_in * (v - Z_in)``; ``q = int(roundf(transform(d) * (1 / s_out)) + Z_out)`` (std::round:
    half away from zero), clamped to [-128, 127]; a run is one lookup ``table[x.view(uint8)]``.
    Used by LiteRT's float LOGISTIC and TANH tables and by GELU."""
    v = np.arange(-128, 128, dtype=np.int64)
    s_in = np.float32(input_qp.tensor_scale)
    d = (s_in * (v - input_qp.tensor_zero_point).astype(np.float32)).astype(np.float32)
    f = np.asarray(transform(d), dtype=np.float32)
    inverse_scale = np.float32(1.0) / np.float32(output_qp.tensor_scale)
    scaled = (f * inverse_scale).astype(np.float32)
    rounded = round_float(scaled, Rounding.HALF_AWAY_FROM_ZERO)  # roundf, decided on the exact fraction
    quantized = np.trunc((rounded + np.float32(output_qp.tensor_zero_point)).astype(np.float32))
    return int8_table(np.clip(quantized, -128, 127))


def _uint8_ordered(table_by_value: np.ndarray) -> np.ndarray:
    """Reorder a table indexed by ``v + 128`` into one indexed by ``uint8(v)``."""
    out = np.empty(256, dtype=np.int8)
    out[np.arange(-128, 128, dtype=np.int64).astype(np.int8).view(np.uint8)] = table_by_value
    out.setflags(write=False)
    return out


def int8_table(values_by_input: np.ndarray) -> np.ndarray:
    """A read-only int8 table indexed by ``uint8(x)`` from results listed for x = -128..127."""
    return _uint8_ordered(np.asarray(values_by_input).astype(np.int8))
