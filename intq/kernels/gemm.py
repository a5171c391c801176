"""Exact int8 x int8 -> int32 matrix products (DESIGN.md decisions 6 and 10), on the backend measured fastest here.

float32 represents every integer of magnitude <= 2^24 exactly, and a float32 sum of such
integers is exact as long as every partial sum stays <= 2^24, *whatever order BLAS adds in*: it
is enough that the sum of absolute values of the terms is <= 2^24. For an output channel n
and a reduction chunk K_c, with activations |x| <= 128 (raw int8):

    sum_{k in K_c} |x_k * w_nk|  <=  128 * sum_{k in K_c} |w_nk|  <=  2^24

:func:`prepare_gemm` splits the reduction dimension into the fewest contiguous chunks meeting this
bound for every channel (one chunk, i.e. no split, when the weights allow), asserts it, and stores
each chunk's weights as float32. :func:`exact_matmul` multiplies each chunk with BLAS (exact
integers in float32) and sums the chunks in int32. Raw int8 operands stay raw: the zero points
are handled by the caller with the expansion of Jacob et al. section 2.3.

Backends. All compute the same exact int32 products (tests/kernels/test_gemm.py); which one runs
is a speed choice only, and speed depends on the CPU (``torch._int_mm`` is 7x faster than float32
BLAS on an AVX-512 VNNI EPYC and was 15x *slower* on an AVX2-only one):

* ``torch-int8``: ``torch._int_mm``, PyTorch's CPU int8 x int8 -> int32 product (oneDNN) —
  integer arithmetic, exact by definition (checked on a probe before use); a candidate only in a
  process that has imported PyTorch already (a torch model, QAT) or with ``INTQ_GEMM=torch``:
  importing it costs seconds, which no integer model should pay;
* ``blas-float32``: the chunked float32 BLAS product above, with numpy alone (always available);
* ``numba-int32``: a compiled loop of int32 multiply-adds (numba is a core dependency).

Choice. :func:`gemm_backend` is the fastest of the available backends on :data:`SHAPES` (the
largest convolution and fully-connected shapes of ResNet-18 and MobileNet), measured on first use
by :func:`time_candidates` (about 0.1-0.5 s) and cached per host in ``intq.host.cache_dir("gemm")``
(keyed by the CPU features, the library versions and the thread settings): float32 BLAS is always
a candidate, so a backend slower than it is never chosen. ``INTQ_GEMM=torch|blas|numba`` in the
environment forces one (tests); :func:`gemm_measurement` reports what was measured.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from intq.host import cache_dir, cpu_features

_EXACT = 2**24  # largest magnitude below which every float32 integer sum is exact
_X_BOUND = 128  # |raw int8| <= 128

#: every backend, in the order of preference on a tie
BACKENDS = ("torch-int8", "blas-float32", "numba-int32")
_ENV_NAMES = {"torch": "torch-int8", "blas": "blas-float32", "numba": "numba-int32"}

#: the measurement's own version: a cache written by another way of measuring is not read
_MEASUREMENT = 4

#: (M, K, N) of the measured products: ResNet-18's 3x3 convolutions on 56x56x64 and 28x28x128
#: (im2col rows x taps*channels), its last 3x3 on 7x7x512, and a 1000-class classifier row
SHAPES = ((3136, 576, 64), (784, 1152, 128), (49, 4608, 512), (1, 512, 1000))


def _torch_loaded():
    """The torch module when this process has already imported it (a torch model, QAT) or
    ``INTQ_GEMM=torch`` asks for it, else None: intq never imports PyTorch (seconds, hundreds of MB)
    just to multiply matrices."""
    if os.environ.get("INTQ_GEMM", "").strip().lower() == "torch":
        import torch

        return torch
    return sys.modules.get("torch")


@lru_cache(maxsize=None)
def _torch_int_mm():
    """``torch._int_mm`` if PyTorch is loaded (:func:`_torch_loaded`) and multiplies int8 exactly
    here, else None."""
    try:
        torch = _torch_loaded()
        if torch is None:
            return None

        probe_a = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
        probe_b = np.ascontiguousarray(probe_a.T[:, ::-1])
        got = torch._int_mm(torch.from_numpy(probe_a), torch.from_numpy(probe_b)).numpy()
        if not np.array_equal(got, probe_a.astype(np.int64) @ probe_b.astype(np.int64)):
            return None
        return torch._int_mm
    except Exception:
        return None


@njit(cache=True, nogil=True)
def _numba_int_mm(x, wt):
    """``x @ wt`` for int8 ``x`` [M, K] and int16 ``wt`` [K, N] (int8 values) in int32: every
    product |x * w| <= 2^14, and the sums are the caller's int32 accumulators (bounded at prepare)."""
    m, k = x.shape
    n = wt.shape[1]
    out = np.zeros((m, n), np.int32)
    for i in range(m):
        row = out[i]
        for q in range(k):
            a = np.int32(x[i, q])
            if a != 0:
                w = wt[q]
                for j in range(n):
                    row[j] += a * np.int32(w[j])
    return out


