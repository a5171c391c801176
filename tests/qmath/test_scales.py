"""Scale folding (spec 000) and scale alignment (spec 001)."""

from fractions import Fraction

import numpy as np
import pytest

from intq.errors import ContractError
from intq.qmath import (
    QuantParams,
    align_scales,
    aligned_value,
    apply_fixed_point_scale,
    choose_qparams,
    dequantize,
    effective_scale,
    multiply_by_quantized_multiplier,
    quantize,
    quantize_multiplier,
    quantize_multiplier_bits,
)

from . import reference as ref


def test_effective_scale_double_and_float_products(rng):
    s_in = np.float32(rng.uniform(1e-3, 1e-1))
    s_w = rng.uniform(1e-4, 1e-2, size=64).astype(np.float32)
    s_out = np.float32(rng.uniform(1e-2, 1))
    got = effective_scale(s_in, s_w, s_out)
    want = [float(Fraction(float(s_in)) * Fraction(float(w)) / Fraction(float(s_out))) for w in s_w]
    np.testing.assert_array_equal(got, want)  # exact product, one rounding
    got32 = effective_scale(s_in, s_w, s_out, product_dtype=np.float32)
    want32 = [ref.f32(float(s_in) * float(w)) / float(s_out) for w in s_w]
    np.testing.assert_array_equal(got32, want32)
    with pytest.raises(ContractError, match="output_scale"):
        effective_scale(0.1, 0.1, 0.0)


def test_apply_fixed_point_scale_spec_000(rng):
    acc = rng.integers(-(2**24), 2**24, size=100_000)
    real = 0.00371
    fx = quantize_multiplier_bits(real, 16)
    got = apply_fixed_point_scale(acc, fx, 3, -128, 127)
    want = [min(max(((int(a) * fx.multiplier + (1 << (fx.frac_bits - 1))) >> fx.frac_bits) + 3, -128), 127) for a in acc]
    np.testing.assert_array_equal(got, want)
    # and it approximates the real rescale to within half an LSB plus the representation error
    inside = (np.abs(acc * real) < 120)
    err = np.abs(got[inside] - 3 - acc[inside] * real)
    assert err.max() <= 0.5 + np.abs(acc[inside]).max() * real * 2.0**-15


def test_alignment_of_two_scales_then_integer_add(rng):
    a_qp = choose_qparams(-1.0, 3.0)      # scale ~0.0157
    b_qp = choose_qparams(-20.0, 5.0)     # scale ~0.098
    out_qp = choose_qparams(-21.0, 8.0)
    a = rng.uniform(-1, 3, size=10_000).astype(np.float32)
    b = rng.uniform(-20, 5, size=10_000).astype(np.float32)
    qa, qb = quantize(a, a_qp), quantize(b, b_qp)

    al = align_scales(a_qp.scale[0], b_qp.scale[0])
    assert all(128 <= int(f.multiplier) <= 255 for f in al.fixed)
    assert min(int(s) for s in al.left_shift) == 0
    sa = aligned_value(qa, a_qp.zero_point[0], al.fixed[0].multiplier, al.left_shift[0])
    sb = aligned_value(qb, b_qp.zero_point[0], al.fixed[1].multiplier, al.left_shift[1])
    total = sa.astype(np.int64) + sb  # integers in the implicit scale 2^-frac_bits

    # the aligned sum is the float sum of the dequantized operands up to the 8-bit mantissa error
    exact = dequantize(qa, a_qp).astype(np.float64) + dequantize(qb, b_qp)
    rel = 2.0**-8
    bound = (np.abs(dequantize(qa, a_qp)) + np.abs(dequantize(qb, b_qp))) * rel + 1e-9
    assert np.all(np.abs(total * al.implicit_scale - exact) <= bound)

    # requantize the aligned sum to the output scale with integers only
    m, shift = quantize_multiplier(al.implicit_scale / out_qp.scale[0])
    q_out = np.clip(multiply_by_quantized_multiplier(total, m, shift) + out_qp.zero_point[0], -128, 127)
    err_lsb = np.abs(dequantize(q_out.astype(np.int8), out_qp) - exact) / out_qp.scale[0]
    assert err_lsb.max() <= 0.5 + (bound / out_qp.scale[0]).max() + 1e-6


def test_per_axis_to_per_tensor_alignment():
    scales = np.array([0.013, 0.002, 0.07, 0.5])
    al = align_scales(scales)
    f = al.fixed[0]
    # one common fractional-bit count; each channel keeps its own 8-bit mantissa
    assert al.frac_bits == int(np.max(f.frac_bits))
    per_tensor = np.asarray(f.multiplier) * 2.0 ** np.asarray(al.left_shift[0]) * al.implicit_scale
    assert np.all(np.abs(per_tensor - scales) / scales <= 2.0**-8)
    q = np.array([[5, -3, 100, -128]])
    v = aligned_value(q, 0, f.multiplier, al.left_shift[0])
    np.testing.assert_allclose(v * al.implicit_scale, q * scales, rtol=2.0**-8)


def test_aligned_value_refuses_overflow():
    with pytest.raises(ContractError, match="overflows"):
        aligned_value(np.array([127]), -128, 255, 24)
