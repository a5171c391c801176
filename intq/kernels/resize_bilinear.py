"""RESIZE_BILINEAR: bilinear interpolation of an int8 NHWC image in 10-bit fixed point.

Formula (``reference_ops::ResizeBilinearInteger``, which LiteRT's ``BUILTIN_REF`` and TFLM both
run for int8; no float anywhere). Per axis, with ``in``/``out`` the input/output sizes:

    scale_10 = (1024 * in + out // 2) // out                   (align_corners and out > 1:
                                                                (1024*(in-1) + (out-1)//2) // (out-1))
    v        = i * scale_10                                     (half_pixel_centers:
                                                                 i * scale_10 + scale_10 // 2 - 512)
    lo       = max(v / 1024, 0),  hi = min(ceil(v / 1024), in - 1)   (C division, truncating)
    f        = v - 1024 * lo                                    (the 10-bit fraction; may be < 0
                                                                 or > 1024 at the clamped edges)

and per output pixel, with the four neighbours of the input rows (ylo, yhi) and columns
(xlo, xhi):

    acc = q[ylo,xlo](1024-fy)(1024-fx) + q[yhi,xlo] fy (1024-fx) + q[ylo,xhi](1024-fy) fx
          + q[yhi,xhi] fy fx                                     (int64, 20 fraction bits)
    y   = (acc + (acc > 0 ? 2^19 : -2^19)) / 2^20                (C division: half away from 0)

The raw integers are interpolated: input and output share scale and zero point (spec 003;
neither runtime checks it, so intq does, with pooling's tolerance: equal zero points, scales
within 1e-6). ``align_corners`` and ``half_pixel_centers`` together
are rejected, as both runtimes do. ``litert-ref`` and ``tflite`` compute the same function
(TFLITE_SINGLE_ROUNDING builds would round with ``(acc + 2^19) >> 20``; neither oracle is one).

Contract: int8 per-tensor input [N, H, W, C]; input 1 a constant int32 ``size`` = [out_h, out_w]
(TFLM requires it constant). Prepare refuses the rare geometry in which the integer coordinate
lands past the last input pixel (large upscales of tiny inputs): the C code reads outside the
image there.

LiteRT's optimized resolver runs this kernel. Runtimes that compute otherwise replace this kernel
with a variant in their family's folder (docs/engine.md).

**16x8** (int16 activations, int8 weights): the int8 kernel's 10-bit integer interpolation on int16 values, in int64.

LiteRT 2.3 (``resize_bilinear.cc``: ``reference_ops::ResizeBilinearInteger<int16_t>`` under every
resolver — XNNPACK takes no int16 tensor): the taps and weights of
:mod:`intq.kernels.resize_bilinear` (``scale_10``, ``half_pixel_centers``, ``align_corners``), the
four-term sum in int64 (``|acc| <= 2^15 * 1536^2 < 2^37``), ``(acc +- 2^19) / 2^20``. Input and
output int16 per tensor with the same scale and zero point 0 (:func:`int16_params`). TensorFlow Lite
Micro has no int16 RESIZE_BILINEAR (its kernel takes float32 and int8): the reference refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import ResizeRequest, resize_request
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_common import int16_tensor

OP = "RESIZE_BILINEAR"

_ONE = 1 << 10  # 1.0 in the 10-bit fixed point of the coordinates
_HALF_OUT = 1 << 19  # 0.5 in the 20-bit fixed point of the interpolated value
_OUT_BITS = 20


@dataclass(frozen=True, eq=False)
class AxisTaps:
    """Per output row (or column): the two input indices and their 10-bit weights."""

    lo: np.ndarray  # int64 [out]
    hi: np.ndarray  # int64 [out]
    w_lo: np.ndarray  # int32 [out]: 1024 - f, in (0, 1536]
    w_hi: np.ndarray  # int32 [out]: f, in [-512, 1024)


@dataclass(frozen=True, eq=False)
class ResizeBilinearParams:
    rows: AxisTaps
    cols: AxisTaps
    out_shape: tuple[int, ...]


def _taps(ctx: KernelContext, in_size: int, out_size: int, align_corners: bool, half_pixel: bool, what: str) -> AxisTaps:
    if align_corners and out_size > 1:
        scale_10 = (_ONE * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale_10 = (_ONE * in_size + out_size // 2) // out_size
    if out_size * (scale_10 + 1) > 2**31 - 1:  # ComputeInterpolationValuesInteger works in int32
        raise ctx.error(f"resizing {what} {in_size} -> {out_size} overflows TFLite's int32 coordinates")
    i = np.arange(out_size, dtype=np.int64)
    v = i * scale_10 + (scale_10 // 2 - _ONE // 2 if half_pixel else 0)
    # v >= -512, so C's truncating v / 1024 is 0 where v < 0 and the floor elsewhere, and
    # (v + 1023) / 1024 is the ceiling, non-negative: floor division gives the same integers.
    lo = np.where(v < 0, 0, v // _ONE)  # max(v / 1024, 0)
    hi = np.minimum((v + _ONE - 1) // _ONE, in_size - 1)
    if int(lo.max()) > in_size - 1:
        raise ctx.error(f"resizing {what} {in_size} -> {out_size}: TFLite's integer coordinates pass the last input "
                        "pixel (its kernel reads outside the image); use a smaller ratio or RESIZE_NEAREST_NEIGHBOR")
    f = v - _ONE * lo
    assert int(f.min()) >= -_ONE // 2 and int(f.max()) < _ONE, "10-bit fraction out of range"
    return AxisTaps(lo, hi, (_ONE - f).astype(np.int32), f.astype(np.int32))


@kernel(OP)
def prepare(ctx: KernelContext) -> ResizeBilinearParams:
    r = checked_request(ctx)
    return reference_params(ctx, r)


def checked_request(ctx: KernelContext) -> ResizeRequest:
    """The resize contract (:func:`intq.kernels._pool_common.resize_request`) without both coordinate
    flags set."""
    ctx.check_emulated()
    r = resize_request(ctx)
    if r.align_corners and r.half_pixel_centers:
        raise ctx.error("align_corners and half_pixel_centers cannot both be set (TFLite rejects it)")
    return r


def reference_params(ctx: KernelContext, r: ResizeRequest) -> ResizeBilinearParams:
    """``ResizeBilinearInteger``'s taps of both axes (int8 and 16x8)."""
    align, half = r.align_corners, r.half_pixel_centers
    if align and half:
        raise ctx.error("align_corners and half_pixel_centers cannot both be set (TFLite rejects it)")
    rows = _taps(ctx, r.in_shape[1], r.out_h, align, half, "height")
    cols = _taps(ctx, r.in_shape[2], r.out_w, align, half, "width")
    return ResizeBilinearParams(rows, cols, r.out_shape)


