"""Scale handling from the spec texts: folding scales into one multiplier, aligning scales.

* Folding (spec 000, Jacob et al. eq. 5): a conv/matmul accumulates ``sum (x - Zx) * w`` in
  int32 with the implicit scale ``s_in * s_w``; the output needs ``s_out``, so the accumulator is
  multiplied by ``M = s_in * s_w / s_out`` — :func:`effective_scale` — held as a fixed-point
  number and applied with integers only — :func:`apply_fixed_point_scale`.
* Alignment (spec 001): operands with different scales cannot be added as integers. Each scale
  becomes an 8-bit fixed-point number ``i_s * 2**-f_s``; ``(q - Z) * i_s`` is then a fixed-point
  value with ``f_s`` fractional bits; shifting each left to the largest ``f`` puts all operands in
  one implicit scale ``2**-max_f``, where integers add. :func:`align_scales` and
  :func:`aligned_value`. Per-axis scales are aligned to one per-tensor scale the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import ContractError
from intq.qmath._checks import INT32_MAX, INT32_MIN, as_int64, scalar_or_array
from intq.qmath.fixedpoint import saturate
from intq.qmath.multiplier import FixedPointScale, quantize_multiplier_bits
from intq.qmath.rounding import Rounding, shift_right_rounded


def effective_scale(input_scale, weight_scale, output_scale, *, product_dtype=np.float64) -> np.ndarray:
    """The real requantization multiplier ``M = s_in * s_w / s_out`` (per channel if s_w is).

    ``product_dtype=float64`` computes ``(double(s_in) * double(s_w)) / double(s_out)`` — exact
    product, one rounding — as TFLite's PopulateConvolutionQuantizationParams does for conv and
    depthwise conv. ``product_dtype=float32`` rounds the product to float32 first, as TFLite's
    GetQuantizedConvolutionMultipler does (``double(input_scale * filter_scale)``); the two can
    differ in the last bit of M and so in the int32 multiplier.
    """
    s_in = np.asarray(input_scale, dtype=np.float32).astype(np.float64)
    s_w = np.asarray(weight_scale, dtype=np.float32).astype(np.float64)
    s_out = np.asarray(output_scale, dtype=np.float32).astype(np.float64)
    for name, v in (("input_scale", s_in), ("weight_scale", s_w), ("output_scale", s_out)):
        if not (np.all(np.isfinite(v)) and np.all(v > 0)):
            raise ContractError(f"effective_scale: {name} must be positive and finite, got {v.tolist()}")
    product = s_in * s_w
    if np.dtype(product_dtype) == np.float32:
        product = product.astype(np.float32).astype(np.float64)
    return (product / s_out)[()]


def apply_fixed_point_scale(acc, scale: FixedPointScale, zero_point: int, qmin: int, qmax: int, dtype=np.int8):
    """Spec 000: rescale an int32 accumulator by a fixed-point number with integers only.

    ``y = saturate(((acc * i) + 2**(f-1)) >> f + Z)`` where ``scale = i * 2**-f``: one multiply,
    a rounded (half up) right shift by ``f`` fractional bits, the zero point, the clamp.

    Contract: ``acc`` int32; ``scale.multiplier`` at most 32 bits and ``scale.frac_bits`` in
    [0, 63] (so ``acc * i`` fits int64); ``zero_point`` in [qmin, qmax].
    """
    acc = as_int64(acc, "apply_fixed_point_scale: acc")
    i = as_int64(scale.multiplier, "apply_fixed_point_scale: multiplier", -(2**32), 2**32)
    f = as_int64(scale.frac_bits, "apply_fixed_point_scale: frac_bits", 0, 63)
    zp = as_int64(zero_point, "apply_fixed_point_scale: zero_point", qmin, qmax)
    y = shift_right_rounded(acc * i, f, Rounding.HALF_UP) + zp
    return saturate(y, qmin, qmax, dtype)


@dataclass(frozen=True, eq=False)
class ScaleAlignment:
    """Fixed-point forms of several scales brought to a common number of fractional bits.

    ``fixed[k]`` is scale k as ``i_k * 2**-f_k``; ``left_shift[k] = frac_bits - f_k >= 0``; an
    aligned operand ``((q - Z) * i_k) << left_shift[k]`` carries the implicit scale
    ``2**-frac_bits``. (Spec 001 writes the shift as ``f_k - max_f``, a non-positive number, and
    then shifts left by it; intq's shifts are positive for a left shift.)
    """

    fixed: tuple[FixedPointScale, ...]
    left_shift: tuple[np.ndarray | int, ...]
    frac_bits: int

    @property
    def implicit_scale(self) -> float:
        """The scale of an aligned sum: ``2**-frac_bits``."""
        return float(np.ldexp(1.0, -self.frac_bits))


def align_scales(*scales, mantissa_bits: int = 8) -> ScaleAlignment:
    """Spec 001: align the scales of operands (each a float or a per-axis array) to one scale.

    Each scale becomes an unsigned ``mantissa_bits``-bit fixed-point number (8 bits keep the
    8 most significant bits of the scale, enough for 8-bit operands); ``frac_bits`` is the
    largest fractional-bit count over all scales and channels. Aligning one per-axis scale array
    alone turns it into a per-tensor scale.
    """
    if not scales:
        raise ContractError("align_scales needs at least one scale")
    fixed = tuple(quantize_multiplier_bits(s, mantissa_bits, signed=False) for s in scales)
    for s in scales:
        if np.any(np.asarray(s) <= 0):
            raise ContractError(f"align_scales: scales must be positive, got {np.asarray(s).tolist()}")
    max_f = int(max(np.max(fx.frac_bits) for fx in fixed))
    shifts = tuple(scalar_or_array(max_f - np.asarray(fx.frac_bits, dtype=np.int64), np.int64) for fx in fixed)
    return ScaleAlignment(fixed, shifts, max_f)


def aligned_value(q, zero_point, mantissa, left_shift) -> np.ndarray:
    """``((q - Z) * i) << left_shift``: a quantized operand in the common fixed-point scale.

    Contract: ``q`` and ``zero_point`` int32; ``mantissa`` and ``left_shift`` from an
    :class:`ScaleAlignment` (broadcastable against ``q``); the result must fit int32, the width
    of the intermediate buffer (a left shift that overflows raises, it does not wrap).
    Returns int32.
    """
    q = as_int64(q, "aligned_value: q")
    zp = as_int64(zero_point, "aligned_value: zero_point")
    m = as_int64(mantissa, "aligned_value: mantissa", 0, 2**32)
    sh = as_int64(left_shift, "aligned_value: left_shift", 0, 31)
    v = ((q - zp) * m) << sh  # |q - zp| < 2^32, m <= 2^32, shift <= 31: checked below
    back = v >> sh
    if np.any(back != (q - zp) * m) or (v.size and (int(v.min()) < INT32_MIN or int(v.max()) > INT32_MAX)):
        raise ContractError(
            "aligned_value: the aligned operand overflows int32; the scales differ too much for "
            "a 32-bit intermediate (use fewer mantissa bits or rescale the operand first)"
        )
    return scalar_or_array(v)
