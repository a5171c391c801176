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

Run: the int8 kernel's tap loop (:class:`intq.kernels.depthwise_conv_2d.DepthwiseTaps`) in int64,
over the input padded with its zero point 0, starting from the bias.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import conv_padding
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.depthwise_conv_2d import DepthwiseTaps, depthwise_shape, depthwise_sums, prepare_taps
from intq.kernels.int16x8._common import Int64Requant, conv_int64_requant, conv_operands_16x8, int64_bias, requantize_int64

OP = "DEPTHWISE_CONV_2D"


@dataclass(frozen=True, eq=False)
class DepthwiseConv16x8Params:
    taps: DepthwiseTaps  # int64, offset = bias
    requant: Int64Requant


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> DepthwiseConv16x8Params:
    ops = conv_operands_16x8(ctx, channel_axis=3)
    kh, kw, c_out = depthwise_shape(ctx, ops)
    bias = int64_bias(ctx, 2, c_out)
    pad = conv_padding(ctx, ops, kh, kw, c_out)
    requant = conv_int64_requant(ctx, ops, bias)
    return DepthwiseConv16x8Params(prepare_taps(ops, bias, pad, np.int64), requant)


def run(p: DepthwiseConv16x8Params, x, w=None, b=None):
    acc = depthwise_sums(p.taps, x)  # int64: |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc),)
