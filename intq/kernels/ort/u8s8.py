"""The ``ort_u8s8_avx2`` family (target ``ort-u8s8-avx2``, whose families are this one, then
``ort``): on an x86-64 CPU with AVX2 but without VNNI, MLAS's U8S8 GEMM sums adjacent uint8 x int8
products in int16 with saturation (:mod:`intq.kernels.ort.saturation`, measured under QEMU
``-cpu Haswell``). The operators whose onnxruntime kernels run that GEMM: CONV_2D, FULLY_CONNECTED,
DEPTHWISE_CONV_2D with a depth multiplier > 1, TRANSPOSE_CONV (as intq writes it: the stride-1
convolution of the zero-stuffed input with the flipped kernel), MATMUL_INTEGER, and CONV_INTEGER
on uint8 weights by int8 inputs (the weights are then MLAS's uint8 side). Each variant takes the
nodes whose operand types make MLAS run that kernel (:func:`~intq.kernels.ort.saturation.mlas_uint8_operand`:
a uint8 x uint8 product, e.g. an imported model's uint8 weights, stays exact and falls back to the
``ort`` family), prepares the ``ort`` kernel (the reference with onnxruntime's requantization
contract, or :mod:`intq.kernels.ort.gemm` for weights with a zero point) and adds the pairs that can
saturate; onnxruntime's depthwise kernel (one input and one output channel per group) is exact, so
those nodes keep the ``ort`` parameters. A uint8 x int8 QLinearMatMul, not measured, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import batch_matmul, conv_2d, conv_integer, depthwise_conv_2d, fully_connected, matmul_integer, \
    transpose_conv
from intq.kernels._conv_common import Im2col, conv_operands, conv_padding, fill_im2col, make_im2col
from intq.kernels.base import KernelContext, variant
from intq.kernels.gemm import exact_matmul
from intq.kernels.ort import U8S8_AVX2, saturation
from intq.kernels.ort.gemm import OrtAsymmetricGemm, asymmetric_weights, prepare_asymmetric_gemm, run_asymmetric_gemm
from intq.kernels.requantize import requantize

#: what onnxruntime's uint8 codes add to intq's int8 ones (the family's targets run uint8 activations)
_OFFSET = 128




def _uint8_activations(ctx: KernelContext) -> bool:
    """The node's activations are MLAS's uint8 side (:func:`saturation.mlas_uint8_operand`)."""
    return saturation.mlas_uint8_operand(ctx) == "activations"


# ------------------------------------------------------------------------------------- CONV_2D

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2Conv2DParams:
    """The exact convolution plus MLAS's int16 pair saturation on the im2col rows."""

    conv: conv_2d.Conv2DParams
    pairs: saturation.PairSaturation


@variant(conv_2d.OP, family=U8S8_AVX2, applies=_uint8_activations,
         run={conv_2d.Conv2DParams: conv_2d.run, OrtU8S8Avx2Conv2DParams: "run_conv",
              OrtAsymmetricGemm: run_asymmetric_gemm})
def prepare_conv(ctx: KernelContext) -> OrtU8S8Avx2Conv2DParams | conv_2d.Conv2DParams | OrtAsymmetricGemm:
    if asymmetric_weights(ctx):  # an imported QLinearConv with a weight zero point
        return prepare_asymmetric_gemm(ctx, saturating=True)
    params = conv_2d.prepare(ctx)
    w = ctx.constant(1, "weights")
    c_out, kh, kw, c_g = w.shape
    c_in = ctx.input(0).shape[3]
    groups = c_in // c_g
    rows = saturation.mlas_weight_rows(conv_2d.OP, w.shape, c_in)
    if rows is None:  # one input and one output channel per group: onnxruntime's depthwise
        return params  # kernel, exact (measured)
    # MLAS's K per group: taps, then the group's channels; their columns in intq's im2col rows
    tap, c = np.divmod(np.arange(kh * kw * c_g), c_g)
    group = np.arange(c_out) // (c_out // groups)
    columns = tap[None, :] * c_in + group[:, None] * c_g + c[None, :]
    return OrtU8S8Avx2Conv2DParams(params, saturation.pair_saturation(w.reshape(-1)[rows], columns))


