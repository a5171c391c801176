"""TRANSPOSE_CONV, 16x8: every int16 input pixel scatters ``x[n,iy,ix,c] * w[o,i,j,c]`` into
``acc[n, iy*s_h - p_t + i, ix*s_w - p_l + j, o]`` (int64); ``y = clamp(MBQM64(acc + b[o], m_o, shift_o))``.

Contract (spec 003, 16x8; LiteRT ``transpose_conv.cc`` Prepare, TFLM ``transpose_conv.cc``): inputs
``(output_shape, weights, input[, bias])`` — output_shape a constant int32 ``[4]`` equal to the
output's shape; weights int8 ``[C_out, KH, KW, C_in]`` constant, symmetric, per tensor or per
output channel (axis 0); input int16 ``[N, H, W, C_in]`` per tensor, zero point 0; bias int64
``[C_out]`` or omitted; output int16 per tensor, zero point 0. Options as the int8 kernel
(:mod:`intq.kernels.transpose_conv`, whose contract checks and scatter geometry this kernel uses,
including LiteRT's output-size check).

Arithmetic — the same in LiteRT 2.3 (``EvalQuantizedPerChannel16x8``: with an int64 bias, or none,
``reference_integer_ops::TransposeConv<int64_t>`` under every resolver; LiteRT's optimized path is
taken only for an int32 bias, which intq refuses) and TFLM (the same reference function with an
int64 scratch buffer): the int64 sum of ``x * w`` over the taps landing on each output pixel,
plus the bias, then ``MultiplyByQuantizedMultiplier(int64 acc, m_o, shift_o)`` (the multiplier
reduced to 16 bits, :class:`intq.kernels.int16x8._common.Int64Requant`) with
``M_o = double(s_in) * double(s_w[o]) / double(s_out)``, then the fused activation's clamp.
``|acc| <= 2^15 * sum|w_o| + |b_o| < 2^47`` (prepare). XNNPACK takes no int16 tensor, so
``xnnpack`` computes what ``litert-opt`` does (measured: equal on every random model of
tests/kernels/test_int16x8.py).

Run: one int64 matrix product of the input pixels against the weights as ``[KH*KW*C_out, C_in]``
gives every tap's contribution; :func:`intq.kernels.transpose_conv.scatter` adds them up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import Int64Requant, conv_int64_requant, conv_operands_16x8, int64_bias, requantize_int64
from intq.kernels.transpose_conv import TransposeGeometry, scatter, tap_matrix, transpose_geometry

OP = "TRANSPOSE_CONV"


@dataclass(frozen=True, eq=False)
class TransposeConv16x8Params:
    taps_t: np.ndarray  # int64 [C_in, KH*KW*C_out]: the weights, row (i, j, o) of tap_matrix transposed
    bias: np.ndarray  # int64 [C_out]
    requant: Int64Requant
    geometry: TransposeGeometry


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> TransposeConv16x8Params:
    ops = conv_operands_16x8(ctx, channel_axis=0, input_index=2, dilation=False)
    geometry = transpose_geometry(ctx, ops)
    bias = int64_bias(ctx, 3, ops.w.shape[0])
    requant = conv_int64_requant(ctx, ops, bias)
    return TransposeConv16x8Params(tap_matrix(ops.w).astype(np.int64).T.copy(), bias, requant, geometry)


def run(p: TransposeConv16x8Params, output_shape, w, x, b=None):
    g = p.geometry
    n, h, w_in, c_in = x.shape
    cols = (x.reshape(-1, c_in).astype(np.int64) @ p.taps_t).reshape(n, h, w_in, g.kh, g.kw, g.out_shape[3])
    acc = scatter(g, cols) + p.bias  # int64, |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc).reshape(g.out_shape),)
