"""The fixed-point primitives compiled (numba), for the kernels' fused per-element loops.

Scalar forms of :mod:`intq.qmath.raw` — the same formulas, one int64 element at a time — and the
fused requantization loops built from them (accumulator + offset -> multiplier -> zero point ->
clamp in one pass, with no temporary arrays). tests/qmath/test_raw.py checks every function here
against the big-integer reference and against :mod:`intq.qmath.raw`.

Contracts are those of the matching :mod:`intq.qmath.raw` function; nothing is checked here.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_HALF_Q31 = 1073741824  # 2^30: 0.5 in the Q0.31 result of a doubling high multiply
_INT32_MIN = -2147483648
_INT32_MAX = 2147483647


@njit(cache=True, nogil=True, inline="always")
def srdhm_scalar(a, b):
    """:func:`intq.qmath.raw.srdhm` on one pair: ``floor((a * b + 2^30) / 2^31)``, ``MIN * MIN`` saturated."""
    if a == _INT32_MIN and b == _INT32_MIN:
        return np.int64(_INT32_MAX)
    return (np.int64(a) * np.int64(b) + _HALF_Q31) >> 31


@njit(cache=True, nogil=True, inline="always")
def rdbp_scalar(x, exponent, away):
    """``(x + 2^(e-1) - [away and x < 0 and e > 0]) >> e``: with ``away`` = 1 gemmlowp's
    RoundingDivideByPOT (:func:`intq.qmath.raw.rdbp`, ties away from zero), with 0 the rounding
    shift :func:`intq.qmath.raw.rshift_half_up` (ties up). ``exponent`` in [0, 62]."""
    nudge = (np.int64(1) << exponent) >> 1
    if away and x < 0 and exponent > 0:
        return (x + nudge - 1) >> exponent
    return (x + nudge) >> exponent


@njit(cache=True, nogil=True, inline="always")
def mbqm_scalar(x, multiplier, left, right, away):
    """MultiplyByQuantizedMultiplier, double rounding, with ``left = max(shift, 0)`` and
    ``right = max(-shift, 0)`` prepared: ``rdbp_scalar(srdhm_scalar(x << left, m), right, away)``.
    ``away`` = 1: :func:`intq.qmath.raw.mbqm` (gemmlowp, TFLM); 0: :func:`intq.qmath.raw.mbqm_half_up`
    (NEON ``vrshl``). The caller guarantees ``x << left`` fits int32 (see :func:`requantize_rows_double`)."""
    return rdbp_scalar(srdhm_scalar(np.int64(x) << left, multiplier), right, away)


@njit(cache=True, nogil=True, inline="always")
def mbqm_single_scalar(x, multiplier, shift):
    """:func:`intq.qmath.raw.mbqm_single`: ``(x * m + 2^(30 - shift)) >> (31 - shift)``."""
    total = 31 - shift
    return (np.int64(x) * multiplier + (np.int64(1) << (total - 1))) >> total


@njit(cache=True, nogil=True, inline="always")
def round_clamp_half_away_scalar(q, zero_point, f_lo, f_hi):
    """The integer of one float32 quotient ``q = x / scale``: round half away from zero, deciding on
    the exact fractional part ``q - trunc(q)`` as :func:`intq.qmath.round_float` does, clamp to
    ``[f_lo, f_hi]`` (float32 ``qmin - zp``, ``qmax - zp``) in float before the integer conversion
    (infinities saturate), add ``zero_point``. The step of :func:`quantize_float32_half_away`."""
    one = np.float32(1)
    zero = np.float32(0)
    half = np.float32(0.5)
    t = np.trunc(q)
    frac = q - t  # exact
    t = t + (one if frac >= half else zero) - (one if frac <= -half else zero)
    t = min(max(t, f_lo), f_hi)
    return np.int32(t) + zero_point


@njit(cache=True, nogil=True)
def quantize_float32_half_away(x, scale, zero_point, lo, hi, out):
    """:func:`intq.qmath.quantize` per tensor with its defaults (float32 division, half away from
    zero), one pass: ``out[i] = clamp(round_half_away(x[i] / scale) + zp, lo, hi)`` for ``x`` and
    ``scale`` float32 (``x`` 1-D). The rounding decides on the exact fractional part ``q - trunc(q)``
    as :func:`intq.qmath.round_float` does; the clamp is taken in float before the integer
    conversion (infinities saturate). Returns True if some ``x[i] / scale`` is NaN (the caller
    raises; those elements are undefined). A float boundary function: QUANTIZE's float input only."""
    f_lo = np.float32(lo - zero_point)
    f_hi = np.float32(hi - zero_point)
    nan = False
    for i in range(x.size):
        q = x[i] / scale
        nan |= q != q
        out[i] = round_clamp_half_away_scalar(q, zero_point, f_lo, f_hi)
    return nan


