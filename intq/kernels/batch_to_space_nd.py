"""BATCH_TO_SPACE_ND: move batch blocks back into the spatial dims, then crop.

For a 4-D NHWC input, block ``[bh, bw]`` and crops ``[[top, bottom], [left, right]]``, with
``N = x.shape[0] / (bh * bw)``::

    y[n, h * bh + dh - top, w * bw + dw - left, c] = x[(dh * bw + dw) * N + n, h, w, c]

A 3-D NHC input is read as NH1C (one block size, one crop pair). Contract (LiteRT
``batch_to_space_nd.cc``, TFLM ``batch_to_space_nd.cc``): constant int32 ``block_shape``
[spatial] (> 0, dividing the batch) and ``crops`` [spatial, 2] (>= 0). The integers are copied.

* LiteRT: int8, uint8, int16, int32, int64; 8- and 16-bit tensors must have the output's
  scale and zero point, int16 zero points 0.
* TFLM: int8 only; it does not compare quantization parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "BATCH_TO_SPACE_ND"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8,)}


@dataclass(frozen=True)
class BatchToSpaceNDParams:
    shape4: tuple[int, int, int, int]  # the input as NHWC
    block: tuple[int, int]
    crop: tuple[slice, slice]  # rows and columns kept after un-blocking
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> BatchToSpaceNDParams:
    x, y = ctx.input(0), ctx.outputs[0]
    dtype = mc.check_dtype(ctx, x, "input", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.same_dtype(ctx, x, y)
    mc.check_per_tensor(ctx, [x, y])
    shape = mc.static_shape(ctx, x, "input")
    if len(shape) not in (3, 4):
        raise mc.unsupported(ctx, f"an input of rank {len(shape)} (3-D NHC or 4-D NHWC)")
    if mc.runtime(ctx) == mc.LITERT and dtype in (mc.I8, mc.U8, mc.I16):
        mc.require_same_quant(ctx, x, y)
        if dtype == mc.I16 and mc.zero_point(x) != 0:
            raise mc.unsupported(ctx, "int16 tensors with a non-zero zero point")
    spatial = len(shape) - 2
    block = [int(v) for v in mc.constant_ints(ctx, 1, "block_shape", (mc.I32,), (spatial,))]
    crops = mc.constant_ints(ctx, 2, "crops", (mc.I32,), (spatial, 2))
    total = int(np.prod(block))
    if any(b <= 0 for b in block) or shape[0] % total:
        raise ctx.error(f"block_shape {block} must be positive and divide the batch {shape[0]}")
    if np.any(crops < 0):
        raise ctx.error(f"crops {crops.tolist()} must be >= 0")
    spans = [shape[1 + k] * block[k] for k in range(spatial)]
    sizes = [s - int(crops[k, 0]) - int(crops[k, 1]) for k, s in enumerate(spans)]
    if any(s < 0 for s in sizes):
        raise ctx.error(f"crops {crops.tolist()} remove more than the {spans} rows/columns there are")
    out_shape = mc.check_output_shape(ctx, [shape[0] // total, *sizes, shape[-1]])
    rows = slice(int(crops[0, 0]), int(crops[0, 0]) + sizes[0])
    if spatial == 1:  # NHC -> NH1C
        shape4, block2, cols = (shape[0], shape[1], 1, shape[2]), (block[0], 1), slice(0, 1)
    else:
        shape4, block2 = shape, (block[0], block[1])
        cols = slice(int(crops[1, 0]), int(crops[1, 0]) + sizes[1])
    return BatchToSpaceNDParams(shape4, block2, (rows, cols), out_shape)


def run(p: BatchToSpaceNDParams, x, block_shape=None, crops=None):
    n, h, w, c = p.shape4
    bh, bw = p.block
    y = x.reshape(bh, bw, n // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5)  # [n', h, dh, w, dw, c]
    y = y.reshape(n // (bh * bw), h * bh, w * bw, c)[:, p.crop[0], p.crop[1], :]
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
