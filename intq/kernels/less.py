"""LESS: ``y = a < b`` on both inputs brought to a common scale, numpy broadcasting; bool output.

True where the first input's real value is below the second's.

Shared arithmetic of TFLite's quantized comparisons (reference_ops::ComparisonWithScaling /
BroadcastComparison4DSlowWithScaling; Prepare in tflite/kernels/comparisons.cc
ComparisonQuantized and TFLM comparisons.cc ComparisonsPrepare, which agree): each input is
offset, shifted left by 8 and rescaled by its own scale,
``v_i = MultiplyByQuantizedMultiplierSmallerThanOneExp((x_i - Z_i) << 8, QuantizeMultiplier(s_i))``,
and the int32 results are compared. Inputs on different scales compare by real value, up to
that rounding.

Contract (spec 003): two int8 per-tensor inputs, a bool output. Each input scale must be below
1: TFLM aborts otherwise, and LiteRT's rescale would shift right by a negative amount (undefined
in C). |(x - Z) << 8| < 2^16: no overflow. Run looks both rescaled operands up in tables prepare
computed on all 256 int8 values (the same integers, one gather each).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import ComparisonParams, prepare_comparison, rescaled_operands
from intq.kernels.base import KernelContext

OP = "LESS"


def prepare(ctx: KernelContext) -> ComparisonParams:
    return prepare_comparison(ctx)


def run(p: ComparisonParams, a, b):
    va, vb = rescaled_operands(p, a, b)
    return (np.asarray(va < vb),)  # a 0-d result stays an array
