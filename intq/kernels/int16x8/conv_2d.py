"""CONV_2D, 16x8: ``y = clamp(MBQM64(sum_taps,c x * w + b_o, m_o, shift_o))``, int16 NHWC in and out.

Contract (spec 003, 16x8): input int16 ``[N, H, W, C]`` per tensor, zero point 0; weights int8
``[C_out, KH, KW, C]`` constant, symmetric, per tensor or per output channel (axis 0); bias int64
``[C_out]``, zero point 0; output int16 per tensor, zero point 0. Options as the int8 kernel:
padding SAME/VALID, strides, dilations, fused activation. Grouped convolutions are refused.

Arithmetic — identical in LiteRT 2.3 (``reference_integer_ops::ConvPerChannel`` for int16 input,
``AccumScalar = int64_t``, prepared by ``conv.cc`` / ``PopulateConvolutionQuantizationParams``)
and TFLM (``conv_common.cc`` + the same reference function): the int64 sum of ``x * w`` over the
in-image taps, plus the bias, then ``MultiplyByQuantizedMultiplier(int64 acc, m_o, shift_o)``
(the multiplier reduced to 16 bits, one rounding half up) with
``M_o = double(s_in) * double(s_w[o]) / double(s_out)``, then the fused activation's clamp. No
zero point anywhere. ``|acc| <= 2^15 * sum|w_o| + |b_o|`` must stay below 2^47 (prepare).

Where the targets differ: LiteRT's Prepare requires the bias input (as for int8), so
``litert-ref`` refuses a CONV_2D without bias; ``tflite`` runs it.
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
from intq.kernels.targets import Runtime
from intq.qmath import effective_scale

OP = "CONV_2D"


@dataclass(frozen=True, eq=False)
class Conv2D16x8Params:
    window: Window
    weights_t: np.ndarray  # int64 [KH*KW*C, C_out]
    bias: np.ndarray  # int64 [C_out]
    requant: Int64Requant
    out_shape: tuple[int, int, int, int]


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Conv2D16x8Params:
    runtime = reference_runtime(ctx)
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = int16_tensor(ctx, x, "input")
    out_qp = int16_tensor(ctx, y, "output")
    n, h, w_in, c_in = static_shape(ctx, x, "input", 4)
    w, w_qp = conv_weights(ctx, 1, channel_axis=0)
    c_out, kh, kw, c_w = w.shape
    if c_w != c_in:
        raise ctx.error(f"the weights have {c_w} input channels for an input of {c_in}; grouped 16x8 "
                        f"convolutions are not supported")
    if not ctx.has_input(2) and runtime is Runtime.LITERT:
        raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) refuses a CONV_2D without bias; "
                        "give it a zero int64 bias")
    bias = int64_bias(ctx, 2, c_out)
    opts = window_options(ctx)
    g = make_window(ctx, (h, w_in), kh, kw, opts)
    out_shape = (n, g.out_h, g.out_w, c_out)
    if static_shape(ctx, y, "output", 4) != out_shape:
        raise ctx.error(f"output shape {list(y.shape)} does not match the computed {list(out_shape)}")
    w64 = w.astype(np.int64).reshape(c_out, -1)
    bound = int(((1 << 15) * np.abs(w64).sum(axis=1) + np.abs(bias)).max())
    if bound >= INT64_ACC_LIMIT:
        raise ctx.error(f"the accumulator can exceed 2^47 (|acc| up to {bound}); split the layer")
    s_w = w_qp.scale if w_qp.per_axis else np.broadcast_to(w_qp.scale, (c_out,))
    real = effective_scale(in_qp.scale[0], s_w, out_qp.scale[0], product_dtype=np.float64)
    lo, hi = fused_activation_range(ctx, out_qp)
    return Conv2D16x8Params(g, w64.T.copy(), bias, make_int64_requant(ctx, real, lo, hi), out_shape)


def run(p: Conv2D16x8Params, x, w=None, b=None):
    n, oh, ow, c_out = p.out_shape
    cols = patches(p.window, x).reshape(n * oh * ow, -1)  # int64 [pixels, KH*KW*C], tap-major
    acc = cols @ p.weights_t + p.bias  # int64: |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc).reshape(p.out_shape),)
