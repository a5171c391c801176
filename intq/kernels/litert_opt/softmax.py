"""LiteRT's optimized int8 SOFTMAX (``litert-opt``; ``xnnpack`` too: XNNPACK takes float SOFTMAX only):
``activations.cc`` SoftmaxPrepare<kGenericOptimized> builds a float32 table
(``PopulateSoftmaxLookupTable``; the uint16 table of ``TFLITE_SOFTMAX_USE_UINT16_LUT`` is an
aarch64-only build) and ``optimized_ops::Softmax`` computes, per row, in float32::

    t[d]  = expf(float32(-s_in * beta) * d)                 d = max - x in 0..255
    sum   = t[d_0] + t[d_1] + ...                           (in order, one rounding per addition)
    inv   = 1 / (sum * s_out)
    y     = clamp(roundf(t[d] * inv) + Z_out)                (roundf: half away from zero)

(:class:`OptimizedSoftmaxParams`, the float emulation :func:`float32_softmax`). It agrees with the
fixed-point kernel on all but about 1 random model in 4,000 (measured: 30 of 133,089 random models
differ, and LiteRT's optimized kernel equals this formula on all 30; e.g. input scale
0.2359921932220459, zero point 6, logits [-91, 7, 11, 26, 13, -59, -3, 46, 9, -56] give 126 at
index 7 where the reference gives 125). Neither the ``beta * s_in * 2^26 > 1`` check nor the
512 limit exists on this path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.softmax import DEFAULT_BETA, OP, check_io
from intq.qmath import Rounding, round_float


@dataclass(frozen=True, eq=False)
class OptimizedSoftmaxParams:
    """LiteRT's optimized int8 SOFTMAX (``litert-opt``, ``xnnpack``; module docstring)."""

    depth: int  # length of the last axis
    table: np.ndarray  # float32 [256]: expf(float32(-s_in * beta) * d), d = max - x
    output_scale: np.float32
    zero_point: int


def float32_softmax(p: OptimizedSoftmaxParams, x: np.ndarray) -> np.ndarray:
    """LiteRT's ``optimized_ops::Softmax`` on int8 (a float emulation: LiteRT computes it in float32):
    ``clamp(roundf(t[d] * (1 / (sum_row t[d] * s_out))) + Z_out)``."""
    rows = x.reshape(-1, p.depth)
    values = p.table[rows.max(axis=1, keepdims=True).astype(np.int16) - rows]  # float32 [rows, depth]
    inverse = np.float32(1) / (float32_row_sums(values) * p.output_scale)
    scaled = values * inverse[:, None]  # float32
    y = round_float(scaled, Rounding.HALF_AWAY_FROM_ZERO).astype(np.int32) + p.zero_point
    return np.clip(y, -128, 127).astype(np.int8).reshape(x.shape)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OptimizedSoftmaxParams:
    in_qp, out_qp = check_io(ctx)
    beta = ctx.attr("beta", DEFAULT_BETA)
    return OptimizedSoftmaxParams(int(ctx.outputs[0].shape[-1]), optimized_softmax_table(in_qp.tensor_scale, beta),
                                  np.float32(out_qp.tensor_scale), out_qp.tensor_zero_point)


def run(p: OptimizedSoftmaxParams, x, table=None):
    return (float32_softmax(p, x),)


def optimized_softmax_table(input_scale, beta) -> np.ndarray:
    """LiteRT's ``optimized_ops::PopulateSoftmaxLookupTable``, indexed by ``d = max - x`` in 0..255:
    ``expf(float32(-s_in * beta) * float32(d))``, every step in float32 with the C library's ``expf``
    (measured: the optimized SOFTMAX / LOG_SOFTMAX of LiteRT 2.3 on x86_64 equal a run on this
    table). Read-only float32 [256]."""
    scale = np.float32(-np.float32(input_scale) * np.float32(beta))
    table = fp.c_float32_function("expf", (scale * np.arange(256, dtype=np.float32)).astype(np.float32))
    table.setflags(write=False)
    return table


def float32_row_sums(values: np.ndarray) -> np.ndarray:
    """``sum_exp += v`` over each row of a float32 ``[rows, depth]`` array in C's order, one float32
    rounding per addition (``np.sum`` sums pairwise and would differ): the last column of the
    sequential ``cumsum``. A float emulation for LiteRT's optimized SOFTMAX / LOG_SOFTMAX only."""
    return np.cumsum(values, axis=1, dtype=np.float32)[:, -1]
