"""SPLIT_V: input 0 cut along the axis held by input 2 into pieces of the sizes held by input 1.

``y_k = x[..., o_k : o_k + s_k, ...]`` along ``axis`` with ``o_k = s_0 + ... + s_(k-1)``. Contract
(LiteRT and TFLM ``split_v.cc``): input 1, ``size_splits``, a 1-D int32 or int64 constant with one
entry per output, of which at most one is -1 (that piece takes what the others leave); input 2
the axis (int32, one element; negative counts from the end); ``num_splits`` outputs. The integers
are copied; neither runtime compares quantization parameters. LiteRT: int8, uint8, int16, int32,
int64; TFLM: int8, int16, int32 (measured: 200 random models each, tests/kernels/test_data_movement.py).
intq needs both inputs constant (static shapes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SPLIT_V"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16, mc.I32)}
SIZE_DTYPES = {mc.LITERT: (mc.I32, mc.I64), mc.TFLM: (mc.I32, mc.I64)}


@dataclass(frozen=True)
class SplitVParams:
    axis: int
    offsets: tuple[int, ...]  # where each piece starts; the last entry is the axis size


@kernel(OP)
def prepare(ctx: KernelContext) -> SplitVParams:
    x = ctx.input(0)
    mc.check_dtype(ctx, x, "input", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    shape = mc.static_shape(ctx, x, "input")
    sizes = [int(s) for s in mc.constant_ints(ctx, 1, "size_splits", SIZE_DTYPES[mc.runtime(ctx)]).reshape(-1)]
    axis_data = mc.constant_ints(ctx, 2, "axis", (mc.I32,))
    if axis_data.size != 1:
        raise ctx.error(f"the axis input holds {axis_data.size} values; expected one")
    axis = mc.normalize_axis(ctx, int(axis_data.reshape(-1)[0]), len(shape))
    n = int(ctx.attr("num_splits", len(sizes)))
    if not n == len(sizes) == len(ctx.outputs):
        raise ctx.error(f"num_splits {n}, {len(sizes)} size_splits and {len(ctx.outputs)} outputs must agree")
    unknown = [k for k, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in sizes):
        raise ctx.error(f"size_splits {sizes}: sizes must be >= 0, with at most one -1")
    if unknown:
        sizes[unknown[0]] = shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != shape[axis] or min(sizes, default=0) < 0:
        raise ctx.error(f"size_splits {sizes} do not add up to dimension {axis} of size {shape[axis]}")
    for i, (y, s) in enumerate(zip(ctx.outputs, sizes)):
        mc.same_dtype(ctx, x, y, "input", f"output {i}")
        mc.check_output_shape(ctx, [s if k == axis else d for k, d in enumerate(shape)], i)
    return SplitVParams(axis, tuple(int(o) for o in np.cumsum([0, *sizes])))


def run(p: SplitVParams, x, size_splits=None, axis=None):
    return tuple(np.ascontiguousarray(part) for part in np.split(x, p.offsets[1:-1], axis=p.axis))