def run_conv(p: OrtU8S8Avx2Conv2DParams, x, w=None, b=None):
    conv = p.conv
    cols = fill_im2col(conv.im2col, x)  # int8 [N*OH*OW, KH*KW*C_in]
    acc = exact_matmul(cols, conv.gemm)  # int32 sum(x * w), exact
    corr = saturation.saturation_correction(p.pairs, cols, _OFFSET)  # |acc| stays < 2^31: saturation shrinks it
    if corr is not None:
        acc = acc + corr
    return (requantize(conv.requant, acc, conv.offset).reshape(conv.out_shape),)


# ----------------------------------------------------------------------------- FULLY_CONNECTED

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2FullyConnectedParams:
    """QGemm's exact product plus MLAS's int16 pair saturation along K."""

    fc: fully_connected.FullyConnectedParams
    pairs: saturation.PairSaturation


@variant(fully_connected.OP, family=U8S8_AVX2, applies=_uint8_activations,
         run={OrtU8S8Avx2FullyConnectedParams: "run_fully_connected", OrtAsymmetricGemm: run_asymmetric_gemm})
def prepare_fully_connected(ctx: KernelContext) -> OrtU8S8Avx2FullyConnectedParams | OrtAsymmetricGemm:
    if asymmetric_weights(ctx):  # an imported QGemm / QLinearMatMul with a weight zero point
        return prepare_asymmetric_gemm(ctx, saturating=True)
    params = fully_connected.prepare(ctx)
    return OrtU8S8Avx2FullyConnectedParams(params, saturation.pair_saturation(ctx.constant(1, "weights")))


def run_fully_connected(p: OrtU8S8Avx2FullyConnectedParams, x, w=None, b=None):
    fc = p.fc
    rows = x.reshape(-1, fc.k)
    acc = exact_matmul(rows, fc.gemm)  # int32 sum(x * w), exact
    corr = saturation.saturation_correction(p.pairs, rows, _OFFSET)  # saturation only shrinks |acc|
    if corr is not None:
        acc = acc + corr
    return (requantize(fc.requant, acc, fc.offset).reshape(fc.out_shape),)  # |acc + offset| < 2^31 (prepare)


# --------------------------------------------------------------------------- DEPTHWISE_CONV_2D

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2DepthwiseParams:
    """A depth multiplier ``M > 1``: onnxruntime's QLinearConv runs a grouped convolution (one U8S8
    GEMM per input channel, K = the taps), so MLAS's int16 pair saturation applies to adjacent taps;
    ``M = 1`` runs MLAS's depthwise kernel, exact (measured under QEMU -cpu Haswell: 0 of 200 models
    differ from ``ort-u8``)."""

    dw: depthwise_conv_2d.DepthwiseConv2DParams
    pairs: saturation.PairSaturation
    im2col: Im2col  # int8 rows [N*OH*OW, KH*KW*C] the pairs read


def _depth_multiplied(ctx: KernelContext) -> bool:
    """Whether the node's depthwise weights have more output channels than its input (M > 1) and its
    activations are MLAS's uint8 side."""
    w, x = (ctx.inputs[i] if i < len(ctx.inputs) else None for i in (1, 0))
    return (w is not None and x is not None and w.shape is not None and x.shape is not None and len(w.shape) == 4
            and len(x.shape) == 4 and w.shape[3] > x.shape[3] and _uint8_activations(ctx))


