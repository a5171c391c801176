"""onnxruntime's QLinearConv / QGemm / QLinearMatMul with weights whose zero point is not 0 (what
``quantize_static`` writes for uint8 weights — also for weights a model holds in Constant nodes,
which it quantizes as activations: uint8, per tensor — and ONNX's own node tests): the ``ort``
variants of CONV_2D, DEPTHWISE_CONV_2D (depth multiplier 1) and FULLY_CONNECTED for those nodes;
symmetric weights run the reference kernels, whose
requantization the targets' contract makes onnxruntime's (:data:`intq.kernels.targets.Requant.FLOAT32_RNE`).
intq's own kernels take symmetric weights only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from intq.kernels._conv_common import (
    ConvOperands, conv_bias, conv_padding, conv_requantizer, fill_im2col, make_im2col, window_options)
from intq.kernels.base import variant
from intq.kernels.depthwise_conv_2d import DepthwiseTaps, depthwise_sums, prepare_taps
from intq.kernels.ort import FAMILY, saturation
from intq.kernels.requantize import Requantizer, requantize


@dataclass(frozen=True, eq=False)
class OrtAsymmetricGemm:
    """QLinearConv / QGemm / QLinearMatMul with weights whose zero point is not 0 (what
    ``quantize_static`` writes for uint8 weights, and ONNX's own node tests): ``acc = sum((x - Z_x)
    (w - Z_w)) + b`` exactly in int64 (``|acc| < 2^31`` checked at prepare, as onnxruntime's int32
    accumulator), then the float32 requantization of :data:`Requant.FLOAT32_RNE`. Only the ``ort``
    targets build it: intq's own kernels take symmetric weights."""

    weights: np.ndarray  # int64 [C_out, K]: w - Z_w, K in im2col order (taps, then channels)
    input_zero_point: int
    bias: np.ndarray  # int64 [C_out]
    requant: Requantizer
    im2col: object | None  # intq.kernels._conv_common.Im2col for CONV_2D, None for FULLY_CONNECTED
    out_shape: tuple[int, ...]
    pairs: object = None  # ort-u8s8-avx2: intq.kernels.ort.u8s8.PairSaturation of the raw weight codes

def asymmetric_weights(ctx) -> bool:
    """Whether the node's weights (input 1) have a non-zero zero point."""
    w = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    return w is not None and w.qparams is not None and bool(np.any(np.asarray(w.qparams.zero_point) != 0))

def prepare_asymmetric_gemm(ctx, saturating: bool = False) -> OrtAsymmetricGemm:
    """CONV_2D (no groups) or FULLY_CONNECTED with asymmetric int8 weights, per tensor or per output
    channel (zero points per channel too); ``saturating``: MLAS's int16 pair saturation of target
    ``ort-u8s8-avx2`` (:mod:`intq.kernels.ort.u8s8`)."""

    x, y = ctx.input(0), ctx.outputs[0]
    in_qp, out_qp = ctx.per_tensor(x, "input"), ctx.per_tensor(y, "output")
    w = ctx.constant(1, "weights")
    w_qp = ctx.qparams(ctx.input(1), "weights")
    conv = ctx.op == "CONV_2D"
    if w.dtype != np.int8 or w.ndim != (4 if conv else 2) or (w_qp.per_axis and w_qp.axis != 0):
        raise ctx.error(f"weights must be int8 of rank {4 if conv else 2}, per tensor or per output channel")
    channels = w.shape[0]
    zw = np.broadcast_to(np.asarray(w_qp.zero_point, np.int64).reshape(-1), (channels,))
    centred = w.reshape(channels, -1).astype(np.int64) - zw[:, None]
    bias = conv_bias(ctx, 2, channels)
    bound = int((255 * np.abs(centred).sum(axis=1) + np.abs(bias)).max(initial=0))
    if bound >= 1 << 31:
        raise ctx.error(f"the int32 accumulator can overflow (|acc| up to {bound})")
    activation = ctx.attr("fused_activation_function", "NONE")
    requant = conv_requantizer(ctx, ctx.op, in_qp, w_qp, out_qp, channels, activation, y.dtype)
    out_shape = tuple(int(d) for d in ctx.static_shape(y, "output"))
    im2col = None
    if conv:
        in_shape = ctx.static_shape(x, "input", 4)
        if in_shape[3] != w.shape[3]:
            raise ctx.error("grouped convolutions with asymmetric weights are not emulated")
        opts = window_options(ctx)
        ops = ConvOperands(in_qp, out_qp, in_shape, w, w_qp, y.dtype, opts, 0)
        pad = conv_padding(ctx, ops, w.shape[1], w.shape[2], channels)
        im2col = make_im2col(in_shape, w.shape[1], w.shape[2], opts, pad, in_qp.tensor_zero_point)
    pairs = None
    if saturating and not (conv and w.shape[3] == 1 and channels == 1):
        # MLAS multiplies the raw codes (uint8 x, int8 w as stored) with int16-saturating pairs and applies the
        # zero points to the exact row and column sums afterwards (measured under QEMU -cpu Haswell on 200 random
        # QGemm and 200 QLinearConv models, tests/export/test_ort_u8s8.py); one input and one output channel
        # runs onnxruntime's depthwise kernel, exact
        pairs = saturation.pair_saturation(w.reshape(channels, -1))
    return OrtAsymmetricGemm(centred, in_qp.tensor_zero_point, bias, requant, im2col, out_shape, pairs)

