"""Pure-Python big-integer references, written from the C semantics of each runtime.

Independent of intq's numpy code: Python ints never overflow, `>>` on a negative int is an
arithmetic (floor) shift like C's on two's complement, and `c_div` is C's truncating division.
Exact rationals (fractions.Fraction) give the mathematical value a rounding should approximate.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def c_div(a: int, b: int) -> int:
    """C's integer division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return c_div(ab + nudge, 1 << 31)


def rounding_divide_by_pot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def mbqm_double(x: int, m: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier, default (double rounding) build."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    return rounding_divide_by_pot(srdhm(x * (1 << left), m), right)


def mbqm_single(x: int, m: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier, TFLITE_SINGLE_ROUNDING build."""
    total_shift = 31 - shift
    rnd = 1 << (total_shift - 1)
    return (x * m + rnd) >> total_shift


def mbqm_int64(x: int, m: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier(int64_t x, ...) used by 16x8 kernels."""
    reduced = ((m + (1 << 15)) >> 16) if m < 0x7FFF0000 else 0x7FFF
    total_shift = 15 - shift
    rnd = 1 << (total_shift - 1)
    return (x * reduced + rnd) >> total_shift


def cmsis_single_rounding(x: int, m: int, shift: int) -> int:
    """CMSIS-NN arm_nn_requantize with CMSIS_NN_USE_SINGLE_ROUNDING (written as CMSIS does)."""
    total_shift = 31 - shift
    new_val = x * m
    result = new_val >> (total_shift - 1)
    return (result + 1) >> 1


def tpu_right_shift_round(src: int, shift: int, mode: str) -> int:
    """TPU-MLIR RightShiftRound on int64."""
    if shift == 0:
        return src
    if shift > 63:
        shift = 63
    if shift < 0:
        return src << -shift
    val = src >> shift
    mant = src & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if mode == "half_to_even":
        return val + (val & 1) if mant == half else val + (1 if mant > half else 0)
    if mode == "half_away_from_zero":
        return val + (1 if (mant >= half if src >= 0 else mant > half) else 0)
    if mode == "toward_zero":
        return val + (1 if src < 0 and mant != 0 else 0)
    if mode == "floor":
        return val
    if mode == "ceil":
        return val + (1 if mant != 0 else 0)
    if mode == "half_up":
        return val + (1 if mant >= half else 0)
    if mode == "half_down":
        return val + (1 if mant > half else 0)
    raise ValueError(mode)


def round_rational(v: Fraction, mode: str) -> int:
    """Round an exact rational with the named mode (the mathematical definition)."""
    fl = math.floor(v)
    frac = v - fl  # in [0, 1)
    half = Fraction(1, 2)
    if mode == "floor":
        return fl
    if mode == "ceil":
        return fl + (1 if frac else 0)
    if mode == "toward_zero":
        return fl + (1 if v < 0 and frac else 0)
    if frac != half:
        return fl + (1 if frac > half else 0)
    return {
        "half_up": fl + 1,
        "half_down": fl,
        "half_away_from_zero": fl + (1 if v > 0 else 0),
        "half_to_even": fl + (fl & 1),
    }[mode]


def quantize_multiplier(d: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier (default build), with exact rationals for the rounding."""
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    q_fixed = round_rational(Fraction(q) * (1 << 31), "half_away_from_zero")
    assert q_fixed <= (1 << 31)
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def f32(x: float) -> float:
    """Round a double to the nearest float32 (ties to even), as a C cast does."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def requantize_float32_rne(acc: int, scale: float, zp: int, qmin: int, qmax: int) -> int:
    """MLAS / XNNPACK fp32 requantization. The float32 product is exact in double, then rounded."""
    prod = f32(f32(float(acc)) * f32(scale))
    prod = min(max(prod, float(qmin - zp)), float(qmax - zp))
    return round(prod) + zp  # Python's round() on a float is half to even


def mbqm_half_up(x: int, m: int, shift: int) -> int:
    """LiteRT's optimized MultiplyByQuantizedMultiplier on NEON: vqrdmulh, then vrshl by -right
    (a rounding shift, ties toward +infinity)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    h = srdhm(x * (1 << left), m)
    return (h + ((1 << right) >> 1)) >> right


def wrap32(x: int) -> int:
    """C's conversion of a wider integer to int32 (two's complement)."""
    return ((x + 2**31) % 2**32) - 2**31


def srdhm16(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul<int16_t>."""
    if a == b == -32768:
        return 32767
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return c_div(ab + nudge, 1 << 15)


def sdhm16(a: int, b: int) -> int:
    """TFLite hard_swish.h SaturatingDoublingHighMul(int16): trunc(2ab / 2^16)."""
    if a == b == -32768:
        return 32767
    return c_div(2 * a * b, 1 << 16)


def rdbp16(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT<int16_t>: the mask is computed in int16 (wraps for e >= 16)."""
    mask = ((1 << exponent) - 1) & 0xFFFF
    mask = mask - 0x10000 if mask >= 0x8000 else mask  # int16(mask)
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    shifted = x >> exponent if exponent < 63 else (-1 if x < 0 else 0)
    return shifted + (1 if remainder > threshold else 0)


def mul_by_pot_param(x: int, exponent: int) -> int:
    """TFLite SaturatingRoundingMultiplyByPOTParam for exponent >= 0 (int32)."""
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return x * (1 << exponent)
