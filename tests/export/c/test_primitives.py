"""The C fixed-point primitives (intq/export/c/csrc/fixedpoint.c) against the big-integer reference
(tests/qmath/reference.py) and intq.qmath: random int32 operands plus every edge, compiled with the
strict flags and, where the compiler has it, -fsanitize=undefined (a shift of a negative value or
a signed overflow aborts the process)."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from intq.export.c import emit
from intq.export.c.runner import compile_shared, find_compiler
from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.requantize import make_requantizer
from intq.kernels.targets import Requant
from intq.qmath import raw
from tests.qmath import reference as ref

N = 20000  # random cases per primitive against the big-integer reference
EDGES = np.array([0, 1, -1, 2, -2, 3, -3, 7, -7, 2**30, -(2**30), 2**31 - 1, -(2**31), 2**31 - 2, -(2**31) + 1,
                  12345, -12345, 2**15, -(2**15), 65535, -65536], np.int64)

WRAPPERS = """
#define MAP2(NAME, EXPR) void t_##NAME(const int32_t *a, const int32_t *b, int32_t *y, int32_t n) \\
    { int32_t i; (void)b; for (i = 0; i < n; ++i) y[i] = (EXPR); }
MAP2(asr32, intq_asr32(a[i], b[i]))
MAP2(srdhm, intq_srdhm(a[i], b[i]))
MAP2(rdbp, intq_rdbp(a[i], b[i]))
MAP2(mul_by_pot, intq_mul_by_pot(a[i], b[i]))
MAP2(half_sum, intq_rounding_half_sum(a[i], b[i]))
MAP2(clz, intq_clz32((uint32_t)a[i]))
MAP2(one_over, intq_one_over_one_plus_x(a[i]))
MAP2(recip, intq_get_reciprocal(a[i], 12, &y[n + i]))
MAP2(log, intq_log_x_ge_1(a[i], b[i] >> 8, b[i] & 255))
void t_inv_sqrt(const int32_t *a, const int32_t *b, int32_t *y, int32_t n)
    { int32_t i; int s; (void)b; for (i = 0; i < n; ++i) { y[i] = intq_inv_sqrt(a[i], &s); y[n + i] = s; } }
void t_mbqm(const int32_t *x, const int32_t *m, const int32_t *s, int32_t *y, int32_t n)
    { int32_t i; for (i = 0; i < n; ++i) y[i] = intq_mbqm(x[i], m[i], s[i]); }
void t_asr64(const int64_t *x, const int32_t *s, int64_t *y, int32_t n)
    { int32_t i; for (i = 0; i < n; ++i) y[i] = intq_asr64(x[i], s[i]); }
void t_double_product(const int32_t *x, const int64_t *mant, const int32_t *k, int32_t *y, int32_t n)
    { int32_t i; for (i = 0; i < n; ++i) y[i] = intq_double_product(x[i], (uint64_t)mant[i], k[i]); }
