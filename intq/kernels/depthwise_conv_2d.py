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

Arithmetic: the input is copied once into a reused int32 buffer padded with ``Z_x`` (so padding
contributes ``Z_x * w - Z_x * w = 0`` after the zero-point expansion
``acc = sum(x * w) - Z_x * sum(w) + b``); a compiled loop (numba) accumulates, for every output
pixel, ``offset + sum over taps of x * w`` in int32 — innermost over the contiguous channels when
the depth multiplier is 1 — and the fused requantizer finishes. The int32 accumulator cannot
overflow: ``|acc| <= 255 * sum|w| + |b|`` is checked at prepare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.kernels._conv_common import (
    check_accumulator,
    compute_padding,
    conv_bias,
    conv_requantizer,
    conv_weights,
    static_shape,
    window_options,
)
from intq.kernels.base import KernelContext, kernel
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.targets import Requant

OP = "DEPTHWISE_CONV_2D"
VECTOR_CHANNELS = 8  # LiteRT's optimized output stage: channel groups of 8 through NEON, the rest scalar


def bias_required(target) -> bool:
    """LiteRT's optimized depthwise kernel reads the bias unconditionally (crashes without one);
    under the XNNPACK resolver a node without bias crashes LiteRT too (measured)."""
    return target.optimized



@dataclass(frozen=True, eq=False)
class DepthwiseConv2DParams:
    """Prepared integers and reused scratch buffers (not re-entrant: one run at a time)."""

    weights: np.ndarray  # int32 [KH*KW, C, M]
    offset: np.ndarray  # int32 [C*M]: b - Z_x * sum_taps(w)
    requant: Requantizer
    tail: Requantizer | None  # litert-opt: the last C_out % 8 channels (scalar gemmlowp rounding)
    split: int  # channels [0, split) use ``requant``, [split, C_out) ``tail``
    tap_rows: np.ndarray  # int64 [KH*KW]: row offset of each tap in the padded input
    tap_cols: np.ndarray  # int64 [KH*KW]: column offset
    top: int
    left: int
    stride_h: int
    stride_w: int
    padded: np.ndarray  # int32 [N, Hp, Wp, C], border = Z_x
    acc: np.ndarray  # int32 [N, OH, OW, C*M], reused
    out_shape: tuple[int, int, int, int]


