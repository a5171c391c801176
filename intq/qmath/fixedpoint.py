"""Fixed-point primitives: the integer operations requantization is built from.

Each function mirrors one C function of a real runtime bit for bit on its documented input
range, and raises :class:`intq.errors.ContractError` outside it (where C would be undefined or
wrap). All take numpy integer arrays or Python ints, broadcast their arguments against each other
(so per-channel multipliers and shifts work along the last axis), compute in int64 where the C
code's intermediates need it, and return int32 (int64 for :func:`rounded_right_shift`).

Shift convention (everywhere in intq): ``shift`` is the exponent, positive for a left shift;
a TFLite pair ``(multiplier, shift)`` represents the real number ``multiplier * 2**(shift - 31)``.
"""

from __future__ import annotations

import numpy as np

from intq.errors import ContractError
from intq.qmath._checks import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, as_int64, scalar_or_array
from intq.qmath import raw
from intq.qmath.rounding import Rounding, shift_right_rounded



def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp's SaturatingRoundingDoublingHighMul: ``round(a * b / 2**31)``, saturated.

    Formula (C semantics): ``ab = int64(a) * b``; ``nudge = 2**30 if ab >= 0 else 1 - 2**30``;
    result ``= (ab + nudge) / 2**31`` with C division (truncation toward zero). This rounds to
    nearest with ties toward +infinity (``-2.5 -> -2``, ``2.5 -> 3``): for a negative tie
    ``ab + nudge`` is one above a multiple of 2**31 and truncates toward zero. (gemmlowp's comment
    says "away from zero"; the arithmetic says otherwise, and intq follows the arithmetic.)
    The single overflow case ``a == b == INT32_MIN`` (exact result 2**31) saturates to
    INT32_MAX. ARM NEON's ``vqrdmulh`` computes the same function.

    Contract: ``a`` and ``b`` are int32 values. Returns int32.
    """
    a = as_int64(a, "saturating_rounding_doubling_high_mul: a")
    b = as_int64(b, "saturating_rounding_doubling_high_mul: b")
    return scalar_or_array(raw.srdhm(a, b))


def rounding_divide_by_pot(x, exponent):
    """gemmlowp's RoundingDivideByPOT: ``x / 2**exponent`` rounded half away from zero.

    Formula: ``mask = 2**e - 1``, ``r = x & mask``, ``threshold = (mask >> 1) + (x < 0)``,
    result ``= (x >> e) + (r > threshold)``. Equal to :func:`rounded_right_shift` with
    ``Rounding.HALF_AWAY_FROM_ZERO``.

    Contract: ``x`` int32, ``exponent`` in [0, 31]. Returns int32.
    """
    x = as_int64(x, "rounding_divide_by_pot: x")
    e = as_int64(exponent, "rounding_divide_by_pot: exponent", 0, 31)
    return scalar_or_array(raw.rdbp(x, e))


def multiply_by_quantized_multiplier(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier, double rounding (the default build, gemmlowp).

    ``x * multiplier * 2**(shift - 31)`` computed as
    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * 2**max(shift, 0), multiplier),
    max(-shift, 0))``: two roundings, the first to nearest (ties toward +infinity) on the 2^-31
    bit, the second half away from zero on the shifted-out bits. This is what TFLite's reference kernels and
    TensorFlow Lite Micro compute when built without TFLITE_SINGLE_ROUNDING.

    Contract: ``x`` int32; ``multiplier`` int32 (from :func:`quantize_multiplier`: 0 or in
    [2**30, 2**31)); ``shift`` in [-31, 30]; the left-shifted ``x * 2**max(shift, 0)`` must fit
    in int32 (in C it would overflow). Returns int32.
    """
    x = as_int64(x, "multiply_by_quantized_multiplier: x")
    m = as_int64(multiplier, "multiply_by_quantized_multiplier: multiplier")
    s = as_int64(shift, "multiply_by_quantized_multiplier: shift", -31, 30)
    left = np.maximum(s, 0)
    xs = x << left
    if xs.size and (int(xs.min()) < INT32_MIN or int(xs.max()) > INT32_MAX):
        raise ContractError(
            "multiply_by_quantized_multiplier: x * 2**shift overflows int32 "
            f"(shift {int(left.max())}); the multiplier is too large for this input range"
        )
    return scalar_or_array(raw.mbqm(x, m, s))


