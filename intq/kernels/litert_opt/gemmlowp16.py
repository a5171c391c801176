"""gemmlowp's fixed-point logistic and tanh on int16 raws (no ``OP``: not a kernel).

LiteRT's optimized int16 LOGISTIC / TANH (``optimized_ops::Logistic`` / ``Tanh`` on int16), which
its optimized resolver runs when the input scale is a power of two the reference kernel
special-cases (2^-12; TANH also 2^-11), read the input as ``FixedPoint<int16_t, 3>`` and return
``gemmlowp::logistic`` / ``gemmlowp::tanh`` as ``FixedPoint<int16_t, 0>`` (gemmlowp
``fixedpoint/fixedpoint.h``, the templates instantiated for ``int16_t``). This module evaluates
those templates on int16 raws held in int64 arrays, bit for bit:

* ``+``, ``-`` and negation wrap to int16 (C's int promotion, then the narrowing store);
* ``*`` is SaturatingRoundingDoublingHighMul on int16 (:func:`intq.qmath.raw.srdhm16`);
* ``SaturatingRoundingMultiplyByPOT<e>``: a saturating left shift, or RoundingDivideByPOT;
* constants are the int32 ones rescaled: ``RoundingDivideByPOT<int32>(c, 16)``;
* ``One()`` of ``FixedPoint<int16, 0>`` is 32767, of ``FixedPoint<int16, k>`` ``1 << (15 - k)``.

The SIMD blocks of those kernels (SSE4.1 on x86_64: ``_mm_mulhrs_epi16`` for the doubling high
multiply, ``_mm_avg_epu16`` for RoundingHalfSum) compute the same values on the operands these
functions see (RoundingHalfSum only receives non-negative sums here), so every element follows
these scalar templates. An int16 input has 65536 values: the kernels tabulate the function at
prepare (:func:`logistic_table`, :func:`tanh_table`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.qmath.raw import INT16_MAX, rdbp, rdbp16, saturating_left_shift16, srdhm16

_ONE_F0 = INT16_MAX  # FixedPoint<int16, 0>::One(): the largest raw (1.0 is not representable)


def _wrap16(x):
    """C's narrowing of an int to int16 (two's complement wrap)."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _constant(int32_value: int) -> int:
    """GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT for int16: ``RoundingDivideByPOT<int32>(c, 16)``."""
    return int(rdbp(np.int64(int32_value), 16))


def _mul_by_pot(x, exponent: int):
    """SaturatingRoundingMultiplyByPOT<exponent> on int16."""
    return saturating_left_shift16(x, exponent) if exponent >= 0 else rdbp16(x, -exponent)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for a in [-1/4, 0), FixedPoint<int16, 0> in and out (Taylor series around -1/8)."""
    constant_term = _constant(1895147668)  # exp(-1/8)
    one_third = _constant(715827883)
    x = _wrap16(a + (1 << 12))  # + ConstantPOT<-3>: 1/8
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    x4_over_4 = rdbp16(x4, 2)
    poly = rdbp16(_wrap16(srdhm16(_wrap16(x4_over_4 + x3), one_third) + x2), 1)  # x^4/24 + x^3/6 + x^2/2
    return np.clip(constant_term + srdhm16(constant_term, _wrap16(x + poly)), -(1 << 15), INT16_MAX)  # saturating


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int):
    """gemmlowp's exp_on_negative_values for FixedPoint<int16, integer_bits> (``a <= 0``), result F0."""
    fractional_bits = 15 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = _wrap16((a & (quarter - 1)) - quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        _mul_by_pot(a_mod_quarter_minus_quarter, integer_bits))  # Rescale<0>
    remainder = _wrap16(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _BARREL:
        if integer_bits > exponent:
            bit = remainder & (1 << (fractional_bits + exponent))
            result = np.where(bit != 0, srdhm16(result, _constant(multiplier)), result)
    assert integer_bits <= 5  # the clamp below -32 only exists for more integer bits
    return np.where(a == 0, _ONE_F0, result)


def _reciprocal_of_half_denominator(a):
    """The Newton-Raphson iterations shared by one_over_one_plus_x and one_minus_x_over_one_plus_x:
    ``x ~ 1 / half_denominator`` as FixedPoint<int16, 2>, with ``half_denominator = (a + 1) / 2``."""
    s = np.asarray(a, dtype=np.int64) + _ONE_F0
    half_denominator = np.where(s >= 0, (s + 1) >> 1, -((-(s - 1)) >> 1))  # RoundingHalfSum (s >= 0 here)
    one_f2 = 1 << 13
    x = _wrap16(_constant(1515870810) + srdhm16(half_denominator, _constant(-1010580540)))  # 48/17 - 32/17 h
    for _ in range(3):
        one_minus = _wrap16(one_f2 - srdhm16(half_denominator, x))
        x = _wrap16(x + _mul_by_pot(srdhm16(x, one_minus), 2))  # Rescale<2> of an F4 product
    return x


def one_over_one_plus_x_for_x_in_0_1(a):
    """``1 / (1 + a)``, F0 in and out: Rescale<0>(ExactMulByPot<-1>(x)) of the F2 reciprocal."""
    return _mul_by_pot(_reciprocal_of_half_denominator(a), 1)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    """``(1 - a) / (1 + a)``, F0 in and out: Rescale<0>(x - 1) of the F2 reciprocal."""
    return _mul_by_pot(_wrap16(_reciprocal_of_half_denominator(a) - (1 << 13)), 2)


def logistic(a):
    """gemmlowp::logistic of FixedPoint<int16, 3> raws, FixedPoint<int16, 0> raws out."""
    positive = a > 0
    abs_input = np.where(positive, a, _wrap16(-a))
    if_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(_wrap16(-abs_input), 3))
    result = np.where(positive, if_positive, _wrap16(_ONE_F0 - if_positive))
    return np.where(a == 0, _constant(1 << 30), result)  # one half


def tanh(a):
    """gemmlowp::tanh of FixedPoint<int16, 3> raws, FixedPoint<int16, 0> raws out."""
    negative = a < 0
    n = np.where(negative, a, _wrap16(-a))
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, 4))  # ExactMulByPot<1>: read as F4
    return np.where(a == 0, 0, np.where(negative, _wrap16(-t), t))


def logistic_table(all_int16: np.ndarray) -> np.ndarray:
    """``logistic(x)`` for the int16 input raws ``all_int16`` (F3), as int16."""
    return logistic(np.asarray(all_int16, dtype=np.int64)).astype(np.int16)


def tanh_table(all_int16: np.ndarray, input_left_shift: int) -> np.ndarray:
    """``tanh(x << input_left_shift)`` (SaturatingRoundingMultiplyByPOT<1> for a 2^-11 scale) as int16."""
    x = np.asarray(all_int16, dtype=np.int64)
    return tanh(_mul_by_pot(x, input_left_shift) if input_left_shift else x).astype(np.int16)


@dataclass(frozen=True, eq=False)
class GemmlowpSigmoid16x8Params:
    """gemmlowp's int16 fixed-point function of every int16 input, ``y = table[x.view(uint16)]``."""

    table: np.ndarray  # int16 [65536]


def run_table(p: GemmlowpSigmoid16x8Params, x):
    return (p.table[x.view(np.uint16)],)
