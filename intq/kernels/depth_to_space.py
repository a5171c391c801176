"""DEPTH_TO_SPACE: ``y[b, h * bs + dy, w * bs + dx, c] = x[b, h, w, (dy * bs + dx) * C_out + c]`` (NHWC, DCR order).

Contract (LiteRT ``depth_to_space.cc``, TFLM ``depth_to_space.cc``): a 4-D input whose depth is a
multiple of ``block_size**2`` (``block_size`` > 0); output ``[N, H * bs, W * bs, C / bs**2]``.
The integers are copied; neither runtime compares quantization parameters. LiteRT: int8,
uint8, int32, int64 (no int16). TFLM: int8 only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "DEPTH_TO_SPACE"
DTYPES = {mc.LITERT: (mc.I8, mc.U8, mc.I32, mc.I64), mc.TFLM: (mc.I8,)}


@dataclass(frozen=True)
class DepthToSpaceParams:
    block: int
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> DepthToSpaceParams:
    x, y = ctx.input(0), ctx.outputs[0]
    mc.check_dtype(ctx, x, "input", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.same_dtype(ctx, x, y)
    shape = mc.static_shape(ctx, x, "input")
    if len(shape) != 4:
        raise ctx.error(f"input {x.name!r} must be 4-D NHWC, has shape {list(shape)}")
    bs = int(ctx.attr("block_size", 0))
    n, h, w, c = shape
    if bs <= 0 or c % (bs * bs):
        raise ctx.error(f"block_size {bs} must be positive with block_size**2 dividing the depth {c}")
    out_shape = mc.check_output_shape(ctx, (n, h * bs, w * bs, c // (bs * bs)))
    return DepthToSpaceParams(bs, out_shape)


def run(p: DepthToSpaceParams, x):
    n, h, w, c = x.shape
    bs = p.block
    y = x.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)  # [n, h, dy, w, dx, c']
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
