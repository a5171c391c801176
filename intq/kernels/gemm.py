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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EXACT = 2**24  # largest magnitude below which every float32 integer sum is exact
_X_BOUND = 128  # |raw int8| <= 128


@dataclass(frozen=True, eq=False)
class PreparedGemm:
    """Weights ``w`` [N, K] int8 as float32 chunks ``[K_c, N]`` (transposed for ``x @ w_c``)."""

    chunks: tuple[tuple[int, int, np.ndarray], ...]  # (k0, k1, float32 [k1-k0, N])
    n: int
    k: int
    weight_sums: np.ndarray  # int64 [N]: sum_k w_nk, for the zero-point expansion


def prepare_gemm(w: np.ndarray, x_bound: int = _X_BOUND) -> PreparedGemm:
    """Split ``w`` ([N, K] integers) into exact float32 chunks; the bound is asserted."""
    w = np.asarray(w)
    assert w.ndim == 2 and np.issubdtype(w.dtype, np.integer)
    n, k = w.shape
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
