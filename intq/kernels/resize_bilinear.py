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

``litert-opt`` runs the reference kernel above. ``xnnpack`` (measured; explained from XNNPACK's
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

The ``ort`` targets (intq writes ONNX ``Resize``, mode ``linear``, on the NHWC int8 tensor, with
``coordinate_transformation_mode`` ``half_pixel`` / ``align_corners`` / ``asymmetric`` for
half_pixel_centers / align_corners / neither; measured, and read in onnxruntime's
``upsamplebase.h`` / ``upsample.h``): with scales ``[1, s_h, s_w, 1]`` and ``s_h != 1`` onnxruntime
runs ``NhwcUpsampleBilinearInteger``. Per axis, ``scale = float32(out) / float32(in)``, the source
coordinate in float32 (``(i + 0.5) / scale - 0.5``, ``i * float32(in - 1) / float32(out - 1)`` or
``i / scale``; ``i`` itself where ``scale == 1``), clamped to ``[0, in - 1]``; ``v10 = trunc(v 1024)``,
``lo = trunc(v)``, ``hi = min(lo + 1, in - 1)``, weights ``d_lo = |v10 - 1024 hi|`` and ``d_hi = |v10 -
1024 lo|`` (512 each where ``lo == hi``). Per pixel ``acc = sum X w_y w_x`` (the weights of an
axis sum to 1024) and ``y = acc / 2^20`` in C integer division: truncated toward zero on int8
codes, floored on uint8 codes (``ort-u8``: ``floor(acc / 2^20)`` of intq's codes, as the 128 the
uint8 codes add comes out whole). Where only the width is resized (``s_h == 1``) onnxruntime would
take its NCHW float path, so intq writes the resize between two H/W Transposes: the same integer
path (:class:`OrtResizeBilinearParams`; integer-only at run time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import ResizeRequest, resize_request
from intq.kernels.base import KernelContext, kernel
from intq.kernels.targets import Runtime

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


@dataclass(frozen=True, eq=False)
class OrtResizeBilinearParams:
    """The ``ort`` targets: onnxruntime's ``NhwcUpsampleBilinearInteger`` (module docstring); the
    taps' ``w_lo`` / ``w_hi`` are its 10-bit ``d`` weights (summing to 1024 per output index)."""

    rows: AxisTaps
    cols: AxisTaps
    unsigned: bool  # ort-u8: uint8 codes, so C division floors; ort: int8 codes, it truncates toward 0
    out_shape: tuple[int, ...]


def _ort_axis(in_size: int, out_size: int, mode: str) -> AxisTaps:
    """onnxruntime's ``SetupUpsampleBilinearInteger`` for one axis, in float32 (module docstring)."""
    f32 = np.float32
    scale = f32(f32(out_size) / f32(in_size))
    i = np.arange(out_size).astype(f32)
    if scale == 1:
        v = i
    elif mode == "half_pixel":
        v = (((i + f32(0.5)).astype(f32) / scale).astype(f32) - f32(0.5)).astype(f32)
    elif mode == "align_corners":
        v = ((i * f32(in_size - 1)).astype(f32) / f32(out_size - 1)).astype(f32) if out_size > 1 else i * f32(0)
    else:  # asymmetric
        v = (i / scale).astype(f32)
    v = np.maximum(f32(0), np.minimum(v, f32(in_size - 1)))
    v10 = (v * f32(_ONE)).astype(np.int64)  # exact (a power of two), then truncated: v >= 0
    lo = np.minimum(v.astype(np.int64), in_size - 1)
    hi = np.minimum(lo + 1, in_size - 1)
    same = lo == hi
    d_lo = np.where(same, _ONE // 2, np.abs(v10 - _ONE * hi))  # the weight of lo: its distance to hi
    d_hi = np.where(same, _ONE // 2, np.abs(v10 - _ONE * lo))
    return AxisTaps(lo, hi, d_lo.astype(np.int32), d_hi.astype(np.int32))


def ort_mode(align_corners: bool, half_pixel_centers: bool) -> str:
    """The ONNX ``coordinate_transformation_mode`` of TFLite's flags (the exporter writes this one)."""
    return "half_pixel" if half_pixel_centers else "align_corners" if align_corners else "asymmetric"


@kernel(OP)
def prepare(ctx: KernelContext) -> ResizeBilinearParams | XnnpackResizeBilinearParams | OrtResizeBilinearParams:
    ctx.check_emulated()
    r = resize_request(ctx)
    align, half = r.align_corners, r.half_pixel_centers
    if align and half:
        raise ctx.error("align_corners and half_pixel_centers cannot both be set (TFLite rejects it)")
    if ctx.target.runtime is Runtime.ORT:  # onnxruntime's NhwcUpsampleBilinearInteger
        mode = ort_mode(r.align_corners, r.half_pixel_centers)
        return OrtResizeBilinearParams(_ort_axis(r.in_shape[1], r.out_h, mode), _ort_axis(r.in_shape[2], r.out_w, mode),
                                       ctx.target.activation_offset != 0, r.out_shape)
    if ctx.target.xnnpack:  # XNNPACK takes every int8 RESIZE_BILINEAR
        return XnnpackResizeBilinearParams(_xnnpack_axis(r.in_shape[1], r.out_h, align, half),
                                           _xnnpack_axis(r.in_shape[2], r.out_w, align, half), r.out_shape)
    return reference_params(ctx, r)


def reference_params(ctx: KernelContext, r: ResizeRequest) -> ResizeBilinearParams:
    """``ResizeBilinearInteger``'s taps of both axes (int8 and 16x8)."""
    align, half = r.align_corners, r.half_pixel_centers
    if align and half:
        raise ctx.error("align_corners and half_pixel_centers cannot both be set (TFLite rejects it)")
    rows = _taps(ctx, r.in_shape[1], r.out_h, align, half, "height")
    cols = _taps(ctx, r.in_shape[2], r.out_w, align, half, "width")
    return ResizeBilinearParams(rows, cols, r.out_shape)


def run(p: ResizeBilinearParams | XnnpackResizeBilinearParams | OrtResizeBilinearParams, x, size=None):
    if isinstance(p, XnnpackResizeBilinearParams):
        return (_xnnpack_resize(p, x),)
    if isinstance(p, OrtResizeBilinearParams):
        return (_ort_resize(p, x),)
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


def _ort_resize(p: OrtResizeBilinearParams, x: np.ndarray) -> np.ndarray:
    """onnxruntime's ``(sum X w_y w_x) / 2^20`` (|acc| <= 128 * 2^20 = 2^27: int32 is exact), truncated
    toward zero on int8 codes, floored on uint8 ones (``ort-u8``)."""
    r, c = p.rows, p.cols
    xi = x.astype(np.int32)
    rows = xi[:, r.lo] * r.w_lo[:, None, None] + xi[:, r.hi] * r.w_hi[:, None, None]  # [N, out_h, W, C]
    acc = rows[:, :, c.lo] * c.w_lo[:, None] + rows[:, :, c.hi] * c.w_hi[:, None]  # [N, out_h, out_w, C]
    if p.unsigned:
        return (acc >> _OUT_BITS).astype(np.int8)
    q = np.abs(acc) >> _OUT_BITS
    return np.where(acc < 0, -q, q).astype(np.int8)
