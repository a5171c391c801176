"""SPACE_TO_BATCH_ND: pad the spatial dims, then move each block offset into the batch.

For a 4-D NHWC input, block ``[bh, bw]`` and paddings ``[[top, bottom], [left, right]]``::

    y[(dh * bw + dw) * N + n, h, w, c] = xp[n, h * bh + dh, w * bw + dw, c]

where ``xp`` is ``x`` padded with the pad value. A 3-D NHC input is read as NH1C (one block
size, one padding pair). Contract (shared with BATCH_TO_SPACE_ND,
:func:`intq.kernels._movement_common.space_batch`): constant int32 ``block_shape`` [spatial] (> 0)
and ``paddings`` [spatial, 2] (>= 0), padded sizes multiples of the block.

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


@dataclass(frozen=True)
class SpaceToBatchNDParams:
    shape4: tuple[int, int, int, int]  # the input as NHWC
    block: tuple[int, int]
    widths: tuple[tuple[int, int], ...]  # np.pad widths of the 4-D view
    value: int
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> SpaceToBatchNDParams:
    sb = mc.space_batch(ctx, "paddings")
    n, h, w, c = sb.shape4
    bh, bw = sb.block2
    (top, bottom), (left, right) = sb.pairs2
    rows, cols = h + top + bottom, w + left + right
    if rows % bh or cols % bw:
        raise ctx.error(f"padded spatial sizes {list(sb.shape_nd(n, rows, cols, c)[1:-1])} are not multiples of "
                        f"block_shape {list(sb.block)}")
    out_shape = mc.check_output_shape(ctx, sb.shape_nd(n * bh * bw, rows // bh, cols // bw, c))
    if mc.runtime(ctx) == mc.TFLM:
        if np.any(sb.pairs > 0):
            raise ctx.error("TensorFlow Lite Micro pads SPACE_TO_BATCH_ND with an uninitialised value (its "
                            "prepare never sets output_offset), so the padded outputs are undefined; pad "
                            "explicitly with PAD first, or use target 'litert-ref'")
        value = 0  # no padded position is written
    else:  # float 0 for 32-bit data, 0 for int64
        value = mc.zero_point(sb.io.y) if sb.io.dtype in (mc.I8, mc.U8) else 0
    widths = ((0, 0), (top, bottom), (left, right), (0, 0))
    return SpaceToBatchNDParams(sb.shape4, sb.block2, widths, value, out_shape)


def run(p: SpaceToBatchNDParams, x, block_shape=None, paddings=None):
    xp = np.pad(x.reshape(p.shape4), p.widths, mode="constant", constant_values=p.value)
    n, h, w, c = xp.shape
    bh, bw = p.block
    y = xp.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)  # [dh, dw, n, h', w', c]
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