@lru_cache(maxsize=None)
def _numba_works() -> bool:
    """The compiled loop exists here and multiplies the probe exactly."""
    try:
        a = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
        b = np.ascontiguousarray(a.T[:, ::-1], dtype=np.int16)
        return bool(np.array_equal(_numba_int_mm(a, b), a.astype(np.int64) @ b.astype(np.int64)))
    except Exception:
        return False


def available_backends() -> tuple[str, ...]:
    """The backends that work here (an import that fails or a probe that differs leaves one out)."""
    return tuple(b for b in BACKENDS if b == "blas-float32" or (b == "torch-int8" and _torch_int_mm() is not None)
                 or (b == "numba-int32" and _numba_works()))


def _canonical(a: np.ndarray) -> np.ndarray:
    """``a`` (2-D int8) with C-order strides ``(cols, 1)`` exactly, writeable. numpy calls an array
    with a size-1 axis contiguous whatever that axis's stride (``w.T`` of an [N, 1] weight has
    strides (1, 1)); oneDNN takes that stride as the leading dimension and reads wrong memory."""
    if a.flags.writeable and a.strides == (a.shape[1] * a.itemsize, a.itemsize):
        return a
    return np.array(a, order="C", copy=True)


# ------------------------------------------------------------------------------ measurement


def time_candidates(factories: dict[str, Callable[[int, int, int], Callable[[], object]]], shapes=None,
                    rounds: int = 3, drop: float = 4.0, anchor: str = "blas-float32") -> dict[str, float | None]:
    """Seconds of each candidate on ``shapes`` (default :data:`SHAPES`): the sum over the shapes of its fastest of ``rounds``
    calls (wall clock, after one untimed call), the candidates interleaved call by call so that a
    shared machine's load drifts hit them alike. ``factories[name](m, k, n)`` sets one up (operands,
    packing: not timed) and returns the call. A candidate whose time on the shapes so far (this one:
    the faster of its first two timed calls) is more than ``drop`` times the fastest one's, in
    wall-clock time and in the CPU time of the calling thread, is dropped (None) — a slow backend
    costs three calls on the shape it was found slow on, not seconds; a call preempted by another
    job on a shared machine (slow in wall clock only) drops nothing, nor does a fixed per-call cost
    on a tiny shape —, as is one whose set-up or call raises;
    ``anchor`` (float32 BLAS, what nothing chosen may be slower than) is never dropped for being slow."""
    total: dict[str, float | None] = {k: 0.0 for k in factories}
    for m, k, n in SHAPES if shapes is None else shapes:
        calls = {}
        for name, make in factories.items():
            if total[name] is not None:
                try:
                    calls[name] = make(m, k, n)
                except Exception:
                    total[name] = None
        best: dict[str, float] = {}
        cpu: dict[str, float] = {}  # the calling thread's CPU time: what a preempted call did not spend
        for r in range(rounds):
            for name, call in calls.items():
                if total[name] is None:
                    continue
                try:
                    if r == 0:
                        call()  # warm-up: caches, lazy compilation, first-touch page faults
                    c0, t0 = time.thread_time(), time.perf_counter()
                    call()
                    dt, dc = time.perf_counter() - t0, time.thread_time() - c0
                except Exception:
                    total[name] = None
                    continue
                best[name] = min(best.get(name, math.inf), dt)
                cpu[name] = min(cpu.get(name, math.inf), dc)
            if r == 1 and best:  # two timed calls each; slow in wall clock and in CPU time: not preempted
                so_far = {name: total[name] + t for name, t in best.items()}  # the shapes up to this one
                fastest = min(so_far.values())
                for name, t in so_far.items():
                    if t > drop * fastest and total[name] + cpu[name] > drop * fastest and name != anchor:
                        total[name] = None
        for name, t in best.items():
            if total[name] is not None:
                total[name] += t
    return total


def operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random raw int8 operands of one measured shape: ``x`` [M, K] in [-128, 127], ``w`` [N, K]
    in [-127, 127] (narrow-range weights, as the kernels'), fixed by ``seed``."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (m, k)).astype(np.int8), rng.integers(-127, 128, (n, k)).astype(np.int8))


def backend_factories(backends=None) -> dict[str, Callable[[int, int, int], Callable[[], object]]]:
    """:func:`time_candidates` factories of :func:`exact_matmul` on each backend (default: the available ones)."""
    def factory(backend):
        def make(m, k, n):
            x, w = operands(m, k, n)
            g = prepare_gemm(w, backend=backend)
            return lambda: exact_matmul(x, g)
        return make

    return {b: factory(b) for b in (backends or available_backends())}


@dataclass(frozen=True)
class GemmMeasurement:
    """What :func:`gemm_backend` chose and why: seconds per backend on :data:`SHAPES` (None: dropped
    as slower than 4x the fastest, or failed), and the cache file (None when not written)."""

    choice: str
    seconds: dict[str, float | None]
    file: str | None
    cached: bool

    def as_dict(self) -> dict:
        return {"choice": self.choice, "seconds": self.seconds, "shapes": [list(s) for s in SHAPES],
                "file": self.file, "cached": self.cached}


def _versions_key() -> str:
    """What the measurement depends on besides the CPU: library versions and thread settings."""
    parts = [f"measurement {_MEASUREMENT}", platform.machine(), " ".join(sorted(cpu_features())), np.__version__]
    try:
        import numba

        parts.append(numba.__version__)
    except ImportError:
        pass
    torch = _torch_loaded()
    try:
        parts += [torch.__version__, str(torch.get_num_threads())] if torch is not None else ["no torch"]
    except Exception:
        parts.append("no torch")
    parts += [f"{k}={os.environ.get(k, '')}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")]
    return "\n".join(parts)


def choose(seconds: dict[str, float | None]) -> str:
    """The fastest measured backend (ties: :data:`BACKENDS` order); float32 BLAS when none was measured."""
    timed = [(t, BACKENDS.index(b) if b in BACKENDS else len(BACKENDS), b) for b, t in seconds.items() if t is not None]
    return min(timed)[2] if timed else "blas-float32"


def _write_json(path, data: dict) -> bool:
    """Write ``data`` to ``path`` atomically (a unique temporary file renamed into place); False if
    the folder is not writable (the measurement then lives in the process only)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".measure-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
        return True
    except OSError:
        return False


def read_json(path) -> dict | None:
    """A cache file's contents, or None (missing, unreadable, not JSON)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@lru_cache(maxsize=1)
def gemm_measurement() -> GemmMeasurement:
    """The measured backends of this host (:func:`time_candidates` on :data:`SHAPES`), read from
    the cache when this host, its libraries and thread settings measured them before."""
    key = hashlib.sha256(_versions_key().encode()).hexdigest()[:20]
    path = cache_dir("gemm") / f"gemm-{key}.json"
    data = read_json(path)
    if data is not None and isinstance(data.get("seconds"), dict) and data.get("shapes") == [list(s) for s in SHAPES]:
        seconds = {b: t for b, t in data["seconds"].items() if b in available_backends()}
        if seconds:
            return GemmMeasurement(choose(seconds), seconds, str(path), True)
    seconds = time_candidates(backend_factories())
    written = _write_json(path, {"shapes": [list(s) for s in SHAPES], "seconds": seconds, "key": _versions_key()})
    return GemmMeasurement(choose(seconds), seconds, str(path) if written else None, False)


def gemm_backend() -> str:
    """The backend :func:`exact_matmul` uses: ``INTQ_GEMM``'s (``torch``, ``blas``, ``numba``) when
    set (raises if that one does not work here), else the fastest measured (:func:`gemm_measurement`)."""
    forced = os.environ.get("INTQ_GEMM", "auto").strip().lower()
    if forced in ("", "auto"):
        return gemm_measurement().choice
    backend = _ENV_NAMES.get(forced, forced)
    if backend not in BACKENDS:
        raise ValueError(f"INTQ_GEMM={forced!r}: choose one of auto, {', '.join(_ENV_NAMES)}")
    if backend not in available_backends():
        raise RuntimeError(f"INTQ_GEMM={forced!r}: the {backend} backend does not work here "
                           f"(available: {', '.join(available_backends())})")
    return backend


