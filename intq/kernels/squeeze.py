"""SQUEEZE: drop size-1 dimensions; the integers are copied unchanged.

Contract (LiteRT and TFLM ``squeeze.cc``, identical): one input of any integer dtype, at most 8
dimensions; ``squeeze_dims`` (negative counts from the end, repeats allowed) must name size-1
dimensions; empty ``squeeze_dims`` drops every size-1 dimension. Neither runtime compares
quantization parameters (both ``memcpy``), so intq copies the integers too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SQUEEZE"
MAX_RANK = 8  # both runtimes: should_squeeze[8]


@dataclass(frozen=True)
class SqueezeParams:
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> SqueezeParams:
    x, y = ctx.input(0), ctx.outputs[0]
    mc.check_dtype(ctx, x, "input", mc.ALL_INTS, mc.ALL_INTS)
    mc.same_dtype(ctx, x, y)
    shape = mc.static_shape(ctx, x, "input")
    mc.check_rank(ctx, len(shape), "an input", MAX_RANK, MAX_RANK)
    dims = [int(d) for d in ctx.attr("squeeze_dims", ()) or ()]
    if dims:
        drop = {mc.normalize_axis(ctx, d, len(shape), "squeeze_dims entry") for d in dims}
        bad = sorted(d for d in drop if shape[d] != 1)
        if bad:
            raise ctx.error(f"squeeze_dims {dims} name dimensions {bad} of {list(shape)} whose size is not 1")
    else:
        drop = {i for i, d in enumerate(shape) if d == 1}
    out_shape = mc.check_output_shape(ctx, [d for i, d in enumerate(shape) if i not in drop])
    return SqueezeParams(out_shape)


def run(p: SqueezeParams, x):
    return (np.ascontiguousarray(x).reshape(p.out_shape),)
