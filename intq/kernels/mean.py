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

``litert-opt`` (measured on LiteRT 2.3 x86_64, explained from reduce.cc and
``optimized_integer_ops::Mean``/``MeanImpl``): a rank-4 MEAN over axes {1, 2} with ``keep_dims``
runs the optimized 4-D kernel, every other int8 MEAN the reference one (above). The 4-D kernel
sums the raw int8 values (no zero point), folds the input zero point into a rounded bias and
``1/N`` into the multiplier, both in float32::

    t    = float32(float32(Z_in * s_in) / s_out)
    bias = Z_out - trunc(t + 0.5 sign(t))                   (float32 add, then truncation)
    M    = float32(s_in / float32(float32(N) * s_out))      -> QuantizeMultiplier
    y    = clamp(R(sum q_in, M) + bias)

where ``R`` rounds both steps half up (NEON ``vqrdmulh`` + ``vrshl``,
:data:`Requant.DOUBLE_HALF_UP`) on the channels ``[0, 16 floor(C/16))`` (16 int8 lanes per step)
and is gemmlowp's double rounding on the last ``C mod 16`` channels.

``xnnpack`` (measured, explained from XNNPACK's ``reduce-nd.c``: the raw int8 values summed in
int32 by its ``rsum`` (innermost axis reduced) or ``rdsum`` (otherwise) microkernels, then the
reference int32 -> qint8 conversion with the input zero point folded into the output's, in float32):
XNNPACK takes every int8 MEAN::

    S_m = float32(float32(s_in / s_out) * float32(1 / N))
    Y_z = float32(float32(Z_out) - float32(float32(N Z_in) * S_m))
    y   = clamp(nearbyint(float32(float32(sum q_in) * S_m) + Y_z))        (half to even)

a float32 emulation (``_float32_mean``), ``xnnpack`` target only. Folding ``N Z_in`` in float, not
into the integer sum, matters: ``rint(float32(sum - N Z_in) * S_m + Z_out)`` differs on about 1
random model in 130,000 (measured on 20 such models per path, rsum and rdsum: LiteRT's XNNPACK
follows this formula on all 40).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.errors import ContractError, IntqError
from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import multiply_by_quantized_multiplier
from intq.qmath.compiled import mbqm_scalar

OP = "MEAN"
VECTOR_CHANNELS = 16  # optimized MeanImpl: one int8x16 register of channels per step


@dataclass(frozen=True, eq=False)
class OptimizedMean4DParams:
    """LiteRT's optimized 4-D MEAN over axes {1, 2} (module docstring)."""

    out_shape: tuple[int, ...]
    vector_channels: int  # channels [0, vector_channels) round half up
    vector: Requantizer  # DOUBLE_HALF_UP, zero point = the folded bias
    tail: Requantizer  # DOUBLE, same


@dataclass(frozen=True, eq=False)
class XnnpackMeanParams:
    """XNNPACK's int8 MEAN over axes that leave the innermost one (module docstring)."""

    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]
    scale: np.float32  # S_m (SUM: float32(s_in / s_out))
    zero_point: np.float32  # Y_z = float32(Z_out) - float32(N Z_in) * S, in float32


@kernel(OP)
def prepare(ctx: KernelContext) -> QuantizedSumParams | OptimizedMean4DParams | XnnpackMeanParams:
    ctx.check_emulated()
    if _ort.is_ort(ctx):  # QLinearGlobalAveragePool (channels last): float32 requantization of the sum
        return _ort.prepare_global_average_pool(ctx)
    p = prepare_quantized_sum(ctx, mean=True)
    if ctx.target.xnnpack:
        return xnnpack_reduce(ctx, p, mean=True)
    if not ctx.target.optimized or len(p.out_shape) != 4 or set(p.axes) != {1, 2} or not p.keep_dims:
        return p
    s_in = np.float32(ctx.input(0).qparams.tensor_scale)
    out_qp = ctx.outputs[0].qparams
    s_out, z_in, z_out = np.float32(out_qp.tensor_scale), ctx.input(0).qparams.tensor_zero_point, out_qp.tensor_zero_point
    t = np.float32(np.float32(np.float32(z_in) * s_in) / s_out)
    t = t + np.float32(0.5) if t > 0 else t - np.float32(0.5)
    bias = z_out - int(np.trunc(t))
    real = float(np.float32(s_in / np.float32(np.float32(p.count) * s_out)))
    channels = p.out_shape[-1]
    try:
        vector = make_requantizer(real, Requant.DOUBLE_HALF_UP, bias, -128, 127)
        tail = make_requantizer(real, Requant.DOUBLE, bias, -128, 127)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    if (p.count * 128) << max(int(vector.shift[0]), 0) > 2**31 - 1:
        raise ctx.error("the optimized 4-D MEAN's multiplier shifts the sum beyond int32")
    return OptimizedMean4DParams(p.out_shape, VECTOR_CHANNELS * (channels // VECTOR_CHANNELS), vector, tail)


def xnnpack_reduce(ctx: KernelContext, p: QuantizedSumParams, mean: bool) -> XnnpackMeanParams:
    """XNNPACK's int8 MEAN (``mean``) or SUM (module docstring): ``S`` and ``Y_z`` in float32. The raw
    sum (``|sum| <= 128 N``) must be exact in float32, as XNNPACK's conversion of it is."""
    if p.count * 128 >= 2**24:
        raise ctx.error(f"target {ctx.target.name!r}: a sum of {p.count} elements may not be exact in float32")
    in_qp, out_qp = ctx.input(0).qparams, ctx.outputs[0].qparams
    scale = np.float32(np.float32(in_qp.tensor_scale) / np.float32(out_qp.tensor_scale))
    if mean:
        scale = np.float32(scale * (np.float32(1) / np.float32(p.count)))
    folded = np.float32(np.float32(p.count) * np.float32(in_qp.tensor_zero_point)) * scale
    zero_point = np.float32(np.float32(out_qp.tensor_zero_point) - np.float32(folded))
    return XnnpackMeanParams(p.axes, p.keep_dims, p.out_shape, scale, zero_point)


def run(p: QuantizedSumParams | OptimizedMean4DParams | XnnpackMeanParams | _ort.OrtGlobalAveragePool | _ort.OrtMeanOfOne,
        x, axis=None):
    if isinstance(p, (_ort.OrtGlobalAveragePool, _ort.OrtMeanOfOne)):
        return (_ort.run_global_average_pool(p, x),)
    if isinstance(p, XnnpackMeanParams):
        acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # raw sum, |.| < 2^24 (prepare)
        return (_float32_mean(acc, p.scale, p.zero_point).reshape(p.out_shape),)
    if isinstance(p, OptimizedMean4DParams):
        acc = x.astype(np.int64).sum(axis=(1, 2), keepdims=True)  # raw int8 sum: |.| <= 128 N < 2^31
        head = requantize(p.vector, acc[..., :p.vector_channels])
        rest = requantize(p.tail, acc[..., p.vector_channels:])
        return (np.concatenate([head, rest], axis=-1).reshape(p.out_shape),)
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


def _float32_mean(acc: np.ndarray, scale: np.float32, zero_point: np.float32) -> np.ndarray:
    """XNNPACK's float32 conversion of a MEAN's or SUM's raw sums (``xnnpack`` target only, a float
    emulation): ``clamp(nearbyint(float32(acc) * S + Y_z))``, each step rounded to float32, ties to
    even. ``acc`` is below 2^24 in magnitude, exact in float32."""
    v = acc.astype(np.float32) * scale + zero_point
    return np.clip(np.rint(v), -128, 127).astype(np.int8)
