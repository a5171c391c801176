"""CONV_2D, 16x8: ``y = clamp(MBQM64(sum_taps,c x * w + b_o, m_o, shift_o))``, int16 NHWC in and out.

Contract (spec 003, 16x8): input int16 ``[N, H, W, C]`` per tensor, zero point 0; weights int8
``[C_out, KH, KW, C]`` constant, symmetric, per tensor or per output channel (axis 0); bias int64
``[C_out]``, zero point 0; output int16 per tensor, zero point 0. Options as the int8 kernel:
padding SAME/VALID, strides, dilations, fused activation. Grouped convolutions (``C_in`` a multiple
of the weights' ``C_g``) as the int8 kernel: a block-diagonal weight matrix
(:func:`intq.kernels._conv_common.conv_matrix`); LiteRT runs them with its reference kernel under
every resolver.

Arithmetic — identical in LiteRT 2.3 (``reference_integer_ops::ConvPerChannel`` for int16 input,
``AccumScalar = int64_t``, prepared by ``conv.cc`` / ``PopulateConvolutionQuantizationParams``)
and TFLM (``conv_common.cc`` + the same reference function): the int64 sum of ``x * w`` over the
in-image taps, plus the bias, then ``MultiplyByQuantizedMultiplier(int64 acc, m_o, shift_o)``
(the multiplier reduced to 16 bits, one rounding half up) with
``M_o = double(s_in) * double(s_w[o]) / double(s_out)``, then the fused activation's clamp. No
zero point anywhere. ``|acc| <= 2^15 * sum|w_o| + |b_o|`` must stay below 2^47 (prepare).

Run: the int8 kernel's im2col (:func:`intq.kernels._conv_common.fill_im2col`) in int16, padded with
the zero point 0, then one int64 matrix product with the weights as ``[KH*KW*C, C_out]``.

Where the targets differ: LiteRT's Prepare requires the bias input (as for int8), so
``litert-ref`` refuses a CONV_2D without bias; ``tflite`` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import Im2col, conv_matrix, conv_padding, fill_im2col, make_im2col
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import Int64Requant, conv_int64_requant, conv_operands_16x8, int64_bias, requantize_int64
from intq.kernels.targets import Runtime

OP = "CONV_2D"


@dataclass(frozen=True, eq=False)
class Conv2D16x8Params:
    im2col: Im2col  # int16, padded with 0
    weights_t: np.ndarray  # int64 [KH*KW*C, C_out]
    bias: np.ndarray  # int64 [C_out]
    requant: Int64Requant
    out_shape: tuple[int, int, int, int]


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Conv2D16x8Params:
    ops = conv_operands_16x8(ctx, channel_axis=0)
    n, h, w_in, c_in = ops.in_shape
    c_out, kh, kw, c_w = ops.w.shape
    matrix, _ = conv_matrix(ctx, ops.w, c_in)  # block-diagonal when grouped
    bias = int64_bias(ctx, 2, c_out, refused_without="refuses" if ctx.target.runtime is Runtime.LITERT else None)
    pad = conv_padding(ctx, ops, kh, kw, c_out)
    requant = conv_int64_requant(ctx, ops, bias)
    im2col = make_im2col(ops.in_shape, kh, kw, ops.opts, pad, 0, np.int16)
    return Conv2D16x8Params(im2col, matrix.astype(np.int64).T.copy(), bias, requant, (n, pad.out_h, pad.out_w, c_out))


def run(p: Conv2D16x8Params, x, w=None, b=None):
    cols = fill_im2col(p.im2col, x)  # int16 [N*OH*OW, KH*KW*C], tap-major
    acc = cols.astype(np.int64) @ p.weights_t + p.bias  # int64: |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc).reshape(p.out_shape),)