@njit(cache=True, nogil=True)
def dequantize_float32(q, zero_point, scale, out):
    """:func:`intq.qmath.dequantize` per tensor, one pass: ``out[i] = float32(double(q[i] - Z) * S)``
    (``S`` the float64 scale; the product is exact for |q - Z| < 2^29, the one rounding is to
    float32). A float boundary function: DEQUANTIZE only."""
    for i in range(q.size):
        out[i] = np.float32(np.float64(np.int64(q[i]) - zero_point) * scale)


@njit(cache=True, nogil=True)
def requantize_rows_double(acc, offset, multiplier, left, right, zero_point, lo, hi, out, away):
    """``out[i, c] = clamp(mbqm_scalar(acc[i, c] + offset[c], m[c], left[c], right[c], away) + zp, lo, hi)``.

    ``acc`` 2-D (rows x channels), ``offset``/``multiplier``/``left``/``right`` int64 per channel.
    Returns True if some ``(acc + offset) << left`` left int32 (the C code would overflow there;
    the caller raises), computing the element from the wrapped value as C would.
    """
    rows, cols = acc.shape
    overflow = False
    for i in range(rows):
        for c in range(cols):
            x = np.int64(acc[i, c]) + offset[c]
            if left[c] > 0:
                shifted = x << left[c]
                if shifted > _INT32_MAX or shifted < _INT32_MIN:
                    overflow = True
            y = mbqm_scalar(x, multiplier[c], left[c], right[c], away) + zero_point
            out[i, c] = lo if y < lo else (hi if y > hi else y)
    return overflow


@njit(cache=True, nogil=True, inline="always")
def mbqm_right_scalar(x, multiplier, nudge, toward, right):
    """:func:`mbqm_scalar` with no left shift, branch-free (vectorizable): ``h = (x * m + 2^30) >> 31``
    is SRDHM for a multiplier that is never INT32_MIN (``quantize_multiplier`` gives 0 or
    [2^30, 2^31), so SRDHM's one saturating case cannot occur), then
    ``(h + nudge - (toward & [h < 0])) >> right`` with ``nudge = 2^(right-1)`` (0 for ``right`` 0) and
    ``toward`` = 1 for gemmlowp's ties away from zero when ``right > 0``, else 0 (ties up)."""
    h = (np.int64(x) * multiplier + _HALF_Q31) >> 31
    return (h + nudge - (toward & (h < 0))) >> right


@njit(cache=True, nogil=True)
def requantize_rows_double_right(acc, offset, multiplier, right, zero_point, lo, hi, out, away):
    """:func:`requantize_rows_double` when no channel shifts left (every multiplier below 1: the
    usual case), with :func:`mbqm_right_scalar`, branch-free so the compiler vectorizes it (measured
    1.5-3x faster)."""
    rows, cols = acc.shape
    nudge = np.empty(cols, np.int64)
    toward = np.empty(cols, np.int64)  # 1 where a negative tie must go away from zero
    for c in range(cols):
        nudge[c] = (np.int64(1) << right[c]) >> 1
        toward[c] = 1 if away and right[c] > 0 else 0
    for i in range(rows):
        for c in range(cols):
            y = mbqm_right_scalar(np.int64(acc[i, c]) + offset[c], multiplier[c], nudge[c], toward[c], right[c])
            y += zero_point
            out[i, c] = min(max(y, lo), hi)


@njit(cache=True, nogil=True)
def requantize_rows_single(acc, offset, multiplier, shift, zero_point, lo, hi, out):
    """``out[i, c] = clamp(mbqm_single_scalar(acc[i, c] + offset[c], m[c], shift[c]) + zp, lo, hi)``."""
    rows, cols = acc.shape
    for i in range(rows):
        for c in range(cols):
            y = mbqm_single_scalar(np.int64(acc[i, c]) + offset[c], multiplier[c], shift[c]) + zero_point
            out[i, c] = lo if y < lo else (hi if y > hi else y)
