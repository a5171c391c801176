"""SPACE_TO_DEPTH: ``y[b, h, w, (dy * bs + dx) * C + c] = x[b, h * bs + dy, w * bs + dx, c]`` (NHWC).

Contract (LiteRT ``space_to_depth.cc``, TFLM ``space_to_depth.cc``): a 4-D input whose height
and width are multiples of ``block_size`` (> 0); output ``[N, H / bs, W / bs, C * bs * bs]``.
Shared contract and dtypes: :func:`intq.kernels._movement_common.block_4d`.
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SPACE_TO_DEPTH"


@kernel(OP)
def prepare(ctx: KernelContext) -> mc.BlockParams:
    (n, h, w, c), bs = mc.block_4d(ctx)
    if h % bs or w % bs:
        raise ctx.error(f"block_size {bs} must be positive and divide height {h} and width {w}")
    return mc.BlockParams(bs, mc.check_output_shape(ctx, (n, h // bs, w // bs, c * bs * bs)))


def run(p: mc.BlockParams, x):
    n, h, w, c = x.shape
    bs = p.block
    y = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)  # [n, h', w', dy, dx, c]
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