# ------------------------------------------------------------------------------ the product


@dataclass(frozen=True, eq=False)
class PreparedGemm:
    """Weights ``w`` [N, K] int8, prepared for one backend: float32 chunks ``[K_c, N]``
    (transposed for ``x @ w_c``), an int8 torch tensor ``[K, N]``, or int16 ``[K, N]`` for numba."""

    chunks: tuple[tuple[int, int, np.ndarray], ...]  # (k0, k1, float32 [k1-k0, N]); empty for torch, numba
    n: int
    k: int
    weight_sums: np.ndarray  # int64 [N]: sum_k w_nk, for the zero-point expansion
    torch_weight: object = None  # torch int8 [K, N] for the torch-int8 backend
    numba_weight: np.ndarray | None = None  # int16 [K, N] for the numba-int32 backend


def prepare_gemm(w: np.ndarray, x_bound: int = _X_BOUND, backend: str | None = None) -> PreparedGemm:
    """Prepare ``w`` ([N, K] integers) for :func:`exact_matmul` on ``backend`` (default
    :func:`gemm_backend`). For the float32 backend the reduction is split into exact chunks (the
    bound is asserted); int8 weights go to torch / numba as they are, other integer weights to
    the float32 backend."""
    w = np.asarray(w)
    assert w.ndim == 2 and np.issubdtype(w.dtype, np.integer)
    n, k = w.shape
    backend = backend or gemm_backend()
    if backend == "torch-int8" and w.dtype == np.int8 and _torch_int_mm() is not None:
        import torch

        wt = torch.from_numpy(_canonical(w.T))  # [K, N] int8
        return PreparedGemm((), n, k, w.astype(np.int64).sum(axis=1), wt)
    if backend == "numba-int32" and w.dtype == np.int8 and _numba_works():
        return PreparedGemm((), n, k, w.astype(np.int64).sum(axis=1), numba_weight=np.ascontiguousarray(w.T, np.int16))
    absw = np.abs(w.astype(np.int64)) * x_bound  # [N, K]: the largest |x * w| per term
    chunks = []
    k0 = 0
    cum = np.cumsum(absw, axis=1)  # [N, K]
    while k0 < k:
        base = cum[:, k0 - 1] if k0 > 0 else np.zeros(n, np.int64)
        within = (cum[:, k0:] - base[:, None]) <= _EXACT  # [N, K - k0], monotone per row
        fits = np.all(within, axis=0)
        k1 = k0 + int(np.argmin(fits)) if not np.all(fits) else k
        if k1 == k0:  # a single term always fits: |x * w| <= 128 * 127 < 2^24
            k1 = k0 + 1
        part = absw[:, k0:k1].sum(axis=1)
        assert int(part.max(initial=0)) <= _EXACT, "exact-GEMM bound violated"
        chunks.append((k0, k1, np.ascontiguousarray(w[:, k0:k1].T, dtype=np.float32)))
        k0 = k1
    return PreparedGemm(tuple(chunks), n, k, w.astype(np.int64).sum(axis=1))


def exact_matmul(x: np.ndarray, g: PreparedGemm) -> np.ndarray:
    """``x @ w.T`` exactly, as int32 [M, N]. ``x``: [M, K] integers with |x| <= 128 (raw int8), or
    float32 already holding such integers (an im2col buffer built in float32)."""
    if g.torch_weight is not None:
        import torch

        xi = _canonical(x if x.dtype == np.int8 else x.astype(np.int8))  # |x| <= 128 holds int8 values
        return _torch_int_mm()(torch.from_numpy(xi), g.torch_weight).numpy()
    if g.numba_weight is not None:
        return _numba_int_mm(np.ascontiguousarray(x, dtype=np.int8), g.numba_weight)
    if x.dtype != np.float32:
        x = x.astype(np.float32)  # exact: |x| <= 128
    out = None
    for k0, k1, wc in g.chunks:
        part = x[:, k0:k1] @ wc if len(g.chunks) > 1 else x @ wc
        if out is None:
            out = part.astype(np.int32)
        else:
            out += part.astype(np.int32)
    return out
