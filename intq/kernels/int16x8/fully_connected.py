"""FULLY_CONNECTED, 16x8: ``y = clamp(R(sum_k x_k * w_nk + b_n))`` with int16 ``x``, int8 ``w``.

Contract (spec 003, 16x8): input int16 per tensor, zero point 0; weights int8 ``[N, K]``
constant, symmetric, per tensor or per output channel (axis 0); bias int64 ``[N]`` (zero point
0) or omitted; output int16 per tensor, zero point 0. The input is read as rows of ``K``.
No zero point enters the sum (all are 0). The accumulator is int64:
``|acc| <= 2^15 * sum_k |w_nk| + |b_n|``, which must stay below 2^47 (checked at prepare). The
contract checks are the int8 kernel's (:func:`intq.kernels.fully_connected.fc_weights`,
:func:`~intq.kernels.fully_connected.fc_out_shape`).

Requantization — where the runtimes differ (read in their sources, measured with single-op
models in tests/kernels/test_int16x8.py):

* ``tflite`` (TFLM ``fully_connected_common.cc`` + ``reference_integer_ops::FullyConnected`` /
  ``FullyConnectedPerChannel`` with ``int64_t`` bias): ``MultiplyByQuantizedMultiplier(int64 acc,
  m, shift)`` — the multiplier reduced to 16 bits, ``(acc * m16 + 2^(14-shift)) >> (15-shift)``.
  ``M = double(s_in) * double(s_w[n]) / double(s_out)`` per channel and per tensor alike —
  measured: unlike the int8 kernel (``double(float(s_in * s_w))`` per tensor), the installed TFLM
  rounds per-tensor 16x8 models as the double product (models whose two 16-bit multipliers
  differ are among the tests).
* ``litert-ref`` (LiteRT 2.3 ``reference_integer_ops::FullyConnected[PerChannel]`` with the
  float-scale arguments): ``static_cast<int32_t>(round(double(acc) * M))`` with
  ``M = double(s_in) * double(s_w[n]) / double(s_out)`` — no fixed-point multiplier (the same
  ``Requant.DOUBLE_PRODUCT`` float emulation as the int8 kernel, litert-ref only).

Then the fused activation's clamp (no output zero point).

``litert-opt`` and ``xnnpack`` (XNNPACK takes no int16 tensor; measured on 150 random models
without bias, 43 of which differ from the reference; explained from fully_connected.cc): with an
int64 bias, or with the option ``quantized_bias_type`` INT64 (which TensorFlow's 16x8 converter
writes on every layer, bias or not), LiteRT's optimized resolver runs the reference kernel above;
**without a bias and without that option** (intq's exports; measured: the converter's bias-less
layer follows the reference, the same layer without the option takes ruy) it takes
``optimized_integer_ops::FullyConnected`` through cpu_backend_gemm (ruy): an int32 accumulator
(wrapping: the sum is taken modulo 2^32) and the int8 optimized kernel's fixed-point output stage,
``Requant.DOUBLE_HALF_UP`` with ``M`` from the float32 product per tensor and the double product
per channel (:func:`intq.kernels.fully_connected.fc_multipliers`) — :class:`OptimizedFullyConnected16x8Params`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError

from intq.kernels._conv_common import conv_scales
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.fully_connected import fc_multipliers, fc_out_shape, fc_weights
from intq.kernels.int16x8._common import (
    Int64Requant,
    check_int64_accumulator,
    fused_activation_range,
    int64_bias,
    io_int16,
    make_int64_requant,
    runtime_16x8,
    requantize_int64,
)
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant, Runtime
from intq.qmath.raw import wrap32

OP = "FULLY_CONNECTED"


@dataclass(frozen=True, eq=False)
class FullyConnected16x8Params:
    weights_t: np.ndarray  # int64 [K, N]
    bias: np.ndarray  # int64 [N]
    k: int
    out_shape: tuple[int, ...]
    tflm: Int64Requant | None  # tflite target
    litert: Requantizer | None  # litert-ref target: the double product


@dataclass(frozen=True, eq=False)
class OptimizedFullyConnected16x8Params:
    """LiteRT's optimized 16x8 FULLY_CONNECTED without bias (module docstring): int32 sums, NEON-style
    double rounding with the second step half up."""

    weights_t: np.ndarray  # int64 [K, N]
    k: int
    out_shape: tuple[int, ...]
    requant: Requantizer  # Requant.DOUBLE_HALF_UP, int16 out


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> FullyConnected16x8Params | OptimizedFullyConnected16x8Params:
    runtime = runtime_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    w, w_qp = fc_weights(ctx)
    n, k = w.shape
    bias = int64_bias(ctx, 2, n)
    out_shape = fc_out_shape(ctx, k, n)
    check_int64_accumulator(ctx, np.abs(w.astype(np.int64)).sum(axis=1), bias)
    lo, hi = fused_activation_range(ctx, out_qp)
    if ctx.target.optimized and not ctx.has_input(2) and ctx.attr("quantized_bias_type") != "INT64":  # ruy
        mode = ctx.target.requant_for(OP)
        try:
            r = make_requantizer(fc_multipliers(in_qp, w_qp, out_qp, mode), mode, 0, lo, hi, np.int16)
        except IntqError as e:
            raise ctx.error(str(e)) from None
        return OptimizedFullyConnected16x8Params(w.astype(np.int64).T.copy(), k, out_shape, r)
    # both runtimes: M = double(s_in) * double(s_w) / double(s_out), per tensor too (measured for TFLM)
    real = conv_scales(in_qp, w_qp, out_qp, n)
    tflm = litert = None
    if runtime is Runtime.LITERT:
        litert = make_requantizer(real, Requant.DOUBLE_PRODUCT, 0, lo, hi, np.int16)
    else:
        tflm = make_int64_requant(ctx, real, lo, hi)
    return FullyConnected16x8Params(w.astype(np.int64).T.copy(), bias, k, out_shape, tflm, litert)


def run(p: FullyConnected16x8Params | OptimizedFullyConnected16x8Params, x, w=None, b=None):
    if isinstance(p, OptimizedFullyConnected16x8Params):
        acc = wrap32(x.reshape(-1, p.k).astype(np.int64) @ p.weights_t)  # ruy's int32 sum, wrapping
        return (requantize(p.requant, acc).reshape(p.out_shape),)
    acc = x.reshape(-1, p.k).astype(np.int64) @ p.weights_t + p.bias  # int64, |acc| < 2^47 (prepare)
    if p.litert is not None:
        return (requantize(p.litert, acc).reshape(p.out_shape),)
    return (requantize_int64(p.tflm, acc).reshape(p.out_shape),)
