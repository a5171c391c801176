"""The unchecked run-time primitives (intq.qmath.raw) and their compiled forms (intq.qmath.compiled)
against the big-integer reference, on every edge and 10^6 random cases, as the checked ones
(tests/qmath/test_fixedpoint.py; the checked functions call raw's, so those tests cover raw's
srdhm, rdbp, mbqm, mbqm_single and the int64 form's rounding too)."""

import itertools

import numpy as np
from numba import njit

from intq.qmath import compiled, raw

from . import reference as ref
from .conftest import INT32_EDGES, MULTIPLIER_EDGES, random_int32

N_RANDOM = 1_000_000


def expect(fn, *cols):
    return np.array([fn(*map(int, args)) for args in zip(*cols)], dtype=np.int64)


def _double_rounding_cases(rng, n):
    """x, multiplier, shift with x * 2^max(shift, 0) inside int32 (the contract)."""
    m = rng.integers(2**30, 2**31, size=n, dtype=np.int64)
    m[: len(MULTIPLIER_EDGES)] = MULTIPLIER_EDGES
    shift = rng.integers(-31, 8, size=n, dtype=np.int64)
    x = random_int32(rng, n) >> np.maximum(shift, 0)
    return x, m, shift


def test_mbqm_half_up_random_and_edges(rng):
    x, m, shift = _double_rounding_cases(rng, N_RANDOM)
    edges = np.array(list(itertools.product(INT32_EDGES, MULTIPLIER_EDGES, [-31, -20, -1, 0])))
    x, m, shift = (np.concatenate([c, e]) for c, e in zip((x, m, shift), edges.T))
    np.testing.assert_array_equal(raw.mbqm_half_up(x, m, shift), expect(ref.mbqm_half_up, x, m, shift))


def test_mbqm_int64_wraps_like_c(rng):
    x = rng.integers(-(2**47), 2**47, size=200_000, dtype=np.int64)
    m = rng.integers(0, 2**31, size=x.size, dtype=np.int64)
    shift = rng.integers(-31, 8, size=x.size, dtype=np.int64)
    m16, total = raw.reduce_multiplier(m, shift)
    got = raw.mbqm_int64(x, m16, total)
    want = expect(lambda a, b, c: ref.wrap32(ref.mbqm_int64(a, b, c)), x, m, shift)
    np.testing.assert_array_equal(got, want)


def test_wrap32():
    v = np.array([-(2**40), -(2**31) - 1, -(2**31), -1, 0, 2**31 - 1, 2**31, 2**33 + 5], dtype=np.int64)
    np.testing.assert_array_equal(raw.wrap32(v), expect(ref.wrap32, v))


def test_16_bit_forms_exhaustive_on_a_grid(rng):
    values = np.concatenate([np.array([-32768, -32767, -16384, -2, -1, 0, 1, 2, 16384, 32767]),
                             rng.integers(-32768, 32768, size=600)])
    a, b = (np.array(c, dtype=np.int64) for c in zip(*itertools.product(values, values)))
    np.testing.assert_array_equal(raw.srdhm16(a, b), expect(ref.srdhm16, a, b))
    np.testing.assert_array_equal(raw.sdhm16(a, b), expect(ref.sdhm16, a, b))
    for e in range(0, 32):
        np.testing.assert_array_equal(raw.rdbp16(values, e), expect(lambda v: ref.rdbp16(v, e), values))
    for amount in range(0, 16):
        want = np.clip(values * 2**amount, -32768, 32767)
        np.testing.assert_array_equal(raw.saturating_left_shift16(values, amount), want)


def test_mul_by_pot_param(rng):
    x = random_int32(rng, 100_000)
    e = rng.integers(0, 32, size=x.size)
    np.testing.assert_array_equal(raw.mul_by_pot_param(x, e), expect(ref.mul_by_pot_param, x, e))
    np.testing.assert_array_equal(raw.mul_by_pot(x, -5), expect(lambda v: ref.rounding_divide_by_pot(v, 5), x))


@njit(cache=True)
def _compiled_forms(x, m, shift, out_double, out_half_up, out_single, out_srdhm):
    for i in range(x.size):
        left = max(shift[i], 0)
        right = max(-shift[i], 0)
        out_double[i] = compiled.mbqm_scalar(x[i], m[i], left, right, 1)
        out_half_up[i] = compiled.mbqm_scalar(x[i], m[i], left, right, 0)
        out_single[i] = compiled.mbqm_single_scalar(x[i], m[i], shift[i])
        out_srdhm[i] = compiled.srdhm_scalar(x[i], m[i])


@njit(cache=True)
def _right_forms(x, m, right, out_double, out_half_up):
    for i in range(x.size):
        nudge = (np.int64(1) << right[i]) >> 1
        out_double[i] = compiled.mbqm_right_scalar(x[i], m[i], nudge, 1 if right[i] > 0 else 0, right[i])
        out_half_up[i] = compiled.mbqm_right_scalar(x[i], m[i], nudge, 0, right[i])


def test_branch_free_right_shift_form_equals_the_reference(rng):
    """mbqm_right_scalar (no left shift, multipliers from quantize_multiplier: 0 or [2^30, 2^31))
    equals the double rounding on every int32 edge and 10^6 random cases."""
    x, m, shift = _double_rounding_cases(rng, N_RANDOM)
    shift = -np.abs(shift)
    x[: len(INT32_EDGES)] = INT32_EDGES
    m[1::97] = 0
    double, half_up = np.empty(x.size, np.int64), np.empty(x.size, np.int64)
    _right_forms(x, m, -shift, double, half_up)
    np.testing.assert_array_equal(double, raw.mbqm(x, m, shift))
    np.testing.assert_array_equal(half_up, raw.mbqm_half_up(x, m, shift))
    sample = slice(0, 100_000)
    np.testing.assert_array_equal(double[sample], expect(ref.mbqm_double, x[sample], m[sample], shift[sample]))


