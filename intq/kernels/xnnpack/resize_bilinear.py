"""XNNPACK's int8 RESIZE_BILINEAR (measured; explained from XNNPACK's
``xnn_indirection_init_resize_bilinear2d_hwc_q11`` and the ``s8-ibilinear`` microkernels): XNNPACK
takes every int8 RESIZE_BILINEAR and interpolates with 11-bit weights computed in float32. Per
axis, ``scale = float32(in - a) / float32(out - a)`` (``a = 1`` with align_corners and out > 1);
with align_corners or neither flag (TensorFlow's legacy mapping) ``v = min(float32(i) * scale,
in - 1)``, with half_pixel_centers ``v = clamp(float32(i) * scale + (0.5 scale - 0.5), 0, in - 1)``
(each operation rounded to float32); ``lo = trunc(v)``, ``hi = min(lo + 1, in - 1)``,
``alpha = lrintf((v - lo) * 2048)`` (half to even). Per pixel, in int32::

    t = q[lo_y, lo_x] 2048 + (q[lo_y, hi_x] - q[lo_y, lo_x]) alpha_x        (b likewise on row hi_y)
    y = (t 2048 + (b - t) alpha_y + 2^21) >> 22                          (arithmetic: half up)

(:class:`XnnpackResizeBilinearParams`; integer-only at run time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.resize_bilinear import OP, checked_request
from intq.kernels.xnnpack import FAMILY


_XNN_ONE = 1 << 11  # 1.0 in XNNPACK's 11-bit interpolation weights


_XNN_HALF = 1 << 21  # 0.5 in the 22-bit fixed point of the interpolated value


_XNN_BITS = 22


@dataclass(frozen=True, eq=False)
class XnnpackAxis:
    """XNNPACK's taps of one axis (module docstring): input indices and the 11-bit weight of ``hi``."""

    lo: np.ndarray  # int64 [out]
    hi: np.ndarray  # int64 [out]
    alpha: np.ndarray  # int32 [out], in [0, 2048]


@dataclass(frozen=True, eq=False)
class XnnpackResizeBilinearParams:
    """``xnnpack``: XNNPACK's qs8 bilinear resize with 11-bit weights (module docstring)."""

    rows: XnnpackAxis
    cols: XnnpackAxis
    out_shape: tuple[int, ...]


def _xnnpack_axis(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> XnnpackAxis:
    """XNNPACK's ``xnn_indirection_init_resize_bilinear2d_hwc_q11`` for one axis, in float32."""
    f32 = np.float32
    adjust = int(align_corners and out_size != 1)
    scale = f32(f32(in_size - adjust) / f32(out_size - adjust))
    i = np.arange(out_size).astype(f32)
    last = f32(in_size - 1)
    if align_corners or not half_pixel:  # XNN_FLAG_ALIGN_CORNERS or XNN_FLAG_TENSORFLOW_LEGACY_MODE
        v = np.minimum((i * scale).astype(f32), last)
    else:
        offset = f32(f32(f32(0.5) * scale) - f32(0.5))
        v = np.minimum(np.maximum(((i * scale).astype(f32) + offset).astype(f32), f32(0)), last)
    lo = np.trunc(v).astype(np.int64)
    alpha = np.rint(((v - lo.astype(f32)).astype(f32) * f32(_XNN_ONE)).astype(f32)).astype(np.int32)  # lrintf
    return XnnpackAxis(lo, np.minimum(lo + 1, in_size - 1), alpha)


def _xnnpack_resize(p: XnnpackResizeBilinearParams, x: np.ndarray) -> np.ndarray:
    """XNNPACK's ``s8-ibilinear``: each row's horizontal blend ``l 2048 + (r - l) alpha_x`` (|.| <= 2^18),
    then the vertical one ``t 2048 + (b - t) alpha_y`` (|.| <= 2^29, int32), ``(. + 2^21) >> 22``."""
    c = p.cols
    xi = x.astype(np.int32)
    left = xi[:, :, c.lo]  # [N, H, out_w, C]
    rows = left * _XNN_ONE + (xi[:, :, c.hi] - left) * c.alpha[:, None]
    top = rows[:, p.rows.lo]  # [N, out_h, out_w, C]
    acc = top * _XNN_ONE + (rows[:, p.rows.hi] - top) * p.rows.alpha[:, None, None]
    return ((acc + _XNN_HALF) >> _XNN_BITS).astype(np.int8)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> XnnpackResizeBilinearParams:
    r = checked_request(ctx)
    align, half = r.align_corners, r.half_pixel_centers
    return XnnpackResizeBilinearParams(_xnnpack_axis(r.in_shape[1], r.out_h, align, half),
                                       _xnnpack_axis(r.in_shape[2], r.out_w, align, half), r.out_shape)


def run(p: XnnpackResizeBilinearParams, x, size=None):
    return (_xnnpack_resize(p, x),)
