"""DEPTHWISE_CONV_2D (NHWC): ``y[n,oy,ox,c*M+m] = requant(sum_{i,j} (x[n, oy*s_h - p_t + i*d_h,
ox*s_w - p_l + j*d_w, c] - Z_x) * w[0,i,j,c*M+m] + b[c*M+m]) + Z_y``, clamped to the fused
activation's range; ``M`` is the depth multiplier.

Contract (spec 003, TFLite ``depthwise_conv.cc`` Prepare): input int8 ``[N, H, W, C]`` per tensor;
weights int8 ``[1, KH, KW, C*M]`` constant, symmetric, per tensor or per output channel (axis 3);
bias int32 ``[C*M]`` optional; output int8 per tensor ``[N, OH, OW, C*M]``. Options: padding
SAME/VALID, stride_h/w >= 1, dilation_h/w_factor >= 1, depth_multiplier, fused activation.

Semantics verified in the sources: ``reference_integer_ops::DepthwiseConvPerChannel``
(kernels/internal/reference/integer_ops/depthwise_conv.h): int32 accumulation of
``w * (x + input_offset)`` over the in-image taps, + bias, ``MultiplyByQuantizedMultiplier`` (double
rounding), + output offset, clamp; output channel ``c*M + m`` reads input channel ``c``. Multipliers
from ``PopulateConvolutionQuantizationParams`` (``double(s_in) * double(s_w[c]) / double(s_out)``,
a per-tensor scale broadcast), padding from ``ComputePaddingHeightWidth``. LiteRT BUILTIN_REF and
TFLite Micro call the same reference kernel, with one difference in how they get ``M``: LiteRT's
``ComputeDepthMultiplier`` derives it from the shapes (``C_out / C_in``) and ignores the option,
TFLite Micro (``DepthwiseConvParamsQuantized``) uses the ``depth_multiplier`` option as is. intq
requires the option to equal ``C_out / C_in`` so that both runtimes compute the same thing, and
refuses the node otherwise (a missing option is TFLite's default, 0). A bias omitted as index -1
runs on neither runtime (LiteRT's Prepare fails, TFLite Micro's ``CalculateOpDataDepthwiseConv``
dereferences the null bias and crashes); a two-input node without bias runs on both. intq
computes either as "no bias".

Where the runtimes differ (measured with single-op models, tests/kernels/test_conv.py):

* ``litert-opt`` (LiteRT's optimized kernel, optimized/integer_ops/depthwise_conv.h
  ``DepthwiseConvGeneral``): the int32 accumulators are the same; its output stage
  (``optimized_ops::Quantize``) requantizes output channels in groups of 8 with NEON
  ``vqrdmulh`` + ``vrshl`` (NEON_2_SSE on x86: ``Requant.DOUBLE_HALF_UP``, the second rounding half
  up) and the remaining ``C_out % 8`` channels with the scalar ``MultiplyByQuantizedMultiplier``
  (gemmlowp, ``Requant.DOUBLE``). It dereferences the bias: a node without bias crashes LiteRT
  (segfault, measured), so intq refuses it for this target (:func:`bias_required`).
* ``xnnpack``: XNNPACK takes every int8 depthwise convolution intq accepts (measured) and
  requantizes in float32 (``rint(float(acc) * float(float(s_in * s_w) / s_out))``, half to even,
  clamp from ``xnn_qs8_quantize`` of the activation bounds). A node without bias crashes LiteRT
  under this resolver as well (measured), so ``xnnpack`` refuses it too.

``tpu-mlir`` target: TPU-MLIR's depthwise ``tpu.Conv2D`` (group = channels; explicit pads, the
model's multiplier/rshift), :mod:`intq.kernels.tpu_mlir.conv`.

Arithmetic: the input is copied once into a reused int32 buffer padded with ``Z_x`` (so padding
contributes ``Z_x * w - Z_x * w = 0`` after the zero-point expansion
``acc = sum(x * w) - Z_x * sum(w) + b``); a compiled loop (numba) accumulates, for every output
pixel, ``offset + sum over taps of x * w`` in int32 — innermost over the contiguous channels when
the depth multiplier is 1 — and the fused requantizer finishes. The int32 accumulator cannot
overflow: ``|acc| <= 255 * sum|w| + |b|`` is checked at prepare. The 16x8 kernel
(:mod:`intq.kernels.int16x8.depthwise_conv_2d`) runs the same tap loop in int64
(:class:`DepthwiseTaps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.kernels._conv_common import (
    ConvOperands,
    Padding2D,
    PaddedInput,
    check_accumulator,
    conv_bias,
    conv_operands,
    conv_padding,
    fill_padded,
    make_padded,
)
from intq.kernels import _ort_u8s8
from intq.kernels._conv_common import Im2col, fill_im2col, make_im2col
from intq.kernels.base import KernelContext, kernel
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.targets import Requant, Runtime
from intq.kernels.tpu_mlir import conv as tpu_mlir_conv

OP = "DEPTHWISE_CONV_2D"
VECTOR_CHANNELS = 8  # LiteRT's optimized output stage: channel groups of 8 through NEON, the rest scalar


def bias_required(target) -> bool:
    """LiteRT's optimized depthwise kernel reads the bias unconditionally (crashes without one);
    under the XNNPACK resolver a node without bias crashes LiteRT too (measured)."""
    return target.optimized



@dataclass(frozen=True, eq=False)
class DepthwiseTaps:
    """The tap loop's operands, in the accumulator's dtype (int32 for int8, int64 for 16x8), and its
    reused buffers (not re-entrant: one run at a time)."""

    weights: np.ndarray  # [KH*KW, C, M]
    offset: np.ndarray  # [C*M]: every output pixel's sum starts here
    tap_rows: np.ndarray  # int64 [KH*KW]: row offset of each tap in the padded input
    tap_cols: np.ndarray  # int64 [KH*KW]: column offset
    stride_h: int
    stride_w: int
    padded: PaddedInput  # border = Z_x, in the accumulator's dtype
    acc: np.ndarray  # [N, OH, OW, C*M], reused


def prepare_taps(ops: ConvOperands, offset: np.ndarray, pad: Padding2D, dtype) -> DepthwiseTaps:
    """Prepare the tap loop for the weights ``[1, KH, KW, C*M]`` of ``ops`` over its NHWC input,
    padded with the input's zero point, accumulating in ``dtype`` from ``offset`` (``[C*M]``)."""
    n, _, _, c = ops.in_shape
    _, kh, kw, c_out = ops.w.shape
    opts = ops.opts
    tap_rows = np.array([i * opts.dilation_h for i in range(kh) for _ in range(kw)], np.int64)
    tap_cols = np.array([j * opts.dilation_w for _ in range(kh) for j in range(kw)], np.int64)
    padded = make_padded(ops.in_shape, kh, kw, opts, pad, ops.in_qp.tensor_zero_point, dtype, always=True)
    # C order: a weight array that arrives transposed (F order) makes numba compile the tap loop for
    # any layout ('A'), measured 2-15x slower than the contiguous one
    weights = np.ascontiguousarray(ops.w.reshape(kh * kw, c, c_out // c), dtype=dtype)
    return DepthwiseTaps(weights, offset.astype(dtype), tap_rows, tap_cols, opts.stride_h, opts.stride_w, padded,
                         np.empty((n, pad.out_h, pad.out_w, c_out), dtype))


def depthwise_sums(t: DepthwiseTaps, x: np.ndarray) -> np.ndarray:
    """``acc[n,oy,ox,c*M+m] = offset[c*M+m] + sum_taps x_padded * w`` in ``t.acc`` (returned)."""
    _accumulate(fill_padded(t.padded, x), t.weights, t.tap_rows, t.tap_cols, t.stride_h, t.stride_w, t.offset, t.acc)
    return t.acc


@dataclass(frozen=True, eq=False)
class DepthwiseConv2DParams:
    """Prepared integers, the int32 tap loop and its reused buffers (not re-entrant)."""

    taps: DepthwiseTaps  # int32; offset b - Z_x * sum_taps(w)
    requant: Requantizer
    tail: Requantizer | None  # litert-opt: the last C_out % 8 channels (scalar gemmlowp rounding)
    split: int  # channels [0, split) use ``requant``, [split, C_out) ``tail``
    out_shape: tuple[int, int, int, int]


@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2DepthwiseParams:
    """``ort-u8s8-avx2`` with a depth multiplier ``M > 1``: onnxruntime's QLinearConv runs a grouped
    convolution (one U8S8 GEMM per input channel, K = the taps), so MLAS's int16 pair saturation
    applies to adjacent taps (:mod:`intq.kernels._ort_u8s8`); ``M = 1`` runs MLAS's depthwise
    kernel, exact (measured under QEMU -cpu Haswell: 0 of 200 models differ from ``ort-u8``)."""

    dw: DepthwiseConv2DParams
    pairs: _ort_u8s8.PairSaturation
    im2col: Im2col  # int8 rows [N*OH*OW, KH*KW*C] the pairs read


@kernel(OP)
def prepare(ctx: KernelContext) -> DepthwiseConv2DParams | OrtU8S8Avx2DepthwiseParams | tpu_mlir_conv.TpuMlirDepthwiseParams:
    if ctx.target.runtime is Runtime.TPU_MLIR:
        return tpu_mlir_conv.prepare_depthwise(ctx)
    ops = conv_operands(ctx, channel_axis=3)
    kh, kw, c_out = depthwise_shape(ctx, ops)
    refused = "crashes (measured) on" if bias_required(ctx.target) else None
    bias = conv_bias(ctx, 2, c_out, refused_without=refused)
    pad = conv_padding(ctx, ops, kh, kw, c_out)

    check_accumulator(ctx, ops.abs_weight_sums(), bias)
    zx = ops.in_qp.tensor_zero_point
    offset = bias - zx * ops.w.astype(np.int64).reshape(kh * kw, c_out).sum(axis=0)  # |.| <= 128 sum|w| + |b| < 2^31
    split, tail = c_out, None
    if ctx.target.optimized and not ctx.target.xnnpack and ctx.target.requant_for(OP) is Requant.DOUBLE_HALF_UP:
        split = c_out - c_out % VECTOR_CHANNELS
        if split < c_out:
            tail = ops.requantizer(ctx, OP, mode=Requant.DOUBLE, select=slice(split, None))
    requant = None
    if split > 0:
        requant = ops.requantizer(ctx, OP, select=slice(0, split))
    else:
        requant, tail, split = tail, None, c_out
    taps = prepare_taps(ops, offset, pad, np.int32)
    params = DepthwiseConv2DParams(taps, requant, tail, split, (ops.in_shape[0], pad.out_h, pad.out_w, c_out))
    c_in = ops.in_shape[3]
    if _ort_u8s8.saturates(ctx) and c_out > c_in:
        # output channel o multiplies input channel o // M at every tap: im2col column tap * C + o // M
        columns = np.arange(kh * kw)[None, :] * c_in + (np.arange(c_out) // (c_out // c_in))[:, None]
        pairs = _ort_u8s8.pair_saturation(ops.w.reshape(kh * kw, c_out).T, columns)
        return OrtU8S8Avx2DepthwiseParams(params, pairs, make_im2col(ops.in_shape, kh, kw, ops.opts, pad, zx))
    return params


def depthwise_shape(ctx: KernelContext, ops: ConvOperands) -> tuple[int, int, int]:
    """``(KH, KW, C*M)`` of depthwise weights ``[1, KH, KW, C*M]`` (int8 and 16x8). The depth
    multiplier ``M = C_out / C`` must be whole and equal the ``depth_multiplier`` option: LiteRT's
    ComputeDepthMultiplier takes it from the shapes, TFLite Micro from the option (absent: 0)."""
    one, kh, kw, c_out = ops.w.shape
    if one != 1:
        raise ctx.error(f"depthwise weights must have shape [1, KH, KW, C*M], got {list(ops.w.shape)}")
    c = ops.in_shape[3]
    if c_out % c:
        raise ctx.error(f"weights have {c_out} channels, not a multiple of the {c} input channels")
    mult = c_out // c
    option = ctx.attr("depth_multiplier", 0)  # TFLite's default when the option is absent
    if option != mult:
        raise ctx.error(f"depth_multiplier is {option!r} but the shapes give {c_out} / {c} = {mult}; LiteRT uses "
                        "the shapes and TFLite Micro the option, so they would differ: set the option to "
                        f"{mult}")
    return kh, kw, c_out


def run(p: DepthwiseConv2DParams | OrtU8S8Avx2DepthwiseParams, x, w=None, b=None):
    if type(p) is tpu_mlir_conv.TpuMlirDepthwiseParams:
        return tpu_mlir_conv.run_depthwise(p, x)
    if type(p) is OrtU8S8Avx2DepthwiseParams:
        acc = depthwise_sums(p.dw.taps, x)  # exact, then MLAS's saturated pairs (only shrink |acc|)
        corr = _ort_u8s8.saturation_correction(p.pairs, fill_im2col(p.im2col, x), 128)
        if corr is not None:
            acc = acc + corr.reshape(acc.shape)
        return (requantize(p.dw.requant, acc),)
    acc = depthwise_sums(p.taps, x)  # int32, |acc| < 2^31 (prepare)
    if p.tail is None:
        return (requantize(p.requant, acc),)
    out = np.empty(p.out_shape, p.requant.out_dtype)  # litert-opt: two channel groups, two roundings
    out[..., :p.split] = requantize(p.requant, acc[..., :p.split])
    out[..., p.split:] = requantize(p.tail, acc[..., p.split:])
    return (out,)


@njit(cache=True, nogil=True)
def _accumulate(padded, weights, tap_rows, tap_cols, stride_h, stride_w, offset, acc):
    """``acc[n,oy,ox,c*M+m] = offset[c*M+m] + sum_t padded[n, oy*s_h + r_t, ox*s_w + c_t, c] * w[t,c,m]``
    (in the arrays' integer dtype; the padded border holds Z_x, whose contribution the offset cancels).

    Pixels are rows of 2-D views (``[N*Hp*Wp, C]`` in, ``[N*OH*OW, C*M]`` out) indexed by computed
    row numbers: no array view per pixel (each costs a reference count; measured 1.1-2.4x slower)."""
    batch, out_h, out_w, cm = acc.shape
    _, hp, wp, channels = padded.shape
    taps, _, mult = weights.shape
    src = padded.reshape(batch * hp * wp, channels)
    dst = acc.reshape(batch * out_h * out_w, cm)
    w = weights.reshape(taps, channels * mult)
    for n in range(batch):
        for oy in range(out_h):
            for ox in range(out_w):
                r = (n * out_h + oy) * out_w + ox
                for k in range(cm):
                    dst[r, k] = offset[k]
                for t in range(taps):
                    p = (n * hp + oy * stride_h + tap_rows[t]) * wp + ox * stride_w + tap_cols[t]
                    if mult == 1:  # the usual case: one contiguous, vectorisable pass over channels
                        for c in range(channels):
                            dst[r, c] += src[p, c] * w[t, c]
                    else:
                        for c in range(channels):
                            v = src[p, c]
                            for m in range(mult):
                                dst[r, c * mult + m] += v * w[t, c * mult + m]
