"""quantize_multiplier (TFLite QuantizeMultiplier) and the b-bit fixed-point forms."""

import math
from fractions import Fraction

import numpy as np
import pytest

from intq.errors import ContractError
from intq.qmath import (
    FixedPointScale,
    QuantizedMultiplier,
    Rounding,
    quantize_multiplier,
    quantize_multiplier_bits,
    relative_error,
    tpu_mlir_multiplier_rshift,
)

from . import reference as ref


def _reals(rng, n):
    """Reals over the whole useful range, plus the values where QuantizeMultiplier branches."""
    random = 2.0 ** rng.uniform(-34, 31, size=n) * rng.choice([1, 1, 1, -1], size=n)
    powers = [2.0**k for k in range(-40, 31)]
    near_one_mantissa = [math.ldexp(1 - 2.0**-k, e) for k in (31, 32, 33, 40, 53) for e in (-20, -1, 0, 1)]
    tiny = [2.0**-32, 2.0**-31.5, 2.0**-31, 2.0**-32 * (1 - 2.0**-40), 1e-300, 5e-324]
    ties = [math.ldexp((2**30 + k + 0.5) / 2**31, e) for k in (0, 1, 12345) for e in (-5, 0)]
    return np.concatenate([random, powers, near_one_mantissa, tiny, ties, [0.0, 0.1234]])


def test_matches_tflite_reference(rng):
    reals = _reals(rng, 200_000)
    got = quantize_multiplier(reals)
    want = np.array([ref.quantize_multiplier(float(r)) for r in reals])
    np.testing.assert_array_equal(got.multiplier, want[:, 0])
    np.testing.assert_array_equal(got.shift, want[:, 1])


def test_properties(rng):
    reals = np.abs(_reals(rng, 200_000))
    qm = quantize_multiplier(reals)
    m, s = np.asarray(qm.multiplier), np.asarray(qm.shift)
    nonzero = m != 0
    assert np.all((m[nonzero] >= 2**30) & (m[nonzero] < 2**31)), "multiplier outside [2^30, 2^31)"
    assert np.all(s[~nonzero] == 0)
    # flushed exactly when the real is below 2^-32 (after rounding of the mantissa)
    assert np.all(reals[~nonzero & (reals > 0)] < 2.0**-32)
    # relative error at most 2^-31, exactly (rationals)
    for r, mi, si in zip(reals[nonzero][:20_000], m[nonzero][:20_000], s[nonzero][:20_000]):
        rep = Fraction(int(mi)) * Fraction(2) ** (int(si) - 31)
        assert abs(rep - Fraction(float(r))) <= Fraction(float(r)) / 2**31
    assert np.all(relative_error(reals[nonzero], quantize_multiplier(reals[nonzero])) <= 2.0**-31)
    assert s[nonzero].min() >= -31


def test_carry_and_flush_cases():
    assert tuple(quantize_multiplier(1 - 2.0**-40)) == (2**30, 1)  # mantissa rounds up to 1.0
    assert tuple(quantize_multiplier(0.5)) == (2**30, 0)
    assert tuple(quantize_multiplier(2.0**-33)) == (0, 0)
    assert tuple(quantize_multiplier(2.0**-32)) == (2**30, -31)
    assert tuple(quantize_multiplier(0.0)) == (0, 0)
    assert tuple(quantize_multiplier(-0.75)) == (-1610612736, 0)
    assert tuple(quantize_multiplier(2.0**40)) == (2**30, 41)
    assert tuple(quantize_multiplier(2.0**40, for_single_rounding=True)) == (2**31 - 1, 30)


def test_spec_002_worked_example():
    # y = x * 0.1234 = x * 0.9872 * 2^-3 = (x * 2119995857) >> 34
    m, shift = quantize_multiplier(0.1234)
    assert (m, shift) == (2119995857, -3)
    fx = quantize_multiplier_bits(0.1234, 32)
    assert (fx.multiplier, fx.frac_bits) == (2119995857, 34)
    assert relative_error(0.1234, fx) < 2.0**-31


