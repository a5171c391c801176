"""SPLIT: ``num_splits`` equal pieces of input 1 along the axis held by input 0.

Contract (LiteRT and TFLM ``split.cc``): input 0 is the axis (an int32 constant with one
element; negative counts from the end), input 1 the data; ``num_splits`` outputs, which must
divide the axis evenly. The integers are copied; neither runtime compares quantization
parameters. LiteRT: int8, uint8, int16, int32, int64. TFLM: int8, int16, int32, and the axis
must be a constant (LiteRT would accept a computed axis; intq's static shapes need a constant).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SPLIT"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16, mc.I32)}


@dataclass(frozen=True)
class SplitParams:
    axis: int
    num_splits: int


@kernel(OP)
def prepare(ctx: KernelContext) -> SplitParams:
    x = ctx.input(1)
    mc.check_dtype(ctx, x, "input", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    shape = mc.static_shape(ctx, x, "input")
    axis_data = mc.constant_ints(ctx, 0, "axis", (mc.I32,))
    if axis_data.size != 1:
        raise ctx.error(f"the axis input holds {axis_data.size} values; expected one")
    axis = mc.normalize_axis(ctx, int(axis_data.reshape(-1)[0]), len(shape))
    n = int(ctx.attr("num_splits", 0))
    if n != len(ctx.outputs):
        raise ctx.error(f"num_splits is {n} but the node has {len(ctx.outputs)} outputs")
    if n <= 0 or shape[axis] % n:
        raise ctx.error(f"dimension {axis} of size {shape[axis]} does not split evenly into {n}")
    piece = [shape[axis] // n if k == axis else d for k, d in enumerate(shape)]
    for i, y in enumerate(ctx.outputs):
        mc.same_dtype(ctx, x, y, "input", f"output {i}")
        mc.check_output_shape(ctx, piece, i)
    return SplitParams(axis, n)


def run(p: SplitParams, axis, x):
    return tuple(np.ascontiguousarray(part) for part in np.split(x, p.num_splits, axis=p.axis))