"""


def _build(tmp_path, name, flags=("-O2",), compiler=None):
    names = ["intq_asr32", "intq_asr64", "intq_srdhm", "intq_rdbp", "intq_mbqm", "intq_mul_by_pot",
             "intq_rounding_half_sum", "intq_clz32", "intq_one_over_one_plus_x", "intq_get_reciprocal",
             "intq_log_x_ge_1", "intq_inv_sqrt", "intq_double_product"]
    text = "#include <stdint.h>\n" + emit.runtime_source(names) + WRAPPERS
    lib = compile_shared({f"{name}.c": text}, tmp_path / f"lib{name}.so", compiler, flags)
    return ctypes.CDLL(str(lib))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


class Prims:
    def __init__(self, lib):
        self.lib = lib

    def map2(self, name, a, b, extra=0):
        a = np.ascontiguousarray(a, np.int32)
        b = np.ascontiguousarray(np.broadcast_to(b, a.shape), np.int32)
        y = np.zeros(a.size * (1 + extra), np.int32)
        getattr(self.lib, f"t_{name}")(_ptr(a), _ptr(b), _ptr(y), ctypes.c_int32(a.size))
        return y.astype(np.int64)

    def mbqm(self, x, m, s):
        x, m, s = (np.ascontiguousarray(v, np.int32) for v in (x, m, s))
        y = np.zeros(x.size, np.int32)
        self.lib.t_mbqm(_ptr(x), _ptr(m), _ptr(s), _ptr(y), ctypes.c_int32(x.size))
        return y.astype(np.int64)

    def asr64(self, x, s):
        x, s = np.ascontiguousarray(x, np.int64), np.ascontiguousarray(s, np.int32)
        y = np.zeros(x.size, np.int64)
        self.lib.t_asr64(_ptr(x), _ptr(s), _ptr(y), ctypes.c_int32(x.size))
        return y

    def double_product(self, x, real):
        from intq.export.c.lower import double_product

        r = make_requantizer(real, Requant.DOUBLE_PRODUCT, 0, -128, 127)
        mant, k, *_ = double_product(None, r, real.size)
        x = np.ascontiguousarray(x, np.int32)
        y = np.zeros(x.size, np.int32)
        self.lib.t_double_product(_ptr(x), _ptr(mant), _ptr(k), _ptr(y), ctypes.c_int32(x.size))
        return y.astype(np.int64)


@pytest.fixture(scope="module")
def prims(tmp_path_factory):
    return Prims(_build(tmp_path_factory.mktemp("prims"), "prims"))


def _int32(rng, n):
    """Random int32 values, a third of them small (where the roundings' ties live), plus the edges."""
    big = rng.integers(-(2**31), 2**31, size=n)
    small = rng.integers(-300, 300, size=n)
    return np.concatenate([np.where(rng.random(n) < 0.33, small, big), EDGES])


def test_shifts_are_floor_divisions(prims, rng):
    x = _int32(rng, N)
    for s in (0, 1, 5, 30, 31):
        assert np.array_equal(prims.map2("asr32", x, s), np.floor_divide(x, 2**s))
    x64 = np.concatenate([rng.integers(-(2**63), 2**63 - 1, size=N, dtype=np.int64), EDGES])
    s64 = rng.integers(0, 64, size=x64.size)
    want = [v >> int(k) for v, k in zip(x64.tolist(), s64.tolist())]  # Python: a floor shift, exact
    assert prims.asr64(x64, s64).tolist() == want


def test_srdhm_equals_the_reference(prims, rng):
    a, b = _int32(rng, N), _int32(rng, N)[::-1]
    got = prims.map2("srdhm", a, b)
    assert got.tolist() == [ref.srdhm(int(x), int(y)) for x, y in zip(a, b)]
    assert prims.map2("srdhm", np.array([-(2**31)]), -(2**31))[0] == 2**31 - 1


def test_rdbp_equals_the_reference(prims, rng):
    x = _int32(rng, N)
    e = rng.integers(0, 32, size=x.size)
    got = prims.map2("rdbp", x, e)
    assert got.tolist() == [ref.rounding_divide_by_pot(int(v), int(k)) for v, k in zip(x, e)]


def test_mbqm_equals_the_reference(prims, rng):
    x = _int32(rng, N)
    m = np.where(rng.random(x.size) < 0.9, rng.integers(2**30, 2**31, size=x.size), 0)  # QuantizeMultiplier's range
    s = rng.integers(-31, 31, size=x.size)
    left = np.maximum(s, 0)
    fits = np.abs(x) < (2**31 - 1) >> left  # the kernels bound x << shift within int32
    x, m, s = x[fits], m[fits], s[fits]
    got = prims.mbqm(x, m, s)
    assert got.tolist() == [ref.mbqm_double(int(a), int(b), int(c)) for a, b, c in zip(x, m, s)]
    assert np.array_equal(got, raw.mbqm(x, m, s))


def test_mbqm_wraps_the_left_shift_as_intq_does(prims, rng):
    """Where x << shift leaves int32, C's int32 arithmetic wraps on the runtimes; raw.mbqm says so."""
    x = rng.integers(2**20, 2**31, size=1000) * rng.choice([-1, 1], size=1000)
    m, s = rng.integers(2**30, 2**31, size=1000), rng.integers(12, 31, size=1000)
    assert np.array_equal(prims.mbqm(x, m, s), raw.mbqm(x, m, s))


def test_saturating_and_reciprocal_helpers_equal_intq(prims, rng):
    x = _int32(rng, N)
    for e in (-31, -5, -1, 0, 1, 2, 6, 30):
        assert np.array_equal(prims.map2("mul_by_pot", x, e), raw.mul_by_pot(x, e)), e
    y = _int32(rng, N)[::-1]
    assert np.array_equal(prims.map2("half_sum", x, y), fp.rounding_half_sum(x, y))
    assert np.array_equal(prims.map2("clz", x, 0), fp.count_leading_zeros32(x))
    a = rng.integers(0, 2**31, size=N)  # [0, 1) in Q0.31
    assert np.array_equal(prims.map2("one_over", a, 0), fp.one_over_one_plus_x_for_x_in_0_1(a))
    s = rng.integers(1, 2**31, size=N)  # a positive Q12.19 sum
    got = prims.map2("recip", s, 0, extra=1)
    want, bits = fp.get_reciprocal(s, 12)
    assert np.array_equal(got[:N], want) and np.array_equal(got[N:], bits)


def test_log_and_inverse_square_root_equal_intq(prims, rng):
    """LOG_SOFTMAX's log (Q12.19 -> Q5.26, every positive int32 sum) and L2_NORMALIZATION's 1/sqrt
    (every int32 sum of squares, 0 and 1 included) against intq.kernels._fixedpoint_lut."""
    x = np.concatenate([rng.integers(1, 2**31, size=N), rng.integers(1, 2**20, size=N // 4),
                        [1, 2, 3, 2**19, 2**19 + 1, 2**30, 2**31 - 1]])
    got = prims.map2("log", x, (12 << 8) | 5)
    assert np.array_equal(got, fp.log_x_for_x_greater_than_or_equal_to_1(x, 12, 5))
    acc = np.concatenate([rng.integers(0, 2**31, size=N), rng.integers(0, 600, size=N // 4),
                          [0, 1, 2, 3, 4, 2**27, 2**29 - 1, 2**29, 2**31 - 1]])
    got = prims.map2("inv_sqrt", acc, 0, extra=1)
    want_m, want_s = fp.inv_sqrt_multiplier(acc)
    assert np.array_equal(got[:acc.size], want_m) and np.array_equal(got[acc.size:], want_s)


def _double_product_reference(x: int, real: float) -> int:
    """std::round(double(x) * real) from exact rationals: the product rounded to the nearest double
    (ties to even: Fraction -> float is correctly rounded), then half away from zero."""
    from fractions import Fraction

    p = Fraction(float(Fraction(x) * Fraction(real)))
    n = abs(p.numerator) * 2 + p.denominator  # floor(|p| + 1/2) = floor((2|num| + den) / (2 den))
    return (1 if p >= 0 else -1) * (n // (2 * p.denominator))


def test_double_product_equals_litert_refs_double_rounding(prims, rng):
    """litert-ref's FULLY_CONNECTED output stage (std::round(double(acc) * M)) in integers, against
    intq's float64 emulation (DoubleProduct) and the exact-rational reference: random multipliers of
    every magnitude the kernels produce, multipliers with few significant bits (exact ties at the
    integer step), and products that need the 53-bit rounding (full 53-bit mantissas, large acc)."""
    x = _int32(rng, N)
    real = np.concatenate([
        2.0 ** rng.uniform(-24, 1, size=N // 2),  # full 53-bit mantissas
        rng.integers(1, 64, size=N - N // 2) * 2.0 ** rng.integers(-20, 0, size=N - N // 2),  # few bits: ties
        2.0 ** rng.uniform(-24, 1, size=EDGES.size)])
    got = prims.double_product(x, real)
    r = make_requantizer(real, Requant.DOUBLE_PRODUCT, 0, -(2**62), 2**62, out_dtype=np.int64)
    want = np.clip(r.rescaled(x.astype(np.int64)), -(2**30), 2**30)
    assert np.array_equal(got, want)
    ties = [int(v) for v in x[N // 2:N]]
    assert sum(abs(_double_product_reference(v, float(m)) * 2 - v * float(m) * 2) == 1
               for v, m in zip(ties, real[N // 2:N]) if abs(v) < 2**20) > 50  # exact ties are exercised
    sample = rng.choice(x.size, 3000, replace=False)
    assert [int(got[i]) for i in sample] == [max(-(2**30), min(2**30, _double_product_reference(int(x[i]), float(real[i]))))
                                              for i in sample]


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_primitives_under_ubsan(compiler, tmp_path, rng):
    """The same cases under -fsanitize=undefined (as a program: sanitizer runtimes and ctypes mix badly)."""
    if find_compiler(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    names = ["intq_srdhm", "intq_rdbp", "intq_mbqm", "intq_mul_by_pot", "intq_get_reciprocal", "intq_asr64",
             "intq_log_x_ge_1", "intq_inv_sqrt", "intq_double_product"]
    x = _int32(rng, 2000)
    m = rng.integers(2**30, 2**31, size=x.size)
    s = rng.integers(-31, 31, size=x.size)
    arr = lambda v: ",".join("INT32_MIN" if int(t) == -(2**31) else str(int(t)) for t in v)  # noqa: E731
    main = f"""#include <stdint.h>
#include <stdio.h>
{emit.runtime_source(names)}
static const int32_t X[] = {{{arr(x)}}}, M[] = {{{arr(m)}}}, S[] = {{{arr(s)}}};
int main(void) {{
    uint64_t h = 0; int i, bits; int32_t n = (int32_t)(sizeof X / sizeof X[0]);
    for (i = 0; i < n; ++i) {{
        h += (uint64_t)intq_mbqm(X[i], M[i], S[i]) + (uint64_t)intq_srdhm(X[i], M[i]) + (uint64_t)intq_rdbp(X[i], i % 32);
        h += (uint64_t)intq_mul_by_pot(X[i], i % 40 - 20) + (uint64_t)intq_asr64((int64_t)X[i] * M[i], i % 64);
        if (X[i] > 0) h += (uint64_t)intq_get_reciprocal(X[i], 12, &bits) + (uint64_t)bits;
        h += (uint64_t)intq_double_product(X[i], (uint64_t)M[i] << (i % 22), 20 + i % 60);
        if (X[i] > 0) h += (uint64_t)intq_log_x_ge_1(X[i], 12, 5) + (uint64_t)intq_inv_sqrt(X[i], &bits) + (uint64_t)bits;
    }}
    printf("%llu\\n", (unsigned long long)h);
    return 0;
}}
"""
    (tmp_path / "ub.c").write_text(main)
    exe = tmp_path / "ub"
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla", "-O1", "-fsanitize=undefined",
             "-fno-sanitize-recover=undefined"]
    built = subprocess.run([compiler, *flags, "-o", str(exe), str(tmp_path / "ub.c")], capture_output=True, text=True)
    if built.returncode and "ubsan" in built.stderr:
        pytest.skip(f"{compiler} has no UBSan runtime here (Debian: libclang-rt-dev)")
    assert built.returncode == 0, built.stderr[-2000:]
    done = subprocess.run([str(exe)], capture_output=True, text=True)
    assert done.returncode == 0 and "runtime error" not in done.stderr, done.stderr[-2000:]
