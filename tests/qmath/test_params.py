"""QuantParams, choose_qparams, quantize / dequantize."""

import numpy as np
import pytest

from intq.errors import QuantizationError
from intq.qmath import QuantParams, Rounding, choose_qparams, dequantize, dtype_range, quantize

from . import reference as ref


def test_dtype_ranges():
    assert dtype_range("int8") == (-128, 127)
    assert dtype_range("int8", narrow_range=True) == (-127, 127)
    assert dtype_range("uint8") == (0, 255)
    assert dtype_range("int16", True) == (-32767, 32767)
    assert dtype_range(np.int32) == (-(2**31), 2**31 - 1)
    with pytest.raises(QuantizationError, match="unsupported"):
        dtype_range("float32")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_asymmetric_formula_and_zero_exact(rng, dtype):
    for _ in range(2000):
        lo, hi = sorted(rng.normal(0, 10, size=2) * 10.0 ** rng.integers(-3, 3))
        qp = choose_qparams(lo, hi, dtype)
        qmin, qmax = dtype_range(dtype)
        lo0, hi0 = min(lo, 0.0), max(hi, 0.0)
        s = float(np.float32((hi0 - lo0) / (qmax - qmin)))
        assert qp.scale[0] == s and float(np.float32(s)) == s
        z = min(max(ref.round_rational(ref.Fraction(qmin) - ref.Fraction(lo0) / ref.Fraction(s), "half_away_from_zero"), qmin), qmax)
        assert qp.zero_point[0] == z
        assert quantize(np.float32(0.0), qp) == z and dequantize(np.array(z), qp) == 0.0
        # every real inside the range is within half a step after the round trip
        x = np.linspace(lo0, hi0, 101).astype(np.float32)
        err = np.abs(dequantize(quantize(x, qp), qp) - x)
        assert err.max() <= 0.5 * s * (1 + 1e-5) + abs(x).max() * 2e-7


def test_symmetric_forms():
    w = choose_qparams(-0.5, 2.54, symmetric=True, narrow_range=True)
    assert w.zero_point[0] == 0 and w.scale[0] == np.float32(2.54 / 127) and w.qmin == -127
    a = choose_qparams(-0.5, 2.56, symmetric=True, symmetric_scale="tpu-mlir")
    assert a.scale[0] == np.float32(2.56 / 128)
    wt = choose_qparams(-3.0, 2.0, symmetric=True, narrow_range=True, symmetric_scale="tpu-mlir")
    assert wt.scale[0] == np.float32(3.0 / 127)
    u = choose_qparams(0.0, 2.55, "uint8", symmetric=True, symmetric_scale="tpu-mlir")
    assert u.scale[0] == np.float32(2.55 / 255) and u.zero_point[0] == 0
    with pytest.raises(QuantizationError, match="negative"):
        choose_qparams(-1.0, 2.0, "uint8", symmetric=True)
    i16 = choose_qparams(-4.0, 1.0, "int16", symmetric=True, narrow_range=True)
    assert i16.scale[0] == np.float32(4.0 / 32767) and i16.qmin == -32767


def test_per_axis(rng):
    lo = -rng.uniform(0, 2, size=16)
    hi = rng.uniform(0, 2, size=16)
    lo[3] = hi[3] = 0.0  # a pruned channel
    qp = choose_qparams(lo, hi, symmetric=True, narrow_range=True, axis=0)
    assert qp.per_axis and qp.scale.shape == (16,) and qp.scale[3] == 1.0
    np.testing.assert_array_equal(qp.scale[[0, 1]], (np.maximum(-lo, hi)[[0, 1]] / 127).astype(np.float32))
    w = rng.uniform(-1, 1, size=(16, 3, 3, 4)) * np.maximum(-lo, hi)[:, None, None, None]
    w[3] = 0
    q = quantize(w, qp)
    assert q.dtype == np.int8 and q.min() >= -127
    assert np.all(np.abs(dequantize(q, qp) - w) <= qp.scale[:, None, None, None] / 2 * (1 + 1e-6))
    with pytest.raises(QuantizationError, match="do not fit"):
        quantize(np.zeros((8, 3)), qp)


