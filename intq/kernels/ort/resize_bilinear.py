"""onnxruntime's RESIZE_BILINEAR. intq writes ONNX ``Resize``, mode ``linear``, on the NHWC int8
tensor, with ``coordinate_transformation_mode`` ``half_pixel`` / ``align_corners`` / ``asymmetric``
for half_pixel_centers / align_corners / neither. Measured, and read in onnxruntime's
``upsamplebase.h`` / ``upsample.h``: with scales ``[1, s_h, s_w, 1]`` and ``s_h != 1`` onnxruntime
runs ``NhwcUpsampleBilinearInteger``. Per axis, ``scale = float32(out) / float32(in)``, the source
coordinate in float32 (``(i + 0.5) / scale - 0.5``, ``i * float32(in - 1) / float32(out - 1)`` or
``i / scale``; ``i`` itself where ``scale == 1``), clamped to ``[0, in - 1]``; ``v10 = trunc(v 1024)``,
``lo = trunc(v)``, ``hi = min(lo + 1, in - 1)``, weights ``d_lo = |v10 - 1024 hi|`` and ``d_hi = |v10 -
1024 lo|`` (512 each where ``lo == hi``). Per pixel ``acc = sum X w_y w_x`` (the weights of an
axis sum to 1024) and ``y = acc / 2^20`` in C integer division: truncated toward zero on int8
codes, floored on uint8 codes (``floor(acc / 2^20)`` of intq's codes, as the 128 the uint8 codes add
comes out whole). intq writes the Resize on uint8 codes in its int8 exports too (a DequantizeLinear ->
QuantizeLinear to uint8 around it: onnxruntime on x86 runs an int8 QDQ model's other units on uint8
codes and would leave this one on int8 codes), so the ``ort`` targets floor; an imported model's
Resize of int8 codes (node attribute ``onnx_codes`` ``"int8"``, set by the reader) truncates. Where only the width is resized (``s_h == 1``) onnxruntime would
take its NCHW float path, so intq writes the resize between two H/W Transposes: the same integer
path (:class:`OrtResizeBilinearParams`; integer-only at run time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import resize_bilinear as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.resize_bilinear import _ONE, _OUT_BITS, AxisTaps


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


@variant(reference.OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtResizeBilinearParams:
    r = reference.checked_request(ctx)
    mode = ort_mode(r.align_corners, r.half_pixel_centers)
    # intq writes every Resize on uint8 codes (intq.onnx_format.writer._to_uint8_codes): floored; an imported
    # model's Resize of int8 codes (attribute onnx_codes "int8", the reader's) truncates
    unsigned = ctx.target.activation_offset != 0 or ctx.attr("onnx_codes", "uint8") != "int8"
    return OrtResizeBilinearParams(_ort_axis(r.in_shape[1], r.out_h, mode), _ort_axis(r.in_shape[2], r.out_w, mode),
                                   unsigned, r.out_shape)


def run(p: OrtResizeBilinearParams, x, size=None):
    return (_ort_resize(p, x),)


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
