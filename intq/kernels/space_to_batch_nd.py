"""SPACE_TO_BATCH_ND: pad the spatial dims, then move each block offset into the batch.

For a 4-D NHWC input, block ``[bh, bw]`` and paddings ``[[top, bottom], [left, right]]``::

    y[(dh * bw + dw) * N + n, h, w, c] = xp[n, h * bh + dh, w * bw + dw, c]

where ``xp`` is ``x`` padded with the pad value. A 3-D NHC input is read as NH1C (one block
size, one padding pair). Contract (LiteRT ``space_to_batch_nd.cc``, TFLM
``space_to_batch_nd.cc``): constant int32 ``block_shape`` [spatial] (> 0) and ``paddings``
[spatial, 2] (>= 0), padded sizes multiples of the block.

* LiteRT: int8, uint8, int16, int32, int64; 8- and 16-bit tensors must have the output's
  scale and zero point, int16 zero points 0. The pad value is the output zero point (the real
  0; ``memset`` of its byte) for 8-bit data, 0 otherwise.
* TFLM: int8 only; it does not compare quantization parameters. Its pad value is
  ``SpaceToBatchParams::output_offset``, which TFLM's prepare never sets (a TFLM bug): the
  persistent buffer holding it is uninitialised arena memory — zero in a fresh host arena, other
  values after earlier runs (measured: -32, -88) — so the padded outputs are **undefined**: intq
  refuses a padded SPACE_TO_BATCH_ND for the ``tflite`` target instead of guessing (pad explicitly
  with PAD first, whose pad value TFLM sets); without padding the op is pure data movement there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SPACE_TO_BATCH_ND"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8,)}


@dataclass(frozen=True)
class SpaceToBatchNDParams:
    shape4: tuple[int, int, int, int]  # the input as NHWC
    block: tuple[int, int]
    widths: tuple[tuple[int, int], ...]  # np.pad widths of the 4-D view
    value: int
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> SpaceToBatchNDParams:
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
    pads = mc.constant_ints(ctx, 2, "paddings", (mc.I32,), (spatial, 2))
    if any(b <= 0 for b in block) or np.any(pads < 0):
        raise ctx.error(f"block_shape {block} must be positive and paddings {pads.tolist()} >= 0")
    padded = [shape[1 + k] + int(pads[k, 0]) + int(pads[k, 1]) for k in range(spatial)]
    if any(p % b for p, b in zip(padded, block)):
        raise ctx.error(f"padded spatial sizes {padded} are not multiples of block_shape {block}")
    out_shape = mc.check_output_shape(
        ctx, [shape[0] * int(np.prod(block)), *(p // b for p, b in zip(padded, block)), shape[-1]])
    if spatial == 1:  # NHC -> NH1C
        shape4, block2 = (shape[0], shape[1], 1, shape[2]), (block[0], 1)
        widths = ((0, 0), (int(pads[0, 0]), int(pads[0, 1])), (0, 0), (0, 0))
    else:
        shape4, block2 = shape, (block[0], block[1])
        widths = ((0, 0), (int(pads[0, 0]), int(pads[0, 1])), (int(pads[1, 0]), int(pads[1, 1])), (0, 0))
    if mc.runtime(ctx) == mc.TFLM:
        if np.any(pads > 0):
            raise ctx.error("TensorFlow Lite Micro pads SPACE_TO_BATCH_ND with an uninitialised value (its "
                            "prepare never sets output_offset), so the padded outputs are undefined; pad "
                            "explicitly with PAD first, or use target 'litert-ref'")
        value = 0  # no padded position is written
    else:
        value = mc.zero_point(y) if dtype in (mc.I8, mc.U8) else 0  # float 0 for 32-bit data, 0 for int64
    return SpaceToBatchNDParams(shape4, block2, widths, value, out_shape)


def run(p: SpaceToBatchNDParams, x, block_shape=None, paddings=None):
    xp = np.pad(x.reshape(p.shape4), p.widths, mode="constant", constant_values=p.value)
    n, h, w, c = xp.shape
    bh, bw = p.block
    y = xp.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)  # [dh, dw, n, h', w', c]
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
