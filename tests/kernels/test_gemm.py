"""exact_matmul equals the int64 product on every backend, across the float32 chunking bound; the
backend is the fastest measured here, never slower than float32 BLAS, and INTQ_GEMM forces one."""

import contextlib
import subprocess
import sys
import time

import numpy as np
import pytest

from intq.kernels import gemm
from intq.kernels.gemm import available_backends, exact_matmul, prepare_gemm

with contextlib.suppress(ImportError):  # the torch-int8 backend is a candidate once torch is loaded
    import torch  # noqa: F401
gemm._torch_int_mm.cache_clear()
BACKENDS = available_backends()


def test_torch_is_a_backend_once_loaded():
    if "torch" not in sys.modules:
        pytest.skip("torch is not installed")
    assert "torch-int8" in BACKENDS


def test_the_integer_engine_never_imports_torch():
    """An integer model runs (and the backend is measured) without importing PyTorch: the import
    costs seconds (8.7 s on a loaded machine, issue 27)."""
    code = ("import sys, numpy as np, intq; from intq.kernels import gemm; gemm.gemm_backend(); "
            "g = intq.quantize('intq/data/digits_cnn.onnx', [np.zeros((1, 1, 8, 8), np.float32)], input_shapes={'image': (1, 1, 8, 8)}); "
            "intq.Interpreter(g).run({'image': np.zeros((2, 1, 8, 8), np.float32)}); "
            "print('torch' in sys.modules, gemm.available_backends())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=__file__.rsplit("/tests/", 1)[0], env={**__import__("os").environ, "INTQ_GEMM": "auto"})
    loaded, backends = out.stdout.split(" ", 1)
    assert loaded == "False", out.stdout
    assert "torch-int8" not in backends


def test_float32_blas_is_always_available():
    assert "blas-float32" in BACKENDS


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


@pytest.mark.parametrize("backend", BACKENDS)
def test_extreme_operands_at_the_float32_bound(backend):
    # every term at its largest magnitude: 128 * 127 * k crosses 2^24 at k = 1033
    k = 2000
    x = np.full((4, k), -128, np.int8)
    w = np.full((3, k), 127, np.int8)
    g = prepare_gemm(w, backend=backend)
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


# ------------------------------------------------------------------------------ the measured choice


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _sleeper(seconds_per_shape: dict, wait=_busy):
    """A candidate taking the given wall-clock time per shape (1 ms elsewhere): computing (busy) or
    waiting (``time.sleep``: as a call preempted by another job, slow in wall clock only)."""
    def make(m, k, n):
        return lambda: wait(seconds_per_shape.get((m, k, n), 0.001))
    return make


def test_a_preempted_candidate_is_not_dropped():
    got = gemm.time_candidates({"fast": _sleeper({}), "waits": _sleeper({(1, 2, 3): 0.02}, time.sleep)},
                               shapes=((1, 2, 3),), anchor="fast")
    assert got["waits"] is not None  # slow in wall clock, not in CPU time: it is timed, and loses
    assert gemm.choose(got) == "fast" or got["waits"] >= got["fast"]


def test_a_slow_candidate_is_dropped_after_one_call_and_the_anchor_never():
    shapes = ((1, 2, 3), (4, 5, 6))
    calls = []

    def counted(make):
        def wrapped(m, k, n):
            call = make(m, k, n)
            return lambda: calls.append((m, k, n)) or call()
        return wrapped

    def broken(m, k, n):
        raise RuntimeError("this backend does not work here")

    got = gemm.time_candidates({"fast": _sleeper({}), "slow": counted(_sleeper({(1, 2, 3): 0.06})),
                                "blas-float32": _sleeper({(1, 2, 3): 0.06, (4, 5, 6): 0.002}), "broken": broken},
                               shapes=shapes)
    assert got["slow"] is None and got["broken"] is None
    assert len(calls) == 3  # its warm-up and two timed calls on the first shape, nothing after
    assert got["blas-float32"] is not None and got["blas-float32"] > got["fast"] > 0  # slow too, but the anchor
    assert gemm.choose(got) == "fast"


def test_choose_takes_the_fastest_and_blas_without_measurements():
    assert gemm.choose({"torch-int8": 0.03, "blas-float32": 0.01, "numba-int32": None}) == "blas-float32"
    assert gemm.choose({"torch-int8": 0.002, "blas-float32": 0.01}) == "torch-int8"
    assert gemm.choose({"torch-int8": None, "blas-float32": None}) == "blas-float32"
    assert gemm.choose({"torch-int8": 0.01, "blas-float32": 0.01}) == "torch-int8"  # a tie: BACKENDS order


def test_the_measurement_is_cached_per_host_and_read_back(monkeypatch, tmp_path):
    monkeypatch.setenv("INTQ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm, "SHAPES", ((64, 96, 32), (1, 64, 40)))  # small: the test stays fast
    gemm.gemm_measurement.cache_clear()
    try:
        first = gemm.gemm_measurement()
        assert not first.cached and first.file is not None and first.file.startswith(str(tmp_path))
        assert set(first.seconds) == set(BACKENDS) and first.seconds["blas-float32"] is not None
        timed = {b: t for b, t in first.seconds.items() if t is not None}
        assert first.choice == min(timed, key=timed.get)
        assert timed[first.choice] <= timed["blas-float32"]  # never slower than float32 BLAS
        gemm.gemm_measurement.cache_clear()
        again = gemm.gemm_measurement()
        assert again.cached and again.seconds == first.seconds and again.choice == first.choice
        monkeypatch.setattr(gemm, "SHAPES", ((64, 96, 16),))  # other shapes: the file does not answer
        gemm.gemm_measurement.cache_clear()
        assert not gemm.gemm_measurement().cached
    finally:
        gemm.gemm_measurement.cache_clear()


def test_intq_gemm_forces_a_backend(monkeypatch):
    monkeypatch.setenv("INTQ_GEMM", "blas")
    assert gemm.gemm_backend() == "blas-float32"
    w = np.ones((3, 4), np.int8)
    assert prepare_gemm(w).chunks  # the float32 chunks
    monkeypatch.setenv("INTQ_GEMM", "numba")
    if "numba-int32" in BACKENDS:
        assert gemm.gemm_backend() == "numba-int32" and prepare_gemm(w).numba_weight is not None
    monkeypatch.setenv("INTQ_GEMM", "cublas")
    with pytest.raises(ValueError, match="INTQ_GEMM='cublas'"):
        gemm.gemm_backend()
