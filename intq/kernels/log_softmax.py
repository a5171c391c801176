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

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md).
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
OUTPUT_ZERO_POINT = 127


@dataclass(frozen=True)
class LogSoftmaxParams:
    depth: int  # length of the last axis
    diff_min: int  # <= 0
    scaled_q5: np.ndarray  # int64 [256]: the scaled difference -d in Q5.26, for d = max - x (d <= radius)
    exp_q12: np.ndarray  # int64 [256]: Rescale<12>(exp(scaled)), 0 where d > radius
    reverse_multiplier: int
    reverse_shift: int  # <= 0 (a right shift)


def check_io(ctx: KernelContext):
    """One int8 input and output of the same static shape, the output ``(16/256, 127)`` (spec 003)."""
    in_qp, out_qp = fp.check_int8_io(ctx)
    fp.check_output_params(ctx, out_qp, 16.0 / 256.0, OUTPUT_ZERO_POINT, "16/256")
    return in_qp, out_qp


@kernel(OP)
def prepare(ctx: KernelContext) -> LogSoftmaxParams:
    in_qp, out_qp = check_io(ctx)
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


def run(p: LogSoftmaxParams, x):
    rows = x.reshape(-1, p.depth)
    d = rows.max(axis=1, keepdims=True).astype(np.int16) - rows  # max - x in [0, 255]
    sums = raw.wrap32(p.exp_q12[d].sum(axis=1))  # int32 accumulation, as C
    log_sum = fp.log_x_for_x_greater_than_or_equal_to_1(sums, _ACCUMULATION_INTEGER_BITS, fp.SCALED_DIFF_INTEGER_BITS)
    shifted = raw.wrap32(log_sum + raw.INT32_MIN)  # smallest Q5.26 plus log(sum)
    adjusted_diff_min = np.maximum(
        p.diff_min - 1, raw.mbqm(shifted, p.reverse_multiplier, p.reverse_shift))
    y = raw.rdbp(raw.wrap32(p.scaled_q5[d] - log_sum[:, None]), _OUTPUT_SHIFT) + OUTPUT_ZERO_POINT
    y = np.where(-d > adjusted_diff_min[:, None], np.clip(y, -128, 127), -128)
    return (y.astype(np.int8).reshape(x.shape),)


