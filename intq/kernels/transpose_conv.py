"""TRANSPOSE_CONV (NHWC): every input pixel scatters ``(x[n,iy,ix,c] - Z_x) * w[o,i,j,c]`` into
``acc[n, iy*s_h - p_t + i, ix*s_w - p_l + j, o]`` (contributions landing outside the output are
dropped); ``y = requant(acc + b[o]) + Z_y``, clamped.

Contract (TFLite ``transpose_conv.cc`` Prepare): inputs ``(output_shape, weights, input[, bias])``
— output_shape int32 ``[4]`` constant, equal to the output tensor's static shape; weights int8
``[C_out, KH, KW, C_in]`` constant, symmetric, per tensor or per output channel (axis 0); input
int8 ``[N, H, W, C_in]`` per tensor; bias int32 ``[C_out]`` optional (index -1 or absent); output
int8 per tensor. Options: padding SAME/VALID, stride_h/w >= 1, fused activation (see below).
No dilation (TFLite has none for this op).

Semantics verified in the sources: ``reference_integer_ops::TransposeConv``
(kernels/internal/reference/integer_ops/transpose_conv.h) scatters into an int32 scratch buffer
exactly as above, then bias, ``MultiplyByQuantizedMultiplier`` (double rounding), output offset,
clamp. Multipliers from ``PopulateConvolutionQuantizationParams`` (double product, per channel on
axis 0). Padding: ``ComputePaddingHeightWidth`` run on the *output* height/width as if it were a
convolution's input (stride, dilation 1, the kernel size); only the leading padding is used.
LiteRT BUILTIN_REF (``transpose_conv.cc``, kReference) and TFLite Micro (``transpose_conv.cc``)
call the same reference kernel. Fused activation: both compute the clamp from the node's
activation (LiteRT's Prepare reads it through a ``TfLiteConvParams`` cast whose ``activation``
field lines up; TFLite Micro's ``CalculateOpData`` passes ``params->activation`` — older TFLite
Micro sources passed ``kTfLiteActNone``, the pinned build applies it, measured by
tests/kernels/test_conv.py).

Difference between the targets: LiteRT 2.3's Prepare also requires the input size to be the one
a convolution of the output would produce, ``ComputeOutSize(padding, out, k, stride) == in`` per
axis (its error "computed_input_height != SizeOfDimension(input, 1)"; measured on every
combination of padding, k <= 4, stride <= 3, in <= 4, out <= 13), and refuses other sizes; TFLite
Micro accepts any output size and crops or leaves zeros. The ``litert-ref`` target refuses such
nodes as LiteRT does (:data:`SIZE_CHECKED_BY`); ``tflite`` computes them as TFLite Micro does.

Where the optimized targets differ (measured with single-op models, tests/kernels/test_conv.py and
tests/kernels/test_optimized_targets.py; explained from transpose_conv.cc and
optimized/integer_ops/transpose_conv.h):

* ``litert-opt`` (``optimized_integer_ops::TransposeConvV2``): a ruy GEMM of the raw input (its zero
  point as the GEMM's) against the weights as ``[KH*KW*C_out, C_in]``, ``Col2im`` into the int32
  scratch buffer, ``BiasAdd`` (skipped without bias) — the reference accumulators — then
  ``optimized_ops::Quantize``, the output stage of the optimized DEPTHWISE_CONV_2D: output
  channels ``[0, 8 floor(C_out/8))`` through NEON ``vqrdmulh`` + ``vrshl`` (``Requant.DOUBLE_HALF_UP``),
  the last ``C_out mod 8`` through the scalar gemmlowp ``MultiplyByQuantizedMultiplier``
  (``Requant.DOUBLE``): :class:`OptimizedTransposeConvParams` when both groups exist.
* ``xnnpack``: the delegate takes an int8 TRANSPOSE_CONV (``VisitTransposeConvNode``) unless its
  padding is SAME with a kernel smaller than the stride (:func:`xnnpack_takes`), and requantizes
  like its convolutions: ``rint(float32(acc) * float32(float32(s_in * s_w) / s_out))``, half to
  even, clamp from ``xnn_qs8_quantize`` (``Requant.FLOAT32_RNE``). A node it declines runs LiteRT's
  optimized kernel, as ``litert-opt``.

``tpu-mlir`` target: TPU-MLIR's ``tpu.Deconv`` with its raw int32 output (:mod:`intq.kernels.tpu_mlir.deconv`).

Arithmetic: one exact GEMM (:func:`intq.kernels.gemm.exact_matmul`) of the raw input
``[N*H*W, C_in]`` against the weights as ``[KH*KW*C_out, C_in]`` gives every tap's contribution;
``- Z_x * sum_c w[o,i,j,c]`` is folded per (tap, channel) at prepare; a Python loop over the
KH*KW taps adds each tap's contributions into a strided slice of an int32 buffer covering the
full (uncropped) output, which is then cropped by the padding. The accumulator cannot overflow:
``|acc| <= 255 * sum|w_o| + |b_o|`` is checked at prepare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import (
    ConvOperands,
    check_accumulator,
    compute_padding,
    conv_bias,
    conv_operands,
    static_shape,
)
from intq.kernels import _ort_u8s8
from intq.kernels.base import KernelContext, kernel
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.targets import Requant, Runtime
from intq.kernels.tpu_mlir import deconv as tpu_mlir_deconv

OP = "TRANSPOSE_CONV"
VECTOR_CHANNELS = 8  # optimized_ops::Quantize: output channels in groups of 8 through NEON, the rest scalar

#: Targets whose runtime refuses an input size that a convolution of the output would not give.
SIZE_CHECKED_BY = frozenset({Runtime.LITERT})


@dataclass(frozen=True)
class TransposeGeometry:
    """Where each input pixel's taps land (int8 and 16x8): tap ``(i, j)`` of input pixel ``(iy, ix)``
    adds into ``(iy * stride_h + i, ix * stride_w + j)`` of an uncropped buffer of ``full_hw``,
    whose window ``[top, top + OH) x [left, left + OW)`` is the output."""

    kh: int
    kw: int
    stride_h: int
    stride_w: int
    top: int
    left: int
    full_hw: tuple[int, int]  # the uncropped scatter buffer's height and width
    out_shape: tuple[int, int, int, int]


@dataclass(frozen=True, eq=False)
class TransposeConvParams:
    gemm: PreparedGemm  # weights [KH*KW*C_out, C_in]
    tap_offset: np.ndarray  # int32 [KH, KW, C_out]: -Z_x * sum_c w[o,i,j,c]
    bias: np.ndarray  # int64 [C_out]
    requant: Requantizer
    geometry: TransposeGeometry

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return self.geometry.out_shape


@dataclass(frozen=True, eq=False)
class OptimizedTransposeConvParams:
    """``litert-opt`` (and nodes XNNPACK declines): the reference accumulators, two output stages —
    NEON half-up double rounding on channels ``[0, split)``, gemmlowp's on ``[split, C_out)``."""

    sums: TransposeConvParams  # the scatter; its ``requant`` and ``bias`` cover channels [0, split)
    split: int  # 8 floor(C_out / 8), in (0, C_out)
    tail: Requantizer  # channels [split, C_out): Requant.DOUBLE
    tail_bias: np.ndarray  # int64 [C_out - split]


