"""Fixed-point primitives against the big-integer reference: exhaustive edges + 10^6 random cases."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intq.errors import ContractError
from intq.qmath import (
    Rounding,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
    multiply_by_quantized_multiplier_single_rounding,
    requantize_float32_rne,
    right_shift_round,
    rounded_right_shift,
    rounding_divide_by_pot,
    saturate,
    saturating_rounding_doubling_high_mul,
)

from . import reference as ref
from .conftest import INT32_EDGES, INT32_MAX, INT32_MIN, MULTIPLIER_EDGES, random_int32

N_RANDOM = 1_000_000
int32s = st.integers(INT32_MIN, INT32_MAX)


def expect(fn, *cols):
    return np.array([fn(*map(int, args)) for args in zip(*cols)], dtype=np.int64)


# --- SaturatingRoundingDoublingHighMul -------------------------------------------------------

def test_srdhm_exhaustive_edges():
    a, b = map(np.array, zip(*itertools.product(INT32_EDGES, INT32_EDGES)))
    got = saturating_rounding_doubling_high_mul(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expect(ref.srdhm, a, b))
    assert saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN) == INT32_MAX


def test_srdhm_exact_ties_round_toward_plus_infinity():
    # b = 2^30 is 0.5 in Q0.31: the result is round(a / 2), a tie for every odd a. The nudge
    # 1 - 2^30 with C's truncating division sends negative ties toward zero: -500.5 -> -500.
    a = np.arange(-1001, 1002, 2)
    got = saturating_rounding_doubling_high_mul(a, 2**30)
    np.testing.assert_array_equal(got, (a + 1) >> 1)
    assert saturating_rounding_doubling_high_mul(-1001, 2**30) == -500


def test_srdhm_random(rng):
    a, b = random_int32(rng, N_RANDOM), random_int32(rng, N_RANDOM)
    np.testing.assert_array_equal(saturating_rounding_doubling_high_mul(a, b), expect(ref.srdhm, a, b))


@settings(max_examples=3000, deadline=None)
@given(int32s, int32s)
def test_srdhm_hypothesis(a, b):
    assert int(saturating_rounding_doubling_high_mul(a, b)) == ref.srdhm(a, b)


# --- RoundingDivideByPOT ---------------------------------------------------------------------

def test_rdbpot_every_exponent_with_ties():
    cases = []
    for e in range(32):
        half = (1 << (e - 1)) if e else 0
        for k in (-(2**31) >> e, -5, -1, 0, 1, 5, (2**31 - 1) >> e):
            for d in (-1, 0, 1):
                x = k * (1 << e) + half + d  # exact tie at d == 0
                if INT32_MIN <= x <= INT32_MAX:
                    cases.append((x, e))
        cases += [(x, e) for x in INT32_EDGES]
    x, e = map(np.array, zip(*cases))
    np.testing.assert_array_equal(rounding_divide_by_pot(x, e), expect(ref.rounding_divide_by_pot, x, e))


def test_rdbpot_random(rng):
    x = random_int32(rng, N_RANDOM)
    e = rng.integers(0, 32, size=N_RANDOM)
    np.testing.assert_array_equal(rounding_divide_by_pot(x, e), expect(ref.rounding_divide_by_pot, x, e))


# --- MultiplyByQuantizedMultiplier, double rounding --------------------------------------------

def _fits_after_left_shift(x, shift):
    left = np.maximum(shift, 0)
    return ((x << left) >= INT32_MIN) & ((x << left) <= INT32_MAX)


def test_mbqm_double_exhaustive_edges():
    x, m, s = map(np.array, zip(*itertools.product(INT32_EDGES, MULTIPLIER_EDGES, range(-31, 31))))
    ok = _fits_after_left_shift(x, s)
    x, m, s = x[ok], m[ok], s[ok]
    np.testing.assert_array_equal(multiply_by_quantized_multiplier(x, m, s), expect(ref.mbqm_double, x, m, s))


def test_mbqm_double_ties_at_every_shift():
    # m = 2^30 is 0.5: x*0.5*2^s; choose x so the exact product is k + 1/2 for right shifts.
    rows = []
    for s in range(-30, 1):
        n = 1 - s  # x * 2^30 * 2^(s-31) = x / 2^n
        for k in (-7, -1, 0, 1, 7, 1000):
            x = k * (1 << n) + (1 << (n - 1))
            if INT32_MIN <= x <= INT32_MAX:
                rows.append((x, s))
    x, s = map(np.array, zip(*rows))
    got = multiply_by_quantized_multiplier(x, 2**30, s)
    np.testing.assert_array_equal(got, expect(ref.mbqm_double, x, np.full_like(x, 2**30), s))


def test_mbqm_double_random(rng):
    m = rng.integers(2**30, 2**31, size=N_RANDOM)
    s = rng.integers(-31, 8, size=N_RANDOM)
    x = random_int32(rng, N_RANDOM) >> np.maximum(s, 0)  # keep x * 2^shift inside int32
    np.testing.assert_array_equal(multiply_by_quantized_multiplier(x, m, s), expect(ref.mbqm_double, x, m, s))


def test_mbqm_per_channel_broadcast(rng):
    acc = rng.integers(-(2**20), 2**20, size=(4, 5, 3))
    m = np.array([2**30, 1518500250, 2**31 - 1])
    s = np.array([-1, -7, 0])
    got = multiply_by_quantized_multiplier(acc, m, s)
    want = np.stack([multiply_by_quantized_multiplier(acc[..., c], m[c], s[c]) for c in range(3)], axis=-1)
    np.testing.assert_array_equal(got, want)


# --- single rounding, int64 overload ---------------------------------------------------------

def test_mbqm_single_exhaustive_edges():
    rows = [(x, m, s) for x, m, s in itertools.product(INT32_EDGES, MULTIPLIER_EDGES, range(-31, 31))
            if INT32_MIN <= ref.mbqm_single(x, m, s) <= INT32_MAX]
    x, m, s = map(np.array, zip(*rows))
    got = multiply_by_quantized_multiplier_single_rounding(x, m, s)
    np.testing.assert_array_equal(got, expect(ref.mbqm_single, x, m, s))
    np.testing.assert_array_equal(got, expect(ref.cmsis_single_rounding, x, m, s))


def test_mbqm_single_random(rng):
    m = rng.integers(2**30, 2**31, size=N_RANDOM)
    s = rng.integers(-31, 1, size=N_RANDOM)
    x = random_int32(rng, N_RANDOM)
    np.testing.assert_array_equal(
        multiply_by_quantized_multiplier_single_rounding(x, m, s), expect(ref.mbqm_single, x, m, s)
    )


def test_mbqm_int64_random_and_edges(rng):
    n = 200_000
    x = rng.integers(-(2**47), 2**47, size=n)
    m = np.concatenate([rng.integers(2**30, 2**31, size=n - 4), [0x7FFEFFFF, 0x7FFF0000, 2**31 - 1, 2**30]])
    s = rng.integers(-31, -15, size=n)  # keep the result inside int32
    np.testing.assert_array_equal(
        multiply_by_quantized_multiplier_int64(x, m, s), expect(ref.mbqm_int64, x, m, s)
    )


# --- rounded right shifts (spec 000, TPU-MLIR) ------------------------------------------------

@pytest.mark.parametrize("mode", [m.value for m in Rounding])
def test_right_shift_round_all_modes(rng, mode):
    x = np.concatenate([rng.integers(-(2**62), 2**62, size=50_000), np.arange(-64, 65)])
    n = np.concatenate([rng.integers(0, 64, size=50_000), np.full(129, 3)])
    got = right_shift_round(x, n, mode)
    np.testing.assert_array_equal(got, expect(lambda a, b: ref.tpu_right_shift_round(a, b, mode), x, n))
    np.testing.assert_array_equal(rounded_right_shift(x, n, mode), got)
    # and both are the mathematical rounding of x / 2^n
    small = slice(50_000, None)
    want = [ref.round_rational(ref.Fraction(int(a), 2**int(b)), mode) for a, b in zip(x[small], n[small])]
    np.testing.assert_array_equal(got[small], want)


def test_right_shift_round_negative_shift_is_left_shift():
    assert right_shift_round(5, -3) == 40
    assert right_shift_round(-5, -3) == -40
    with pytest.raises(ContractError):
        right_shift_round(2**62, -2)


def test_rounded_right_shift_default_is_spec_000_half_up():
    x = np.array([-6, -5, -4, 4, 5, 6])
    np.testing.assert_array_equal(rounded_right_shift(x, 1), (x + 1) >> 1)


# --- float requantization (ONNX Runtime, XNNPACK) ---------------------------------------------

def test_requantize_float32_rne_random(rng):
    n = 200_000
    acc = random_int32(rng, n)
    scales = np.float32(2.0) ** rng.uniform(-30, -5, size=n).astype(np.float32)
    zp = rng.integers(-128, 128, size=n)
    got = requantize_float32_rne(acc, scales, zp, -128, 127)
    want = [ref.requantize_float32_rne(int(a), float(s), int(z), -128, 127) for a, s, z in zip(acc, scales, zp)]
    np.testing.assert_array_equal(got, want)


def test_requantize_float32_rne_ties_to_even_and_float32_precision():
    assert requantize_float32_rne(5, 0.5, 0, -128, 127) == 2  # 2.5 -> 2
    assert requantize_float32_rne(7, 0.5, 0, -128, 127) == 4  # 3.5 -> 4
    assert requantize_float32_rne(-5, 0.5, 0, -128, 127) == -2
    # 2^24 + 1 is not a float32: it becomes 2^24 before the multiply.
    assert requantize_float32_rne(2**24 + 1, 2.0**-24, 0, -128, 127) == 1


# --- saturate and contracts ---------------------------------------------------------------------

def test_saturate():
    got = saturate(np.array([-(2**40), -129, -128, 0, 127, 128, 2**40]), -128, 127, np.int8)
    np.testing.assert_array_equal(got, [-128, -128, -128, 0, 127, 127, 127])
    assert got.dtype == np.int8


@pytest.mark.parametrize(
    "call",
    [
        lambda: saturating_rounding_doubling_high_mul(2**31, 1),
        lambda: saturating_rounding_doubling_high_mul(1.5, 1),
        lambda: rounding_divide_by_pot(1, 32),
        lambda: rounding_divide_by_pot(1, -1),
        lambda: multiply_by_quantized_multiplier(1, 2**30, 31),
        lambda: multiply_by_quantized_multiplier(1, 2**30, -32),
        lambda: multiply_by_quantized_multiplier(2**20, 2**30, 12),  # x << 12 overflows int32
        lambda: multiply_by_quantized_multiplier_single_rounding(1, -5, 0),
        lambda: multiply_by_quantized_multiplier_single_rounding(INT32_MAX, 2**31 - 1, 30),
        lambda: multiply_by_quantized_multiplier_int64(2**47, 2**30, 0),
        lambda: rounded_right_shift(1, 64),
        lambda: rounded_right_shift(1, 1, "nearest"),
        lambda: requantize_float32_rne(1, 0.0, 0, -128, 127),
        lambda: requantize_float32_rne(1, 0.1, 200, -128, 127),
        lambda: saturate([1], -200, 127, np.int8),
    ],
)
def test_out_of_contract_inputs_raise(call):
    with pytest.raises(ContractError):
        call()


@pytest.mark.parametrize("mode", ["half_up", "half_away_from_zero", "half_to_even"])
def test_tpu_mlir_multiply_rshift_random_and_ties(rng, mode):
    """RightShiftRound(x * m, rshift): int32 accumulators, 32-bit multipliers (BM1684X convs) and
    8-bit ones (pool, add), every shift TPU-MLIR emits; the exact product then one rounding."""
    from intq.qmath import tpu_mlir_multiply_rshift
    from intq.qmath.raw import multiply_rshift

    n = 200_000
    x = np.concatenate([random_int32(rng, n), np.arange(-40, 41), np.full(8, INT32_MIN), np.full(8, INT32_MAX)])
    m = np.concatenate([rng.integers(0, 2**31, size=n // 2), rng.integers(0, 128, size=n - n // 2),
                        np.ones(81, np.int64), np.arange(8), np.full(8, 2**31 - 1)])
    s = np.concatenate([rng.integers(0, 40, size=n), np.full(81, 2), np.arange(8), np.full(8, 31)])
    want = expect(lambda a, b, c: ref.tpu_right_shift_round(a * b, c, mode), x, m, s)
    np.testing.assert_array_equal(tpu_mlir_multiply_rshift(x, m, s, mode), want)
    np.testing.assert_array_equal(multiply_rshift(x, m, s, Rounding(mode)), want)
    # ties at rshift 2: x * 1 = 4k + 2 is exactly half way; each mode resolves it its own way
    assert tpu_mlir_multiply_rshift(-6, 1, 2, mode) == {"half_up": -1, "half_away_from_zero": -2,
                                                        "half_to_even": -2}[mode]
    with pytest.raises(ContractError):
        tpu_mlir_multiply_rshift(2**40, 2**31, 3)
