"""onnxruntime's x86 AVX2 uint8 x int8 GEMM without VNNI (target ``ort-u8s8-avx2``): the int16 pair
saturation its variants (:mod:`intq.kernels.ort.u8s8`, family ``ort_u8s8_avx2``) add.

On an x86-64 CPU with AVX2 but without AVX-VNNI / AVX512-VNNI, MLAS's U8S8 GEMM kernel
(``MlasGemmU8S8KernelAvx2``, used by ``QLinearConv``, ``QGemm`` and ``MatMulInteger`` with uint8
activations and int8 weights) multiplies with ``vpmaddubsw``: each pair of adjacent products along
K, ``u[2j] w[2j] + u[2j+1] w[2j+1]`` (``u`` the uint8 activation codes, ``w`` the int8 weights as
stored), is summed with **int16 saturation**, then widened to int32 by ``vpmaddwd`` with ones and
accumulated exactly. MLAS packs K in groups of 4 (zero padded), so the pairs are ``(2j, 2j+1)`` of
the row of K it multiplies: for ``QGemm`` the input features, for ``QLinearConv`` the im2col row in
intq's order (kernel rows, kernel columns, then channels: NHWC, as onnxruntime's ``QLinearConv``
runs it; TRANSPOSE_CONV as intq writes it: the stride-1 convolution of the zero-stuffed input
with the flipped kernel; one input and one output channel per group runs MLAS's depthwise kernel,
exact). The activation zero point enters afterwards, exactly (``- Z_x sum_k w_k`` folded into the
bias), so the accumulator is intq's exact one plus, per pair, ``sat16(p) - p`` with
``sat16(p) = clamp(p, -32768, 32767)``.

A pair can saturate only when ``255 (|w_a| + |w_b|) > 32767``, i.e. ``|w_a| + |w_b| >= 129``
(:data:`PAIR_LIMIT`): ``prepare`` keeps those pairs only (none when every weight is within
[-64, 64], onnxruntime's documented safe range), and ``run`` adds their integer correction.

Measured under QEMU 7.2 user mode with ``-cpu Haswell`` (AVX2, no AVX-512, no VNNI), where
onnxruntime's CPUID dispatch takes this kernel (tools/record_ort_u8s8.py, fixtures in
tests/fixtures/ort_u8s8_avx2/): on this machine's CPU (AVX512-VNNI) onnxruntime sums exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``|w_a| + |w_b|`` from which ``255 (|w_a| + |w_b|)`` may leave int16 (255 * 129 = 32895 > 32767;
#: 255 * 128 = 32640 fits).
PAIR_LIMIT = 129
#: Rows of the activation matrix handled at once (bounds the [rows, pairs] int32 temporaries).
_CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True, eq=False)
class PairSaturation:
    """The weight pairs that can saturate, sorted by output channel.

    ``first`` / ``second``: int64 [P] K indices of the pair's products (``second`` is ``k`` when the
    pair's partner is MLAS's zero padding: its weight is then 0); ``w_first`` / ``w_second``: int32
    [P] their weights; ``starts``: int64 [C] start of each channel's run in the P pairs and
    ``channels``: int64 [C] those channels (only channels with at least one pair)."""

    first: np.ndarray
    second: np.ndarray
    w_first: np.ndarray
    w_second: np.ndarray
    starts: np.ndarray
    channels: np.ndarray
    n: int  # output channels


def pair_saturation(w: np.ndarray, columns: np.ndarray | None = None) -> PairSaturation:
    """The pairs ``(2j, 2j+1)`` of ``w`` ([N, K] int8, K in MLAS's order) that can saturate.
    ``columns`` ([N, K] int64, default ``k``): the column of intq's activation rows each weight
    multiplies (a grouped convolution's channel reads its group's columns only)."""
    n, k = w.shape
    if columns is None:
        columns = np.broadcast_to(np.arange(k, dtype=np.int64), (n, k))
    kp = k + (k & 1)  # MLAS pads K with zeros (to a multiple of 4; a pair of zeros never saturates)
    wp = np.zeros((n, kp), np.int32)
    wp[:, :k] = w
    a, b = wp[:, 0::2], wp[:, 1::2]
    ch, j = np.nonzero(np.abs(a) + np.abs(b) >= PAIR_LIMIT)  # row-major: sorted by channel
    first = columns[ch, 2 * j]
    second = columns[ch, np.minimum(2 * j + 1, k - 1)]  # a padded partner has weight 0: any column reads fine
    channels, starts = np.unique(ch, return_index=True)
    return PairSaturation(first.astype(np.int64), second.astype(np.int64), a[ch, j].astype(np.int32),
                          b[ch, j].astype(np.int32), starts.astype(np.int64), channels.astype(np.int64), n)


def saturation_correction(p: PairSaturation, rows: np.ndarray, offset: int) -> np.ndarray | None:
    """``sum over pairs (sat16(s) - s)``, ``s = u_a w_a + u_b w_b`` with ``u = rows + offset`` (the
    uint8 codes), as int32 [M, N]; ``None`` when no pair can saturate. ``rows``: [M, K] int8 codes
    (intq's), ``offset``: 128 (what onnxruntime's uint8 codes add to intq's)."""
    if p.first.size == 0:
        return None
    m = rows.shape[0]
    out = np.zeros((m, p.n), np.int32)
    step = max(1, _CHUNK_ELEMENTS // p.first.size)
    for r0 in range(0, m, step):
        block = rows[r0:r0 + step]
        s = (block[:, p.first].astype(np.int32) + offset) * p.w_first
        s += (block[:, p.second].astype(np.int32) + offset) * p.w_second
        d = np.clip(s, -32768, 32767) - s  # |d| < 2^16 per pair; K/2 pairs: no int32 overflow
        out[r0:r0 + step, p.channels] = np.add.reduceat(d, p.starts, axis=1)
    return out
