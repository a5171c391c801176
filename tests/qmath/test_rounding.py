"""round_float against the exact rational definition of each mode."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intq.errors import ContractError
from intq.qmath import Rounding, round_float

from . import reference as ref

MODES = [m.value for m in Rounding]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ties_and_near_ties(mode, dtype):
    base = np.arange(-20, 21, dtype=np.float64)
    x = np.concatenate([base + 0.5, base - 0.5, base, base + 0.25, base + 0.75]).astype(dtype)
    near = np.array([0.49999997, -0.49999997, 0.50000006, 1.4999999, 2.5000002], dtype=dtype)
    x = np.concatenate([x, near, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)])
    got = round_float(x, mode)
    assert got.dtype == dtype
    want = [ref.round_rational(Fraction(float(v)), mode) for v in x]
    np.testing.assert_array_equal(got, want)


def test_named_examples():
    x = np.array([2.5, -2.5])
    assert round_float(x, "half_away_from_zero").tolist() == [3, -3]
    assert round_float(x, "half_to_even").tolist() == [2, -2]
    assert round_float(x, "half_up").tolist() == [3, -2]
    assert round_float(x, "half_down").tolist() == [2, -3]
    assert round_float(x, "floor").tolist() == [2, -3]
    assert round_float(x, "ceil").tolist() == [3, -2]
    assert round_float(x, "toward_zero").tolist() == [2, -2]
    # floor(x + 0.5) is wrong here; round_float is not
    assert round_float(np.float32(0.49999997), "half_up") == 0


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=32), st.sampled_from(MODES))
def test_hypothesis_float32(x, mode):
    got = round_float(np.float32(x), mode)
    assert got == ref.round_rational(Fraction(x), mode)


def test_infinities_pass_and_bad_input_raises():
    assert np.isinf(round_float(np.array([np.inf]), "half_up"))[0]
    with pytest.raises(ContractError):
        round_float(np.array([1, 2]), "half_up")
    with pytest.raises(ContractError, match="half_to_even"):
        round_float(np.array([1.0]), "banker")
