"""LiteRT's optimized int8 LOG_SOFTMAX (``litert-opt``; ``xnnpack`` too: XNNPACK takes no int8
LOG_SOFTMAX): LiteRT's LogSoftmaxPrepare<kGenericOptimized> builds the float32 table of its optimized SOFTMAX
(:func:`intq.kernels.litert_opt.softmax.optimized_softmax_table`, beta 1) and
``optimized_ops::LogSoftmax<int8_t>`` computes, per row, in float32 (no fused multiply-add)::

    sum  = t[d_0] + t[d_1] + ...                 (in order, one rounding per addition)
    pre  = (s_in * max + logf(sum)) / s_out
    y    = clamp(rint(s_in / s_out * x - pre) + 127)   (rint: half to even)

(:class:`OptimizedLogSoftmaxParams`, the float emulation :func:`float32_log_softmax`). Measured:
20 of 31,453 random models differ from the fixed-point kernel, and LiteRT's optimized kernel
equals this formula on all 20 (with a fused multiply-add it would not on 2 of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.litert_opt.softmax import float32_row_sums, optimized_softmax_table
from intq.kernels.log_softmax import OP, OUTPUT_ZERO_POINT, check_io


@dataclass(frozen=True, eq=False)
class OptimizedLogSoftmaxParams:
    """LiteRT's optimized int8 LOG_SOFTMAX (``litert-opt``, ``xnnpack``; module docstring)."""

    depth: int  # length of the last axis
    table: np.ndarray  # float32 [256]: expf(-s_in * d), d = max - x
    input_scale: np.float32
    output_scale: np.float32


def float32_log_softmax(p: OptimizedLogSoftmaxParams, x: np.ndarray) -> np.ndarray:
    """LiteRT's ``optimized_ops::LogSoftmax<int8_t>`` (a float emulation: LiteRT computes it in
    float32): ``clamp(rint(s_in / s_out * x - (s_in * max +
    logf(sum_row t[d])) / s_out) + 127)``, each operation rounded to float32."""
    rows = x.reshape(-1, p.depth)
    peak = rows.max(axis=1, keepdims=True)
    log_sum = fp.c_float32_function("logf", float32_row_sums(p.table[peak.astype(np.int16) - rows]))
    scale = p.input_scale / p.output_scale
    pre = (p.input_scale * peak[:, 0].astype(np.float32) + log_sum) / p.output_scale
    log_prob = scale * rows.astype(np.float32) - pre[:, None]  # two float32 roundings (no FMA: measured)
    y = np.rint(log_prob).astype(np.int32) + OUTPUT_ZERO_POINT
    return np.clip(y, -128, 127).astype(np.int8).reshape(x.shape)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OptimizedLogSoftmaxParams:
    in_qp, out_qp = check_io(ctx)
    return OptimizedLogSoftmaxParams(int(ctx.outputs[0].shape[-1]), optimized_softmax_table(in_qp.tensor_scale, 1.0),
                                     np.float32(in_qp.tensor_scale), np.float32(out_qp.tensor_scale))


def run(p: OptimizedLogSoftmaxParams, x):
    return (float32_log_softmax(p, x),)
