"""Exact int8 x int8 -> int32 matrix products on float32 BLAS (DESIGN.md decision 6).

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

Backends. Both compute the same exact int32 products; which one runs is a speed choice only:

* ``torch-int8`` (used when PyTorch is installed): ``torch._int_mm``, PyTorch's CPU int8 x int8
  -> int32 matrix product (oneDNN; VNNI/AMX instructions where the CPU has them) — integer
  arithmetic, exact by definition, 5-10x faster than float32 BLAS on this machine.
* ``blas-float32``: the chunked float32 BLAS product above, with numpy alone.

``INTQ_GEMM=blas`` (or ``torch``) in the environment forces a backend; the default ``auto`` takes
torch when it imports and passes an exactness probe. tests/kernels/test_gemm.py checks both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

_EXACT = 2**24  # largest magnitude below which every float32 integer sum is exact
_X_BOUND = 128  # |raw int8| <= 128


@lru_cache(maxsize=None)
def _torch_int_mm():
    """``torch._int_mm`` if PyTorch is installed and it multiplies int8 exactly here, else None."""
    choice = os.environ.get("INTQ_GEMM", "auto").lower()
    if choice == "blas":
        return None
    try:
        import torch

        probe_a = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
        probe_b = np.ascontiguousarray(probe_a.T[:, ::-1])
        got = torch._int_mm(torch.from_numpy(probe_a), torch.from_numpy(probe_b)).numpy()
        if not np.array_equal(got, probe_a.astype(np.int64) @ probe_b.astype(np.int64)):
            raise RuntimeError("torch._int_mm is not exact here")
        return torch._int_mm
    except Exception:
        if choice == "torch":
            raise
        return None


def _canonical(a: np.ndarray) -> np.ndarray:
    """``a`` (2-D int8) with C-order strides ``(cols, 1)`` exactly, writeable. numpy calls an array
    with a size-1 axis contiguous whatever that axis's stride (``w.T`` of an [N, 1] weight has
    strides (1, 1)); oneDNN takes that stride as the leading dimension and reads wrong memory."""
    if a.flags.writeable and a.strides == (a.shape[1] * a.itemsize, a.itemsize):
        return a
    return np.array(a, order="C", copy=True)


def gemm_backend() -> str:
    """The backend exact_matmul uses: ``"torch-int8"`` or ``"blas-float32"``."""
    return "torch-int8" if _torch_int_mm() is not None else "blas-float32"


@dataclass(frozen=True, eq=False)
class PreparedGemm:
    """Weights ``w`` [N, K] int8, prepared for one backend: float32 chunks ``[K_c, N]``
    (transposed for ``x @ w_c``), or an int8 torch tensor ``[K, N]``."""

    chunks: tuple[tuple[int, int, np.ndarray], ...]  # (k0, k1, float32 [k1-k0, N]); empty for torch
    n: int
    k: int
    weight_sums: np.ndarray  # int64 [N]: sum_k w_nk, for the zero-point expansion
    torch_weight: object = None  # torch int8 [K, N] for the torch-int8 backend


def prepare_gemm(w: np.ndarray, x_bound: int = _X_BOUND, backend: str | None = None) -> PreparedGemm:
    """Prepare ``w`` ([N, K] integers) for :func:`exact_matmul`. For the float32 backend the
    reduction is split into exact chunks (the bound is asserted); int8 weights go to torch as is."""
    w = np.asarray(w)
    assert w.ndim == 2 and np.issubdtype(w.dtype, np.integer)
    n, k = w.shape
    backend = backend or gemm_backend()
    if backend == "torch-int8" and w.dtype == np.int8 and _torch_int_mm() is not None:
        import torch

        wt = torch.from_numpy(_canonical(w.T))  # [K, N] int8
        return PreparedGemm((), n, k, w.astype(np.int64).sum(axis=1), wt)
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
