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
(:func:`pair_saturation`'s ``limit``): ``prepare`` keeps those pairs only (none when every weight is within
[-64, 64], onnxruntime's documented safe range), and ``run`` adds their integer correction.

Which operand is the uint8 one (:func:`mlas_uint8_operand`): MLAS computes ``C = A B`` and takes the
U8S8 kernel when ``A`` is uint8 and ``B`` int8. ``A`` is the activations for QLinearConv, QGemm,
QLinearMatMul and MatMulInteger, but the weights for ConvInteger (its im2col matrix is ``B``, in
NCHW order: channels, then kernel rows and columns). Models imported from ONNX record their operand
types (the node attribute ``onnx_operand_types``: activation, weights); U8U8, S8S8 and S8U8 products
sum exactly (S8U8 widens; measured on ConvInteger with int8 weights). With the weights as the uint8
side, a pair saturates only when ``128 (u_a + u_b) > 32767``: the same correction with the roles
swapped (``pair_saturation(u, other_max=128)``, rows read without offset).

Measured under QEMU 7.2 user mode with ``-cpu Haswell`` (AVX2, no AVX-512, no VNNI), where
onnxruntime's CPUID dispatch takes this kernel (tools/record_ort_u8s8.py, fixtures in
tests/fixtures/ort_u8s8_avx2/): on this machine's CPU (AVX512-VNNI) onnxruntime sums exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INT16_MAX = 32767
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


def mlas_uint8_operand(ctx) -> str | None:
    """For the ``ort_u8s8_avx2`` family: which operand of the node's integer matrix product MLAS's
    int16-saturating U8S8 kernel reads as its uint8 side — ``"activations"`` (QLinearConv, QGemm,
    QLinearMatMul, MatMulInteger on uint8 activations and int8 weights: intq's own uint8 exports),
    ``"weights"`` (ConvInteger on uint8 weights and int8 activations) — or None (U8U8, S8S8, S8U8:
    exact sums).

    The activations are uint8 on this target (its codes are onnxruntime's uint8 ones: a uint8 model,
    or an int8 QDQ model that onnxruntime's optimizer rewrote to uint8 on a CPU without VNNI), except
    for MatMulInteger and ConvInteger, which no rewrite touches: there the imported model's types
    rule (the node attribute ``onnx_operand_types``: activation, weights). Constant weights keep the
    type they were stored with (int8 unless an imported model stored them as uint8); BATCH_MATMUL's
    second operand is an activation's type, unless it is an imported model's constant (intq's
    export writes a constant operand in the activations' type)."""
    stored = ctx.attr("onnx_operand_types")
    x = "uint8" if ctx.target.activation_offset else "int8"
    w = stored[1] if stored else "int8"
    if ctx.op in ("MATMUL_INTEGER", "CONV_INTEGER") and stored:
        x = stored[0]
    elif ctx.op == "BATCH_MATMUL" and not (stored and ctx.input(1).is_constant):
        w = x
    if ctx.op == "CONV_INTEGER":  # onnxruntime passes the weights as MLAS's A
        return "weights" if (w, x) == ("uint8", "int8") else None
    return "activations" if (x, w) == ("uint8", "int8") else None


def mlas_weight_rows(op: str, w_shape: tuple, c_in: int) -> np.ndarray | None:
    """Where MLAS's U8S8 GEMM reads each weight: int64 [N, K] flat indices into the weights as intq
    stores them (``w.reshape(-1)[rows]`` is the [N, K] matrix :func:`pair_saturation` takes, K in
    MLAS's order, one row per output channel), or None where onnxruntime runs its exact depthwise
    kernel (one input and one output channel per group). ``c_in``: the input channels.

    CONV_2D ``[C_out, KH, KW, C_g]``: per group the taps, then the group's channels (the rows as
    stored); FULLY_CONNECTED ``[N, K]``: as stored; DEPTHWISE_CONV_2D ``[1, KH, KW, C_out]`` with a
    depth multiplier > 1: per output channel its taps; TRANSPOSE_CONV ``[C_out, KH, KW, C_in]`` as
    intq's export writes it: the kernel flipped in both spatial axes, taps then channels."""
    size = int(np.prod(w_shape))
    flat = np.arange(size, dtype=np.int64).reshape(w_shape)
    if op == "FULLY_CONNECTED":
        return flat.reshape(w_shape[0], -1)
    if op == "CONV_2D":
        c_out, c_g = w_shape[0], w_shape[3]
        if c_g == 1 and c_out == c_in // c_g:
            return None
        return flat.reshape(c_out, -1)
    if op == "DEPTHWISE_CONV_2D":
        _, kh, kw, c_out = w_shape
        if c_out == c_in:
            return None
        return np.ascontiguousarray(flat.reshape(kh * kw, c_out).T)
    if op == "TRANSPOSE_CONV":
        c_out = w_shape[0]
        if c_in == 1 and c_out == 1:
            return None
        return np.ascontiguousarray(flat[:, ::-1, ::-1, :]).reshape(c_out, -1)
    raise ValueError(f"MLAS's weight order is modelled for CONV_2D, FULLY_CONNECTED, DEPTHWISE_CONV_2D and "
                     f"TRANSPOSE_CONV, not {op}")


def pair_saturation(w: np.ndarray, columns: np.ndarray | None = None, other_max: int = 255) -> PairSaturation:
    """The pairs ``(2j, 2j+1)`` of ``w`` ([N, K] integers, K in MLAS's order) that can saturate when
    the other operand's magnitude is at most ``other_max`` (255: uint8 activations against int8
    weights; 128: int8 activations against uint8 weights passed as their values 0..255).
    ``columns`` ([N, K] int64, default ``k``): the column of intq's activation rows each weight
    multiplies (a grouped convolution's channel reads its group's columns only)."""
    n, k = w.shape
    if columns is None:
        columns = np.broadcast_to(np.arange(k, dtype=np.int64), (n, k))
    kp = k + (k & 1)  # MLAS pads K with zeros (to a multiple of 4; a pair of zeros never saturates)
    wp = np.zeros((n, kp), np.int32)
    wp[:, :k] = w
    a, b = wp[:, 0::2], wp[:, 1::2]
    limit = INT16_MAX // other_max + 1  # other_max (|a| + |b|) > 32767 from here: 129 for 255, 256 for 128
    ch, j = np.nonzero(np.abs(a) + np.abs(b) >= limit)  # row-major: sorted by channel
    first = columns[ch, 2 * j]
    second = columns[ch, np.minimum(2 * j + 1, k - 1)]  # a padded partner has weight 0: any column reads fine
    channels, starts = np.unique(ch, return_index=True)
    return PairSaturation(first.astype(np.int64), second.astype(np.int64), a[ch, j].astype(np.int32),
                          b[ch, j].astype(np.int32), starts.astype(np.int64), channels.astype(np.int64), n)


def saturation_correction(p: PairSaturation, rows: np.ndarray, offset: int) -> np.ndarray | None:
    """``sum over pairs (sat16(s) - s)``, ``s = u_a w_a + u_b w_b`` with ``u = rows + offset``, as
    int32 [M, N]; ``None`` when no pair can saturate. ``rows``: [M, K] int8 codes (intq's),
    ``offset``: 128 when the rows are the uint8 side (what onnxruntime's uint8 codes add to intq's),
    0 when they are the int8 side (the weights then hold the uint8 values)."""
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
