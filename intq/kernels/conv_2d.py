"""CONV_2D (NHWC): ``y[n,oy,ox,o] = requant(sum_{i,j,c} (x[n, oy*s_h - p_t + i*d_h, ox*s_w - p_l + j*d_w,
g(o)*C_g + c] - Z_x) * w[o,i,j,c] + b[o]) + Z_y``, clamped to the fused activation's range.

Contract (spec 003, TFLite ``conv.cc`` Prepare): input int8 ``[N, H, W, C_in]`` per tensor; weights
int8 ``[C_out, KH, KW, C_g]`` constant, symmetric, per tensor or per output channel (axis 0); bias
int32 ``[C_out]`` optional; output int8 per tensor ``[N, OH, OW, C_out]``. Options: padding
SAME/VALID, stride_h/w >= 1, dilation_h/w_factor >= 1, fused activation NONE/RELU/RELU6/RELU_N1_TO_1.
Grouped convolution: ``C_g`` may divide ``C_in`` (``G = C_in / C_g`` groups, output channel ``o``
reads group ``o // (C_out / G)``), as both runtimes' reference kernel ``ConvPerChannel`` does;
``C_out`` must be a multiple of ``G`` (TFLite does not check it and would read out of bounds).

Semantics verified in the sources: ``reference_integer_ops::ConvPerChannel``
(kernels/internal/reference/integer_ops/conv.h) accumulates ``w * (x + input_offset)`` in int32,
skipping positions outside the image, adds the bias, then ``MultiplyByQuantizedMultiplier`` (double
rounding), the output offset and the clamp. LiteRT's ``conv.cc`` (BUILTIN_REF, kReference) and
TFLite Micro's ``conv.cc`` both call it for int8 (per-tensor weights included: their scale is
broadcast to every channel); both derive the multipliers in
``PopulateConvolutionQuantizationParams`` from ``double(s_in) * double(s_w[c]) / double(s_out)`` and
the padding from ``ComputePaddingHeightWidth``. The two targets therefore agree; the requantization
is ``ctx.target.requant_for("CONV_2D")`` (LiteRT's optimized kernel rounds the second step half up:
its target row's contract). TFLite Micro accepts a convolution without bias. Runtimes that
compute otherwise replace this kernel with a variant in their family's folder (docs/engine.md).

Arithmetic: im2col of the input padded with ``Z_x`` (see :mod:`intq.kernels._conv_common`) into a
reused int8 buffer, one exact int8 GEMM (:func:`intq.kernels.gemm.exact_matmul`) against the
weights as an ``[C_out, KH*KW*C_in]`` matrix (block-diagonal for grouped convolutions: G times the
multiply-adds of a dense kernel, zeros elsewhere), then ``- Z_x * sum(w) + b`` (folded per channel
at prepare) and the fused requantization (one compiled pass). 1x1 convolutions skip the copy (the
strided input is the matrix).
The int32 accumulator cannot overflow: ``|acc| <= 255 * sum|w_o| + |b_o|`` is checked at prepare
(TFLite would wrap).

**16x8** (int16 activations, int8 weights): ``y = clamp(MBQM64(sum_taps,c x * w + b_o, m_o,
shift_o))``, int16 NHWC in and out.

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

TFLM runs a CONV_2D without bias; LiteRT's Prepare requires it (as for int8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import (
    Im2col,
    check_accumulator,
    conv_bias,
    conv_matrix,
    conv_operands,
    conv_padding,
    fill_im2col,
    make_im2col,
)
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import Requantizer, activation_range, requantize
from intq.kernels.targets import Requant
from intq.kernels._int16_common import Int64Requant, conv_int64_requant, conv_operands_16x8, int64_bias, requantize_int64

OP = "CONV_2D"


@dataclass(frozen=True, eq=False)
class Conv2DParams:
    """Prepared integers, the exact GEMM's weights and the reused im2col buffers (not re-entrant)."""

    gemm: PreparedGemm  # weights [C_out, KH*KW*C_in] (block-diagonal when grouped)
    offset: np.ndarray  # int64 [C_out]: b_o - Z_x * sum(w_o)
    requant: Requantizer
    im2col: Im2col
    out_shape: tuple[int, int, int, int]


