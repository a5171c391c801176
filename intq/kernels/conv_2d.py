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
broadcast to every channel); both derive the multipliers in ``PopulateConvolutionQuantizationParams``
from ``double(s_in) * double(s_w[c]) / double(s_out)`` and the padding from
``ComputePaddingHeightWidth``. The two targets therefore agree; the requantization is
``ctx.target.requant_for("CONV_2D")``. Difference: LiteRT's Prepare requires the bias input
(``TF_LITE_ENSURE(context, has_bias)``, and an index -1 fails "Tensor at index 2 was optional but
was expected"); TFLite Micro accepts a convolution without one. The ``litert-ref`` target refuses
a convolution without bias as LiteRT does (:data:`BIAS_REQUIRED_BY`); ``tflite`` computes it.

Where ``litert-opt`` and ``xnnpack`` differ (measured, tools/probe_litert_rounding.py and
tests/kernels/test_conv.py): LiteRT's optimized CONV_2D (optimized/integer_ops/conv.h: im2col and
cpu_backend_gemm, i.e. ruy) computes the same accumulators and multipliers and rounds the second
step half up (``Requant.DOUBLE_HALF_UP``: SRDHM, then ``(h + 2^(r-1)) >> r``); XNNPACK takes every
int8 CONV_2D intq accepts (grouped ones too) and requantizes in float32
(``rint(float(acc) * float(float(s_in * s_w) / s_out))``, half to even, clamp from
``xnn_qs8_quantize``); both require the bias as LiteRT's Prepare does. A grouped convolution
(``G > 1``) runs LiteRT's reference kernel even in the optimized resolver (measured: ``DOUBLE``
matches, ``DOUBLE_HALF_UP`` does not), so ``litert-opt`` uses double rounding there.

Arithmetic: im2col of the input padded with ``Z_x`` (see :mod:`intq.kernels._conv_common`) into a
reused int8 buffer, one exact int8 GEMM (:func:`intq.kernels.gemm.exact_matmul`) against the
weights as an ``[C_out, KH*KW*C_in]`` matrix (block-diagonal for grouped convolutions: G times the
multiply-adds of a dense kernel, zeros elsewhere), then ``- Z_x * sum(w) + b`` (folded per channel
at prepare) and the fused requantization (one compiled pass). 1x1 convolutions skip the copy (the
strided input is the matrix).
The int32 accumulator cannot overflow: ``|acc| <= 255 * sum|w_o| + |b_o|`` is checked at prepare
(TFLite would wrap).

``tpu-mlir`` target: TPU-MLIR's ``tpu.Conv2D`` (explicit pads, uint8 or int8 input, the model's
per-channel multiplier/rshift, HALF_UP), :mod:`intq.kernels.tpu_mlir.conv`.
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
from intq.kernels import _ort, _ort_u8s8
from intq.kernels.base import KernelContext, kernel
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.targets import Requant, Runtime
from intq.kernels.tpu_mlir import conv as tpu_mlir_conv

OP = "CONV_2D"

#: Targets whose runtime refuses a CONV_2D without bias.
BIAS_REQUIRED_BY = frozenset({Runtime.LITERT})


@dataclass(frozen=True, eq=False)
class Conv2DParams:
    """Prepared integers, the exact GEMM's weights and the reused im2col buffers (not re-entrant)."""

    gemm: PreparedGemm  # weights [C_out, KH*KW*C_in] (block-diagonal when grouped)
    offset: np.ndarray  # int64 [C_out]: b_o - Z_x * sum(w_o)
    requant: Requantizer
    im2col: Im2col
    out_shape: tuple[int, int, int, int]


@dataclass(frozen=True, eq=False)
class OrtU8S8Avx2Conv2DParams:
    """``ort-u8s8-avx2``: the exact convolution plus MLAS's int16 pair saturation
    (:mod:`intq.kernels._ort_u8s8`) on the im2col rows."""

    conv: Conv2DParams
    pairs: _ort_u8s8.PairSaturation


@kernel(OP)
def prepare(ctx: KernelContext) -> Conv2DParams | OrtU8S8Avx2Conv2DParams | _ort.OrtAsymmetricGemm:
    if _ort.is_ort(ctx) and _ort.asymmetric_weights(ctx):  # imported QLinearConv with a weight zero point
        return _ort.prepare_asymmetric_gemm(ctx)
    if ctx.target.runtime is Runtime.TPU_MLIR:
        return tpu_mlir_conv.prepare_conv(ctx)
    ops = conv_operands(ctx, channel_axis=0)
    n, h, w_in, c_in = ops.in_shape
    w = ops.w
    c_out, kh, kw, c_g = w.shape
    matrix, groups = conv_matrix(ctx, w, c_in)  # block-diagonal when grouped
    refused = "refuses" if ctx.target.runtime in BIAS_REQUIRED_BY else None
    bias = conv_bias(ctx, 2, c_out, refused_without=refused)
    pad = conv_padding(ctx, ops, kh, kw, c_out)

    zx = ops.in_qp.tensor_zero_point
    gemm = prepare_gemm(matrix)
    check_accumulator(ctx, ops.abs_weight_sums(), bias)
    offset = bias - zx * gemm.weight_sums
    mode = None
    if groups > 1 and ctx.target.optimized and not ctx.target.xnnpack:
        mode = Requant.DOUBLE  # LiteRT runs grouped convolutions with its reference kernel (measured)
    requant = ops.requantizer(ctx, OP, mode=mode)
    im2col = make_im2col(ops.in_shape, kh, kw, ops.opts, pad, zx)
    params = Conv2DParams(gemm, offset, requant, im2col, (n, pad.out_h, pad.out_w, c_out))
    if _ort_u8s8.saturates(ctx) and not (c_g == 1 and c_out == groups):
        # one input and one output channel per group is onnxruntime's depthwise kernel: exact (measured).
        # Otherwise MLAS's K per group: taps, then the group's channels; their columns in intq's im2col rows
        tap, c = np.divmod(np.arange(kh * kw * c_g), c_g)
        group = np.arange(c_out) // (c_out // groups)
        columns = tap[None, :] * c_in + group[:, None] * c_g + c[None, :]
        return OrtU8S8Avx2Conv2DParams(params, _ort_u8s8.pair_saturation(w.reshape(c_out, -1), columns))
    return params


def run(p: Conv2DParams | OrtU8S8Avx2Conv2DParams | _ort.OrtAsymmetricGemm, x, w=None, b=None):
    if isinstance(p, _ort.OrtAsymmetricGemm):
        return (_ort.run_asymmetric_gemm(p, x),)
    if type(p) is tpu_mlir_conv.TpuMlirConv2DParams:
        return tpu_mlir_conv.run_conv(p, x)
    pairs = None
    if type(p) is OrtU8S8Avx2Conv2DParams:
        p, pairs = p.conv, p.pairs
    cols = fill_im2col(p.im2col, x)  # int8 [N*OH*OW, KH*KW*C_in]
    acc = exact_matmul(cols, p.gemm)  # int32 [N*OH*OW, C_out]: sum(x * w), exact
    if pairs is not None:  # MLAS's int16-saturated pair sums (|acc| stays < 2^31: saturation shrinks it)
        corr = _ort_u8s8.saturation_correction(pairs, cols, 128)
        if corr is not None:
            acc = acc + corr
    # one fused pass: acc + b - Z_x * sum(w) (|.| < 2^31, prepare), requantize, clamp
    return (requantize(p.requant, acc, p.offset).reshape(p.out_shape),)
