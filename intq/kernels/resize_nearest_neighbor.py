"""RESIZE_NEAREST_NEIGHBOR: copy the nearest input pixel of an int8 NHWC image.

Formula (``reference_ops::GetNearestNeighbor``, identical in LiteRT — whose ``BUILTIN_REF`` and
optimized resolvers both run the reference kernel for int8 — and in TFLM). Per axis, in float32
as the C code computes it:

    scale  = float(in - 1) / float(out - 1)   if align_corners and out > 1
             float(in) / float(out)            otherwise
    offset = 0.5 if half_pixel_centers else 0
    src(i) = min(round_half_away((i + offset) * scale) if align_corners
                 else floor((i + offset) * scale), in - 1)
             then max(src, 0) when half_pixel_centers

and ``y[b, i, j, c] = q[b, src_h(i), src_w(j), c]``. Every ``align_corners`` /
``half_pixel_centers`` combination is accepted (the kernel does not forbid both). The source
indices depend only on shapes and flags, so ``prepare`` computes them (float32, emulated
exactly with numpy float32 operations) and ``run`` only gathers.

Contract: int8 per-tensor input [N, H, W, C] and output with the same zero point and scales
within 1e-6 (spec 003; the runtimes copy raw integers without checking); input 1 a constant int32 ``size`` = [out_h, out_w].
``litert-ref`` and ``tflite`` agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import resize_request
from intq.kernels.base import KernelContext, kernel
from intq.qmath import Rounding, round_float

OP = "RESIZE_NEAREST_NEIGHBOR"


@dataclass(frozen=True, eq=False)
class ResizeNearestNeighborParams:
    src_rows: np.ndarray  # int64 [out_h]
    src_cols: np.ndarray  # int64 [out_w]


def _source_index(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """GetNearestNeighbor for every output index, in float32 like the C code."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    offset = np.float32(0.5 if half_pixel else 0.0)
    pos = (np.arange(out_size).astype(np.float32) + offset) * scale  # float32 add, float32 multiply
    src = round_float(pos, Rounding.HALF_AWAY_FROM_ZERO) if align_corners else np.floor(pos)  # TfLiteRound / floor
    src = np.minimum(src.astype(np.int64), in_size - 1)
    return np.maximum(src, 0) if half_pixel else src


@kernel(OP)
def prepare(ctx: KernelContext) -> ResizeNearestNeighborParams:
    r = resize_request(ctx)
    return ResizeNearestNeighborParams(_source_index(r.in_shape[1], r.out_h, r.align_corners, r.half_pixel_centers),
                                       _source_index(r.in_shape[2], r.out_w, r.align_corners, r.half_pixel_centers))


def run(p: ResizeNearestNeighborParams, x, size=None):
    return (x[:, p.src_rows][:, :, p.src_cols],)
