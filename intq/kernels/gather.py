"""GATHER: ``y[b.., o.., c.., i..] = x[b.., o.., idx[b.., c..], i..]`` along ``axis`` after ``batch_dims``.

Shapes: ``y.shape = x.shape[:axis] + idx.shape[batch_dims:] + x.shape[axis + 1:]``; ``axis``
and ``batch_dims`` may be negative (``+= rank(x)``, ``+= rank(idx)``), with
``0 <= batch_dims <= axis`` and the first ``batch_dims`` dimensions of ``x`` and ``idx`` equal.
The integers are copied; neither runtime compares quantization parameters.

* LiteRT (``gather.cc``): data int8, uint8, int16, int32, int64 (so also the int32 shape tensors
  of dynamic-batch models); indices int16, int32 or int64.
* TFLM (``gather.cc``): data int8 only; indices int32.

Indices are data (a run-time input, or a constant): both runtimes fail the invocation on a
negative index or one ``>= x.shape[axis]``, and so does intq (``KernelError`` from ``run``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "GATHER"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8,)}
INDEX_DTYPES = {mc.LITERT: (mc.I16, mc.I32, mc.I64), mc.TFLM: (mc.I32,)}


@dataclass(frozen=True)
class GatherParams:
    view: tuple[int, int, int, int]  # x as [batch, outer, axis, inner]
    batch: int
    out_shape: tuple[int, ...]
    node: str


@kernel(OP)
def prepare(ctx: KernelContext) -> GatherParams:
    x, idx, y = ctx.input(0), ctx.input(1), ctx.outputs[0]
    mc.check_dtype(ctx, x, "input", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.check_dtype(ctx, idx, "indices", INDEX_DTYPES[mc.LITERT], INDEX_DTYPES[mc.TFLM])
    mc.same_dtype(ctx, x, y)
    shape = mc.static_shape(ctx, x, "input")
    ishape = mc.static_shape(ctx, idx, "indices")
    axis = mc.normalize_axis(ctx, int(ctx.attr("axis", 0)), len(shape))
    batch_dims = int(ctx.attr("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += len(ishape)
    if not (0 <= batch_dims <= axis and batch_dims < len(shape) and batch_dims <= len(ishape)):
        raise ctx.error(f"batch_dims {ctx.attr('batch_dims', 0)} must lie in [0, axis={axis}] and within both ranks")
    if shape[:batch_dims] != ishape[:batch_dims]:
        raise ctx.error(f"the first {batch_dims} dimensions of input {list(shape)} and indices {list(ishape)} differ")
    out_shape = mc.check_output_shape(ctx, [*shape[:axis], *ishape[batch_dims:], *shape[axis + 1:]])
    prod = lambda dims: int(np.prod(dims, dtype=np.int64))  # noqa: E731
    view = (prod(shape[:batch_dims]), prod(shape[batch_dims:axis]), shape[axis], prod(shape[axis + 1:]))
    return GatherParams(view, view[0], out_shape, ctx.node.name)


def run(p: GatherParams, x, indices):
    b, o, a, i = p.view
    idx = np.asarray(indices).astype(np.int64).reshape(p.batch, -1)  # [batch, coords]
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= a):
        raise mc.fail_at_run(p.node, OP, f"indices must lie in [0, {a}); got values in "
                                         f"[{int(idx.min())}, {int(idx.max())}]")
    x4 = x.reshape(b, o, a, i)
    y = x4[np.arange(b)[:, None, None], np.arange(o)[None, :, None], idx[:, None, :]]  # [batch, outer, coords, inner]
    return (np.ascontiguousarray(y).reshape(p.out_shape),)
