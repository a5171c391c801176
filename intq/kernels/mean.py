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

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md).

**16x8** (int16 activations, int8 weights): the mean of an int16 tensor over constant axes,
requantized to the output's scale.

Formula (``reference_ops::QuantizedMeanOrSum<int16_t, int32_t>``, ``compute_sum = false``, run by
LiteRT 2.3's ``BUILTIN_REF`` MEAN and by TFLM's ``EvalMeanHelper`` for int16 — measured to agree,
as for int8)::

    acc = sum over the reduced axes of x                    (int32)
    y   = clamp(MBQM(acc, m', shift'), -32768, 32767)

with ``(m', shift')`` the Q0.31 pair of ``double(s_in) / double(s_out)`` with ``1/N`` folded in by
integer division (``k = min(floor(log2 N), 32, 31 + shift)``, ``m' = (m << k) // N``,
``shift' = shift - k``): :func:`intq.kernels._pool_common.quantized_sum`, shared with the int8
MEAN and SUM. Zero points are 0. Contract: ``32768 * N`` (shifted left by a positive ``shift'``)
must fit int32 (the runtimes' accumulator).
"""

from __future__ import annotations


import numpy as np
from numba import njit

from intq.errors import ContractError
from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum, quantized_sum
from intq.kernels.base import INT16, KernelContext, kernel
from intq.qmath import multiply_by_quantized_multiplier
from intq.qmath.compiled import mbqm_scalar
from intq.kernels._int16_common import INT16_MAX, INT16_MIN, io_int16, check_16x8
from intq.qmath.raw import mbqm

OP = "MEAN"


@kernel(OP)
def prepare(ctx: KernelContext) -> QuantizedSumParams:
    ctx.check_emulated()
    return prepare_quantized_sum(ctx, mean=True)


def run(p: QuantizedSumParams, x, axis=None):
    if p.axes == (1, 2) and x.ndim == 4 and x.dtype == np.int8:  # the spatial mean of a CNN: one compiled pass
        out = np.empty((x.shape[0], x.shape[3]), np.int8)
        if _spatial_mean(x, p.input_offset, p.multiplier, max(p.shift, 0), max(-p.shift, 0), p.zero_point, out):
            raise ContractError("multiply_by_quantized_multiplier: x * 2**shift overflows int32 (shift "
                                f"{p.shift}); the multiplier is too large for this input range")
        return (out.reshape(p.out_shape),)
    acc = x.sum(axis=p.axes, keepdims=p.keep_dims, dtype=np.int64) - p.input_offset  # |.| <= 255 N < 2^31
    y = np.asarray(multiply_by_quantized_multiplier(acc, p.multiplier, p.shift)).astype(np.int64) + p.zero_point
    return (np.clip(y, -128, 127).astype(np.int8).reshape(p.out_shape),)


@njit(cache=True, nogil=True)
def _spatial_mean(x, input_offset, multiplier, left, right, zero_point, out):
    """``out[n, c] = clamp(MBQM(sum_{h,w} x[n,h,w,c] - Z_in * count) + Z_out, -128, 127)`` for an int8
    NHWC ``x``: the reference path above for axes (1, 2), with the double rounding of
    :func:`intq.qmath.compiled.mbqm_scalar`. Returns True where ``acc << left`` leaves int32 (the
    checked :func:`intq.qmath.multiply_by_quantized_multiplier` refuses it; the caller raises)."""
    batch, height, width, channels = x.shape
    acc = np.empty(channels, np.int64)
    overflow = False
    for n in range(batch):
        acc[:] = -input_offset
        for i in range(height):
            for j in range(width):
                for c in range(channels):
                    acc[c] += x[n, i, j, c]
        for c in range(channels):
            v = acc[c]  # |v| <= 255 * count < 2^31 (prepare)
            if left > 0 and ((v << left) > 2147483647 or (v << left) < -2147483648):
                overflow = True
            y = mbqm_scalar(v, multiplier, left, right, 1) + zero_point
            out[n, c] = -128 if y < -128 else (127 if y > 127 else y)
    return overflow


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> QuantizedSumParams:
    check_16x8(ctx)
    return quantized_sum(ctx, *io_int16(ctx), mean=True, max_diff=1 << 15)  # |q| <= 2^15, Z_in = 0


def run_int16(p: QuantizedSumParams, x, axis=None):
    acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # |acc| <= 2^15 N < 2^31; Z = 0
    y = np.clip(mbqm(acc, p.multiplier, p.shift), INT16_MIN, INT16_MAX)
    return (y.astype(np.int16).reshape(p.out_shape),)
