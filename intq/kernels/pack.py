"""PACK: stack ``values_count`` equally shaped inputs along a new dimension ``axis``.

``y.shape = x.shape[:axis] + (values_count,) + x.shape[axis:]``, ``axis`` in [-(rank+1), rank]
(negative counts from the end of the output). Contract (LiteRT ``pack.cc``, TFLM ``pack.cc``):
inputs of one shape and dtype, the output's dtype.

* LiteRT: int8, uint8, int16, int32, int64; every input must have the output's scale and zero
  point ("we do not support packing quantized tensors").
* TFLM: int8, int16, int32, int64; it does not compare quantization parameters (the integers
  are copied).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "PACK"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16, mc.I32, mc.I64)}


@dataclass(frozen=True)
class PackParams:
    axis: int


@kernel(OP)
def prepare(ctx: KernelContext) -> PackParams:
    y = ctx.outputs[0]
    inputs = [ctx.input(i) for i in range(len(ctx.inputs))]
    count = int(ctx.attr("values_count", 0))
    if count != len(inputs) or count < 1:
        raise ctx.error(f"values_count is {count} but the node has {len(inputs)} inputs")
    mc.check_dtype(ctx, inputs[0], "input 0", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.check_per_tensor(ctx, [*inputs, y])
    shape = mc.static_shape(ctx, inputs[0], "input 0")
    axis = mc.normalize_axis(ctx, int(ctx.attr("axis", 0)), len(shape) + 1)
    for i, t in enumerate(inputs):
        mc.same_dtype(ctx, t, y, f"input {i}")
        if mc.static_shape(ctx, t, f"input {i}") != shape:
            raise ctx.error(f"input {i} {t.name!r} has shape {list(t.shape)}; input 0 has {list(shape)}")
        if mc.runtime(ctx) == mc.LITERT:
            mc.require_same_quant(ctx, t, y, f"input {i}")
    mc.check_output_shape(ctx, [*shape[:axis], count, *shape[axis:]])
    return PackParams(axis)


def run(p: PackParams, *xs):
    return (np.stack(xs, axis=p.axis),)
