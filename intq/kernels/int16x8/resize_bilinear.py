"""RESIZE_BILINEAR, 16x8: the int8 kernel's 10-bit integer interpolation on int16 values, in int64.

LiteRT 2.3 (``resize_bilinear.cc``: ``reference_ops::ResizeBilinearInteger<int16_t>`` under every
resolver — XNNPACK takes no int16 tensor): the taps and weights of
:mod:`intq.kernels.resize_bilinear` (``scale_10``, ``half_pixel_centers``, ``align_corners``), the
four-term sum in int64 (``|acc| <= 2^15 * 1536^2 < 2^37``), ``(acc +- 2^19) / 2^20``. Input and
output int16 per tensor with the same scale and zero point 0. TensorFlow Lite Micro has no int16
RESIZE_BILINEAR (its kernel takes float32 and int8): the ``tflite`` target refuses it.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import resize_request
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import int16_tensor
from intq.kernels.resize_bilinear import ResizeBilinearParams, interpolate, reference_params
from intq.kernels.targets import Runtime

OP = "RESIZE_BILINEAR"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> ResizeBilinearParams:
    if ctx.target.runtime is Runtime.TFLM:
        raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) has no int16 RESIZE_BILINEAR; "
                        f"use target 'litert-ref' (or 'litert-opt', 'xnnpack')")
    r = resize_request(ctx, dtypes=(np.int16,))
    int16_tensor(ctx, ctx.input(0), "input")
    return reference_params(ctx, r)


def run(p: ResizeBilinearParams, x, size=None):
    return (interpolate(p, x, np.int64).astype(np.int16),)
