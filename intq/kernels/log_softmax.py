"""LOG_SOFTMAX: ``y_i = s_in * (x_i - max x) - log(sum_j exp(s_in * (x_j - max x)))`` over the last axis.

Contract (spec 003): input int8 per tensor, any rank >= 1 (last axis); output int8 per tensor
with ``(16/256, 127)`` exactly, same shape (both runtimes require exactly these); beta is 1.
``s_in * 2^26 > 1``.

Both targets (``tflite``: TFLM ``log_softmax.cc`` + ``reference_ops::LogSoftmax`` ->
LogSoftmaxQuantized; ``litert-ref``: LiteRT ``activations.cc`` LogSoftmaxPrepare<kReference> +
``reference_integer_ops::LogSoftmax``) compute the same function:

* prepare (PreprocessLogSoftmaxScalingExp, 5 integer bits): ``s_in * 2^26`` as a Q0.31
  ``(multiplier, left_shift)``; the reverse scaling ``2^(31 - left_shift) / multiplier`` as a
  Q0.31 pair with a right shift; ``diff_min = -CalculateInputRadius(5, left_shift)``.
* per row: ``d = x - max``; for ``d >= diff_min`` the scaled difference
  ``MultiplyByQuantizedMultiplier(d, multiplier, left_shift)`` (Q5.26) and its
  ``exp_on_negative_values`` summed after ``Rescale<12>`` (Q12.19, int32); ``log`` of the sum by
  ``log_x_for_x_greater_than_or_equal_to_1<5>`` (Q5.26); ``adjusted_diff_min = max(diff_min - 1,
  MultiplyByQuantizedMultiplier(log + INT32_MIN, reverse multiplier, reverse shift))``; each
  output is ``clamp(RoundingDivideByPOT(scaled d - log, 22) + 127)`` where ``d >
  adjusted_diff_min``, else -128.

``prepare`` tabulates the scaled difference and the exp summand for d = 0..255 in integers;
``run`` sums, takes the fixed-point log per row and finishes per element. Integer-only.

``litert-opt`` and ``xnnpack`` (XNNPACK takes no int8 LOG_SOFTMAX): LiteRT's
LogSoftmaxPrepare<kGenericOptimized> builds the float32 table of its optimized SOFTMAX
(:func:`intq.kernels._fixedpoint_lut.optimized_softmax_table`, beta 1) and
``optimized_ops::LogSoftmax<int8_t>`` computes, per row, in float32 (no fused multiply-add)::

    sum  = t[d_0] + t[d_1] + ...                 (in order, one rounding per addition)
    pre  = (s_in * max + logf(sum)) / s_out
    y    = clamp(rint(s_in / s_out * x - pre) + 127)   (rint: half to even)

(:class:`OptimizedLogSoftmaxParams`, the float emulation :func:`_float32_log_softmax`). Measured:
20 of 31,453 random models differ from the fixed-point kernel, and LiteRT's optimized kernel
equals this formula on all 20 (with a fused multiply-add it would not on 2 of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.qmath import raw
from intq.kernels.base import KernelContext, kernel

OP = "LOG_SOFTMAX"

_ACCUMULATION_INTEGER_BITS = 12  # the sum of exps is Q12.19
_OUTPUT_INTEGER_BITS = 4  # the output range is [-16, 0]: 1/16 per step
_OUTPUT_SHIFT = 31 - fp.SCALED_DIFF_INTEGER_BITS - _OUTPUT_INTEGER_BITS  # Q5.26 -> multiples of 1/16
_OUTPUT_ZERO_POINT = 127


@dataclass(frozen=True)
class LogSoftmaxParams:
    depth: int  # length of the last axis
    diff_min: int  # <= 0
    scaled_q5: np.ndarray  # int64 [256]: the scaled difference -d in Q5.26, for d = max - x (d <= radius)
    exp_q12: np.ndarray  # int64 [256]: Rescale<12>(exp(scaled)), 0 where d > radius
    reverse_multiplier: int
    reverse_shift: int  # <= 0 (a right shift)


@dataclass(frozen=True, eq=False)
class OptimizedLogSoftmaxParams:
    """LiteRT's optimized int8 LOG_SOFTMAX (``litert-opt``, ``xnnpack``; module docstring)."""

    depth: int  # length of the last axis
    table: np.ndarray  # float32 [256]: expf(-s_in * d), d = max - x
    input_scale: np.float32
    output_scale: np.float32