@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2TransposeConvParams:
    """``ort-u8s8-avx2``: intq's ONNX export writes TRANSPOSE_CONV as a QLinearConv (stride 1, kernel
    flipped) of the zero-stuffed input, so MLAS's int16 pair saturation applies along that
    convolution's im2col rows (:mod:`intq.kernels._ort_u8s8`): the exact sums plus the correction
    computed on the stuffed input. ``rows_h`` / ``rows_w``: for each row / column of the stuffed,
    padded input the convolution reads (``OH + KH - 1`` by ``OW + KW - 1``), the input row / column
    it holds, or -1 for the zero point (``u[r] = x[(r - lead) / s]`` where that divides)."""

    sums: TransposeConvParams
    pairs: _ort_u8s8.PairSaturation
    rows_h: np.ndarray  # int64 [OH + KH - 1]
    rows_w: np.ndarray  # int64 [OW + KW - 1]
    zero_point: int  # Z_x (intq's int8 code)


def _stuffed_rows(out: int, k: int, top: int, stride: int, size: int) -> np.ndarray:
    """Which input row each of the ``out + k - 1`` rows of the stuffed input the export's
    convolution reads holds (-1: the zero point); ``lead = k - 1 - top`` as the exporter pads."""
    t = np.arange(out + k - 1) - (k - 1 - top)
    src = np.where(t % stride == 0, t // stride, -1)
    return np.where((t >= 0) & (src >= 0) & (src < size), src, -1).astype(np.int64)


def xnnpack_takes(padding: str, kernel_hw: tuple[int, int], stride_hw: tuple[int, int]) -> bool:
    """Whether LiteRT's XNNPACK delegate takes an int8 TRANSPOSE_CONV intq accepts for LiteRT
    (``CalculateTransposeConvPaddings``): SAME padding needs each kernel dimension >= its stride
    (VALID's "output smaller than the kernel" cannot pass LiteRT's size check)."""
    return padding != "SAME" or all(k >= s for k, s in zip(kernel_hw, stride_hw))


@kernel(OP)
def prepare(ctx: KernelContext) -> TransposeConvParams | OptimizedTransposeConvParams | tpu_mlir_deconv.TpuMlirDeconvParams:
    if ctx.target.runtime is Runtime.TPU_MLIR:
        return tpu_mlir_deconv.prepare(ctx)
    ctx.check_emulated()
    ops = conv_operands(ctx, channel_axis=0, input_index=2, dilation=False)
    geometry = transpose_geometry(ctx, ops)
    c_out = ops.w.shape[0]
    bias = conv_bias(ctx, 3, c_out)
    check_accumulator(ctx, ops.abs_weight_sums(), bias)
    matrix = tap_matrix(ops.w)
    gemm = prepare_gemm(matrix)
    zx = ops.in_qp.tensor_zero_point
    tap_offset = (-zx * gemm.weight_sums).astype(np.int32).reshape(geometry.kh, geometry.kw, c_out)  # |.| <= 128 * 127 * C_in
    kh, kw, opts = geometry.kh, geometry.kw, ops.opts

    def params(requant: Requantizer, channels: slice = slice(None)) -> TransposeConvParams:
        return TransposeConvParams(gemm, tap_offset, bias[channels], requant, geometry)

    if _ort_u8s8.saturates(ctx):
        _, h, w_in, c_in = ops.in_shape
        if c_in == 1 and c_out == 1:  # onnxruntime's depthwise kernel: exact (as CONV_2D's)
            return params(ops.requantizer(ctx, OP))
        flipped = ops.w[:, ::-1, ::-1, :].reshape(c_out, -1)  # the export's kernel, taps then channels
        return OrtU8S8Avx2TransposeConvParams(
            params(ops.requantizer(ctx, OP)), _ort_u8s8.pair_saturation(flipped),
            _stuffed_rows(geometry.out_shape[1], kh, geometry.top, geometry.stride_h, h),
            _stuffed_rows(geometry.out_shape[2], kw, geometry.left, geometry.stride_w, w_in), zx)
    xnnpack = ctx.target.xnnpack and xnnpack_takes(opts.padding, (kh, kw), (opts.stride_h, opts.stride_w))
    if not ctx.target.optimized or xnnpack:
        return params(ops.requantizer(ctx, OP))  # reference, or XNNPACK's float32 requantization
    split = c_out - c_out % VECTOR_CHANNELS  # LiteRT's optimized kernel: two channel groups
    vector, scalar = ctx.target.requant_for(OP), Requant.DOUBLE
    if split in (0, c_out):
        return params(ops.requantizer(ctx, OP, mode=vector if split else scalar))
    head = params(ops.requantizer(ctx, OP, mode=vector, select=slice(0, split)), slice(0, split))
    tail = ops.requantizer(ctx, OP, mode=scalar, select=slice(split, None))
    return OptimizedTransposeConvParams(head, split, tail, bias[split:])


def run(p: TransposeConvParams | OptimizedTransposeConvParams | tpu_mlir_deconv.TpuMlirDeconvParams, output_shape, w, x,
        b=None):
    if type(p) is tpu_mlir_deconv.TpuMlirDeconvParams:
        return tpu_mlir_deconv.run(p, x)
    if type(p) is OrtU8S8Avx2TransposeConvParams:
        acc = _sums(p.sums, x)
        corr = _ort_u8s8.saturation_correction(p.pairs, _stuffed_im2col(p, x), 128)
        if corr is not None:
            acc = acc + corr
        return (requantize(p.sums.requant, acc, p.sums.bias).reshape(p.sums.out_shape),)
    if isinstance(p, OptimizedTransposeConvParams):
        acc = _sums(p.sums, x)
        out = np.empty(acc.shape, p.tail.out_dtype)
        out[:, :p.split] = requantize(p.sums.requant, acc[:, :p.split], p.sums.bias)
        out[:, p.split:] = requantize(p.tail, acc[:, p.split:], p.tail_bias)
        return (out.reshape(p.sums.out_shape),)
    return (requantize(p.requant, _sums(p, x), p.bias).reshape(p.out_shape),)  # |acc + b| < 2^31 (prepare)


def _stuffed_im2col(p: OrtU8S8Avx2TransposeConvParams, x) -> np.ndarray:
    """The im2col rows ``[N*OH*OW, KH*KW*C_in]`` (taps, then channels) of the stuffed input."""
    g = p.sums.geometry
    n, c = x.shape[0], x.shape[3]
    u = np.full((n, p.rows_h.size, p.rows_w.size, c), p.zero_point, x.dtype)
    vh, vw = np.nonzero(p.rows_h >= 0)[0], np.nonzero(p.rows_w >= 0)[0]
    u[:, vh[:, None], vw[None, :]] = x[:, p.rows_h[vh][:, None], p.rows_w[vw][None, :]]
    win = np.lib.stride_tricks.sliding_window_view(u, (g.kh, g.kw), axis=(1, 2))  # [N, OH, OW, C, KH, KW]
    return np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(-1, g.kh * g.kw * c)


def _sums(p: TransposeConvParams, x) -> np.ndarray:
    """The int32 accumulators ``[N*OH*OW, C_out]`` of every output pixel, bias not included."""
    g = p.geometry
    n, h, w_in, c_in = x.shape
    cols = exact_matmul(x.reshape(-1, c_in), p.gemm).reshape(n, h, w_in, g.kh, g.kw, g.out_shape[3])
    cols += p.tap_offset  # each tap's contribution, |.| <= 255 * sum|w| < 2^31 (prepare)
    return scatter(g, cols)


def transpose_geometry(ctx: KernelContext, ops: ConvOperands) -> TransposeGeometry:
    """The contract shared by the int8 and 16x8 kernels (module docstring) and the scatter geometry:
    output_shape (input 0) a constant int32 [4] equal to the output's static shape; weights
    ``[C_out, KH, KW, C_in]`` matching the input's channels; on a target whose runtime checks it
    (:data:`SIZE_CHECKED_BY`), the input size a convolution of the output gives."""
    n, h, w_in, c_in = ops.in_shape
    out_shape = static_shape(ctx, ctx.outputs[0], "output", 4)
    requested = ctx.constant(0, "output_shape")
    if requested.dtype != np.int32 or requested.shape != (4,):
        raise ctx.error(f"output_shape {ctx.input(0).name!r} must be int32 [4], got {requested.dtype.name} "
                        f"{list(requested.shape)}")
    if tuple(int(v) for v in requested) != out_shape:
        raise ctx.error(f"output_shape {requested.tolist()} differs from the output tensor's shape {list(out_shape)}")
    c_out, kh, kw, c_w = ops.w.shape
    if c_w != c_in:
        raise ctx.error(f"weights [C_out, KH, KW, C_in] have {c_w} input channels, the input has {c_in}")
    if out_shape[0] != n or out_shape[3] != c_out:
        raise ctx.error(f"output shape {list(out_shape)} must be [{n}, OH, OW, {c_out}]")
    if out_shape[1] < 1 or out_shape[2] < 1:
        raise ctx.error(f"output shape {list(out_shape)} is empty")
    opts = ops.opts
    oh, ow = out_shape[1], out_shape[2]
    pad = compute_padding(opts.padding, (oh, ow), (kh, kw), (opts.stride_h, opts.stride_w), (1, 1))
    if ctx.target.runtime in SIZE_CHECKED_BY and (pad.out_h, pad.out_w) != (h, w_in):
        raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) refuses this output size: a {opts.padding} "
                        f"convolution of the {oh}x{ow} output gives {pad.out_h}x{pad.out_w}, not the {h}x{w_in} input")
    full_hw = (max((h - 1) * opts.stride_h + kh, pad.top + oh), max((w_in - 1) * opts.stride_w + kw, pad.left + ow))
    return TransposeGeometry(kh, kw, opts.stride_h, opts.stride_w, pad.top, pad.left, full_hw, out_shape)


