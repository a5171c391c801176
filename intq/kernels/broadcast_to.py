"""BROADCAST_TO: ``y = x`` broadcast to ``shape`` (numpy's rules: ``x``'s dims align with the last
of ``shape``, each 1 or equal).

Contract (LiteRT ``broadcast_to.cc``, TFLM ``broadcast_to.cc``): ``shape`` a 1-D int32 or int64
tensor (a constant here: integer graphs have static shapes) whose length is the output's rank, at
least the input's; the output of the input's dtype and exactly that shape. The integers are
copied; neither runtime compares quantization parameters. Ranks: LiteRT up to 8, TFLM up to 5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "BROADCAST_TO"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: mc.ALL_INTS}
MAX_RANK = {mc.LITERT: 8, mc.TFLM: 5}


@dataclass(frozen=True)
class BroadcastToParams:
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> BroadcastToParams:
    io = mc.data_io(ctx, DTYPES)
    shape = tuple(int(d) for d in mc.constant_ints(ctx, 1, "shape", (mc.I32, mc.I64), (None,)))
    mc.check_rank(ctx, len(shape), "an output", MAX_RANK[mc.LITERT], MAX_RANK[mc.TFLM])
    extra = len(shape) - len(io.shape)
    if extra < 0 or any(d not in (1, shape[extra + k]) for k, d in enumerate(io.shape)):
        raise ctx.error(f"input {io.x.name!r} of shape {list(io.shape)} does not broadcast to {list(shape)}")
    return BroadcastToParams(mc.check_output_shape(ctx, shape))


def run(p: BroadcastToParams, x, shape=None):
    return (np.ascontiguousarray(np.broadcast_to(x, p.out_shape)),)
