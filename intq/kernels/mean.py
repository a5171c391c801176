"""MEAN: the mean of an int8 tensor over constant axes, requantized to the output's parameters.

Formula (``reference_ops::QuantizedMeanOrSum`` with ``compute_sum=false``, run by LiteRT's
``BUILTIN_REF`` MEAN and by TFLM's ``EvalMeanHelper`` for every int8 input):

    acc = sum over the reduced axes of q_in                      (int32)
    y   = clamp(MBQM(acc - Z_in * N, m', shift') + Z_out, -128, 127)

with ``N`` the number of reduced elements, MBQM TFLite's double-rounding
MultiplyByQuantizedMultiplier and ``(m', shift')`` the Q0.31 pair of ``s_in / s_out`` with
``1/N`` folded in by integer division (:func:`intq.kernels._pool_common.prepare_quantized_sum`).
Note the older special cases are gone from both runtimes: no truncating integer mean when the
scales match, no separate 4-D ``axis=[1, 2]`` kernel — measured, not assumed.

Contract: int8 per-tensor input (rank >= 1) and output; input 1 a constant int32 axis tensor
(negative axes count from the end, duplicates are ignored; an empty axis tensor reduces nothing,
``N = 1``, which follows the sources but cannot be checked against the oracles because intq's
.tflite writer refuses empty constants);
``keep_dims`` keeps reduced dimensions as 1. ``litert-ref`` and ``tflite`` agree.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext
from intq.qmath import multiply_by_quantized_multiplier

OP = "MEAN"


def prepare(ctx: KernelContext) -> QuantizedSumParams:
    ctx.check_emulated()  # litert-opt / xnnpack: measured to differ, not emulated (intq.kernels.targets)
    return prepare_quantized_sum(ctx, mean=True)


def run(p: QuantizedSumParams, x, axis=None):
    acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims) - p.input_offset  # |.| <= 255 N < 2^31
    y = np.asarray(multiply_by_quantized_multiplier(acc, p.multiplier, p.shift)).astype(np.int64) + p.zero_point
    return (np.clip(y, -128, 127).astype(np.int8).reshape(p.out_shape),)
