"""CONV_INTEGER (NHWC): ONNX's ConvInteger, ``y[n,oy,ox,o] = sum_{i,j,c} (x[n, oy*s_h - p_t + i*d_h,
ox*s_w - p_l + j*d_w, c] - Z_x) * (w[o,i,j,c] - Z_w)``, an int32 output with no requantization.

TFLite has no such builtin; ONNX's ConvInteger (opset 10) is what onnxruntime's dynamic
quantization writes, and ONNX's node tests exercise it. Imported models keep it as this operator
(:mod:`intq.onnx_format.reader`), written back as ConvInteger by intq's ONNX export.

Contract: input int8 ``[N, H, W, C]`` per tensor (only its zero point is read: the op has no
scales); weights int8 ``[C_out, KH, KW, C]`` constant with one zero point (onnxruntime's
``conv_integer.cc`` refuses a zero point per output channel: "Non per-tensor quantization is not
supported now"); no groups; options padding SAME/VALID, stride_h/w and dilation_h/w_factor >= 1;
output int32 ``[N, OH, OW, C_out]``. Positions outside the image contribute 0 (the input is padded
with ``Z_x``, as onnxruntime's im2col does).

Arithmetic: exact. ``|acc| <= 255 * max_o sum |w_o - Z_w| < 2^31`` is checked at prepare, so
onnxruntime's int32 accumulator cannot wrap and the int64 product below is its value. Every
target computes the same integers but one: onnxruntime's ConvInteger passes the weights as MLAS's
left operand, so int8 weights by uint8 inputs (intq's export) sum exactly on x86 AVX2 without VNNI
too (measured under QEMU ``-cpu Haswell``: 0 of 200 saturating models differ,
tests/export/test_ort_u8s8.py), while an imported model's uint8 weights by int8 inputs saturate
there (a variant of the onnxruntime families replaces this kernel for them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import (
    ConvOperands,
    Im2col,
    check_accumulator,
    conv_padding,
    fill_im2col,
    make_im2col,
    window_options,
)
from intq.kernels.base import KernelContext, kernel

OP = "CONV_INTEGER"


@dataclass(frozen=True, eq=False)
class ConvIntegerParams:
    weights: np.ndarray  # int64 [C_out, KH*KW*C]: w - Z_w, columns in im2col order (taps, then channels)
    input_zero_point: int
    im2col: Im2col
    out_shape: tuple[int, int, int, int]


@kernel(OP)
def prepare(ctx: KernelContext) -> ConvIntegerParams:
    x, y = ctx.input(0), ctx.outputs[0]
    in_qp = ctx.per_tensor(x, "input")
    if y.dtype != np.int32:
        raise ctx.error(f"output {y.name!r} must be int32 (the accumulator), got {y.dtype.name}")
    in_shape = ctx.static_shape(x, "input", 4)
    w = ctx.constant(1, "weights")
    w_qp = ctx.qparams(ctx.input(1), "weights")
    if w.dtype != np.int8 or w.ndim != 4 or w.shape[3] != in_shape[3]:
        raise ctx.error(f"weights must be int8 [C_out, KH, KW, {in_shape[3]}] (no groups), got {w.dtype.name} "
                        f"{list(w.shape)}")
    if w_qp.per_axis:
        raise ctx.error("weights with a zero point per output channel: onnxruntime's ConvInteger takes one zero point "
                        "(conv_integer.cc: 'Non per-tensor quantization is not supported now')")
    centred = w.reshape(w.shape[0], -1).astype(np.int64) - w_qp.tensor_zero_point
    check_accumulator(ctx, np.abs(centred).sum(axis=1), np.zeros(w.shape[0], np.int64))
    opts = window_options(ctx)
    if opts.activation != "NONE":
        raise ctx.error("ConvInteger has no fused activation")
    ops = ConvOperands(in_qp, in_qp, in_shape, w, w_qp, y.dtype, opts, 0)
    pad = conv_padding(ctx, ops, w.shape[1], w.shape[2], w.shape[0])
    im2col = make_im2col(in_shape, w.shape[1], w.shape[2], opts, pad, in_qp.tensor_zero_point)
    return ConvIntegerParams(centred, in_qp.tensor_zero_point, im2col,
                             (in_shape[0], pad.out_h, pad.out_w, w.shape[0]))


def exact_sums(p: ConvIntegerParams, rows: np.ndarray) -> np.ndarray:
    """``sum (x - Z_x)(w - Z_w)`` of the im2col rows ``[N*OH*OW, KH*KW*C]``: int64, exact (|.| < 2^31, prepare)."""
    return (rows.astype(np.int64) - p.input_zero_point) @ p.weights.T


def run(p: ConvIntegerParams, x, w=None):
    rows = fill_im2col(p.im2col, x)  # int8 [N*OH*OW, KH*KW*C], padded with Z_x
    return (exact_sums(p, rows).astype(np.int32).reshape(p.out_shape),)