@kernel(OP)
def prepare(ctx: KernelContext) -> LogSoftmaxParams | OptimizedLogSoftmaxParams:
    in_qp, out_qp = fp.check_int8_io(ctx)
    fp.check_output_params(ctx, out_qp, 16.0 / 256.0, _OUTPUT_ZERO_POINT, "16/256")
    if ctx.target.optimized:  # XNNPACK takes no int8 LOG_SOFTMAX: LiteRT's optimized kernel under both
        return OptimizedLogSoftmaxParams(int(ctx.outputs[0].shape[-1]), fp.optimized_softmax_table(in_qp.tensor_scale, 1.0),
                                         np.float32(in_qp.tensor_scale), np.float32(out_qp.tensor_scale))
    fp.runtime_for(ctx)  # TFLM and LiteRT BUILTIN_REF compute the same function
    scaling = fp.softmax_scaling(ctx, 1.0, in_qp.tensor_scale)
    reverse_multiplier, reverse_shift = fp.log_softmax_reverse_scaling(ctx, scaling)
    d = np.arange(256, dtype=np.int64)
    used = d <= -scaling.diff_min
    scaled_q5 = raw.mbqm(np.where(used, -d, 0), scaling.multiplier, scaling.left_shift)
    exp_q12 = np.where(used, fp.rescale(fp.exp_on_negative_values(scaled_q5, fp.SCALED_DIFF_INTEGER_BITS), 0,
                                        _ACCUMULATION_INTEGER_BITS), 0)
    for t in (scaled_q5, exp_q12):
        t.setflags(write=False)
    return LogSoftmaxParams(int(ctx.outputs[0].shape[-1]), scaling.diff_min, scaled_q5, exp_q12,
                            reverse_multiplier, reverse_shift)


def run(p: LogSoftmaxParams | OptimizedLogSoftmaxParams, x):
    if isinstance(p, OptimizedLogSoftmaxParams):
        return (_float32_log_softmax(p, x),)
    rows = x.reshape(-1, p.depth)
    d = rows.max(axis=1, keepdims=True).astype(np.int16) - rows  # max - x in [0, 255]
    sums = raw.wrap32(p.exp_q12[d].sum(axis=1))  # int32 accumulation, as C
    log_sum = fp.log_x_for_x_greater_than_or_equal_to_1(sums, _ACCUMULATION_INTEGER_BITS, fp.SCALED_DIFF_INTEGER_BITS)
    shifted = raw.wrap32(log_sum + raw.INT32_MIN)  # smallest Q5.26 plus log(sum)
    adjusted_diff_min = np.maximum(
        p.diff_min - 1, raw.mbqm(shifted, p.reverse_multiplier, p.reverse_shift))
    y = raw.rdbp(raw.wrap32(p.scaled_q5[d] - log_sum[:, None]), _OUTPUT_SHIFT) + _OUTPUT_ZERO_POINT
    y = np.where(-d > adjusted_diff_min[:, None], np.clip(y, -128, 127), -128)
    return (y.astype(np.int8).reshape(x.shape),)


def _float32_log_softmax(p: OptimizedLogSoftmaxParams, x: np.ndarray) -> np.ndarray:
    """LiteRT's ``optimized_ops::LogSoftmax<int8_t>`` (``litert-opt``, ``xnnpack``; a float
    emulation: LiteRT computes it in float32): ``clamp(rint(s_in / s_out * x - (s_in * max +
    logf(sum_row t[d])) / s_out) + 127)``, each operation rounded to float32."""
    rows = x.reshape(-1, p.depth)
    peak = rows.max(axis=1, keepdims=True)
    log_sum = fp.c_float32_function("logf", fp.float32_row_sums(p.table[peak.astype(np.int16) - rows]))
    scale = p.input_scale / p.output_scale
    pre = (p.input_scale * peak[:, 0].astype(np.float32) + log_sum) / p.output_scale
    log_prob = scale * rows.astype(np.float32) - pre[:, None]  # two float32 roundings (no FMA: measured)
    y = np.rint(log_prob).astype(np.int32) + _OUTPUT_ZERO_POINT
    return np.clip(y, -128, 127).astype(np.int8).reshape(x.shape)
