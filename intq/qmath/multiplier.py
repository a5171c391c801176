"""Real multipliers as integers: TFLite's Q0.31 (multiplier, shift) and b-bit fixed-point scales.

A requantization multiplies an int32 accumulator by a real ``M`` (e.g. ``s_in*s_w/s_out``).
Integer hardware holds ``M`` in one of two forms:

* :func:`quantize_multiplier` — TFLite's QuantizeMultiplier: ``M = m * 2**(shift - 31)`` with
  ``m`` an int32 in [2**30, 2**31) (a Q0.31 mantissa in [0.5, 1)) and ``shift`` the exponent.
* :func:`quantize_multiplier_bits` — a ``bits``-bit integer mantissa and a fraction-bit count,
  ``M ~= multiplier * 2**-frac_bits`` (TPU-MLIR's "Multiplier / 2^rshift", the 8-bit-mantissa
  fixed-point scale of spec 001, the fixed-point reciprocal of spec 000).

Both are computed with exact float64 operations (``frexp`` and multiplication by powers of two
are exact), so the only rounding is the documented one. :func:`relative_error` reports how far a
representation is from the real it encodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import ContractError
from intq.qmath.rounding import Rounding, round_float


def _frozen_int_array(values) -> np.ndarray | int:
    arr = np.asarray(values, dtype=np.int64)
    if arr.ndim == 0:
        return int(arr)
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class QuantizedMultiplier:
    """``real ~= multiplier * 2**(shift - 31)``; ``multiplier`` int32 in [2**30, 2**31) or 0.

    ``shift`` is positive for a left shift (TFLite's convention; TFLite Micro and CMSIS-NN store
    the same number). Unpacks as ``multiplier, shift = quantize_multiplier(x)``. Fields are
    Python ints for a scalar input, read-only int64 arrays for an array input (per channel).
    """

    multiplier: np.ndarray | int
    shift: np.ndarray | int

    def __iter__(self):
        return iter((self.multiplier, self.shift))

    def to_float(self) -> np.ndarray | float:
        """The exact real number this pair represents (float64; exact for |shift| < 990)."""
        return np.ldexp(np.asarray(self.multiplier, dtype=np.float64), np.asarray(self.shift) - 31)[()]

    def __eq__(self, other):
        return isinstance(other, QuantizedMultiplier) and np.array_equal(
            self.multiplier, other.multiplier
        ) and np.array_equal(self.shift, other.shift)

    __hash__ = None


@dataclass(frozen=True, eq=False)
class FixedPointScale:
    """``real ~= multiplier * 2**-frac_bits`` with ``multiplier`` a ``bits``-bit integer.

    ``frac_bits`` is TPU-MLIR's ``rshift`` and spec 000/001's ``fracbits``: the number of
    fractional bits of the fixed-point number (it may be negative for reals too large for the
    mantissa). Applying it to an integer ``x`` is ``rounded_right_shift(x * multiplier, frac_bits)``.
    """

    multiplier: np.ndarray | int
    frac_bits: np.ndarray | int
    bits: int
    signed: bool

    def to_float(self) -> np.ndarray | float:
        """The exact real number this representation encodes (float64)."""
        return np.ldexp(np.asarray(self.multiplier, dtype=np.float64), -np.asarray(self.frac_bits))[()]

    def __eq__(self, other):
        return (
            isinstance(other, FixedPointScale)
            and (self.bits, self.signed) == (other.bits, other.signed)
            and np.array_equal(self.multiplier, other.multiplier)
            and np.array_equal(self.frac_bits, other.frac_bits)
        )

    __hash__ = None


def _finite_reals(real, name: str) -> np.ndarray:
    r = np.asarray(real, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        raise ContractError(f"{name}: the real multiplier must be finite, got {real!r}")
    return r


def quantize_multiplier(real, *, for_single_rounding: bool = False) -> QuantizedMultiplier:
    """TFLite's QuantizeMultiplier, bit for bit, vectorised over per-channel reals.

    Formula: ``q, e = frexp(real)`` (``real = q * 2**e``, ``|q|`` in [0.5, 1));
    ``m = round_half_away_from_zero(q * 2**31)``; if ``m == 2**31`` (the mantissa rounded up to
    1.0) then ``m = 2**30`` and ``e += 1``; if ``e < -31`` the multiplier is flushed to
    ``(0, 0)`` (every int32 input would shift out to 0, roughly ``|real| < 2**-32``).
    ``real == 0`` gives ``(0, 0)``. Negative reals give negative multipliers, as in TFLite.

    ``for_single_rounding=True`` adds the cap of TFLite's TFLITE_SINGLE_ROUNDING build (also in
    TPU-MLIR): a shift above 30 saturates to ``(2**31 - 1, 30)``.

    Shift range: [-31, 30] for reals in [2**-32, 2**30); larger reals give larger shifts, which
    :func:`multiply_by_quantized_multiplier` refuses.
    Relative error of the representation: at most 2**-31 (half a unit in the last place of m).
    """
    r = _finite_reals(real, "quantize_multiplier")
    q, e = np.frexp(r)
    m = round_float(q * 2.0**31, Rounding.HALF_AWAY_FROM_ZERO).astype(np.int64)  # exact: q*2^31
    carry = m == 2**31
    m = np.where(carry, m // 2, m)
    e = np.where(carry, e + 1, e).astype(np.int64)
    flush = e < -31
    m = np.where(flush, 0, m)
    e = np.where(flush, 0, e)
    if for_single_rounding:
        cap = e > 30
        m = np.where(cap, 2**31 - 1, m)
        e = np.where(cap, 30, e)
    return QuantizedMultiplier(_frozen_int_array(m), _frozen_int_array(e))


def quantize_multiplier_bits(
    real, bits: int, *, signed: bool = True, rounding: Rounding | str = Rounding.HALF_AWAY_FROM_ZERO
) -> FixedPointScale:
    """A ``bits``-bit fixed-point representation of ``real`` with the most precision it allows.

    The mantissa is normalised: ``|multiplier|`` in [2**(p-1), 2**p) where ``p = bits - 1`` if
    ``signed`` else ``bits`` (p = 7 for int8, 8 for spec 001's 8-bit unsigned mantissa, 31 for
    int32). With ``q, e = frexp(real)``: ``multiplier = round(q * 2**p)`` and
    ``frac_bits = p - e``; a mantissa that rounds up to ``2**p`` is halved and ``frac_bits``
    decremented. ``real == 0`` gives ``(0, 0)``.

    For ``bits=32, signed=True`` this is :func:`quantize_multiplier` with
    ``frac_bits = 31 - shift`` (no flush): spec 002's example 0.1234 -> 2119995857 / 2**34.
    ``rounding=TOWARD_ZERO`` truncates the mantissa instead (as TPU-MLIR's int8 multipliers do;
    :func:`tpu_mlir_multiplier_rshift` reproduces its exact search).
    Unsigned mantissas need a non-negative ``real``.
    Relative error: at most 2**-p with rounding to nearest, 2**-(p-1) with truncation.
    """
    if not (2 <= bits <= 32 if signed else 1 <= bits <= 32):
        raise ContractError(f"quantize_multiplier_bits: bits must be in [2, 32] (signed) or [1, 32], got {bits}")
    r = _finite_reals(real, "quantize_multiplier_bits")
    if not signed and np.any(r < 0):
        raise ContractError("quantize_multiplier_bits: an unsigned mantissa cannot represent a negative real")
    p = bits - 1 if signed else bits
    q, e = np.frexp(r)
    m = round_float(q * 2.0**p, rounding).astype(np.int64)
    carry = np.abs(m) == 2**p
    m = np.where(carry, m // 2, m)
    e = np.where(carry, e + 1, e)
    frac = np.where(r == 0, 0, p - e).astype(np.int64)
    return FixedPointScale(_frozen_int_array(m), _frozen_int_array(frac), bits, signed)


def tpu_mlir_multiplier_rshift(real, max_multiplier: int = 127) -> FixedPointScale:
    """TPU-MLIR's getRShiftAndMultiplierFromQScale (non-QDM mode), exactly.

    The smallest ``rshift`` in [0, 63) with ``real * 2**(rshift + 1) >= max_multiplier`` is
    chosen and ``multiplier = trunc(real * 2**rshift)`` (truncation, not rounding). A real above
    ``max_multiplier`` gives ``(max_multiplier, 0)``; one too small for any shift gives
    ``(0, 0)``. ``max_multiplier`` is 127 for int8 multipliers, 255 for uint8.
    Contract: ``real`` finite and non-negative.
    """
    r = _finite_reals(real, "tpu_mlir_multiplier_rshift")
    if np.any(r < 0):
        raise ContractError("tpu_mlir_multiplier_rshift: the real must be non-negative")
    flat = r.reshape(-1)
    mult = np.zeros(flat.shape, dtype=np.int64)
    rsh = np.zeros(flat.shape, dtype=np.int64)
    for i, v in enumerate(flat):  # a handful of per-channel scales, computed once in prepare
        v = float(v)
        if v > max_multiplier:
            mult[i] = max_multiplier
            continue
        for s in range(63):
            if v * 2.0 ** (s + 1) >= max_multiplier:
                mult[i], rsh[i] = int(v * 2.0**s), s
                break
    signed = max_multiplier in (127, 32767, 2**31 - 1)  # int8 / int16 / int32 multipliers
    bits = int(max_multiplier).bit_length() + int(signed)
    return FixedPointScale(
        _frozen_int_array(mult.reshape(r.shape)), _frozen_int_array(rsh.reshape(r.shape)), bits, signed
    )


def relative_error(real, representation: QuantizedMultiplier | FixedPointScale):
    """``|represented - real| / |real|`` per element (0 where both are 0, inf where only real is)."""
    r = np.asarray(real, dtype=np.float64)
    rep = np.asarray(representation.to_float(), dtype=np.float64)
    diff = np.abs(rep - r)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(r == 0, np.where(diff == 0, 0.0, np.inf), diff / np.abs(r))
    return err[()]
