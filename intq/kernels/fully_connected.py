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
* ``xnnpack``: XNNPACK takes every int8 FULLY_CONNECTED intq accepts (measured) and requantizes in
  float32: ``rint(float(acc) * float(float(s_in * s_w) / s_out))``, half to even, clamped to
  ``xnn_qs8_quantize`` of the activation bounds.

``tpu-mlir`` target: TPU-MLIR's ``tpu.MatMul`` with constant weights (:mod:`intq.kernels.tpu_mlir.matmul`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import check_accumulator, conv_bias
from intq.kernels import _ort, _ort_u8s8
from intq.kernels.base import KernelContext, kernel
from intq.kernels.tpu_mlir import matmul as tpu_mlir_matmul
from intq.kernels.targets import Runtime as _Runtime
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import (
    Requantizer,
    activation_range,
    make_requantizer,
    requantize,
    xnnpack_activation_range,
    xnnpack_conv_scale,
)
from intq.kernels.targets import Requant, Runtime
from intq.qmath import QuantParams, effective_scale

OP = "FULLY_CONNECTED"


@dataclass(frozen=True)
class FullyConnectedParams:
    gemm: PreparedGemm  # weights [N, K] as exact float32 chunks
    offset: np.ndarray  # int64 [N]: b_n - Z_x * sum_k w_nk
    requant: Requantizer
    k: int
    out_shape: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2FullyConnectedParams:
    """``ort-u8s8-avx2``: QGemm's exact product plus MLAS's int16 pair saturation along K
    (:mod:`intq.kernels._ort_u8s8`)."""

    fc: FullyConnectedParams
    pairs: _ort_u8s8.PairSaturation


@kernel(OP)
def prepare(ctx: KernelContext) -> FullyConnectedParams | OrtU8S8Avx2FullyConnectedParams | _ort.OrtAsymmetricGemm:
    if _ort.is_ort(ctx) and _ort.asymmetric_weights(ctx):  # imported QGemm / QLinearMatMul with a weight zero point
        return _ort.prepare_asymmetric_gemm(ctx)
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_matmul.prepare(ctx)
    in_qp = ctx.per_tensor(ctx.input(0), "input")
    out_qp = ctx.per_tensor(ctx.outputs[0], "output")
    w, w_qp = fc_weights(ctx)
    n, k = w.shape
    bias = conv_bias(ctx, 2, n)
    out_shape = fc_out_shape(ctx, k, n)
    check_accumulator(ctx, np.abs(w.astype(np.int64)).sum(axis=1), bias)
    gemm = prepare_gemm(w)
    offset = bias - in_qp.tensor_zero_point * gemm.weight_sums
    r = fc_requantizer(ctx, in_qp, w_qp, out_qp, ctx.attr("fused_activation_function", "NONE"), ctx.outputs[0].dtype)
    params = FullyConnectedParams(gemm, offset, r, k, out_shape)
    if _ort_u8s8.saturates(ctx):
        return OrtU8S8Avx2FullyConnectedParams(params, _ort_u8s8.pair_saturation(w))
    return params


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
                   activation: str, out_dtype) -> Requantizer:
    """The requantization ``prepare`` uses on ``ctx.target`` (module docstring): ``M`` from the
    float32 product ``float(s_in * s_w) / s_out`` for per-tensor weights, the double product per
    channel (and for ``DOUBLE_PRODUCT``); XNNPACK's fp32 scale and clamp on ``xnnpack``. Only
    ``ctx.target`` is read."""
    mode = ctx.target.requant_for(OP)
    if ctx.target.runtime is Runtime.ORT:  # QGemm: float32 scale, rint, intq's Clip for the activation
        lo, hi = activation_range(activation, out_qp)
        scale = xnnpack_conv_scale(in_qp.scale[0], w_qp.scale, out_qp.scale[0])
        return make_requantizer(scale, Requant.FLOAT32_RNE, out_qp.tensor_zero_point, lo, hi, out_dtype)
    if ctx.target.xnnpack:  # XNNPACK takes the node: fp32 requantization
        lo, hi = xnnpack_activation_range(activation, out_qp)
        scale = xnnpack_conv_scale(in_qp.scale[0], w_qp.scale, out_qp.scale[0])
        return make_requantizer(scale, Requant.FLOAT32_RNE, out_qp.tensor_zero_point, lo, hi, out_dtype)
    lo, hi = activation_range(activation, out_qp)
    return make_requantizer(fc_multipliers(in_qp, w_qp, out_qp, mode), mode, out_qp.tensor_zero_point, lo, hi,
                            out_dtype)


def fc_multipliers(in_qp: QuantParams, w_qp: QuantParams, out_qp: QuantParams, mode: Requant) -> np.ndarray:
    """``M = s_in s_w / s_out`` as TFLite's fixed-point FULLY_CONNECTED paths compute it: the float32
    product ``float(s_in * s_w)`` for per-tensor weights (GetQuantizedConvolutionMultipler), the
    double product per channel and for ``DOUBLE_PRODUCT`` (also the 16x8 kernel's optimized path)."""
    product = np.float64 if (w_qp.per_axis or mode is Requant.DOUBLE_PRODUCT) else np.float32
    return effective_scale(in_qp.scale[0], w_qp.scale, out_qp.scale[0], product_dtype=product)


def run(p: FullyConnectedParams | OrtU8S8Avx2FullyConnectedParams | _ort.OrtAsymmetricGemm, x, w=None, b=None):
    if isinstance(p, _ort.OrtAsymmetricGemm):
        return (_ort.run_asymmetric_gemm(p, x),)
    if type(p) is tpu_mlir_matmul.TpuMlirMatMulParams:
        return tpu_mlir_matmul.run(p, x)
    pairs = None
    if type(p) is OrtU8S8Avx2FullyConnectedParams:
        p, pairs = p.fc, p.pairs
    rows = x.reshape(-1, p.k)
    acc = exact_matmul(rows, p.gemm)  # int32 sum(x * w), exact
    if pairs is not None:  # MLAS's int16-saturated pair sums (saturation only shrinks |acc|)
        corr = _ort_u8s8.saturation_correction(pairs, rows, 128)
        if corr is not None:
            acc = acc + corr
    return (requantize(p.requant, acc, p.offset).reshape(p.out_shape),)  # |acc + offset| < 2^31 (prepare)