def run(p: ResizeBilinearParams, x, size=None):
    # int32 is exact for int8: weights lie in [-512, 1536] and sum to 1024 per axis, so
    # |rows| <= 128 * 2048 = 2^18 and |acc| <= 2^18 * 2048 = 2^29.
    return (interpolate(p, x, np.int32).astype(np.int8),)


def interpolate(p: ResizeBilinearParams, x: np.ndarray, acc_dtype) -> np.ndarray:
    """The four-term sum, separable: rows, then columns (the same integers, in ``acc_dtype``: int32
    for int8 inputs, int64 for int16), then ``(acc +- 2^19) / 2^20`` (C division)."""
    r, c = p.rows, p.cols
    xi = x.astype(acc_dtype)
    rows = xi[:, r.lo] * r.w_lo[:, None, None] + xi[:, r.hi] * r.w_hi[:, None, None]  # [N, out_h, W, C]
    acc = rows[:, :, c.lo] * c.w_lo[:, None] + rows[:, :, c.hi] * c.w_hi[:, None]  # [N, out_h, out_w, C]
    q = (np.abs(acc) + _HALF_OUT) >> _OUT_BITS  # (acc +- 2^19) / 2^20, truncating: |acc| rounded half up
    return np.where(acc < 0, -q, q)


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> ResizeBilinearParams:
    """TensorFlow Lite Micro has no int16 RESIZE_BILINEAR (its kernel takes float32 and int8): the
    reference refuses it, as its op resolver does."""
    raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) has no int16 RESIZE_BILINEAR; "
                    f"use target 'litert-ref' (or 'litert-opt', 'xnnpack')")


def int16_params(ctx: KernelContext) -> ResizeBilinearParams:
    """The 16x8 kernel's taps (the int8 kernel's), int16 input and output with the same parameters."""
    r = resize_request(ctx, dtypes=(np.int16,))
    int16_tensor(ctx, ctx.input(0), "input")
    return reference_params(ctx, r)


def run_int16(p: ResizeBilinearParams, x, size=None):
    return (interpolate(p, x, np.int64).astype(np.int16),)
