"""TPU-MLIR's int8 ``tpu.Conv2D`` (``Conv2D.cpp``): CONV_2D and DEPTHWISE_CONV_2D under ``tpu-mlir``.

``y = clamp(RightShiftRound((sum_taps x_pad * w) + b) * m_c, rshift_c, HALF_UP) + Z_y)``, the clamp
of :func:`intq.kernels.tpu_mlir.common.relu_clamp`. The input is padded with its own zero point
(``pad_value = Z_x``) over explicit ``pads`` (top, left, bottom, right), the weights are symmetric
int8, the int32 bias already holds TPU-MLIR's zero-point correction (its lowering folds
``-Z_x sum(w)`` in for asymmetric models), so the accumulator is the raw sum of products plus the
bias — what TPU-MLIR's interpreter computes with oneDNN (in float32, exact while every partial sum
stays below 2^24; intq sums exactly in integers). ``MultiplierShift`` mode rounds HALF_UP whatever
the op's ``round_mode`` says (``rmode = is_tf ? HALF_AWAY_FROM_ZERO : HALF_UP``).

uint8 inputs (after a ReLU) enter the int8 GEMM as ``x - 128``, the ``128 * sum(w)`` folded into
the per-channel offset; padding then holds ``Z_x - 128``. A layer whose weights are all
non-negative comes with uint8 weights (TPU-MLIR gains a bit there), multiplied exactly on float32
BLAS (:func:`gemm_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import Im2col, Padding2D, WindowOptions, fill_im2col, make_im2col
from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.gemm import PreparedGemm, exact_matmul, prepare_gemm
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.tpu_mlir.common import activation, as_int8, attr, requantizer
from intq.kernels._conv_common import make_padded
from intq.kernels.depthwise_conv_2d import DepthwiseTaps, depthwise_sums
from intq.kernels.tpu_mlir import FAMILY


#: TPU-MLIR stores a layer whose weights are all non-negative as uint8 (one more bit), else int8.
WEIGHT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))


def gemm_of(matrix: np.ndarray) -> PreparedGemm:
    """The exact GEMM of int8 weights (any backend), or of uint8 ones ([0, 255]: the float32 BLAS
    backend, whose chunking bounds ``|x w|`` by the weights' own magnitudes)."""
    if matrix.dtype == np.int8:
        return prepare_gemm(matrix)
    return prepare_gemm(matrix.astype(np.int16), backend="blas-float32")


@dataclass(frozen=True)
class Window:
    """A TPU-MLIR 2-D window: explicit pads, strides, dilations, and the output size they give."""

    opts: WindowOptions
    pad: Padding2D
    kh: int
    kw: int


def window(ctx: KernelContext, in_shape, kh: int, kw: int, channels: int, dilation: bool = True) -> Window:
    """Read ``tpu_pads`` (top, left, bottom, right), strides and dilations; check the output shape
    ``(H + t + b - ((KH - 1) d + 1)) // s + 1`` against the output tensor's."""
    t, l, bo, r = (int(v) for v in attr(ctx, "tpu_pads"))
    sh, sw = int(ctx.attr("stride_h", 1)), int(ctx.attr("stride_w", 1))
    dh = int(ctx.attr("dilation_h_factor", 1)) if dilation else 1
    dw = int(ctx.attr("dilation_w_factor", 1)) if dilation else 1
    if min(sh, sw, dh, dw) < 1 or min(t, l, bo, r) < 0:
        raise ctx.error(f"strides {sh}x{sw}, dilations {dh}x{dw} and pads {(t, l, bo, r)} must be positive")
    n, h, w, _ = in_shape
    out_h = (h + t + bo - ((kh - 1) * dh + 1)) // sh + 1
    out_w = (w + l + r - ((kw - 1) * dw + 1)) // sw + 1
    want = (n, out_h, out_w, channels)
    if static_shape(ctx, ctx.outputs[0], "output", 4) != want:
        raise ctx.error(f"output shape {list(ctx.outputs[0].shape)} does not match the computed {list(want)}")
    return Window(WindowOptions("EXPLICIT", sh, sw, dh, dw, "NONE"), Padding2D(out_h, out_w, t, l), kh, kw)


def _bias(ctx: KernelContext, channels: int) -> np.ndarray:
    if not ctx.has_input(2):
        return np.zeros(channels, np.int64)
    b = ctx.constant(2, "bias")
    if b.dtype != np.int32 or b.shape != (channels,):
        raise ctx.error(f"bias must be int32 [{channels}], got {b.dtype.name} {list(b.shape)}")
    return b.astype(np.int64)


def _check_accumulator(ctx: KernelContext, abs_w_sums: np.ndarray, bias: np.ndarray, uint8: bool) -> None:
    """``|acc| <= 255 sum|w| + |b| < 2^31`` (TPU-MLIR's int64 product of it and a 32-bit multiplier
    cannot overflow then)."""
    bound = int((255 * abs_w_sums + np.abs(bias)).max(initial=0))
    if bound >= 2**31:
        raise ctx.error(f"the accumulator can overflow (|acc| up to {bound} >= 2^31)")


@dataclass(frozen=True, eq=False)
class TpuMlirConv2DParams:
    """CONV_2D under ``tpu-mlir``: the exact GEMM (block-diagonal when grouped), the per-channel
    offset (bias, plus ``128 sum(w)`` for a uint8 input), the model's multiplier/rshift requantizer."""

    gemm: PreparedGemm
    offset: np.ndarray  # int64 [C_out]
    requant: Requantizer
    im2col: Im2col
    out_shape: tuple[int, int, int, int]
    uint8_input: bool


def prepare_conv(ctx: KernelContext) -> TpuMlirConv2DParams:
    in_qp = activation(ctx, 0, "input")
    activation(ctx, -1, "output")
    x = ctx.input(0)
    in_shape = static_shape(ctx, x, "input", 4)
    w = ctx.constant(1, "weights")
    if w.dtype not in WEIGHT_DTYPES or w.ndim != 4:
        raise ctx.error(f"weights must be int8 or uint8 [C_out, KH, KW, C_in/groups], got {w.dtype.name} "
                        f"{list(w.shape)}")
    c_out, kh, kw, c_g = w.shape
    c_in = in_shape[3]
    if c_in % c_g or c_out % (c_in // c_g):
        raise ctx.error(f"weights {list(w.shape)} do not split {c_in} input channels into groups")
    groups = c_in // c_g
    win = window(ctx, in_shape, kh, kw, c_out)
    bias = _bias(ctx, c_out)
    _check_accumulator(ctx, np.abs(w.astype(np.int64)).reshape(c_out, -1).sum(axis=1), bias, x.dtype == np.uint8)
    matrix = w.reshape(c_out, kh * kw * c_g)
    if groups > 1:  # block-diagonal: output channel o sees its group's input channels only
        full = np.zeros((c_out, kh * kw, groups, c_g), w.dtype)
        full[np.arange(c_out), :, np.arange(c_out) // (c_out // groups), :] = w.reshape(c_out, kh * kw, c_g)
        matrix = full.reshape(c_out, kh * kw * c_in)
    gemm = gemm_of(matrix)
    uint8 = x.dtype == np.uint8
    zx = in_qp.tensor_zero_point
    offset = bias + (128 * gemm.weight_sums if uint8 else 0)  # sum((x - 128) w) + 128 sum(w) = sum(x w)
    im2col = make_im2col(in_shape, kh, kw, win.opts, win.pad, zx - 128 if uint8 else zx)
    return TpuMlirConv2DParams(gemm, offset, requantizer(ctx, c_out), im2col,
                               (in_shape[0], win.pad.out_h, win.pad.out_w, c_out), uint8)


def run_conv(p: TpuMlirConv2DParams, x, w=None, b=None):
    cols = fill_im2col(p.im2col, as_int8(x) if p.uint8_input else x)
    acc = exact_matmul(cols, p.gemm)  # int32: sum of raw products (uint8: of x - 128)
    return (requantize(p.requant, acc, p.offset).reshape(p.out_shape),)


@dataclass(frozen=True, eq=False)
class TpuMlirDepthwiseParams:
    """DEPTHWISE_CONV_2D under ``tpu-mlir``: the int32 tap loop (padded with ``Z_x``, starting from
    the bias) and the model's multiplier/rshift requantizer."""

    taps: DepthwiseTaps  # intq.kernels.depthwise_conv_2d's tap loop
    requant: Requantizer


def prepare_depthwise(ctx: KernelContext) -> TpuMlirDepthwiseParams:
    in_qp = activation(ctx, 0, "input")
    activation(ctx, -1, "output")
    x = ctx.input(0)
    in_shape = static_shape(ctx, x, "input", 4)
    w = ctx.constant(1, "weights")
    if w.dtype not in WEIGHT_DTYPES or w.ndim != 4 or w.shape[0] != 1 or w.shape[3] != in_shape[3]:
        raise ctx.error(f"weights must be int8 or uint8 [1, KH, KW, {in_shape[3]}], got {w.dtype.name} "
                        f"{list(w.shape)}")
    _, kh, kw, c = w.shape
    win = window(ctx, in_shape, kh, kw, c)
    bias = _bias(ctx, c)
    _check_accumulator(ctx, np.abs(w.astype(np.int64)).reshape(-1, c).sum(axis=0), bias, x.dtype == np.uint8)
    opts = win.opts
    tap_rows = np.array([i * opts.dilation_h for i in range(kh) for _ in range(kw)], np.int64)
    tap_cols = np.array([j * opts.dilation_w for _ in range(kh) for j in range(kw)], np.int64)
    padded = make_padded(in_shape, kh, kw, opts, win.pad, in_qp.tensor_zero_point, np.int32, always=True)
    taps = DepthwiseTaps(w.reshape(kh * kw, c, 1).astype(np.int32), bias.astype(np.int32), tap_rows, tap_cols,
                         opts.stride_h, opts.stride_w, padded,
                         np.empty((in_shape[0], win.pad.out_h, win.pad.out_w, c), np.int32))
    return TpuMlirDepthwiseParams(taps, requantizer(ctx, c))


def run_depthwise(p: TpuMlirDepthwiseParams, x, w=None, b=None):
    return (requantize(p.requant, depthwise_sums(p.taps, x)),)


variant("CONV_2D", family=FAMILY, run=run_conv)(prepare_conv)
variant("DEPTHWISE_CONV_2D", family=FAMILY, run=run_depthwise)(prepare_depthwise)
