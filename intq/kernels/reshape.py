"""RESHAPE: the same integers in C order, with the output's shape.

Contract (LiteRT ``reshape.cc``, TFLM ``reshape.cc``): one data input of any integer dtype,
optional shape input 1; output of the same dtype and element count. Neither runtime compares
quantization parameters: both ``memcpy`` the input, so intq copies the integers too.

Output shape: LiteRT takes it from input 1 when that is a 1-D int32 tensor, else from the
``new_shape`` option (``[0]`` meaning a scalar), resolving one ``-1``; TFLM takes the output
tensor's declared shape. intq requires the declared output shape and, when known at prepare
(a constant shape input or ``new_shape``), checks that it is what LiteRT computes; a shape
input computed at run time (dynamic-batch models: SHAPE -> ... -> RESHAPE) is checked in
``run`` against the declared shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "RESHAPE"


@dataclass(frozen=True)
class ReshapeParams:
    out_shape: tuple[int, ...]
    check_shape_input: bool  # a non-constant int32 shape input: LiteRT sizes the output from it
    node: str


def _resolve(ctx: KernelContext, shape: list[int], size: int) -> tuple[int, ...]:
    """LiteRT's ResizeOutput: one ``-1`` takes the remaining size; element counts must agree."""
    if shape.count(-1) > 1:
        raise ctx.error(f"shape {shape} has more than one -1")
    known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or size % known:
            raise ctx.error(f"cannot reshape {size} elements to {shape}")
        shape = [size // known if d == -1 else d for d in shape]
    if int(np.prod(shape, dtype=np.int64)) != size or any(d < 0 for d in shape):
        raise ctx.error(f"cannot reshape {size} elements to {shape}")
    return tuple(shape)


@kernel(OP)
def prepare(ctx: KernelContext) -> ReshapeParams:
    x, y = ctx.input(0), ctx.outputs[0]
    mc.check_dtype(ctx, x, "input", mc.ALL_INTS, mc.ALL_INTS)
    mc.same_dtype(ctx, x, y)
    size = int(np.prod(mc.static_shape(ctx, x, "input"), dtype=np.int64))
    out_shape = mc.static_shape(ctx, y, "output")
    if int(np.prod(out_shape, dtype=np.int64)) != size:
        raise ctx.error(f"output {y.name!r} {list(out_shape)} does not hold the {size} input elements")
    if mc.runtime(ctx) == mc.TFLM:  # TFLM sizes the output from its declared shape alone
        return ReshapeParams(out_shape, False, ctx.node.name)
    shape_t = ctx.inputs[1] if ctx.has_input(1) else None
    if shape_t is not None and shape_t.dtype == mc.I32 and shape_t.shape is not None and len(shape_t.shape) == 1:
        if not shape_t.is_constant:
            return ReshapeParams(out_shape, True, ctx.node.name)  # checked when the node runs
        requested = [int(v) for v in shape_t.data]
    else:  # LiteRT falls back to the option; a missing option or the legacy [0] is a scalar
        requested = [int(v) for v in ctx.attr("new_shape", ()) or ()]
        requested = [] if requested == [0] else requested
    resolved = _resolve(ctx, requested, size)
    if resolved != out_shape:
        raise ctx.error(f"the shape {requested} gives {list(resolved)} but the output is declared {list(out_shape)}")
    return ReshapeParams(out_shape, False, ctx.node.name)


def run(p: ReshapeParams, x, shape=None):
    if p.check_shape_input:
        want = [int(d) for d in np.asarray(shape).reshape(-1)]
        # with the element count fixed, a matching shape with one -1 resolves to the declared one
        matches = len(want) == len(p.out_shape) and all(w in (-1, d) for w, d in zip(want, p.out_shape))
        if not matches or want.count(-1) > 1:
            raise mc.fail_at_run(p.node, OP, f"the shape input {want} does not give the declared output "
                                             f"{list(p.out_shape)}")
    return (np.ascontiguousarray(x).reshape(p.out_shape),)
