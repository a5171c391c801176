"""TPU-MLIR's int8 ``tpu.Deconv`` (``Deconv.cpp``, ``Support/Dnnl/Deconv.cpp``): TRANSPOSE_CONV under ``tpu-mlir``.

BM1684X lowers an int8 ConvTranspose to a ``tpu.Deconv`` whose result is the raw int32 accumulator
(no requantization: a ``tpu.RequantIntAxis`` follows, :mod:`intq.kernels.tpu_mlir.cast`). Its
interpreter computes, with oneDNN in float32 on the stored integers (exact while every partial sum
stays below 2^24, checked in :func:`prepare`):

* input zero point 0 (symmetric models): oneDNN's deconvolution, ``acc[o, iy s_h + i - p_t, ix s_w
  + j - p_l] += x[c, iy, ix] w[o, c, i, j]`` over the input pixels, taps landing outside the output
  dropped, plus the bias;
* input zero point ``Z_x != 0``: the input is dilated (``s - 1`` inserted rows and columns) and
  padded to a full convolution's input with ``Z_x`` everywhere, then convolved with the rotated
  kernel: every output sees all ``KH KW C_in`` taps, the inserted ones holding ``Z_x``. That is
  ``sum (x - Z_x) w`` over the real taps plus ``Z_x sum_{c,i,j} w[o, c, i, j]`` — the scatter below
  with a per-channel constant.

So ``acc = scatter((x - Z_x) w) + Z_x W_o + b_o`` with ``W_o`` the sum of channel ``o``'s weights;
``do_relu`` clamps it at 0. intq's int8 scatter (:mod:`intq.kernels.transpose_conv`) computes the
first term exactly; no dilation, groups of one (refused otherwise at import).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.gemm import PreparedGemm, exact_matmul
from intq.kernels.tpu_mlir.common import activation, as_int8, attr
from intq.kernels.tpu_mlir.conv import WEIGHT_DTYPES, gemm_of
from intq.kernels.transpose_conv import TransposeGeometry, scatter, tap_matrix

#: oneDNN sums in float32: every partial sum below 2^24 keeps the int32 result exact.
FLOAT32_EXACT = 1 << 24


@dataclass(frozen=True, eq=False)
class TpuMlirDeconvParams:
    """The exact tap GEMM of the raw input (``x - 128`` for uint8 inputs), the per-(tap, channel)
    offset that turns it into ``(x - Z_x) w``, the per-channel constant ``Z_x W_o + b_o``, the
    scatter geometry and the int32 output's clamp (``do_relu``)."""

    gemm: PreparedGemm  # weights [KH*KW*C_out, C_in]
    tap_offset: np.ndarray  # int64 [KH, KW, C_out]
    channel_offset: np.ndarray  # int64 [C_out]
    geometry: TransposeGeometry  # intq.kernels.transpose_conv's scatter geometry
    uint8_input: bool
    relu: bool


def prepare(ctx: KernelContext) -> TpuMlirDeconvParams:
    """Inputs ``(output_shape, weights [C_out, KH, KW, C_in], input NHWC[, bias int32])`` as TFLite's
    TRANSPOSE_CONV orders them; attributes ``stride_h``/``stride_w`` and ``tpu_pads`` (top, left,
    bottom, right); the output int32 (TPU-MLIR's raw accumulator)."""
    x = ctx.input(2)
    in_qp = activation(ctx, 2, "input")
    n, h, w_in, c_in = static_shape(ctx, x, "input", 4)
    w = ctx.constant(1, "weights")
    if w.dtype not in WEIGHT_DTYPES or w.ndim != 4 or w.shape[3] != c_in:
        raise ctx.error(f"weights must be int8 or uint8 [C_out, KH, KW, {c_in}], got {w.dtype.name} {list(w.shape)}")
    c_out, kh, kw, _ = w.shape
    y = ctx.outputs[0]
    if y.dtype != np.int32 or y.qparams is not None:
        raise ctx.error(f"the output must be TPU-MLIR's raw int32 accumulator, got {y.dtype.name}"
                        f"{' (quantized)' if y.qparams is not None else ''}")
    out_shape = static_shape(ctx, y, "output", 4)
    sh, sw = int(ctx.attr("stride_h", 1)), int(ctx.attr("stride_w", 1))
    t, l, b, r = (int(v) for v in attr(ctx, "tpu_pads"))
    full_hw = ((h - 1) * sh + kh, (w_in - 1) * sw + kw)
    if min(sh, sw) < 1 or min(t, l, b, r) < 0:
        raise ctx.error(f"strides {sh}x{sw} and pads {(t, l, b, r)} must be positive")
    if out_shape != (n, full_hw[0] - t - b, full_hw[1] - l - r, c_out):
        raise ctx.error(f"output shape {list(out_shape)} does not match the computed "
                        f"{[n, full_hw[0] - t - b, full_hw[1] - l - r, c_out]}")
    bias = np.zeros(c_out, np.int64)
    if ctx.has_input(3):
        bias = ctx.constant(3, "bias")
        if bias.dtype != np.int32 or bias.shape != (c_out,):
            raise ctx.error(f"bias must be int32 [{c_out}], got {bias.dtype.name} {list(bias.shape)}")
        bias = bias.astype(np.int64)
    w64 = w.astype(np.int64)
    zx = in_qp.tensor_zero_point
    # every float32 partial sum is bounded by the sum of |tap| over the full window, plus the bias
    bound = int((255 * np.abs(w64).reshape(c_out, -1).sum(axis=1) + np.abs(bias)).max(initial=0))
    if bound >= FLOAT32_EXACT:
        raise ctx.error(f"the accumulator can reach {bound} >= 2^24, where TPU-MLIR's float32 sums round")
    uint8 = x.dtype == np.uint8
    gemm = gemm_of(tap_matrix(w))
    # the GEMM sees x (or x - 128): add -Z_x w (or (128 - Z_x) w) per tap to get (x - Z_x) w
    shift = (128 if uint8 else 0) - zx
    tap_offset = (shift * gemm.weight_sums.astype(np.int64)).reshape(kh, kw, c_out)
    channel_offset = zx * w64.reshape(c_out, -1).sum(axis=1) + bias
    geometry = TransposeGeometry(kh, kw, sh, sw, t, l, full_hw, out_shape)
    return TpuMlirDeconvParams(gemm, tap_offset, channel_offset, geometry, uint8, bool(ctx.attr("tpu_do_relu", False)))


def run(p: TpuMlirDeconvParams, output_shape, w, x, b=None) -> tuple[np.ndarray]:
    g = p.geometry
    n, h, w_in, c_in = x.shape
    xs = as_int8(x) if p.uint8_input else x
    cols = exact_matmul(xs.reshape(-1, c_in), p.gemm).astype(np.int64).reshape(n, h, w_in, g.kh, g.kw, g.out_shape[3])
    acc = scatter(g, cols + p.tap_offset) + p.channel_offset  # |acc| < 2^24 (prepare)
    if p.relu:
        acc = np.maximum(acc, 0)
    return (acc.astype(np.int32).reshape(g.out_shape),)


variant("TRANSPOSE_CONV", family=FAMILY)(prepare)
