"""SUM: the sum of an int8 tensor over constant axes, requantized to the output's parameters.

Formula (``reference_ops::QuantizedMeanOrSum`` with ``compute_sum=true``):

    y = clamp(MBQM(sum over the reduced axes of q_in - Z_in * N, m, shift) + Z_out, -128, 127)

with ``N`` the number of reduced elements and ``(m, shift)`` TFLite's Q0.31 pair of
``double(s_in) / double(s_out)`` (:func:`intq.kernels._pool_common.prepare_quantized_sum`),
applied with the double-rounding MultiplyByQuantizedMultiplier. This is what TFLM computes
(``EvalSumHelper`` -> ``QuantizedMeanOrSum<int8_t>``): the ``tflite`` target.

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md).

Contract: int8 per-tensor input (rank >= 1) and output; input 1 a constant int32 axis tensor;
``keep_dims`` as MEAN. The sum must stay in int32 after the multiplier's left shift (checked at
prepare).
"""

from __future__ import annotations

import numpy as np


from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext, kernel
from intq.qmath import multiply_by_quantized_multiplier

OP = "SUM"


@kernel(OP)
def prepare(ctx: KernelContext) -> QuantizedSumParams:
    ctx.check_emulated()
    return prepare_quantized_sum(ctx, mean=False)


def requantized_sums(p: QuantizedSumParams, values: np.ndarray) -> np.ndarray:
    """``MBQM(sum(values) - Z_in N, m, shift) + Z_out`` over the reduced axes, in the output's shape
    (int64, not clamped); ``|sum - Z_in N| <= 383 N < 2^31`` (prepare)."""
    acc = values.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims) - p.input_offset
    y = np.asarray(multiply_by_quantized_multiplier(acc, p.multiplier, p.shift)).astype(np.int64) + p.zero_point
    return y.reshape(p.out_shape)


def run(p: QuantizedSumParams, x, axis=None):
    return (np.clip(requantized_sums(p, x), -128, 127).astype(np.int8),)
