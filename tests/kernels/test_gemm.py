"""exact_matmul equals the int64 product on every backend, across the float32 chunking bound."""

import numpy as np
import pytest

from intq.kernels.gemm import exact_matmul, gemm_backend, prepare_gemm

BACKENDS = ["blas-float32"] + (["torch-int8"] if gemm_backend() == "torch-int8" else [])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 3, 5), (33, 147, 64), (5, 1100, 10), (3, 5000, 17)])
def test_exact_matmul_equals_int64(backend, m, k, n, rng):
    x = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
    w = rng.choice(np.array([-127, 127, -1, 0, 1], np.int8), size=(n, k)) if k >= 1100 else \
        rng.integers(-127, 128, size=(n, k)).astype(np.int8)
    g = prepare_gemm(w, backend=backend)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    got = exact_matmul(x, g)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(exact_matmul(x.astype(np.float32), g), want)
    if backend == "blas-float32" and k >= 5000:
        assert len(g.chunks) > 1, "the 2^24 bound must split long reductions of large weights"


def test_extreme_operands_at_the_float32_bound(rng):
    # every term at its largest magnitude: 128 * 127 * k crosses 2^24 at k = 1033
    k = 2000
    x = np.full((4, k), -128, np.int8)
    w = np.full((3, k), 127, np.int8)
    g = prepare_gemm(w, backend="blas-float32")
    np.testing.assert_array_equal(exact_matmul(x, g), np.full((4, 3), -128 * 127 * k))


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_one_axes_with_odd_strides(backend, rng):
    """An [N, 1] weight's transpose has strides (1, 1): numpy calls it contiguous, a BLAS that takes
    the row stride as the leading dimension would read the wrong memory."""
    for n, k, m in [(13, 1, 5), (1, 9, 4), (7, 1, 1), (1, 1, 3)]:
        w = rng.integers(-127, 128, size=(n, k)).astype(np.int8)
        w.setflags(write=False)  # graph constants are read-only
        x = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
        g = prepare_gemm(w, backend=backend)
        for _ in range(3):
            np.testing.assert_array_equal(exact_matmul(x, g), x.astype(np.int64) @ w.astype(np.int64).T)
            np.testing.assert_array_equal(exact_matmul(x.T.T, g), x.astype(np.int64) @ w.astype(np.int64).T)
