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

``litert-opt`` (measured on 200 random and tie-heavy models, explained from
``optimized_ops::QuantizedMeanOrSum`` with ``compute_sum``): float32 throughout, on the raw sum::

    r = float32(s_in / s_out);   b = float32(float32(-Z_in * r) * float32(N))
    y = clamp(round_half_away(float32(float32(sum q_in) * r) + b) + Z_out)

(``_float32_sum``, a float emulation: LiteRT computes it so). ``xnnpack``: XNNPACK takes every int8
SUM and computes its MEAN without ``1/N`` (:mod:`intq.kernels.mean`): ``clamp(nearbyint(
float32(sum q_in) * r + Y_z))``, ``Y_z = float32(Z_out - float32(N Z_in) * r)``, over any axes.

Contract: int8 per-tensor input (rank >= 1) and output; input 1 a constant int32 axis tensor;
``keep_dims`` as MEAN. The sum must stay in int32 after the multiplier's left shift (checked at
prepare).
"""

from __future__ import annotations

import numpy as np

from dataclasses import dataclass

from intq.kernels import _ort
from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext, kernel
from intq.kernels.mean import XnnpackMeanParams, _float32_mean, xnnpack_reduce
from intq.kernels.targets import Runtime
from intq.qmath import multiply_by_quantized_multiplier

OP = "SUM"

_LITERT_UINT8_BYTES = frozenset({Runtime.LITERT})  # LiteRT issue #4079: int8 read as uint8


@dataclass(frozen=True)
class OptimizedSumParams:
    """LiteRT's optimized float32 SUM (module docstring)."""

    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]
    ratio: np.float32  # float32(s_in / s_out)
    bias: np.float32  # float32(float32(-Z_in * ratio) * float32(N))
    zero_point: int


@kernel(OP)
def prepare(ctx: KernelContext) -> QuantizedSumParams | OptimizedSumParams | XnnpackMeanParams:
    ctx.check_emulated()
    if _ort.is_ort(ctx):  # QLinearGlobalAveragePool with the output scale s_y / N (intq.kernels._ort)
        return _ort.prepare_global_average_pool(ctx, total=True)
    if not ctx.target.optimized:
        return prepare_quantized_sum(ctx, mean=False, bytes_as_uint8=ctx.target.runtime in _LITERT_UINT8_BYTES)
    p = prepare_quantized_sum(ctx, mean=False)
    if ctx.target.xnnpack:
        return xnnpack_reduce(ctx, p, mean=False)
    if p.count * 255 >= 2**24:
        raise ctx.error(f"target {ctx.target.name!r}: a sum of {p.count} elements may not be exact in float32")
    in_qp, out_qp = ctx.input(0).qparams, ctx.outputs[0].qparams
    ratio = np.float32(np.float32(in_qp.tensor_scale) / np.float32(out_qp.tensor_scale))
    zi, zo = in_qp.tensor_zero_point, out_qp.tensor_zero_point
    bias = np.float32(np.float32(np.float32(-zi) * ratio) * np.float32(p.count))
    return OptimizedSumParams(p.axes, p.keep_dims, p.out_shape, ratio, bias, zo)


def run(p: QuantizedSumParams | OptimizedSumParams | XnnpackMeanParams | _ort.OrtGlobalAveragePool | _ort.OrtMeanOfOne,
        x, axis=None):
    if isinstance(p, (_ort.OrtGlobalAveragePool, _ort.OrtMeanOfOne)):
        return (_ort.run_global_average_pool(p, x),)
    if isinstance(p, XnnpackMeanParams):
        acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # raw sum, |.| < 2^24 (prepare)
        return (_float32_mean(acc, p.scale, p.zero_point).reshape(p.out_shape),)
    if isinstance(p, OptimizedSumParams):
        acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # raw sum, |.| < 2^24 (prepare)
        return (_float32_sum(acc, p.ratio, p.bias, p.zero_point).reshape(p.out_shape),)
    values = x.view(np.uint8) if p.bytes_as_uint8 else x
    acc = values.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims) - p.input_offset  # |.| <= 383 N < 2^31
    y = np.asarray(multiply_by_quantized_multiplier(acc, p.multiplier, p.shift)).astype(np.int64) + p.zero_point
    y = y.reshape(p.out_shape)
    if p.bytes_as_uint8:
        return (np.clip(y, 0, 255).astype(np.uint8).view(np.int8),)
    return (np.clip(y, -128, 127).astype(np.int8),)


def _float32_sum(acc: np.ndarray, ratio: np.float32, bias: np.float32, zero_point: int) -> np.ndarray:
    """LiteRT's optimized SUM (``litert-opt``; a float emulation): ``clamp(round_half_away(
    float32(float32(acc) * ratio) + bias) + Z_out)``, each step rounded to float32; ``acc`` is exact."""
    v = (acc.astype(np.float32) * ratio + bias).astype(np.float64)
    r = np.trunc(v + np.copysign(0.5, v))  # roundf; exact in double for a float32 v
    return np.clip(np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int64) + zero_point, -128, 127).astype(np.int8)