def test_degenerate_and_invalid_ranges():
    z = choose_qparams(0.0, 0.0)
    assert z.scale[0] == 1.0 and z.zero_point[0] == -128
    assert quantize(np.zeros(3, np.float32), z).tolist() == [-128] * 3
    pos = choose_qparams(2.0, 2.0)  # widened to [0, 2]
    assert pos.scale[0] == np.float32(2.0 / 255)
    with pytest.raises(QuantizationError, match="conv1.weight.*NaN"):
        choose_qparams(float("nan"), 1.0, name="conv1.weight")
    with pytest.raises(QuantizationError, match="finite"):
        choose_qparams(0.0, float("inf"))
    with pytest.raises(QuantizationError, match="channel 1"):
        choose_qparams([0.0, 1.0], [1.0, 0.5], axis=0)
    with pytest.raises(QuantizationError, match="too small"):
        choose_qparams(0.0, 1e-40)
    with pytest.raises(QuantizationError, match="axis"):
        choose_qparams([0.0, 1.0], [1.0, 2.0])


def test_quantparams_validation_and_equality():
    qp = QuantParams(0.1, 3)
    assert qp == QuantParams([0.1], [3], "int8") and hash(qp) == hash(QuantParams([0.1], [3]))
    assert qp != QuantParams(0.1, 4)
    with pytest.raises(ValueError):
        qp.scale[0] = 2.0  # read-only
    for bad in [dict(scale=0.0, zero_point=0), dict(scale=float("nan"), zero_point=0),
                dict(scale=0.1, zero_point=200), dict(scale=[0.1, 0.2], zero_point=[0, 0]),
                dict(scale=0.1, zero_point=0.5), dict(scale=0.1, zero_point=0, dtype="float32")]:
        with pytest.raises(QuantizationError):
            QuantParams(**bad)
    assert "axis=0" in repr(QuantParams([0.1, 0.2], [0, 0], axis=0))


def test_quantize_matches_tflite_float32_division_and_rounding(rng):
    qp = QuantParams(np.float32(0.0625), 5)
    ties = (np.arange(-40, 40) + 0.5).astype(np.float32) * np.float32(0.0625)  # x/S = k + 0.5 exactly
    got = quantize(ties, qp)
    want = [min(max(ref.round_rational(ref.Fraction(float(v)) / ref.Fraction(0.0625), "half_away_from_zero") + 5, -128), 127) for v in ties]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(quantize(ties, qp, Rounding.HALF_TO_EVEN),
                                  [min(max(ref.round_rational(ref.Fraction(float(v)) / ref.Fraction(0.0625), "half_to_even") + 5, -128), 127) for v in ties])
    # random values with a non-power-of-two scale: float32 division, as TFLite's kernel
    s = np.float32(0.0371)
    qp = QuantParams(s, -7)
    x = rng.normal(0, 3, size=100_000).astype(np.float32)
    want = [min(max(ref.round_rational(ref.Fraction(ref.f32(float(v) / float(s))), "half_away_from_zero") - 7, -128), 127) for v in x]
    np.testing.assert_array_equal(quantize(x, qp), want)


def test_quantize_saturates_and_refuses_nan():
    qp = QuantParams(0.1, 0)
    assert quantize(np.array([np.inf, -np.inf, 1e30], np.float32), qp).tolist() == [127, -128, 127]
    with pytest.raises(QuantizationError, match="NaN"):
        quantize(np.array([np.nan]), qp)


def test_dequantize_matches_tflite_formula(rng):
    qp = QuantParams(np.float32(0.0371), -7)
    q = np.arange(-128, 128, dtype=np.int8)
    want = [ref.f32(float(np.float32(0.0371)) * (int(v) + 7)) for v in q]
    np.testing.assert_array_equal(dequantize(q, qp), np.array(want, dtype=np.float32))
