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

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md).

Arithmetic: the input is copied once into a reused int32 buffer padded with ``Z_x`` (so padding
contributes ``Z_x * w - Z_x * w = 0`` after the zero-point expansion
``acc = sum(x * w) - Z_x * sum(w) + b``); a compiled loop (numba) accumulates, for every output
pixel, ``offset + sum over taps of x * w`` in int32 — innermost over the contiguous channels when
the depth multiplier is 1 — and the fused requantizer finishes. The int32 accumulator cannot
overflow: ``|acc| <= 255 * sum|w| + |b|`` is checked at prepare. The 16x8 kernel
(:func:`prepare_int16`) runs the same tap loop in int64
(:class:`DepthwiseTaps`).

**16x8** (int16 activations, int8 weights): ``y[.., c*M + m] = clamp(MBQM64(sum_taps x[.., c] * w[tap, c*M + m] + b))``.

Contract (spec 003, 16x8): input int16 ``[N, H, W, C]`` per tensor, zero point 0; weights int8
``[1, KH, KW, C*M]`` constant, symmetric, per tensor or per output channel (axis 3); bias int64
``[C*M]`` (zero point 0) or omitted; output int16 per tensor, zero point 0. ``depth_multiplier``
must equal ``C_out / C`` (LiteRT takes it from the shapes, TFLM from the option, as for int8).

Arithmetic — identical in LiteRT 2.3 (``reference_integer_ops::DepthwiseConvPerChannel`` for
int16 input with int64 bias, prepared by ``depthwise_conv.cc``) and TFLM
(``depthwise_conv_common.cc`` + the same reference function): the int64 sum over the in-image
taps, plus the bias, ``MultiplyByQuantizedMultiplier(int64 acc, m_o, shift_o)`` (16-bit reduced
multiplier, one rounding half up) with ``M_o = double(s_in) * double(s_w[o]) / double(s_out)``,
then the fused activation's clamp. ``|acc| <= 2^15 * sum|w_o| + |b_o| < 2^47`` (prepare).

Run: the int8 kernel's tap loop (:class:`intq.kernels.depthwise_conv_2d.DepthwiseTaps`) in int64,
over the input padded with its zero point 0, starting from the bias.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.kernels._conv_common import (
    ConvOperands,
    PaddedInput,
    Padding2D,
    check_accumulator,
    conv_bias,
    conv_operands,
    conv_padding,
    fill_padded,
    make_padded,
)
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels._int16_common import Int64Requant, conv_int64_requant, conv_operands_16x8, int64_bias, requantize_int64

OP = "DEPTHWISE_CONV_2D"


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
    tail: Requantizer | None  # the channels [split, C_out), where a runtime's output stage rounds them otherwise
    split: int  # channels [0, split) use ``requant``, [split, C_out) ``tail``
    out_shape: tuple[int, int, int, int]


@kernel(OP)
def prepare(ctx: KernelContext) -> DepthwiseConv2DParams:
    return prepare_depthwise(ctx)


def _one_requantizer(ctx: KernelContext, ops: ConvOperands, c_out: int) -> tuple[Requantizer, None, int]:
    return ops.requantizer(ctx, OP), None, c_out


def prepare_depthwise(ctx: KernelContext, *, bias_refused: str | None = None,
                      requantizers=_one_requantizer) -> DepthwiseConv2DParams:
    """The depthwise convolution's parameters; ``bias_refused`` says why the runtime refuses a node
    without bias (:func:`intq.kernels._conv_common.conv_bias`); ``requantizers(ctx, ops, C_out)``
    gives ``(requant, tail, split)``: one requantization for every channel by default."""
    ops = conv_operands(ctx, channel_axis=3)
    kh, kw, c_out = depthwise_shape(ctx, ops)
    bias = conv_bias(ctx, 2, c_out, refused_without=bias_refused)
    pad = conv_padding(ctx, ops, kh, kw, c_out)

    check_accumulator(ctx, ops.abs_weight_sums(), bias)
    zx = ops.in_qp.tensor_zero_point
    offset = bias - zx * ops.w.astype(np.int64).reshape(kh * kw, c_out).sum(axis=0)  # |.| <= 128 sum|w| + |b| < 2^31
    requant, tail, split = requantizers(ctx, ops, c_out)
    taps = prepare_taps(ops, offset, pad, np.int32)
    return DepthwiseConv2DParams(taps, requant, tail, split, (ops.in_shape[0], pad.out_h, pad.out_w, c_out))


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


def run(p: DepthwiseConv2DParams, x, w=None, b=None):
    acc = depthwise_sums(p.taps, x)  # int32, |acc| < 2^31 (prepare)
    if p.tail is None:
        return (requantize(p.requant, acc),)
    out = np.empty(p.out_shape, p.requant.out_dtype)  # two channel groups, two roundings
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


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True, eq=False)
class DepthwiseConv16x8Params:
    taps: DepthwiseTaps  # int64, offset = bias
    requant: Int64Requant


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> DepthwiseConv16x8Params:
    ops = conv_operands_16x8(ctx, channel_axis=3)
    kh, kw, c_out = depthwise_shape(ctx, ops)
    bias = int64_bias(ctx, 2, c_out)
    pad = conv_padding(ctx, ops, kh, kw, c_out)
    requant = conv_int64_requant(ctx, ops, bias)
    return DepthwiseConv16x8Params(prepare_taps(ops, bias, pad, np.int64), requant)


def run_int16(p: DepthwiseConv16x8Params, x, w=None, b=None):
    acc = depthwise_sums(p.taps, x)  # int64: |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc),)