def test_compiled_scalar_forms_equal_the_reference(rng):
    x, m, shift = _double_rounding_cases(rng, N_RANDOM)
    x[:4], m[:4], shift[:4] = ref.INT32_MIN, ref.INT32_MIN, 0  # srdhm's one saturating case
    outs = [np.empty(x.size, np.int64) for _ in range(4)]
    _compiled_forms(x, m, shift, *outs)
    double, half_up, single, srdhm = outs
    sample = slice(0, 200_000)  # the Python reference is slow: a fifth of the cases against it...
    np.testing.assert_array_equal(double[sample], expect(ref.mbqm_double, x[sample], m[sample], shift[sample]))
    np.testing.assert_array_equal(half_up[sample], expect(ref.mbqm_half_up, x[sample], m[sample], shift[sample]))
    np.testing.assert_array_equal(srdhm[sample], expect(ref.srdhm, x[sample], m[sample]))
    # ... and all 10^6 against raw's vector forms, which the reference checks on 10^6 of their own
    np.testing.assert_array_equal(double, raw.mbqm(x, m, shift))
    np.testing.assert_array_equal(half_up, raw.mbqm_half_up(x, m, shift))
    np.testing.assert_array_equal(srdhm, raw.srdhm(x, m))
    ok = shift <= 30
    np.testing.assert_array_equal(single[ok], raw.mbqm_single(x[ok], m[ok], shift[ok]))
    np.testing.assert_array_equal(single[:50_000], expect(ref.mbqm_single, x[:50_000], m[:50_000], shift[:50_000]))


def test_fused_requantization_rows_equal_raw(rng):
    acc = random_int32(rng, 60_000).reshape(-1, 6) >> 6
    offset = rng.integers(-1000, 1000, size=6)
    m = rng.integers(2**30, 2**31, size=6, dtype=np.int64)
    shift = rng.integers(-20, 1, size=6, dtype=np.int64)
    out = np.empty(acc.shape, np.int32)
    for away, form in ((1, raw.mbqm), (0, raw.mbqm_half_up)):
        overflow = compiled.requantize_rows_double(acc, offset, m, np.maximum(shift, 0), np.maximum(-shift, 0),
                                                   5, -1000, 1000, out, away)
        assert not overflow
        np.testing.assert_array_equal(out, np.clip(form(acc + offset, m, shift) + 5, -1000, 1000))
        # the branch-free form for right shifts only, with the edge multipliers and zero
        m_edges = m.copy()
        m_edges[:3] = (2**30, 2**31 - 1, 0)
        compiled.requantize_rows_double_right(acc, offset, m_edges, np.maximum(-shift, 0), 5, -1000, 1000, out, away)
        np.testing.assert_array_equal(out, np.clip(form(acc + offset, m_edges, shift) + 5, -1000, 1000))
    compiled.requantize_rows_single(acc, offset, m, shift, -3, -500, 700, out)
    np.testing.assert_array_equal(out, np.clip(raw.mbqm_single(acc + offset, m, shift) - 3, -500, 700))


def test_compiled_float32_quantization_equals_quantize(rng):
    """QUANTIZE's compiled float path equals intq.qmath.quantize (float32 division, half away from
    zero, saturation) on random values, every tie x = (k + 0.5) S, its float32 neighbours,
    infinities and huge values, for int8 and int16 outputs; NaN is reported."""
    from intq.qmath import QuantParams, quantize

    for scale, zp, dtype in [(0.0123, 5, np.int8), (1 / 256, -128, np.int8), (3.7e-5, 0, np.int8),
                             (7.0, 127, np.int8), (0.25 / 32768, 0, np.int16)]:
        qp = QuantParams(np.array([scale]), np.array([zp]), dtype)
        s = np.float32(qp.scale[0])
        span = float(qp.qmax - qp.qmin) * 2
        ties = (np.arange(-span, span, 1, dtype=np.float32)[::max(1, int(span) // 4000)] + np.float32(0.5)) * s
        x = np.concatenate([rng.standard_normal(50_000).astype(np.float32) * np.float32(span * scale),
                            ties, np.nextafter(ties, np.float32(0)), np.nextafter(ties, np.float32(np.inf)),
                            np.array([np.inf, -np.inf, 3e38, -3e38, 0.0, -0.0, 1e-45], np.float32)])
        out = np.empty(x.size, dtype)
        assert not compiled.quantize_float32_half_away(x, s, zp, qp.qmin, qp.qmax, out)
        np.testing.assert_array_equal(out, quantize(x, qp))
    out = np.empty(2, np.int8)
    assert compiled.quantize_float32_half_away(np.array([1.0, np.nan], np.float32), np.float32(0.1), 0, -128, 127, out)


def test_compiled_dequantization_equals_dequantize():
    from intq.qmath import QuantParams, dequantize

    for scale, zp, dtype in [(0.0123, 5, np.int8), (1 / 256, -128, np.int8), (3.3e-5, 0, np.int16), (7.1, -3, np.int16)]:
        qp = QuantParams(np.array([scale]), np.array([zp]), dtype)
        q = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1).astype(dtype)
        out = np.empty(q.size, np.float32)
        compiled.dequantize_float32(q, zp, float(qp.scale[0]), out)
        np.testing.assert_array_equal(out, dequantize(q, qp))
