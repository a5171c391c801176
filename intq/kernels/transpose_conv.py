"""TRANSPOSE_CONV (NHWC): every input pixel scatters ``(x[n,iy,ix,c] - Z_x) * w[o,i,j,c]`` into
``acc[n, iy*s_h - p_t + i, ix*s_w - p_l + j, o]`` (contributions landing outside the output are
dropped); ``y = requant(acc + b[o]) + Z_y``, clamped.

Contract (TFLite ``transpose_conv.cc`` Prepare): inputs ``(output_shape, weights, input[, bias])``
— output_shape int32 ``[4]`` constant, equal to the output tensor's static shape; weights int8
``[C_out, KH, KW, C_in]`` constant, symmetric, per tensor or per output channel (axis 0); input
int8 ``[N, H, W, C_in]`` per tensor; bias int32 ``[C_out]`` optional (index -1 or absent); output
int8 per tensor. Options: padding SAME/VALID, stride_h/w >= 1, fused activation (see below).
No dilation (TFLite has none for this op).

Semantics verified in the sources: ``reference_integer_ops::TransposeConv``
(kernels/internal/reference/integer_ops/transpose_conv.h) scatters into an int32 scratch buffer
exactly as above, then bias, ``MultiplyByQuantizedMultiplier`` (double rounding), output offset,
clamp. Multipliers from ``PopulateConvolutionQuantizationParams`` (double product, per channel on
axis 0). Padding: ``ComputePaddingHeightWidth`` run on the *output* height/width as if it were a
convolution's input (stride, dilation 1, the kernel size); only the leading padding is used.
LiteRT BUILTIN_REF (``transpose_conv.cc``, kReference) and TFLite Micro (``transpose_conv.cc``)
call the same reference kernel. Fused activation: both compute the clamp from the node's
activation (LiteRT's Prepare reads it through a ``TfLiteConvParams`` cast whose ``activation``
field lines up; TFLite Micro's ``CalculateOpData`` passes ``params->activation`` — older TFLite
Micro sources passed ``kTfLiteActNone``, the pinned build applies it, measured by
tests/kernels/test_conv.py).

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md).

Arithmetic: one exact GEMM (:func:`intq.kernels.gemm.exact_matmul`) of the raw input
``[N*H*W, C_in]`` against the weights as ``[KH*KW*C_out, C_in]`` gives every tap's contribution;
``- Z_x * sum_c w[o,i,j,c]`` is folded per (tap, channel) at prepare; a Python loop over the
KH*KW taps adds each tap's contributions into a strided slice of an int32 buffer covering the
full (uncropped) output, which is then cropped by the padding. The accumulator cannot overflow:
``|acc| <= 255 * sum|w_o| + |b_o|`` is checked at prepare.

**16x8** (int16 activations, int8 weights): every int16 input pixel scatters ``x[n,iy,ix,c] * w[o,i,j,c]`` into
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
reduced to 16 bits, :class:`intq.kernels._int16_common.Int64Requant`) with
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

from intq.kernels._conv_common import (
    ConvOperands,
    check_accumulator,
    compute_padding,
    conv_bias,
    conv_operands,
    static_shape,
)
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels._int16_common import Int64Requant, conv_int64_requant, conv_operands_16x8, int64_bias, requantize_int64

OP = "TRANSPOSE_CONV"


@dataclass(frozen=True)
class TransposeGeometry:
    """Where each input pixel's taps land (int8 and 16x8): tap ``(i, j)`` of input pixel ``(iy, ix)``
    adds into ``(iy * stride_h + i, ix * stride_w + j)`` of an uncropped buffer of ``full_hw``,
    whose window ``[top, top + OH) x [left, left + OW)`` is the output."""

    kh: int
    kw: int
    stride_h: int
    stride_w: int
    top: int
    left: int
    full_hw: tuple[int, int]  # the uncropped scatter buffer's height and width
    out_shape: tuple[int, int, int, int]


@dataclass(frozen=True, eq=False)
class TransposeConvParams:
    gemm: PreparedGemm  # weights [KH*KW*C_out, C_in]
    tap_offset: np.ndarray  # int32 [KH, KW, C_out]: -Z_x * sum_c w[o,i,j,c]
    bias: np.ndarray  # int64 [C_out]
    requant: Requantizer
    geometry: TransposeGeometry

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return self.geometry.out_shape


@dataclass(frozen=True, eq=False)
class TransposeParts:
    """What every runtime's TRANSPOSE_CONV prepares before its output stage (:func:`transpose_parts`)."""

    ops: ConvOperands
    geometry: TransposeGeometry
    gemm: PreparedGemm
    tap_offset: np.ndarray
    bias: np.ndarray

    def params(self, requant: Requantizer, channels: slice = slice(None)) -> TransposeConvParams:
        """The scatter's parameters with ``requant`` for the ``channels`` it covers."""
        return TransposeConvParams(self.gemm, self.tap_offset, self.bias[channels], requant, self.geometry)


