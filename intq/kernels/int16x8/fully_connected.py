"""FULLY_CONNECTED, 16x8: ``y = clamp(R(sum_k x_k * w_nk + b_n))`` with int16 ``x``, int8 ``w``.

Contract (spec 003, 16x8): input int16 per tensor, zero point 0; weights int8 ``[N, K]``
constant, symmetric, per tensor or per output channel (axis 0); bias int64 ``[N]`` (zero point
0) or omitted; output int16 per tensor, zero point 0. The input is read as rows of ``K``.
No zero point enters the sum (all are 0). The accumulator is int64:
``|acc| <= K * 2^15 * 127 + |b|``, which must stay below 2^47 (checked at prepare).

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import (
    INT64_ACC_LIMIT,
    Int64Requant,
    fused_activation_range,
    int16_tensor,
    int64_bias,
    make_int64_requant,
    reference_runtime,
    requantize_int64,
)
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant, Runtime
from intq.qmath import effective_scale

OP = "FULLY_CONNECTED"


@dataclass(frozen=True, eq=False)
class FullyConnected16x8Params:
    weights_t: np.ndarray  # int64 [K, N]
    bias: np.ndarray  # int64 [N]
    k: int
    out_shape: tuple[int, ...]
    tflm: Int64Requant | None  # tflite target
    litert: Requantizer | None  # litert-ref target: the double product


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> FullyConnected16x8Params:
    runtime = reference_runtime(ctx)
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = int16_tensor(ctx, x, "input")
    out_qp = int16_tensor(ctx, y, "output")
    w = ctx.constant(1, "weights")
    w_qp = ctx.qparams(ctx.input(1), "weights")
    if w.dtype != np.int8 or w.ndim != 2:
        raise ctx.error(f"weights must be int8 [N, K], got {w.dtype.name} {list(w.shape)}")
    if np.any(w_qp.zero_point != 0) or (w_qp.per_axis and (w_qp.axis != 0 or w_qp.scale.size != w.shape[0])):
        raise ctx.error("weights must be symmetric (zero point 0), per tensor or per output channel (axis 0)")
    n, k = w.shape
    bias = int64_bias(ctx, 2, n)
    if x.shape is None or not x.is_static or int(np.prod(x.shape)) % k:
        raise ctx.error(f"input of shape {x.shape} cannot be read as rows of {k}")
    if y.shape is None or not y.is_static:
        raise ctx.error("the output shape must be static")
    bound = k * (1 << 15) * 127 + int(np.abs(bias).max(initial=0))
    if bound >= INT64_ACC_LIMIT:
        raise ctx.error(f"the accumulator can exceed 2^47 (|acc| up to {bound}), beyond TFLite's int64 "
                        f"requantization; split the layer")
    lo, hi = fused_activation_range(ctx, out_qp)
    # both runtimes: M = double(s_in) * double(s_w) / double(s_out), per tensor too (measured for TFLM)
    real = np.broadcast_to(effective_scale(in_qp.scale[0], w_qp.scale, out_qp.scale[0], product_dtype=np.float64), (n,))
    tflm = litert = None
    if runtime is Runtime.LITERT:
        litert = make_requantizer(real, Requant.DOUBLE_PRODUCT, 0, lo, hi, np.int16)
    else:
        tflm = make_int64_requant(ctx, real, lo, hi)
    return FullyConnected16x8Params(w.astype(np.int64).T.copy(), bias, k, tuple(int(d) for d in y.shape), tflm, litert)


def run(p: FullyConnected16x8Params, x, w=None, b=None):
    acc = x.reshape(-1, p.k).astype(np.int64) @ p.weights_t + p.bias  # int64, |acc| < 2^47 (prepare)
    if p.litert is not None:
        return (requantize(p.litert, acc).reshape(p.out_shape),)
    return (requantize_int64(p.tflm, acc).reshape(p.out_shape),)