@kernel(OP)
def prepare(ctx: KernelContext) -> Conv2DParams:
    return prepare_conv(ctx)


def prepare_conv(ctx: KernelContext, *, bias_refused: str | None = None, mode: Requant | None = None,
                 bounds=activation_range) -> Conv2DParams:
    """The convolution's parameters; ``bias_refused`` says why the runtime refuses a node without
    bias (:func:`intq.kernels._conv_common.conv_bias`), ``mode`` and ``bounds`` override the target's
    requantization and the clamp (:func:`intq.kernels._conv_common.conv_requantizer`)."""
    ops = conv_operands(ctx, channel_axis=0)
    n, h, w_in, c_in = ops.in_shape
    w = ops.w
    c_out, kh, kw, c_g = w.shape
    matrix, groups = conv_matrix(ctx, w, c_in)  # block-diagonal when grouped
    bias = conv_bias(ctx, 2, c_out, refused_without=bias_refused)
    pad = conv_padding(ctx, ops, kh, kw, c_out)

    zx = ops.in_qp.tensor_zero_point
    gemm = prepare_gemm(matrix)
    check_accumulator(ctx, ops.abs_weight_sums(), bias)
    offset = bias - zx * gemm.weight_sums
    requant = ops.requantizer(ctx, OP, mode=mode, bounds=bounds)
    im2col = make_im2col(ops.in_shape, kh, kw, ops.opts, pad, zx)
    return Conv2DParams(gemm, offset, requant, im2col, (n, pad.out_h, pad.out_w, c_out))


def run(p: Conv2DParams, x, w=None, b=None):
    cols = fill_im2col(p.im2col, x)  # int8 [N*OH*OW, KH*KW*C_in]
    acc = exact_matmul(cols, p.gemm)  # int32 [N*OH*OW, C_out]: sum(x * w), exact
    # one fused pass: acc + b - Z_x * sum(w) (|.| < 2^31, prepare), requantize, clamp
    return (requantize(p.requant, acc, p.offset).reshape(p.out_shape),)


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True, eq=False)
class Conv2D16x8Params:
    im2col: Im2col  # int16, padded with 0
    weights_t: np.ndarray  # int64 [KH*KW*C, C_out]
    bias: np.ndarray  # int64 [C_out]
    requant: Int64Requant
    out_shape: tuple[int, int, int, int]


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Conv2D16x8Params:
    return prepare_conv_int16(ctx)


def prepare_conv_int16(ctx: KernelContext, *, bias_refused: str | None = None) -> Conv2D16x8Params:
    """The 16x8 convolution's parameters; ``bias_refused``: as :func:`prepare_conv`'s."""
    ops = conv_operands_16x8(ctx, channel_axis=0)
    n, h, w_in, c_in = ops.in_shape
    c_out, kh, kw, c_w = ops.w.shape
    matrix, _ = conv_matrix(ctx, ops.w, c_in)  # block-diagonal when grouped
    bias = int64_bias(ctx, 2, c_out, refused_without=bias_refused)
    pad = conv_padding(ctx, ops, kh, kw, c_out)
    requant = conv_int64_requant(ctx, ops, bias)
    im2col = make_im2col(ops.in_shape, kh, kw, ops.opts, pad, 0, np.int16)
    return Conv2D16x8Params(im2col, matrix.astype(np.int64).T.copy(), bias, requant, (n, pad.out_h, pad.out_w, c_out))


def run_int16(p: Conv2D16x8Params, x, w=None, b=None):
    cols = fill_im2col(p.im2col, x)  # int16 [N*OH*OW, KH*KW*C], tap-major
    acc = cols.astype(np.int64) @ p.weights_t + p.bias  # int64: |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc).reshape(p.out_shape),)
