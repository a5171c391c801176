"""SHAPE: the input's dimensions as a 1-D int32 or int64 tensor.

Contract: any input dtype. LiteRT (``shape.cc``) types the output by the ``out_type`` option
(INT32 or INT64; without it the model is rejected); TFLM (``shape.cc``) writes int32 only, and
reads the output tensor's type. intq requires ``out_type``, when given, to match the output's
dtype. Integer graphs have static shapes, so the values are known at prepare time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SHAPE"
OUT_DTYPES = {mc.LITERT: (mc.I32, mc.I64), mc.TFLM: (mc.I32,)}
_OUT_TYPES = {"INT32": mc.I32, "INT64": mc.I64}


@dataclass(frozen=True)
class ShapeParams:
    dims: np.ndarray  # the output, prepared once


@kernel(OP)
def prepare(ctx: KernelContext) -> ShapeParams:
    x, y = ctx.input(0), ctx.outputs[0]
    shape = mc.static_shape(ctx, x, "input")
    mc.check_dtype(ctx, y, "output", OUT_DTYPES[mc.LITERT], OUT_DTYPES[mc.TFLM])
    out_type = ctx.attr("out_type")
    if out_type is None and mc.runtime(ctx) == mc.LITERT:
        raise mc.unsupported(ctx, "SHAPE without out_type (set out_type='INT32' or 'INT64')")
    if out_type is not None and _OUT_TYPES.get(out_type) != y.dtype:
        raise ctx.error(f"out_type {out_type!r} does not match the output dtype {y.dtype.name}")
    mc.check_output_shape(ctx, (len(shape),))
    dims = np.array(shape, dtype=y.dtype)
    dims.setflags(write=False)
    return ShapeParams(dims)


def run(p: ShapeParams, x):
    return (p.dims.copy(),)
