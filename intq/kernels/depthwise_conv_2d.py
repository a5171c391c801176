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

Arithmetic: one vectorised multiply-accumulate per filter tap over a block of output rows (a
Python loop over the KH*KW taps, and over cache-sized blocks of rows, each of all batches, all
columns and all channels; then that block's requantization). The input is copied once into a
reused int16 buffer padded with ``Z_x`` (so padding contributes ``Z_x * w - Z_x * w = 0`` after
the zero-point expansion ``acc = sum(x * w) - Z_x * sum(w) + b``); raw products satisfy
``|x * w| <= 128 * 127 = 16256``, so two taps are summed exactly in int16 (``<= 32512 < 2^15``)
before each int32 accumulation. The int32 accumulator cannot overflow:
``|acc| <= 255 * sum|w| + |b|`` is checked at prepare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import (
    BLOCK_ELEMENTS,
    check_accumulator,
    compute_padding,
    conv_bias,
    conv_requantizer,
    conv_weights,
    static_shape,
    window_options,
)
from intq.kernels.base import KernelContext
from intq.kernels.requantize import Requantizer, requantize

OP = "DEPTHWISE_CONV_2D"


@dataclass(frozen=True, eq=False)
class DepthwiseConv2DParams:
    """Prepared integers and reused scratch buffers (not re-entrant: one run at a time)."""

    weights: np.ndarray  # int16 [KH*KW, C, M]
    offset: np.ndarray  # int32 [C*M]: b - Z_x * sum_taps(w)
    requant: Requantizer
    taps: tuple[tuple[int, int], ...]  # (row, column) offset of each tap in the padded input
    top: int
    left: int
    stride_h: int
    stride_w: int
    padded: np.ndarray  # int16 [N, Hp, Wp, C], border = Z_x
    block_rows: int  # output rows per block
    acc: np.ndarray  # int32 [N, block_rows, OW, C, M]
    products: tuple[np.ndarray, np.ndarray]  # int16 [N, block_rows, OW, C, M] scratch
    out_shape: tuple[int, int, int, int]


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
    zx = int(in_qp.zero_point[0])
    offset = (bias - zx * w64.sum(axis=0)).astype(np.int32)  # |offset| <= 128 * sum|w| + |b| < 2^31
    requant = conv_requantizer(ctx, OP, in_qp, w_qp, out_qp, c_out, opts.activation, y.dtype)

    need_h = (pad.out_h - 1) * opts.stride_h + (kh - 1) * opts.dilation_h + 1
    need_w = (pad.out_w - 1) * opts.stride_w + (kw - 1) * opts.dilation_w + 1
    padded = np.full((n, max(pad.top + h, need_h), max(pad.left + w_in, need_w), c), zx, np.int16)
    taps = tuple((i * opts.dilation_h, j * opts.dilation_w) for i in range(kh) for j in range(kw))
    block_rows = min(pad.out_h, max(1, BLOCK_ELEMENTS // (n * pad.out_w * c_out)))
    acc_shape = (n, block_rows, pad.out_w, c, mult)
    return DepthwiseConv2DParams(
        weights=w.reshape(kh * kw, c, mult).astype(np.int16), offset=offset, requant=requant, taps=taps,
        top=pad.top, left=pad.left, stride_h=opts.stride_h, stride_w=opts.stride_w, padded=padded,
        block_rows=block_rows, acc=np.empty(acc_shape, np.int32),
        products=(np.empty(acc_shape, np.int16), np.empty(acc_shape, np.int16)), out_shape=out_shape)


def run(p: DepthwiseConv2DParams, x, w=None, b=None):
    n, oh, ow, c_out = p.out_shape
    h, w_in = x.shape[1], x.shape[2]
    p.padded[:, p.top:p.top + h, p.left:p.left + w_in, :] = x
    out = np.empty(p.out_shape, p.requant.out_dtype)
    span_w = (ow - 1) * p.stride_w + 1
    for r0 in range(0, oh, p.block_rows):  # blocks of output rows: the scratch stays in cache
        rows = min(p.block_rows, oh - r0)
        acc, first, second = p.acc[:, :rows], p.products[0][:, :rows], p.products[1][:, :rows]
        span_h = (rows - 1) * p.stride_h + 1
        for k in range(0, len(p.taps), 2):  # two taps per int16 partial sum: |x*w + x'*w'| <= 32512
            y0, x0 = p.taps[k]
            y0 += r0 * p.stride_h
            np.multiply(p.padded[:, y0:y0 + span_h:p.stride_h, x0:x0 + span_w:p.stride_w, :, None],
                        p.weights[k], out=first)
            if k + 1 < len(p.taps):
                y1, x1 = p.taps[k + 1]
                y1 += r0 * p.stride_h
                np.multiply(p.padded[:, y1:y1 + span_h:p.stride_h, x1:x1 + span_w:p.stride_w, :, None],
                            p.weights[k + 1], out=second)
                np.add(first, second, out=first)
            if k == 0:
                np.copyto(acc, first)
            else:
                np.add(acc, first, out=acc)
        block = acc.reshape(n, rows, ow, c_out)
        np.add(block, p.offset, out=block)  # |acc| < 2^31 (prepare)
        out[:, r0:r0 + rows] = requantize(p.requant, block)
    return (out,)
