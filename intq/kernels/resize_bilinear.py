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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import resize_request
from intq.kernels.base import KernelContext, kernel

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
    ctx.check_emulated()  # litert-opt / xnnpack: measured to differ, not emulated (intq.kernels.targets)
    r = resize_request(ctx)
    align, half = r.align_corners, r.half_pixel_centers
    if align and half:
        raise ctx.error("align_corners and half_pixel_centers cannot both be set (TFLite rejects it)")
    rows = _taps(ctx, r.in_shape[1], r.out_h, align, half, "height")
    cols = _taps(ctx, r.in_shape[2], r.out_w, align, half, "width")
    return ResizeBilinearParams(rows, cols, r.out_shape)


def run(p: ResizeBilinearParams, x, size=None):
    r, c = p.rows, p.cols
    # The four-term sum is separable: interpolate rows, then columns (the same integer).
    # int32 is exact: weights lie in [-512, 1536] and sum to 1024 per axis, so
    # |rows| <= 128 * 2048 = 2^18 and |acc| <= 2^18 * 2048 = 2^29.
    xi = x.astype(np.int32)
    rows = xi[:, r.lo] * r.w_lo[:, None, None] + xi[:, r.hi] * r.w_hi[:, None, None]  # [N, out_h, W, C]
    acc = rows[:, :, c.lo] * c.w_lo[:, None] + rows[:, :, c.hi] * c.w_hi[:, None]  # [N, out_h, out_w, C]
    q = (np.abs(acc) + _HALF_OUT) >> _OUT_BITS  # (acc +- 2^19) / 2^20, truncating: |acc| rounded half up
    return (np.where(acc < 0, -q, q).astype(np.int8),)