def multiply_by_quantized_multiplier_single_rounding(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier built with TFLITE_SINGLE_ROUNDING (also ruy, CMSIS-NN).

    One rounding, half up: ``(int64(x) * multiplier + 2**(30 - shift)) >> (31 - shift)``.
    CMSIS-NN's single-rounding ``arm_nn_requantize`` (``((x*m) >> (30 - shift)) + 1) >> 1``) and
    ruy's fixed-point path are the same function.

    Contract: ``x`` int32; ``multiplier`` in [0, 2**31); ``shift`` in [-31, 30]; the result must
    fit in int32 (TFLite checks it). Returns int32.
    """
    x = as_int64(x, "multiply_by_quantized_multiplier_single_rounding: x")
    m = as_int64(multiplier, "multiply_by_quantized_multiplier_single_rounding: multiplier", 0)
    s = as_int64(shift, "multiply_by_quantized_multiplier_single_rounding: shift", -31, 30)
    result = raw.mbqm_single(x, m, s)  # |x*m| < 2^62: no overflow
    if result.size and (int(result.min()) < INT32_MIN or int(result.max()) > INT32_MAX):
        raise ContractError("multiply_by_quantized_multiplier_single_rounding: result overflows int32")
    return scalar_or_array(result)


def multiply_by_quantized_multiplier_int64(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier for int64 ``x`` (16x8 kernels with int64 bias).

    The 32-bit multiplier is first reduced to 16 bits with rounding,
    ``m16 = (multiplier + 2**15) >> 16`` (``32767`` when ``multiplier >= 0x7FFF0000``), then
    ``(x * m16 + 2**(14 - shift)) >> (15 - shift)``: a single rounding, half up.

    Contract: ``x`` in [-2**47, 2**47); ``multiplier`` in [0, 2**31); ``shift`` in [-31, 7];
    the result must fit in int32. Returns int32.
    """
    x = as_int64(x, "multiply_by_quantized_multiplier_int64: x", -(2**47), 2**47 - 1)
    m = as_int64(multiplier, "multiply_by_quantized_multiplier_int64: multiplier", 0)
    s = as_int64(shift, "multiply_by_quantized_multiplier_int64: shift", -31, 7)
    m16, total = raw.reduce_multiplier(m, s)  # total in [8, 46]
    result = raw.rshift_half_up(x * m16, total)  # |x*m16| < 2^62; raw.mbqm_int64 wraps this to int32
    if result.size and (int(result.min()) < INT32_MIN or int(result.max()) > INT32_MAX):
        raise ContractError("multiply_by_quantized_multiplier_int64: result overflows int32")
    return scalar_or_array(result)


def rounded_right_shift(x, shift, rounding: Rounding | str = Rounding.HALF_UP):
    """``x / 2**shift`` rounded with the named mode, on int64 values.

    The default ``HALF_UP`` is spec 000's ``(x + 2**(shift-1)) >> shift``. ``shift == 0``
    returns ``x``. Contract: ``x`` int64, ``shift`` in [0, 63]. Returns int64.
    """
    x = as_int64(x, "rounded_right_shift: x", INT64_MIN, INT64_MAX)
    n = as_int64(shift, "rounded_right_shift: shift", 0, 63)
    return scalar_or_array(shift_right_rounded(x, n, Rounding.parse(rounding)), np.int64)


def right_shift_round(src, shift_num, round_mode: Rounding | str = Rounding.HALF_AWAY_FROM_ZERO):
    """TPU-MLIR's RightShiftRound: a rounding arithmetic right shift of an int64.

    Same arithmetic as :func:`rounded_right_shift`, with TPU-MLIR's conventions: its default
    mode is half away from zero, a negative ``shift_num`` is a left shift (``src << -shift_num``,
    which must fit in int64), and shifts above 63 are treated as 63.
    Contract: ``src`` int64, ``shift_num`` in [-63, 2**31). Returns int64.
    """
    src = as_int64(src, "right_shift_round: src", INT64_MIN, INT64_MAX)
    n = as_int64(shift_num, "right_shift_round: shift_num", -63, INT32_MAX)
    mode = Rounding.parse(round_mode)
    src, n = np.broadcast_arrays(src, n)
    left = np.minimum(np.maximum(-n, 0), 63)
    if np.any(n < 0):
        back = np.where(n < 0, (src << left) >> left, src)
        if np.any(back != src):
            raise ContractError("right_shift_round: the left shift (negative shift_num) overflows int64")
    return scalar_or_array(raw.right_shift_round(src, n, mode), np.int64)


def tpu_mlir_multiply_rshift(x, multiplier, rshift, round_mode: Rounding | str = Rounding.HALF_UP):
    """TPU-MLIR's ``applyMultiplierAndRShift`` (``MultiplierShift`` mode, BM168x chips, e.g. BM1684X):
    ``RightShiftRound(x * multiplier, rshift, round_mode)``.

    One rounding: the int64 product of the accumulator and an integer multiplier (TPU-MLIR stores
    up to 32-bit multipliers per output channel for int8 convolutions, ``multiplier / 2^rshift``
    approximating ``s_in s_w / s_out``; 8-bit ones for pooling, add, mul) is shifted right with
    the named rounding — TPU-MLIR's convolutions round HALF_UP, its matrix products and pooling
    HALF_AWAY_FROM_ZERO (the op's ``round_mode``). Contrast TFLite's double rounding
    (:func:`multiply_by_quantized_multiplier`): a Q0.31 doubling high multiply first, then a
    rounding shift.

    Contract: ``x`` int64; ``multiplier`` an integer with ``x * multiplier`` within int64;
    ``rshift`` in [-63, 2**31) (negative: a left shift). Returns int64.
    """
    x = as_int64(x, "tpu_mlir_multiply_rshift: x", INT64_MIN, INT64_MAX)
    m = as_int64(multiplier, "tpu_mlir_multiply_rshift: multiplier", INT64_MIN, INT64_MAX)
    n = as_int64(rshift, "tpu_mlir_multiply_rshift: rshift", -63, INT32_MAX)
    prod = x * m
    if x.size and m.size and np.any((m != 0) & (prod // np.where(m == 0, 1, m) != x)):
        raise ContractError("tpu_mlir_multiply_rshift: x * multiplier overflows int64")
    return right_shift_round(prod, n, round_mode)


def requantize_float32_rne(acc, scale, zero_point, qmin: int, qmax: int):
    """Float requantization as ONNX Runtime (MLAS) and XNNPACK's fp32 path compute it.

    ``y = clamp(rint(float32(acc) * float32(scale)), qmin - zp, qmax - zp) + zp``: the int32
    accumulator is converted to float32 (inexact above 2**24), multiplied by the float32 scale
    in float32, rounded half to even (MLAS and XNNPACK use the float "magic number" trick or
    ``lrintf``, both round half to even in the default FP mode) and offset by the zero point.

    Contract: ``acc`` int32; ``scale`` positive finite, a float32 value (it is rounded to float32
    as those runtimes store it); ``zero_point`` in [qmin, qmax]. Returns int32.
    """
    acc = as_int64(acc, "requantize_float32_rne: acc")
    s = np.asarray(scale, dtype=np.float64)
    if s.size and not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ContractError(f"requantize_float32_rne: scale must be positive and finite, got {scale!r}")
    zp = as_int64(zero_point, "requantize_float32_rne: zero_point", qmin, qmax)
    prod = acc.astype(np.float32) * s.astype(np.float32)  # float32 * float32 -> float32
    lo = (qmin - zp).astype(np.float32)
    hi = (qmax - zp).astype(np.float32)
    rounded = np.rint(np.minimum(np.maximum(prod, lo), hi))
    return scalar_or_array(rounded.astype(np.int64) + zp)


def saturate(x, qmin: int, qmax: int, dtype=np.int32):
    """Clamp integers to [qmin, qmax] and cast to ``dtype`` (the final step of every kernel).

    Contract: ``x`` int64 values; ``qmin <= qmax`` and both fit in ``dtype``.
    """
    info = np.iinfo(dtype)
    if not (info.min <= qmin <= qmax <= info.max):
        raise ContractError(f"saturate: [{qmin}, {qmax}] is not a valid range for {np.dtype(dtype)}")
    x = as_int64(x, "saturate: x", INT64_MIN, INT64_MAX)
    return scalar_or_array(np.clip(x, qmin, qmax), dtype)
