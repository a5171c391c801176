"""The ``ort_u8s8_avx2`` family (target ``ort-u8s8-avx2``, whose families are this one, then
``ort``): on an x86-64 CPU with AVX2 but without VNNI, MLAS's U8S8 GEMM sums adjacent uint8 x int8
products in int16 with saturation (:mod:`intq.kernels.ort.saturation`, measured under QEMU
``-cpu Haswell``). The operators whose onnxruntime kernels run that GEMM: CONV_2D, FULLY_CONNECTED,
DEPTHWISE_CONV_2D with a depth multiplier > 1, TRANSPOSE_CONV (as intq writes it: the stride-1
convolution of the zero-stuffed input with the flipped kernel), MATMUL_INTEGER. Each variant
prepares the ``ort`` kernel (the reference with onnxruntime's requantization contract, or
:mod:`intq.kernels.ort.gemm` for weights with a zero point) and adds the pairs that can saturate;
onnxruntime's depthwise kernel (one input and one output channel per group) is exact, so those
nodes keep the ``ort`` parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import conv_2d, depthwise_conv_2d, fully_connected, matmul_integer, transpose_conv
from intq.kernels._conv_common import Im2col, conv_operands, conv_padding, fill_im2col, make_im2col
from intq.kernels.base import KernelContext, variant
from intq.kernels.gemm import exact_matmul
from intq.kernels.ort import U8S8_AVX2, saturation
from intq.kernels.ort.gemm import OrtAsymmetricGemm, asymmetric_weights, prepare_asymmetric_gemm, run_asymmetric_gemm
from intq.kernels.requantize import requantize

#: what onnxruntime's uint8 codes add to intq's int8 ones (the family's targets run uint8 activations)
_OFFSET = 128


# ------------------------------------------------------------------------------------- CONV_2D

@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2Conv2DParams:
    """The exact convolution plus MLAS's int16 pair saturation on the im2col rows."""

    conv: conv_2d.Conv2DParams
    pairs: saturation.PairSaturation


@variant(conv_2d.OP, family=U8S8_AVX2,
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
    if c_g == 1 and c_out == groups:  # one input and one output channel per group: onnxruntime's depthwise
        return params  # kernel, exact (measured)
    # MLAS's K per group: taps, then the group's channels; their columns in intq's im2col rows
    tap, c = np.divmod(np.arange(kh * kw * c_g), c_g)
    group = np.arange(c_out) // (c_out // groups)
    columns = tap[None, :] * c_in + group[:, None] * c_g + c[None, :]
    return OrtU8S8Avx2Conv2DParams(params, saturation.pair_saturation(w.reshape(c_out, -1), columns))


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


@variant(fully_connected.OP, family=U8S8_AVX2,
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
    """Whether the node's depthwise weights have more output channels than its input (M > 1)."""
    w, x = (ctx.inputs[i] if i < len(ctx.inputs) else None for i in (1, 0))
    return (w is not None and x is not None and w.shape is not None and x.shape is not None and len(w.shape) == 4
            and len(x.shape) == 4 and w.shape[3] > x.shape[3])


@variant(depthwise_conv_2d.OP, family=U8S8_AVX2, applies=_depth_multiplied, run="run_depthwise")
def prepare_depthwise(ctx: KernelContext) -> OrtU8S8Avx2DepthwiseParams:
    params = depthwise_conv_2d.prepare(ctx)
    ops = conv_operands(ctx, channel_axis=3)
    _, kh, kw, c_out = ops.w.shape
    c_in = ops.in_shape[3]
    pad = conv_padding(ctx, ops, kh, kw, c_out)
    # output channel o multiplies input channel o // M at every tap: im2col column tap * C + o // M
    columns = np.arange(kh * kw)[None, :] * c_in + (np.arange(c_out) // (c_out // c_in))[:, None]
    pairs = saturation.pair_saturation(ops.w.reshape(kh * kw, c_out).T, columns)
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


@variant(transpose_conv.OP, family=U8S8_AVX2,
         run={transpose_conv.TransposeConvParams: transpose_conv.run,
              OrtU8S8Avx2TransposeConvParams: "run_transpose_conv"})
def prepare_transpose_conv(ctx: KernelContext) -> OrtU8S8Avx2TransposeConvParams | transpose_conv.TransposeConvParams:
    params = transpose_conv.prepare(ctx)
    _, h, w_in, c_in = ctx.input(2).shape
    w = ctx.constant(1, "weights")
    c_out = w.shape[0]
    if c_in == 1 and c_out == 1:  # onnxruntime's depthwise kernel: exact (as CONV_2D's)
        return params
    g = params.geometry
    flipped = w[:, ::-1, ::-1, :].reshape(c_out, -1)  # the export's kernel, taps then channels
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


@variant(matmul_integer.OP, family=U8S8_AVX2, run="run_matmul_integer")
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