def test_scalar_and_array_forms():
    qm = quantize_multiplier(0.3)
    assert isinstance(qm.multiplier, int) and isinstance(qm.shift, int)
    arr = quantize_multiplier(np.array([0.3, 0.6]))
    assert arr.multiplier.shape == (2,) and not arr.multiplier.flags.writeable
    assert arr == quantize_multiplier([0.3, 0.6])
    assert isinstance(arr, QuantizedMultiplier)
    with pytest.raises(ContractError):
        quantize_multiplier(float("nan"))


@pytest.mark.parametrize("bits,signed", [(8, True), (8, False), (16, True), (16, False), (32, True)])
def test_bits_forms_are_normalised_and_within_error(rng, bits, signed):
    reals = 2.0 ** rng.uniform(-20, 10, size=20_000)
    fx = quantize_multiplier_bits(reals, bits, signed=signed)
    p = bits - 1 if signed else bits
    m = np.asarray(fx.multiplier)
    assert np.all((m >= 2 ** (p - 1)) & (m < 2**p))
    for r, mi, fi in zip(reals[:3000], m[:3000], np.asarray(fx.frac_bits)[:3000]):
        exact = Fraction(float(r)) * 2 ** int(fi)
        assert int(mi) == ref.round_rational(exact, "half_away_from_zero") or int(mi) * 2 == ref.round_rational(
            exact, "half_away_from_zero"
        )
    assert np.all(relative_error(reals, fx) <= 2.0**-p)
    trunc = quantize_multiplier_bits(reals, bits, signed=signed, rounding=Rounding.TOWARD_ZERO)
    assert np.all(relative_error(reals, trunc) <= 2.0 ** -(p - 1))
    assert np.all(np.asarray(trunc.to_float()) <= reals)


def test_bits_32_agrees_with_quantize_multiplier(rng):
    reals = 2.0 ** rng.uniform(-30, 5, size=10_000)
    qm, fx = quantize_multiplier(reals), quantize_multiplier_bits(reals, 32)
    np.testing.assert_array_equal(qm.multiplier, fx.multiplier)
    np.testing.assert_array_equal(31 - np.asarray(qm.shift), fx.frac_bits)


def test_spec_001_eight_bit_mantissa():
    fx = quantize_multiplier_bits(0.0123, 8, signed=False)
    assert 128 <= fx.multiplier <= 255
    assert fx == FixedPointScale(202, 14, 8, False)  # 0.0123 * 2^14 = 201.52 -> 202
    assert abs(fx.to_float() - 0.0123) / 0.0123 < 2.0**-8


def test_tpu_mlir_multiplier_rshift_matches_its_search():
    # Reference written from getRShiftAndMultiplierFromQScale: the first rshift with
    # q * 2^(rshift+1) >= max, multiplier truncated.
    for q in [0.1234, 0.5, 0.0039, 1.0, 3.7, 126.9, 200.0, 1e-25, 0.0]:
        got = tpu_mlir_multiplier_rshift(q)
        want_m, want_s = 0, 0
        if q > 127:
            want_m = 127
        else:
            for s in range(63):
                if q * 2 ** (s + 1) >= 127:
                    want_m, want_s = int(q * 2**s), s
                    break
        assert (got.multiplier, got.frac_bits) == (want_m, want_s), q
    assert tpu_mlir_multiplier_rshift(0.1234) == FixedPointScale(126, 10, 8, True)


def test_relative_error_reports_each_representation():
    r = 0.1234
    errs = {
        "q31": relative_error(r, quantize_multiplier(r)),
        "int16": relative_error(r, quantize_multiplier_bits(r, 16)),
        "int8": relative_error(r, quantize_multiplier_bits(r, 8)),
        "tpu-int8": relative_error(r, tpu_mlir_multiplier_rshift(r)),
    }
    assert errs["q31"] < errs["int16"] < errs["int8"] <= errs["tpu-int8"] < 2.0**-6
