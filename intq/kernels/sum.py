"""SUM: the sum of an int8 tensor over constant axes, requantized to the output's parameters.

Formula (``reference_ops::QuantizedMeanOrSum`` with ``compute_sum=true``):

    y = clamp(MBQM(sum over the reduced axes of q_in - Z_in * N, m, shift) + Z_out, -128, 127)

with ``N`` the number of reduced elements and ``(m, shift)`` TFLite's Q0.31 pair of
``double(s_in) / double(s_out)`` (:func:`intq.kernels._pool_common.prepare_quantized_sum`),
applied with the double-rounding MultiplyByQuantizedMultiplier. This is what TFLM computes
(``EvalSumHelper`` -> ``QuantizedMeanOrSum<int8_t>``): the ``tflite`` target.

``litert-ref`` differs. LiteRT 2.3's ``reduce.cc`` ``QuantizedMeanOrSum<T, kReference>`` passes
the tensors to the reference function as ``uint8_t`` whatever ``T`` is (LiteRT issue #4079,
fix proposed in PR #7855, not in the 2.3.0 wheel). For an int8 SUM under ``BUILTIN_REF`` the
same formula therefore runs on the *bytes*: each ``q_in`` is read as ``q_in mod 256`` in
[0, 255], the zero points stay the int8 ones, the result is clamped to [0, 255] and its byte is
stored, so it reads back as ``y - 256`` when ``y >= 128`` (a saturated output reads as -1).
intq reproduces that bit for bit on ``litert-ref`` (measured: tests/kernels/test_pool_reduce.py)
because that target promises LiteRT's numbers; it is a LiteRT defect, not int8 semantics, and
the other LiteRT resolvers and TFLM do not have it. MEAN is not affected (its int8 path passes
the right type).

Contract: int8 per-tensor input (rank >= 1) and output; input 1 a constant int32 axis tensor;
``keep_dims`` as MEAN. The sum must stay in int32 after the multiplier's left shift (checked at
prepare).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext
from intq.qmath import multiply_by_quantized_multiplier
from intq.kernels.targets import Runtime

OP = "SUM"

_LITERT_UINT8_BYTES = frozenset({Runtime.LITERT})  # LiteRT issue #4079: int8 read as uint8


def prepare(ctx: KernelContext) -> QuantizedSumParams:
    ctx.check_emulated()  # litert-opt / xnnpack: measured to differ, not emulated (intq.kernels.targets)
    return prepare_quantized_sum(ctx, mean=False, bytes_as_uint8=ctx.target.runtime in _LITERT_UINT8_BYTES)


def run(p: QuantizedSumParams, x, axis=None):
    values = x.view(np.uint8) if p.bytes_as_uint8 else x
    acc = values.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims) - p.input_offset  # |.| <= 383 N < 2^31
    y = np.asarray(multiply_by_quantized_multiplier(acc, p.multiplier, p.shift)).astype(np.int64) + p.zero_point
    y = y.reshape(p.out_shape)
    if p.bytes_as_uint8:
        return (np.clip(y, 0, 255).astype(np.uint8).view(np.int8),)
    return (np.clip(y, -128, 127).astype(np.int8),)
