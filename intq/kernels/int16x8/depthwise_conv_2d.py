"""DEPTHWISE_CONV_2D, 16x8: ``y[.., c*M + m] = clamp(MBQM64(sum_taps x[.., c] * w[tap, c*M + m] + b))``.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import conv_weights, static_shape, window_options
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import (
    INT64_ACC_LIMIT,
    Int64Requant,
    fused_activation_range,
    int16_tensor,
    int64_bias,
    make_int64_requant,
    reference_runtime,
    requantize_int64,
)
from intq.kernels.int16x8._window import Window, make_window, patches
from intq.qmath import effective_scale

OP = "DEPTHWISE_CONV_2D"


@dataclass(frozen=True, eq=False)
class DepthwiseConv16x8Params:
    window: Window
    source_channel: np.ndarray  # int64 [C*M]: output channel o reads input channel o // M
    weights: np.ndarray  # int64 [KH*KW, C*M]
    bias: np.ndarray  # int64 [C*M]
    requant: Int64Requant
    out_shape: tuple[int, int, int, int]


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> DepthwiseConv16x8Params:
    reference_runtime(ctx)
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = int16_tensor(ctx, x, "input")
    out_qp = int16_tensor(ctx, y, "output")
    n, h, w_in, c = static_shape(ctx, x, "input", 4)
    w, w_qp = conv_weights(ctx, 1, channel_axis=3)
    one, kh, kw, c_out = w.shape
    if one != 1 or c_out % c:
        raise ctx.error(f"weights {list(w.shape)} must be [1, KH, KW, C*M] for {c} input channels")
    mult = c_out // c
    if ctx.attr("depth_multiplier", 0) != mult:
        raise ctx.error(f"depth_multiplier is {ctx.attr('depth_multiplier', 0)!r} but the shapes give "
                        f"{c_out} / {c} = {mult}; LiteRT uses the shapes, TFLite Micro the option: make them equal")
    bias = int64_bias(ctx, 2, c_out)
    opts = window_options(ctx)
    g = make_window(ctx, (h, w_in), kh, kw, opts)
    out_shape = (n, g.out_h, g.out_w, c_out)
    if static_shape(ctx, y, "output", 4) != out_shape:
        raise ctx.error(f"output shape {list(y.shape)} does not match the computed {list(out_shape)}")
    w64 = w.astype(np.int64).reshape(kh * kw, c_out)
    bound = int(((1 << 15) * np.abs(w64).sum(axis=0) + np.abs(bias)).max())
    if bound >= INT64_ACC_LIMIT:
        raise ctx.error(f"the accumulator can exceed 2^47 (|acc| up to {bound}); split the layer")
    s_w = w_qp.scale if w_qp.per_axis else np.broadcast_to(w_qp.scale, (c_out,))
    real = effective_scale(in_qp.scale[0], s_w, out_qp.scale[0], product_dtype=np.float64)
    lo, hi = fused_activation_range(ctx, out_qp)
    return DepthwiseConv16x8Params(g, np.arange(c_out, dtype=np.int64) // mult, w64, bias,
                                   make_int64_requant(ctx, real, lo, hi), out_shape)


def run(p: DepthwiseConv16x8Params, x, w=None, b=None):
    taps = patches(p.window, x)[..., p.source_channel]  # int64 [N, OH, OW, KH*KW, C*M]
    acc = (taps * p.weights).sum(axis=3) + p.bias  # int64: |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc),)