@variant(depthwise_conv_2d.OP, family=U8S8_AVX2, applies=_depth_multiplied, run="run_depthwise")
def prepare_depthwise(ctx: KernelContext) -> OrtU8S8Avx2DepthwiseParams:
    params = depthwise_conv_2d.prepare(ctx)
    ops = conv_operands(ctx, channel_axis=3)
    _, kh, kw, c_out = ops.w.shape
    c_in = ops.in_shape[3]
    pad = conv_padding(ctx, ops, kh, kw, c_out)
    # output channel o multiplies input channel o // M at every tap: im2col column tap * C + o // M
    columns = np.arange(kh * kw)[None, :] * c_in + (np.arange(c_out) // (c_out // c_in))[:, None]
    pairs = saturation.pair_saturation(ops.w.reshape(-1)[saturation.mlas_weight_rows(depthwise_conv_2d.OP, ops.w.shape,
                                                                                     c_in)], columns)
    return OrtU8S8Avx2DepthwiseParams(params, pairs, make_im2col(ops.in_shape, kh, kw, ops.opts, pad,
                                                                 ops.in_qp.tensor_zero_point))


def run_depthwise(p: OrtU8S8Avx2DepthwiseParams, x, w=None, b=None):
    acc = depthwise_conv_2d.depthwise_sums(p.dw.taps, x)  # exact, then MLAS's saturated pairs (only shrink |acc|)
    corr = saturation.saturation_correction(p.pairs, fill_im2col(p.im2col, x), _OFFSET)
    if corr is not None:
        acc = acc + corr.reshape(acc.shape)
    return (requantize(p.dw.requant, acc),)


# ------------------------------------------------------------------------------ TRANSPOSE_CONV

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2TransposeConvParams:
    """intq's ONNX export writes TRANSPOSE_CONV as a QLinearConv (stride 1, kernel flipped) of the
    zero-stuffed input, so MLAS's int16 pair saturation applies along that convolution's im2col
    rows: the exact sums plus the correction computed on the stuffed input. ``rows_h`` / ``rows_w``:
    for each row / column of the stuffed, padded input the convolution reads (``OH + KH - 1`` by
    ``OW + KW - 1``), the input row / column it holds, or -1 for the zero point (``u[r] = x[(r -
    lead) / s]`` where that divides)."""

    sums: transpose_conv.TransposeConvParams
    pairs: saturation.PairSaturation
    rows_h: np.ndarray  # int64 [OH + KH - 1]
    rows_w: np.ndarray  # int64 [OW + KW - 1]
    zero_point: int  # Z_x (intq's int8 code)


def _stuffed_rows(out: int, k: int, top: int, stride: int, size: int) -> np.ndarray:
    """Which input row each of the ``out + k - 1`` rows of the stuffed input the export's
    convolution reads holds (-1: the zero point); ``lead = k - 1 - top`` as the exporter pads."""
    t = np.arange(out + k - 1) - (k - 1 - top)
    src = np.where(t % stride == 0, t // stride, -1)
    return np.where((t >= 0) & (src >= 0) & (src < size), src, -1).astype(np.int64)


@variant(transpose_conv.OP, family=U8S8_AVX2, applies=_uint8_activations,
         run={transpose_conv.TransposeConvParams: transpose_conv.run,
              OrtU8S8Avx2TransposeConvParams: "run_transpose_conv"})
def prepare_transpose_conv(ctx: KernelContext) -> OrtU8S8Avx2TransposeConvParams | transpose_conv.TransposeConvParams:
    params = transpose_conv.prepare(ctx)
    _, h, w_in, c_in = ctx.input(2).shape
    w = ctx.constant(1, "weights")
    c_out = w.shape[0]
    rows = saturation.mlas_weight_rows(transpose_conv.OP, w.shape, c_in)
    if rows is None:  # onnxruntime's depthwise kernel: exact (as CONV_2D's)
        return params
    g = params.geometry
    flipped = w.reshape(-1)[rows]  # the export's kernel (flipped), taps then channels
    return OrtU8S8Avx2TransposeConvParams(
        params, saturation.pair_saturation(flipped), _stuffed_rows(g.out_shape[1], g.kh, g.top, g.stride_h, h),
        _stuffed_rows(g.out_shape[2], g.kw, g.left, g.stride_w, w_in), ctx.input(2).qparams.tensor_zero_point)


def run_transpose_conv(p: OrtU8S8Avx2TransposeConvParams, output_shape, w, x, b=None):
    acc = transpose_conv.accumulators(p.sums, x)
    corr = saturation.saturation_correction(p.pairs, _stuffed_im2col(p, x), _OFFSET)
    if corr is not None:
        acc = acc + corr
    return (requantize(p.sums.requant, acc, p.sums.bias).reshape(p.sums.out_shape),)


def _stuffed_im2col(p: OrtU8S8Avx2TransposeConvParams, x) -> np.ndarray:
    """The im2col rows ``[N*OH*OW, KH*KW*C_in]`` (taps, then channels) of the stuffed input."""
    g = p.sums.geometry
    n, c = x.shape[0], x.shape[3]
    u = np.full((n, p.rows_h.size, p.rows_w.size, c), p.zero_point, x.dtype)
    vh, vw = np.nonzero(p.rows_h >= 0)[0], np.nonzero(p.rows_w >= 0)[0]
    u[:, vh[:, None], vw[None, :]] = x[:, p.rows_h[vh][:, None], p.rows_w[vw][None, :]]
    win = np.lib.stride_tricks.sliding_window_view(u, (g.kh, g.kw), axis=(1, 2))  # [N, OH, OW, C, KH, KW]
    return np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(-1, g.kh * g.kw * c)


# ------------------------------------------------------------------------------ MATMUL_INTEGER

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2MatMulIntegerParams:
    """MatMulInteger's exact sums plus MLAS's int16 pair saturation of the raw ``b``'s pairs."""

    mm: matmul_integer.MatMulIntegerParams
    pairs: saturation.PairSaturation


@variant(matmul_integer.OP, family=U8S8_AVX2, applies=_uint8_activations, run="run_matmul_integer")
def prepare_matmul_integer(ctx: KernelContext) -> OrtU8S8Avx2MatMulIntegerParams:
    params = matmul_integer.prepare(ctx)
    return OrtU8S8Avx2MatMulIntegerParams(params, saturation.pair_saturation(np.ascontiguousarray(ctx.constant(1, "b").T)))


def run_matmul_integer(p: OrtU8S8Avx2MatMulIntegerParams, a, b=None):
    rows = a.reshape(-1, p.mm.b.shape[0])
    acc = matmul_integer.exact_sums(p.mm, rows)
    corr = saturation.saturation_correction(p.pairs, rows, _OFFSET)  # saturation shrinks |acc|
    if corr is not None:
        acc = acc + corr
    return (acc.astype(np.int32).reshape(p.mm.out_shape),)


# ------------------------------------------------------------------------------- CONV_INTEGER

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2ConvIntegerParams:
    """ConvInteger on uint8 weights by int8 inputs: onnxruntime passes the weights as MLAS's A, so
    they are the uint8 side of the int16-saturating pairs, along ConvInteger's NCHW im2col (channels,
    then kernel rows and columns); the exact sums plus the correction."""

    sums: conv_integer.ConvIntegerParams
    pairs: saturation.PairSaturation


def _uint8_weights(ctx: KernelContext) -> bool:
    return saturation.mlas_uint8_operand(ctx) == "weights"


@variant(conv_integer.OP, family=U8S8_AVX2, applies=_uint8_weights, run="run_conv_integer")
def prepare_conv_integer(ctx: KernelContext) -> OrtU8S8Avx2ConvIntegerParams:
    params = conv_integer.prepare(ctx)
    w = ctx.constant(1, "weights")
    c_out, kh, kw, c = w.shape
    channel, tap = np.divmod(np.arange(c * kh * kw), kh * kw)  # MLAS's K: channels outermost
    columns = np.broadcast_to(tap * c + channel, (c_out, c * kh * kw))  # their columns in intq's im2col rows
    codes = w.transpose(0, 3, 1, 2).reshape(c_out, -1).astype(np.int32) + _OFFSET  # the uint8 weights as stored
    return OrtU8S8Avx2ConvIntegerParams(params, saturation.pair_saturation(codes, columns, other_max=128))


def run_conv_integer(p: OrtU8S8Avx2ConvIntegerParams, x, w=None):
    rows = fill_im2col(p.sums.im2col, x)  # int8 [N*OH*OW, KH*KW*C]: the int8 side, read as stored
    acc = conv_integer.exact_sums(p.sums, rows)
    corr = saturation.saturation_correction(p.pairs, rows, 0)  # saturation shrinks |acc|
    if corr is not None:
        acc = acc + corr
    return (acc.astype(np.int32).reshape(p.sums.out_shape),)


# -------------------------------------------------------------------------------- BATCH_MATMUL

@variant(batch_matmul.OP, family=U8S8_AVX2, applies=_uint8_activations, run=batch_matmul.run)
def prepare_batch_matmul(ctx: KernelContext):
    """A uint8 x int8 QLinearMatMul (an imported model's int8 constant operand: intq's export writes
    both operands uint8, which MLAS widens exactly) runs MLAS's int16-saturating U8S8 kernel, not
    measured on QLinearMatMul: refused by name (so the reference run is never bound)."""
    raise ctx.error(f"a uint8 x int8 QLinearMatMul (operand types {ctx.attr('onnx_operand_types')}) runs MLAS's "
                    f"int16-saturating U8S8 kernel on target {ctx.target.name!r}, which intq has not measured for "
                    "QLinearMatMul; use target 'ort-u8-vnni' (a CPU with VNNI) or int8 activations")
