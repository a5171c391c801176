"""FULLY_CONNECTED: ``y = requant(sum_k (x_k - Z_x) * w_nk + b_n) + Z_y``, clamped.

Contract (spec 003): input int8 per-tensor; weights int8 [N, K] constant, symmetric (zero point
0), per-tensor or per-channel (axis 0); bias int32 [N] with scale ``s_in * s_w`` and zero point
0, optional; output int8 per-tensor. The input is read as [M, K] with ``M = size / K``
(``keep_num_dims`` keeps its leading dimensions in the output).

Arithmetic: the zero-point expansion (Jacob et al. 2.3) keeps operands raw int8:
``acc = x @ w.T - Z_x * sum_k w_nk + b_n``, where ``x @ w.T`` is an exact int8 GEMM on float32
BLAS (:mod:`intq.kernels.gemm`) and ``- Z_x * sum w + b`` is folded into one int32 per channel at
prepare time. The accumulator fits int32: ``|acc| <= 255 * sum_k |w_nk| + |b_n|``, checked at prepare
(:func:`intq.kernels._conv_common.check_accumulator`). The contract checks (:func:`fc_weights`,
:func:`fc_out_shape`) serve the 16x8 kernel too.

Requantization by target (where the runtimes differ; measured by tools/probe_litert_rounding.py
and tests/kernels/test_fully_connected.py):

* ``tflite`` (TFLM): double rounding with ``M`` from the float32 product ``float(s_in * s_w) / s_out``
  for per-tensor weights (TFLite's GetQuantizedConvolutionMultipler) and the double product per
  channel;
* ``litert-ref``: ``round(double(acc) * M)`` with the double product (LiteRT 2.3's reference kernel);
* ``litert-opt``: LiteRT's optimized kernel (optimized/integer_ops/fully_connected.h through
  cpu_backend_gemm and ruy): ``Requant.DOUBLE_HALF_UP`` — SRDHM, then a rounding right shift with
  ties up — and ``M`` computed as TFLM does (float32 product per tensor, double per channel);
* runtimes that requantize otherwise (XNNPACK's float32 scale): a variant in their family's folder.

**16x8** (int16 activations, int8 weights): ``y = clamp(R(sum_k x_k * w_nk + b_n))`` with int16 ``x``, int8 ``w``.

Contract (spec 003, 16x8): input int16 per tensor, zero point 0; weights int8 ``[N, K]``
constant, symmetric, per tensor or per output channel (axis 0); bias int64 ``[N]`` (zero point
0) or omitted; output int16 per tensor, zero point 0. The input is read as rows of ``K``.
No zero point enters the sum (all are 0). The accumulator is int64:
``|acc| <= 2^15 * sum_k |w_nk| + |b_n|``, which must stay below 2^47 (checked at prepare). The
contract checks are the int8 kernel's (:func:`intq.kernels.fully_connected.fc_weights`,
:func:`~intq.kernels.fully_connected.fc_out_shape`).

Requantization (TFLM ``fully_connected_common.cc + ``reference_integer_ops::FullyConnected`` /
  ``FullyConnectedPerChannel`` with ``int64_t`` bias): ``MultiplyByQuantizedMultiplier(int64 acc,
  m, shift)`` — the multiplier reduced to 16 bits, ``(acc * m16 + 2^(14-shift)) >> (15-shift)``.
  ``M = double(s_in) * double(s_w[n]) / double(s_out)`` per channel and per tensor alike —
  measured: unlike the int8 kernel (``double(float(s_in * s_w))`` per tensor), the installed TFLM
  rounds per-tensor 16x8 models as the double product (models whose two 16-bit multipliers
  differ are among the tests; tests/kernels/test_int16x8.py).
Then the fused activation's clamp (no output zero point).

"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import check_accumulator, conv_bias, conv_scales
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import Requantizer, activation_range, float32_rne_scale, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import QuantParams, effective_scale
from intq.kernels._int16_common import (
    Int64Requant,
    check_int64_accumulator,
    fused_activation_range,
    int64_bias,
    io_int16,
    make_int64_requant,
    check_16x8,
    requantize_int64,
)

OP = "FULLY_CONNECTED"


@dataclass(frozen=True)
class FullyConnectedParams:
    gemm: PreparedGemm  # weights [N, K] as exact float32 chunks
    offset: np.ndarray  # int64 [N]: b_n - Z_x * sum_k w_nk
    requant: Requantizer
    k: int
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> FullyConnectedParams:
    return prepare_fc(ctx)


def prepare_fc(ctx: KernelContext, *, mode: Requant | None = None, bounds=activation_range) -> FullyConnectedParams:
    """The layer's parameters; ``mode`` and ``bounds`` override the target's requantization and the
    clamp (:func:`fc_requantizer`)."""
    in_qp = ctx.per_tensor(ctx.input(0), "input")
    out_qp = ctx.per_tensor(ctx.outputs[0], "output")
    w, w_qp = fc_weights(ctx)
    n, k = w.shape
    bias = conv_bias(ctx, 2, n)
    out_shape = fc_out_shape(ctx, k, n)
    check_accumulator(ctx, np.abs(w.astype(np.int64)).sum(axis=1), bias)
    gemm = prepare_gemm(w)
    offset = bias - in_qp.tensor_zero_point * gemm.weight_sums
    r = fc_requantizer(ctx, in_qp, w_qp, out_qp, ctx.attr("fused_activation_function", "NONE"), ctx.outputs[0].dtype,
                       mode=mode, bounds=bounds)
    return FullyConnectedParams(gemm, offset, r, k, out_shape)


def fc_weights(ctx: KernelContext) -> tuple[np.ndarray, QuantParams]:
    """The constant int8 weights ``[N, K]`` (input 1), symmetric, per tensor or per output channel
    (axis 0), and their QuantParams (int8 and 16x8)."""
    w = ctx.constant(1, "weights")
    w_qp = ctx.qparams(ctx.input(1), "weights")
    if w.dtype != np.int8 or w.ndim != 2:
        raise ctx.error(f"weights must be int8 [N, K], got {w.dtype.name} {list(w.shape)}")
    if np.any(w_qp.zero_point != 0) or (w_qp.per_axis and (w_qp.axis != 0 or w_qp.scale.size != w.shape[0])):
        raise ctx.error("weights must be symmetric (zero point 0), per tensor or per output channel (axis 0)")
    return w, w_qp


def fc_out_shape(ctx: KernelContext, k: int, n: int | None = None) -> tuple[int, ...]:
    """The output's static shape, after checking that the input reads as rows of ``k`` and (given
    ``n`` units) that the output holds ``rows x n`` values (int8 and 16x8)."""
    x, y = ctx.input(0), ctx.outputs[0]
    if x.shape is not None and x.is_static and int(np.prod(x.shape)) % k:
        raise ctx.error(f"input of shape {x.shape} cannot be read as rows of {k}")
    if y.shape is None or not y.is_static:
        raise ctx.error("the output shape must be static")
    if n is not None and x.shape is not None and x.is_static:
        # the output LiteRT's Prepare gives (TFLM reads the declared one as [rows, depth] with depth its
        # last dimension): [rows, n], or with keep_num_dims the input's shape with its last dimension n
        rows = int(np.prod(x.shape)) // k
        want = (*x.shape[:-1], n) if ctx.attr("keep_num_dims", False) else (rows, n)
        if tuple(y.shape) != tuple(want):
            raise ctx.error(f"output shape {list(y.shape)} is not the {list(want)} the layer computes")
    return tuple(int(d) for d in y.shape)


def fc_requantizer(ctx: KernelContext, in_qp: QuantParams, w_qp: QuantParams, out_qp: QuantParams,
                   activation: str, out_dtype, mode: Requant | None = None, bounds=activation_range) -> Requantizer:
    """The requantization of the target's contract for FULLY_CONNECTED (``mode`` overrides it):
    ``M`` from the float32 product ``float(s_in * s_w) / s_out`` for per-tensor weights, the double
    product per channel (and for ``DOUBLE_PRODUCT``); the float32 requantization
    (:data:`Requant.FLOAT32_RNE`: XNNPACK, MLAS's QGemm) from its float32 scale
    ``float(float(s_in * s_w) / s_out)``. The clamp is ``bounds(activation, out_qp)``. Only
    ``ctx.target`` is read."""
    mode = ctx.target.requant_for(OP) if mode is None else mode
    lo, hi = bounds(activation, out_qp)
    if mode is Requant.FLOAT32_RNE:
        scale = float32_rne_scale(in_qp.scale[0], w_qp.scale, out_qp.scale[0])
        return make_requantizer(scale, mode, out_qp.tensor_zero_point, lo, hi, out_dtype)
    return make_requantizer(fc_multipliers(in_qp, w_qp, out_qp, mode), mode, out_qp.tensor_zero_point, lo, hi,
                            out_dtype)


def fc_multipliers(in_qp: QuantParams, w_qp: QuantParams, out_qp: QuantParams, mode: Requant) -> np.ndarray:
    """``M = s_in s_w / s_out`` as TFLite's fixed-point FULLY_CONNECTED paths compute it: the float32
    product ``float(s_in * s_w)`` for per-tensor weights (GetQuantizedConvolutionMultipler), the
    double product per channel and for ``DOUBLE_PRODUCT`` (also the 16x8 kernel's optimized path)."""
    product = np.float64 if (w_qp.per_axis or mode is Requant.DOUBLE_PRODUCT) else np.float32
    return effective_scale(in_qp.scale[0], w_qp.scale, out_qp.scale[0], product_dtype=product)


def run(p: FullyConnectedParams, x, w=None, b=None):
    rows = x.reshape(-1, p.k)
    acc = exact_matmul(rows, p.gemm)  # int32 sum(x * w), exact
    return (requantize(p.requant, acc, p.offset).reshape(p.out_shape),)  # |acc + offset| < 2^31 (prepare)


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True, eq=False)
class FullyConnected16x8Params:
    weights_t: np.ndarray  # int64 [K, N]
    bias: np.ndarray  # int64 [N]
    k: int
    out_shape: tuple[int, ...]
    requant: Int64Requant


@dataclass(frozen=True, eq=False)
class Int16Layer:
    """A 16x8 layer's checked operands (:func:`int16_layer`)."""

    in_qp: QuantParams
    out_qp: QuantParams
    w: np.ndarray  # int8 [N, K]
    w_qp: QuantParams
    bias: np.ndarray  # int64 [N]
    out_shape: tuple[int, ...]
    act_min: int
    act_max: int


def int16_layer(ctx: KernelContext) -> Int16Layer:
    """The 16x8 contract (module docstring), the int64 accumulator bound and the fused activation's clamp."""
    check_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    w, w_qp = fc_weights(ctx)
    n, k = w.shape
    bias = int64_bias(ctx, 2, n)
    out_shape = fc_out_shape(ctx, k, n)
    check_int64_accumulator(ctx, np.abs(w.astype(np.int64)).sum(axis=1), bias)
    lo, hi = fused_activation_range(ctx, out_qp)
    return Int16Layer(in_qp, out_qp, w, w_qp, bias, out_shape, lo, hi)


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> FullyConnected16x8Params:
    layer = int16_layer(ctx)
    # M = double(s_in) * double(s_w) / double(s_out), per tensor too (measured for TFLM)
    real = conv_scales(layer.in_qp, layer.w_qp, layer.out_qp, layer.w.shape[0])
    requant = make_int64_requant(ctx, real, layer.act_min, layer.act_max)
    return FullyConnected16x8Params(layer.w.astype(np.int64).T.copy(), layer.bias, layer.w.shape[1], layer.out_shape,
                                    requant)


def int64_sums(p, x) -> np.ndarray:
    """``x @ w.T + b`` in int64 (``|acc| < 2^47``, prepare) for ``p`` with ``weights_t``, ``bias``, ``k``."""
    return x.reshape(-1, p.k).astype(np.int64) @ p.weights_t + p.bias


def run_int16(p: FullyConnected16x8Params, x, w=None, b=None):
    return (requantize_int64(p.requant, int64_sums(p, x)).reshape(p.out_shape),)
