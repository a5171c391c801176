"""The fixed-point primitives in their unchecked vector form: what kernels call at run time.

Each function here is the one implementation of its C function (gemmlowp's ``fixedpoint.h``,
TFLite's ``common.h``) on numpy integer arrays. The checked public forms in
:mod:`intq.qmath.fixedpoint` validate their contract and then call these; the compiled (numba)
forms in :mod:`intq.qmath.compiled` are the same formulas element by element. All three are
tested against the big-integer reference (tests/qmath).

Conventions: values are int32 (or int16) quantities held in **int64** arrays (so products of two
int32 values are exact: ``|a * b| <= 2^62``); inputs are not checked — the caller guarantees the
contract each docstring states (kernels check it once, at prepare). Where C's int32 arithmetic
wraps around, :func:`wrap32` reproduces it and the docstring says so. ``shift`` is positive for a
left shift, as everywhere in intq: ``(multiplier, shift)`` is the real ``multiplier * 2**(shift - 31)``.
"""

from __future__ import annotations

import numpy as np

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_MASK32 = (1 << 32) - 1
_HALF_Q31 = 1 << 30  # 2^30: 0.5 in the Q0.31 result of a doubling high multiply


def wrap32(x):
    """C's conversion of an int64 to int32 (two's complement wrap-around): ``((x + 2^31) mod 2^32) - 2^31``."""
    return ((x - INT32_MIN) & _MASK32) + INT32_MIN


def srdhm(a, b):
    """gemmlowp's SaturatingRoundingDoublingHighMul: ``floor((a * b + 2^30) / 2^31)``, saturated.

    gemmlowp writes ``(ab + nudge) / 2^31`` with C truncation and ``nudge = 2^30`` or ``1 - 2^30``
    by the sign of ``ab``; for every sign that equals the floor form above (ties toward +inf).
    The one overflow, ``a == b == INT32_MIN`` (exact result 2^31), saturates to INT32_MAX.
    ARM NEON's ``vqrdmulh`` computes the same function.
    Contract: ``a``, ``b`` int32 values (int64 arrays or Python ints). Returns int64.
    """
    high = (np.asarray(a, dtype=np.int64) * b + _HALF_Q31) >> 31
    both_min = np.equal(a, INT32_MIN) & np.equal(b, INT32_MIN)
    if np.any(both_min):
        high = np.where(both_min, INT32_MAX, high)
    return high


def rdbp(x, exponent):
    """gemmlowp's RoundingDivideByPOT: ``x / 2^exponent`` rounded half away from zero.

    One shift: ``(x + 2^(e-1) - [x < 0 and e > 0]) >> e`` (ties of positive x go up, of negative
    x down; ``e == 0`` returns x). gemmlowp's mask/threshold form computes the same values.
    Contract: ``exponent`` in [0, 62]; ``x + 2^(e-1)`` fits int64. Returns int64.
    """
    exponent = np.asarray(exponent, dtype=np.int64)
    nudge = (np.int64(1) << exponent) >> 1
    return (np.asarray(x, dtype=np.int64) + nudge - ((np.less(x, 0)) & (exponent > 0))) >> exponent


def rshift_half_up(x, exponent):
    """A rounding right shift, ties up: ``(x + 2^(e-1)) >> e`` (NEON ``vrshl`` by ``-e``; spec 000).

    Contract: ``exponent`` in [0, 62]. Returns int64.
    """
    exponent = np.asarray(exponent, dtype=np.int64)
    return (np.asarray(x, dtype=np.int64) + ((np.int64(1) << exponent) >> 1)) >> exponent


def right_shift_round(x, rshift, mode):
    """TPU-MLIR's RightShiftRound on int64 values: ``x / 2^rshift`` rounded with ``mode`` (a
    :class:`intq.qmath.Rounding`), a negative ``rshift`` shifting left, shifts above 63 taken as 63.

    Contract: ``x`` int64 (a left shift must not overflow); ``rshift`` in [-63, 2^31). Returns int64.
    """
    from intq.qmath.rounding import shift_right_rounded

    x = np.asarray(x, dtype=np.int64)
    n = np.asarray(rshift, dtype=np.int64)
    right = shift_right_rounded(x, np.clip(n, 0, 63), mode)
    if not np.any(n < 0):
        return right
    return np.where(n < 0, x << np.clip(-n, 0, 63), right)


def multiply_rshift(x, multiplier, rshift, mode):
    """TPU-MLIR's ``applyMultiplierAndRShift`` in its ``MultiplierShift`` mode (BM168x chips):
    ``RightShiftRound(x * multiplier, rshift, mode)`` — one integer product, one rounding shift.

    Contract: ``x * multiplier`` fits int64 (int32 accumulators times 32-bit multipliers do);
    ``rshift`` as :func:`right_shift_round`. Returns int64.
    """
    return right_shift_round(np.asarray(x, dtype=np.int64) * multiplier, rshift, mode)