def run_asymmetric_gemm(p: OrtAsymmetricGemm, x, w=None, b=None):
    rows = fill_im2col(p.im2col, x) if p.im2col is not None else x.reshape(-1, p.weights.shape[1])
    acc = (rows.astype(np.int64) - p.input_zero_point) @ p.weights.T  # exact: |acc| < 2^31 (prepare)
    if p.pairs is not None:  # ort-u8s8-avx2: MLAS's int16-saturated pair sums (saturation shrinks |acc|)
        corr = saturation.saturation_correction(p.pairs, rows, 128)
        if corr is not None:
            acc = acc + corr
    return (requantize(p.requant, acc, p.bias).reshape(p.out_shape),)


variant("CONV_2D", family=FAMILY, applies=asymmetric_weights, run=run_asymmetric_gemm)(prepare_asymmetric_gemm)
variant("FULLY_CONNECTED", family=FAMILY, applies=asymmetric_weights, run=run_asymmetric_gemm)(prepare_asymmetric_gemm)


@dataclass(frozen=True, eq=False)
class OrtAsymmetricDepthwise:
    """QLinearConv with one input and one output channel per group and weights whose zero point is
    not 0: MLAS's depthwise kernel (``MlasConvDepthwise``, which onnxruntime's QLinearConv takes for
    such a group shape: ``qlinearconv.cc``), ``acc = sum_taps (x - Z_x)(w - Z_w) + b`` exactly in
    int32 over the window (padding holds ``Z_x``: it adds nothing), then ``MlasRequantizeOutput``,
    the float32 requantization of :data:`Requant.FLOAT32_RNE`. No pair saturation on any CPU: that
    kernel widens both operands to 16 bits before multiplying (exact; onnxruntime's own depthwise
    path for symmetric weights, intq.kernels.ort.u8s8, is measured exact too)."""

    taps: DepthwiseTaps  # int32 weights w - Z_w, offset b - Z_x sum_taps(w - Z_w)
    requant: Requantizer

def asymmetric_depthwise(ctx) -> bool:
    """Asymmetric weights (:func:`asymmetric_weights`) on a depthwise node with depth multiplier 1."""
    x, w = ctx.inputs[0], ctx.inputs[1] if len(ctx.inputs) > 1 else None
    return asymmetric_weights(ctx) and w.shape is not None and x.shape is not None and len(w.shape) == 4 \
        and len(x.shape) == 4 and w.shape[3] == x.shape[3]

def prepare_asymmetric_depthwise(ctx) -> OrtAsymmetricDepthwise:
    """DEPTHWISE_CONV_2D (``[1, KH, KW, C]`` weights, depth multiplier 1) with asymmetric int8 weights,
    per tensor or per channel (axis 3; onnxruntime requires one zero point for all channels, intq
    computes any)."""
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp, out_qp = ctx.per_tensor(x, "input"), ctx.per_tensor(y, "output")
    w = ctx.constant(1, "weights")
    w_qp = ctx.qparams(ctx.input(1), "weights")
    in_shape = ctx.static_shape(x, "input", 4)
    if w.dtype != np.int8 or w.ndim != 4 or w.shape[0] != 1 or w.shape[3] != in_shape[3] \
            or (w_qp.per_axis and w_qp.axis != 3):
        raise ctx.error("depthwise weights must be int8 [1, KH, KW, C] (depth multiplier 1), per tensor or per "
                        "channel on axis 3")
    if ctx.attr("depth_multiplier", 0) != 1:
        raise ctx.error(f"depth_multiplier is {ctx.attr('depth_multiplier', 0)!r} but the shapes give 1")
    _, kh, kw, c = w.shape
    zw = np.broadcast_to(np.asarray(w_qp.zero_point, np.int64).reshape(-1), (c,))
    centred = w.astype(np.int64) - zw  # [1, KH, KW, C], in [-255, 255]
    bias = conv_bias(ctx, 2, c)
    bound = int((255 * np.abs(centred).reshape(-1, c).sum(axis=0) + np.abs(bias)).max(initial=0))
    if bound >= 1 << 31:
        raise ctx.error(f"the int32 accumulator can overflow (|acc| up to {bound})")
    opts = window_options(ctx)
    ops = ConvOperands(in_qp, out_qp, in_shape, w, w_qp, y.dtype, opts, 3)
    pad = conv_padding(ctx, ops, kh, kw, c)
    offset = bias - in_qp.tensor_zero_point * centred.reshape(kh * kw, c).sum(axis=0)  # |.| < 2^31 (bound)
    taps = prepare_taps(replace(ops, w=centred), offset, pad, np.int32)
    requant = conv_requantizer(ctx, ctx.op, in_qp, w_qp, out_qp, c, opts.activation, y.dtype)  # scales only
    return OrtAsymmetricDepthwise(taps, requant)

def run_asymmetric_depthwise(p: OrtAsymmetricDepthwise, x, w=None, b=None):
    return (requantize(p.requant, depthwise_sums(p.taps, x)),)


variant("DEPTHWISE_CONV_2D", family=FAMILY, applies=asymmetric_depthwise,
        run=run_asymmetric_depthwise)(prepare_asymmetric_depthwise)