def transpose_parts(ctx: KernelContext, *, size_checked: bool = False) -> TransposeParts:
    """The contract and the scatter (module docstring); ``size_checked``: the runtime also requires
    the input size a convolution of the output gives (:func:`transpose_geometry`)."""
    ctx.check_emulated()
    ops = conv_operands(ctx, channel_axis=0, input_index=2, dilation=False)
    geometry = transpose_geometry(ctx, ops, size_checked=size_checked)
    c_out = ops.w.shape[0]
    bias = conv_bias(ctx, 3, c_out)
    check_accumulator(ctx, ops.abs_weight_sums(), bias)
    matrix = tap_matrix(ops.w)
    gemm = prepare_gemm(matrix)
    zx = ops.in_qp.tensor_zero_point
    tap_offset = (-zx * gemm.weight_sums).astype(np.int32).reshape(geometry.kh, geometry.kw, c_out)  # |.| <= 128 * 127 * C_in
    return TransposeParts(ops, geometry, gemm, tap_offset, bias)


@kernel(OP)
def prepare(ctx: KernelContext) -> TransposeConvParams:
    parts = transpose_parts(ctx)
    return parts.params(parts.ops.requantizer(ctx, OP))


def run(p: TransposeConvParams, output_shape, w, x, b=None):
    return (requantize(p.requant, accumulators(p, x), p.bias).reshape(p.out_shape),)  # |acc + b| < 2^31 (prepare)


def accumulators(p: TransposeConvParams, x) -> np.ndarray:
    """The int32 accumulators ``[N*OH*OW, C_out]`` of every output pixel, bias not included."""
    g = p.geometry
    n, h, w_in, c_in = x.shape
    cols = exact_matmul(x.reshape(-1, c_in), p.gemm).reshape(n, h, w_in, g.kh, g.kw, g.out_shape[3])
    cols += p.tap_offset  # each tap's contribution, |.| <= 255 * sum|w| < 2^31 (prepare)
    return scatter(g, cols)


def transpose_geometry(ctx: KernelContext, ops: ConvOperands, size_checked: bool = False) -> TransposeGeometry:
    """The contract shared by the int8 and 16x8 kernels (module docstring) and the scatter geometry:
    output_shape (input 0) a constant int32 [4] equal to the output's static shape; weights
    ``[C_out, KH, KW, C_in]`` matching the input's channels; with ``size_checked`` (a runtime that
    checks it: LiteRT), the input size a convolution of the output gives."""
    n, h, w_in, c_in = ops.in_shape
    out_shape = static_shape(ctx, ctx.outputs[0], "output", 4)
    requested = ctx.constant(0, "output_shape")
    if requested.dtype != np.int32 or requested.shape != (4,):
        raise ctx.error(f"output_shape {ctx.input(0).name!r} must be int32 [4], got {requested.dtype.name} "
                        f"{list(requested.shape)}")
    if tuple(int(v) for v in requested) != out_shape:
        raise ctx.error(f"output_shape {requested.tolist()} differs from the output tensor's shape {list(out_shape)}")
    c_out, kh, kw, c_w = ops.w.shape
    if c_w != c_in:
        raise ctx.error(f"weights [C_out, KH, KW, C_in] have {c_w} input channels, the input has {c_in}")
    if out_shape[0] != n or out_shape[3] != c_out:
        raise ctx.error(f"output shape {list(out_shape)} must be [{n}, OH, OW, {c_out}]")
    if out_shape[1] < 1 or out_shape[2] < 1:
        raise ctx.error(f"output shape {list(out_shape)} is empty")
    opts = ops.opts
    oh, ow = out_shape[1], out_shape[2]
    pad = compute_padding(opts.padding, (oh, ow), (kh, kw), (opts.stride_h, opts.stride_w), (1, 1))
    if size_checked and (pad.out_h, pad.out_w) != (h, w_in):
        raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) refuses this output size: a {opts.padding} "
                        f"convolution of the {oh}x{ow} output gives {pad.out_h}x{pad.out_w}, not the {h}x{w_in} input")
    full_hw = (max((h - 1) * opts.stride_h + kh, pad.top + oh), max((w_in - 1) * opts.stride_w + kw, pad.left + ow))
    return TransposeGeometry(kh, kw, opts.stride_h, opts.stride_w, pad.top, pad.left, full_hw, out_shape)