def mbqm(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier (int32 x), double rounding — TFLM and the reference kernels.

    ``RDBP(SRDHM(wrap32(x * 2^max(shift, 0)), multiplier), max(-shift, 0))``. The left shift is
    int32 arithmetic in C: it wraps there and here alike (kernels bound ``x`` so it does not).
    Contract: ``x`` int32; ``multiplier`` int32; ``shift`` in [-31, 30]. Returns int64.
    """
    shift = np.asarray(shift, dtype=np.int64)
    return rdbp(srdhm(wrap32(np.asarray(x, dtype=np.int64) << np.maximum(shift, 0)), multiplier),
                np.maximum(-shift, 0))


def mbqm_half_up(x, multiplier, shift):
    """LiteRT's optimized MultiplyByQuantizedMultiplier on NEON (``vqrdmulh`` then ``vrshl``):
    :func:`mbqm` with the second rounding half up instead of half away from zero.

    Contract as :func:`mbqm`. Returns int64.
    """
    shift = np.asarray(shift, dtype=np.int64)
    return rshift_half_up(srdhm(wrap32(np.asarray(x, dtype=np.int64) << np.maximum(shift, 0)), multiplier),
                          np.maximum(-shift, 0))


def mbqm_single(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier built with TFLITE_SINGLE_ROUNDING (also ruy and CMSIS-NN):
    ``(x * multiplier + 2^(30 - shift)) >> (31 - shift)``, one rounding, ties up.

    Contract: ``x`` int32; ``multiplier`` in [0, 2^31); ``shift`` in [-31, 30]. Returns int64
    (the runtimes require the result to fit int32).
    """
    return rshift_half_up(np.asarray(x, dtype=np.int64) * multiplier, 31 - np.asarray(shift, dtype=np.int64))


def reduce_multiplier(multiplier, shift):
    """Prepare-time half of :func:`mbqm_int64`: ``m16 = (m + 2^15) >> 16`` (``0x7FFF`` from
    ``m >= 0x7FFF0000``, where it would reach 2^15) and ``total_shift = 15 - shift``.

    Contract: ``multiplier`` in [0, 2^31); ``shift`` in [-31, 7]. Returns two int64 arrays.
    """
    m = np.asarray(multiplier, dtype=np.int64)
    m16 = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)  # 0x7FFF0000: m16 would hit 2^15
    return m16.astype(np.int64), (15 - np.asarray(shift, dtype=np.int64)).astype(np.int64)


def mbqm_int64(x, m16, total_shift):
    """TFLite's MultiplyByQuantizedMultiplier(int64 x) (16x8 kernels): ``wrap32((x * m16 + 2^(t-1)) >> t)``
    with ``(m16, t)`` from :func:`reduce_multiplier` — one rounding, ties up. The C function returns
    ``static_cast<int32_t>`` of the result (its range is only DCHECKed): beyond int32 it wraps.

    Contract: ``|x| < 2^47``, ``m16 <= 2^15`` (the product stays below 2^62), ``t`` in [8, 46].
    Returns int64.
    """
    return wrap32(rshift_half_up(np.asarray(x, dtype=np.int64) * m16, total_shift))


# --------------------------------------------------------------------- gemmlowp's 16-bit forms
# HARD_SWISH computes on int16 with gemmlowp's FixedPoint<int16> primitives (values in int64 arrays).

def srdhm16(a, b):
    """SaturatingRoundingDoublingHighMul on int16: ``floor((a * b + 2^14) / 2^15)``; ``a == b == -2^15``
    saturates to ``2^15 - 1``. Contract: ``a``, ``b`` int16 values. Returns int64."""
    a = np.asarray(a, dtype=np.int64)
    high = (a * b + (1 << 14)) >> 15
    return np.minimum(high, INT16_MAX)  # only -2^15 * -2^15 reaches 2^15


def sdhm16(a, b):
    """TFLite's SaturatingDoublingHighMul on int16 (hard_swish.h, ARM SQDMULH): ``trunc(a * b / 2^15)``,
    C's truncating division, no rounding; ``a == b == -2^15`` saturates. Returns int64."""
    ab = np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)
    q = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.minimum(q, INT16_MAX)


def saturating_left_shift16(x, amount: int):
    """TFLite's SaturatingLeftShift on int16: ``clamp(x * 2^amount, -2^15, 2^15 - 1)``. Returns int64."""
    return np.clip(np.asarray(x, dtype=np.int64) << amount, INT16_MIN, INT16_MAX)


def rdbp16(x, exponent: int):
    """gemmlowp's RoundingDivideByPOT on int16, ``exponent`` in [0, 31].

    For ``exponent <= 15`` it is :func:`rdbp`. From 16 on, gemmlowp's int16 mask
    ``int16((1 << e) - 1)`` is -1 (all ones), so the result is 1 for every ``x >= 0`` and -1 for
    every ``x < 0``: reproduced as the reference kernels compute it. Returns int64.
    """
    if exponent <= 15:
        return rdbp(x, exponent)
    return np.where(np.asarray(x) >= 0, 1, -1).astype(np.int64)


# ------------------------------------------------------ gemmlowp's saturating power-of-two scaling

def mul_by_pot_param(x, exponent):
    """TFLite's SaturatingRoundingMultiplyByPOTParam for ``exponent >= 0`` (scalar or per element):
    ``x << exponent`` saturated to int32 when ``|x| > 2^(31 - exponent) - 1``. Returns int64."""
    x = np.asarray(x, dtype=np.int64)
    threshold = (np.int64(1) << (31 - np.asarray(exponent, dtype=np.int64))) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def mul_by_pot(x, exponent: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT<exponent>: a saturating left shift
    (:func:`mul_by_pot_param`) or, for a negative exponent, :func:`rdbp` to the right."""
    if exponent < 0:
        return rdbp(x, -exponent)
    return mul_by_pot_param(x, exponent)