def tap_matrix(w: np.ndarray) -> np.ndarray:
    """Weights ``[C_out, KH, KW, C_in]`` as ``[KH*KW*C_out, C_in]``, row ``(i, j, o)``: one GEMM of the
    input pixels against it gives every tap's contribution."""
    c_out, kh, kw, c_in = w.shape
    return np.ascontiguousarray(w.transpose(1, 2, 0, 3)).reshape(kh * kw * c_out, c_in)


def scatter(g: TransposeGeometry, cols: np.ndarray) -> np.ndarray:
    """Add each tap's contributions ``cols`` ``[N, H, W, KH, KW, C_out]`` (int32 or int64) into the
    strided slices of a zeroed buffer covering the uncropped output; returns the output window as
    ``[N*OH*OW, C_out]`` in ``cols``' dtype."""
    n, h, w_in = cols.shape[:3]
    _, oh, ow, c_out = g.out_shape
    full = np.zeros((n, *g.full_hw, c_out), cols.dtype)
    span_h, span_w = (h - 1) * g.stride_h + 1, (w_in - 1) * g.stride_w + 1
    for i in range(g.kh):
        for j in range(g.kw):
            target = full[:, i:i + span_h:g.stride_h, j:j + span_w:g.stride_w, :]
            np.add(target, cols[:, :, :, i, j, :], out=target)
    return np.ascontiguousarray(full[:, g.top:g.top + oh, g.left:g.left + ow, :]).reshape(-1, c_out)
