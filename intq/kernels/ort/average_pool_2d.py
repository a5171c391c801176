"""onnxruntime's QLinearAveragePool (``count_include_pad = 0``), float32 window sums; a window covering
the whole unpadded image falls back to QLinearGlobalAveragePool (:func:`is_global_window`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import prepare_pool, window_counts
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import (
    INT8_CODES, OrtGlobalAveragePool, global_average_pool_scale, run_global_average_pool)
from intq.kernels.requantize import Requant, make_requantizer

OP = "AVERAGE_POOL_2D"


@dataclass(frozen=True, eq=False)
class OrtAveragePool:
    """QLinearAveragePool (``count_include_pad = 0``): every code dequantized in float32
    (``float32(s_x (q - Z_x))``), each window's in-image values summed in float32 row by row,
    divided by their count, then ``rint(float32(float32(y / s_y) + Z_y))`` (the zero point added
    before rounding), clamped (the fused activation's clamp: the Clip intq writes after it)."""

    dequantized: np.ndarray  # float32 [256] by the code's bits
    geometry: object  # intq.kernels._pool_common.PoolGeometry
    count: np.ndarray  # float32 [out_h, out_w, 1]: in-image pixels per window
    y_scale: np.float32
    zero_point: np.float32  # the runtime's: Z_y (+ 128 on ort-u8)
    offset: int  # the runtime's codes minus intq's (ort-u8: 128)
    act_min: int
    act_max: int

def is_global_window(g) -> bool:
    """Whether onnxruntime's QLinearAveragePool falls back to its global average pool
    (``qlinear_pool.cc``: the kernel equals the image and every pad is 0), whose arithmetic is
    QLinearGlobalAveragePool's integer sum and float32 requantization, not the float32 window sum."""
    return (g.filter_h, g.filter_w) == (g.in_h, g.in_w) and not (g.pad_h or g.pad_w or g.pad_bottom or g.pad_right)


@variant(OP, family=FAMILY, run={OrtAveragePool: "run", OrtGlobalAveragePool: "run_global"})
def prepare(ctx: KernelContext) -> OrtAveragePool | OrtGlobalAveragePool:
    """AVERAGE_POOL_2D on an ``ort`` target: :class:`OrtAveragePool`, or, for a window covering the
    whole unpadded image (:func:`is_global_window`; measured on MediaPipe's selfie segmenter, 16x16),
    :class:`OrtGlobalAveragePool` over H and W clamped to the fused activation's range."""
    qx, qy = ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output")
    pool = prepare_pool(ctx, qx, qy)
    g = pool.geometry
    if is_global_window(g):
        n = g.in_h * g.in_w
        try:
            s = global_average_pool_scale(qx, qy, n)
        except ValueError as e:
            raise ctx.error(str(e)) from None
        r = make_requantizer(s, Requant.FLOAT32_RNE, qy.tensor_zero_point, pool.act_min, pool.act_max, np.int8)
        return OrtGlobalAveragePool((1, 2), np.array([-n * qx.tensor_zero_point], np.int64), r,
                                    tuple(int(d) for d in ctx.static_shape(ctx.outputs[0], "output")))
    counts = window_counts(ctx, pool.geometry, 128)
    dq = (np.float32(qx.tensor_scale) * (INT8_CODES.astype(np.int32) - qx.tensor_zero_point).astype(np.float32))
    offset = ctx.target.activation_offset
    return OrtAveragePool(dq.astype(np.float32), pool.geometry, counts.count.astype(np.float32),
                          np.float32(qy.tensor_scale), np.float32(qy.tensor_zero_point + offset), offset,
                          pool.act_min, pool.act_max)


def run(p: OrtAveragePool, x):
    return (_float32_average_pool(p, np.asarray(x).view(np.uint8)),)


def run_global(p: OrtGlobalAveragePool, x):
    """A window covering the whole unpadded image: QLinearGlobalAveragePool's integer sum."""
    return (run_global_average_pool(p, x),)


def _float32_average_pool(p: OrtAveragePool, codes: np.ndarray) -> np.ndarray:
    """The float32 steps of onnxruntime's QLinearAveragePool (``ort`` targets only, a float
    emulation): each code dequantized (``codes``: the int8 input's bits as uint8), the window's values
    added in onnxruntime's order (kernel rows, then columns; the out-of-image taps of the zero-padded
    input add an exact 0), ``/ count``, ``/ s_y``, ``+ Z_y``, rint."""
    v = p.dequantized[codes]  # float32
    g = p.geometry
    vp = np.pad(v, ((0, 0), (g.pad_h, g.pad_bottom), (g.pad_w, g.pad_right), (0, 0)))
    span_h, span_w = (g.out_h - 1) * g.stride_h + 1, (g.out_w - 1) * g.stride_w + 1
    acc = np.zeros((v.shape[0], g.out_h, g.out_w, v.shape[3]), np.float32)
    for fy in range(g.filter_h):
        for fx in range(g.filter_w):
            acc += vp[:, fy:fy + span_h:g.stride_h, fx:fx + span_w:g.stride_w]
    y = ((acc / p.count).astype(np.float32) / p.y_scale).astype(np.float32) + p.zero_point
    return np.clip(np.rint(y).astype(np.int64) - p.offset, p.act_min, p.act_max).astype(np.int8)
