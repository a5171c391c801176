"""SELECT_V2: ``y = where(condition, x, y)`` elementwise, numpy broadcasting of all three inputs.

Contract (LiteRT ``select.cc`` kVersionTwo, TFLM ``select.cc``): input 0 a bool condition, inputs
1 and 2 of one dtype, which the output takes; the output shape is the broadcast of the three. The
integers are copied: neither runtime compares or rescales quantization parameters, so a graph
whose two value inputs carry different scales must requantize them to the output's first (intq's
converter does). LiteRT: int8, uint8, int16, int32, int64; TFLM: int8, int16 (measured:
tests/kernels/test_data_movement.py). Rank at most 5 (TFLM's broadcasting limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SELECT_V2"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16)}  # TFLM fails int32 at invoke (measured)
MAX_RANK = 5


@dataclass(frozen=True)
class SelectParams:
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> SelectParams:
    cond, x, y, out = ctx.input(0), ctx.input(1), ctx.input(2), ctx.outputs[0]
    if cond.dtype != np.bool_:
        raise ctx.error(f"the condition {cond.name!r} is {cond.dtype.name}; SELECT_V2 takes a bool condition")
    mc.check_dtype(ctx, x, "input 1", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.same_dtype(ctx, x, y, "input 1", "input 2")
    mc.same_dtype(ctx, x, out, "input 1", "output")
    shapes = [mc.static_shape(ctx, t, what) for t, what in ((cond, "condition"), (x, "input 1"), (y, "input 2"))]
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ctx.error(f"condition, x and y of shapes {[list(s) for s in shapes]} do not broadcast") from None
    mc.check_rank(ctx, len(shape), "output", MAX_RANK, MAX_RANK)
    return SelectParams(mc.check_output_shape(ctx, shape))


def run(p: SelectParams, condition, x, y):
    return (np.array(np.broadcast_to(np.where(condition, x, y), p.out_shape)),)  # a copy; 0-d stays 0-d
