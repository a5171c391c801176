"""BATCH_TO_SPACE_ND: move batch blocks back into the spatial dims, then crop.

For a 4-D NHWC input, block ``[bh, bw]`` and crops ``[[top, bottom], [left, right]]``, with
``N = x.shape[0] / (bh * bw)``::

    y[n, h * bh + dh - top, w * bw + dw - left, c] = x[(dh * bw + dw) * N + n, h, w, c]

A 3-D NHC input is read as NH1C (one block size, one crop pair). Contract: SPACE_TO_BATCH_ND's
(:func:`intq.kernels._movement_common.space_batch`: dtypes, quantization, constant int32
``block_shape`` > 0 and ``crops`` >= 0), with the block dividing the batch and the crops no
larger than the un-blocked sizes. The integers are copied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "BATCH_TO_SPACE_ND"


@dataclass(frozen=True)
class BatchToSpaceNDParams:
    shape4: tuple[int, int, int, int]  # the input as NHWC
    block: tuple[int, int]
    crop: tuple[slice, slice]  # rows and columns kept after un-blocking
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> BatchToSpaceNDParams:
    sb = mc.space_batch(ctx, "crops")
    n, h, w, c = sb.shape4
    bh, bw = sb.block2
    if n % (bh * bw):
        raise ctx.error(f"block_shape {list(sb.block)} must divide the batch {n}")
    (top, bottom), (left, right) = sb.pairs2
    rows, cols = h * bh - top - bottom, w * bw - left - right
    if rows < 0 or cols < 0:
        spans = list(sb.shape_nd(n, h * bh, w * bw, c)[1:-1])
        raise ctx.error(f"crops {sb.pairs.tolist()} remove more than the {spans} rows/columns there are")
    out_shape = mc.check_output_shape(ctx, sb.shape_nd(n // (bh * bw), rows, cols, c))
    return BatchToSpaceNDParams(sb.shape4, sb.block2, (slice(top, top + rows), slice(left, left + cols)), out_shape)


def run(p: BatchToSpaceNDParams, x, block_shape=None, crops=None):
    n, h, w, c = p.shape4
    bh, bw = p.block
    y = x.reshape(bh, bw, n // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5)  # [n', h, dh, w, dw, c]
    y = y.reshape(n // (bh * bw), h * bh, w * bw, c)[:, p.crop[0], p.crop[1], :]
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