def tap_matrix(w: np.ndarray) -> np.ndarray:
    """Weights ``[C_out, KH, KW, C_in]`` as ``[KH*KW*C_out, C_in]``, row ``(i, j, o)``: one GEMM of the
    input pixels against it gives every tap's contribution."""
    c_out, kh, kw, c_in = w.shape
    return np.ascontiguousarray(w.transpose(1, 2, 0, 3)).reshape(kh * kw * c_out, c_in)


def scatter(g: TransposeGeometry, cols: np.ndarray) -> np.ndarray:
    """Add each tap's contributions ``cols`` ``[N, H, W, KH, KW, C_out]`` (int32 or int64) into the
    strided slices of a zeroed buffer covering the uncropped output; returns the output window as
    ``[N*OH*OW, C_out]`` in ``cols``' dtype."""
    n, h, w_in = cols.shape[:3]
    _, oh, ow, c_out = g.out_shape
    full = np.zeros((n, *g.full_hw, c_out), cols.dtype)
    span_h, span_w = (h - 1) * g.stride_h + 1, (w_in - 1) * g.stride_w + 1
    for i in range(g.kh):
        for j in range(g.kw):
            target = full[:, i:i + span_h:g.stride_h, j:j + span_w:g.stride_w, :]
            np.add(target, cols[:, :, :, i, j, :], out=target)
    return np.ascontiguousarray(full[:, g.top:g.top + oh, g.left:g.left + ow, :]).reshape(-1, c_out)


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True, eq=False)
class TransposeConv16x8Params:
    taps_t: np.ndarray  # int64 [C_in, KH*KW*C_out]: the weights, row (i, j, o) of tap_matrix transposed
    bias: np.ndarray  # int64 [C_out]
    requant: Int64Requant
    geometry: TransposeGeometry


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> TransposeConv16x8Params:
    return prepare_transpose_int16(ctx)


def prepare_transpose_int16(ctx: KernelContext, *, size_checked: bool = False) -> TransposeConv16x8Params:
    """The 16x8 scatter's parameters; ``size_checked``: as :func:`transpose_parts`'."""
    ops = conv_operands_16x8(ctx, channel_axis=0, input_index=2, dilation=False)
    geometry = transpose_geometry(ctx, ops, size_checked=size_checked)
    bias = int64_bias(ctx, 3, ops.w.shape[0])
    requant = conv_int64_requant(ctx, ops, bias)
    return TransposeConv16x8Params(tap_matrix(ops.w).astype(np.int64).T.copy(), bias, requant, geometry)


def run_int16(p: TransposeConv16x8Params, output_shape, w, x, b=None):
    g = p.geometry
    n, h, w_in, c_in = x.shape
    cols = (x.reshape(-1, c_in).astype(np.int64) @ p.taps_t).reshape(n, h, w_in, g.kh, g.kw, g.out_shape[3])
    acc = scatter(g, cols) + p.bias  # int64, |acc| < 2^47 (prepare)
    return (requantize_int64(p.requant, acc).reshape(g.out_shape),)