@kernel(OP)
def prepare(ctx: KernelContext) -> DepthwiseConv2DParams:
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = ctx.per_tensor(x, "input")
    out_qp = ctx.per_tensor(y, "output")
    n, h, w_in, c = static_shape(ctx, x, "input", 4)
    w, w_qp = conv_weights(ctx, 1, channel_axis=3)
    one, kh, kw, c_out = w.shape
    if one != 1:
        raise ctx.error(f"depthwise weights must have shape [1, KH, KW, C*M], got {list(w.shape)}")
    if c_out % c:
        raise ctx.error(f"weights have {c_out} channels, not a multiple of the {c} input channels")
    mult = c_out // c
    option = ctx.attr("depth_multiplier", 0)  # TFLite's default when the option is absent
    if option != mult:
        raise ctx.error(f"depth_multiplier is {option!r} but the shapes give {c_out} / {c} = {mult}; LiteRT uses "
                        "the shapes and TFLite Micro the option, so they would differ: set the option to "
                        f"{mult}")
    if not ctx.has_input(2) and bias_required(ctx.target):
        raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) crashes on a DEPTHWISE_CONV_2D "
                        "without bias (measured); give it a zero int32 bias")
    bias = conv_bias(ctx, 2, c_out)
    opts = window_options(ctx)
    pad = compute_padding(opts.padding, (h, w_in), (kh, kw), (opts.stride_h, opts.stride_w),
                          (opts.dilation_h, opts.dilation_w))
    out_shape = (n, pad.out_h, pad.out_w, c_out)
    if pad.out_h < 1 or pad.out_w < 1:
        raise ctx.error(f"a {kh}x{kw} kernel (dilation {opts.dilation_h}x{opts.dilation_w}) with {opts.padding} "
                        f"padding leaves no output for a {h}x{w_in} input")
    if static_shape(ctx, y, "output", 4) != out_shape:
        raise ctx.error(f"output shape {list(y.shape)} does not match the computed {list(out_shape)}")

    w64 = w.reshape(kh * kw, c_out).astype(np.int64)
    check_accumulator(ctx, np.abs(w64).sum(axis=0), bias)
    zx = in_qp.tensor_zero_point
    offset = (bias - zx * w64.sum(axis=0)).astype(np.int32)  # |offset| <= 128 * sum|w| + |b| < 2^31
    split, tail = c_out, None
    if ctx.target.optimized and not ctx.target.xnnpack and ctx.target.requant_for(OP) is Requant.DOUBLE_HALF_UP:
        split = c_out - c_out % VECTOR_CHANNELS
        if split < c_out:
            tail = conv_requantizer(ctx, OP, in_qp, w_qp, out_qp, c_out, opts.activation, y.dtype,
                                    mode=Requant.DOUBLE, select=slice(split, None))
    requant = None
    if split > 0:
        requant = conv_requantizer(ctx, OP, in_qp, w_qp, out_qp, c_out, opts.activation, y.dtype,
                                   select=slice(0, split))
    else:
        requant, tail, split = tail, None, c_out

    need_h = (pad.out_h - 1) * opts.stride_h + (kh - 1) * opts.dilation_h + 1
    need_w = (pad.out_w - 1) * opts.stride_w + (kw - 1) * opts.dilation_w + 1
    padded = np.full((n, max(pad.top + h, need_h), max(pad.left + w_in, need_w), c), zx, np.int32)
    tap_rows = np.array([i * opts.dilation_h for i in range(kh) for _ in range(kw)], np.int64)
    tap_cols = np.array([j * opts.dilation_w for _ in range(kh) for j in range(kw)], np.int64)
    return DepthwiseConv2DParams(
        weights=w.reshape(kh * kw, c, mult).astype(np.int32), offset=offset, requant=requant, tail=tail, split=split,
        tap_rows=tap_rows, tap_cols=tap_cols, top=pad.top, left=pad.left, stride_h=opts.stride_h,
        stride_w=opts.stride_w, padded=padded, acc=np.empty(out_shape, np.int32), out_shape=out_shape)


def run(p: DepthwiseConv2DParams, x, w=None, b=None):
    h, w_in = x.shape[1], x.shape[2]
    p.padded[:, p.top:p.top + h, p.left:p.left + w_in, :] = x
    _accumulate(p.padded, p.weights, p.tap_rows, p.tap_cols, p.stride_h, p.stride_w, p.offset, p.acc)
    if p.tail is None:
        return (requantize(p.requant, p.acc),)  # |acc| < 2^31 (prepare)
    out = np.empty(p.out_shape, p.requant.out_dtype)  # litert-opt: two channel groups, two roundings
    out[..., :p.split] = requantize(p.requant, p.acc[..., :p.split])
    out[..., p.split:] = requantize(p.tail, p.acc[..., p.split:])
    return (out,)


@njit(cache=True, nogil=True)
def _accumulate(padded, weights, tap_rows, tap_cols, stride_h, stride_w, offset, acc):
    """``acc[n,oy,ox,c*M+m] = offset[c*M+m] + sum_t padded[n, oy*s_h + r_t, ox*s_w + c_t, c] * w[t,c,m]``
    (int32; the padded border holds Z_x, whose contribution the offset cancels)."""
    batch, out_h, out_w, cm = acc.shape
    taps, channels, mult = weights.shape
    flat_w = weights.reshape(taps, channels * mult)
    for n in range(batch):
        for oy in range(out_h):
            for ox in range(out_w):
                row = acc[n, oy, ox]
                row[:] = offset
                for t in range(taps):
                    src = padded[n, oy * stride_h + tap_rows[t], ox * stride_w + tap_cols[t]]
                    w = flat_w[t]
                    if mult == 1:  # the usual case: one contiguous, vectorisable pass over channels
                        for c in range(channels):
                            row[c] += src[c] * w[c]
                    else:
                        for c in range(channels):
                            v = np.int32(src[c])
                            for m in range(mult):
                                row[c * mult + m] += v * w[c * mult + m]
