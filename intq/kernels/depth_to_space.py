"""DEPTH_TO_SPACE: ``y[b, h * bs + dy, w * bs + dx, c] = x[b, h, w, (dy * bs + dx) * C_out + c]`` (NHWC, DCR order).

Contract (LiteRT ``depth_to_space.cc``, TFLM ``depth_to_space.cc``): a 4-D input whose depth is a
multiple of ``block_size**2`` (``block_size`` > 0); output ``[N, H * bs, W * bs, C / bs**2]``.
Shared contract and dtypes: :func:`intq.kernels._movement_common.block_4d`.
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "DEPTH_TO_SPACE"


@kernel(OP)
def prepare(ctx: KernelContext) -> mc.BlockParams:
    (n, h, w, c), bs = mc.block_4d(ctx)
    if c % (bs * bs):
        raise ctx.error(f"block_size {bs} must be positive with block_size**2 dividing the depth {c}")
    return mc.BlockParams(bs, mc.check_output_shape(ctx, (n, h * bs, w * bs, c // (bs * bs))))


def run(p: mc.BlockParams, x):
    n, h, w, c = x.shape
    bs = p.block
    y = x.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)  # [n, h, dy, w, dx, c']
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
