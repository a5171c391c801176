"""SLICE: ``y = x[begin_0 : begin_0 + size_0, ...]``, ``size_k = -1`` meaning "to the end".

Contract (LiteRT and TFLM ``slice.cc``): inputs data, ``begin`` and ``size`` (int32 or int64, the
same type, one entry per input dimension); ``0 <= begin_k <= dim_k`` (no negative begins) and
``size_k`` is -1 or in ``[0, dim_k - begin_k]``. The integers are copied; neither runtime
compares quantization parameters.

* LiteRT: int8, uint8, int16, int32, int64, any rank.
* TFLM: int8, int16, int32, rank <= 5 (TFLM checks this in Prepare; a larger rank must never
  reach it).

Both runtimes read ``begin``/``size`` when the node runs, so they may be computed tensors: intq
slices from the constants prepared once, or validates run-time values against the declared
output shape (the graph's static shape).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "SLICE"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16, mc.I32)}
MAX_RANK = {mc.LITERT: 1 << 30, mc.TFLM: 5}  # TFLM kMaxDim


@dataclass(frozen=True)
class SliceParams:
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    index: tuple[slice, ...] | None  # None: begin/size are computed tensors, resolved in run
    node: str


def _resolve(in_shape, begin, size):
    """``(slices, sizes)`` or an error message: the runtimes' begin/size validation."""
    slices, sizes = [], []
    for k, (dim, b, s) in enumerate(zip(in_shape, begin, size)):
        b, s = int(b), int(s)
        if b < 0 or b > dim:
            return None, f"begin {b} is outside [0, {dim}] on dimension {k}"
        s = dim - b if s == -1 else s
        if s < 0 or s > dim - b:
            return None, f"size {int(size[k])} does not fit dimension {k} of size {dim} from begin {b}"
        slices.append(slice(b, b + s))
        sizes.append(s)
    return tuple(slices), tuple(sizes)


@kernel(OP)
def prepare(ctx: KernelContext) -> SliceParams:
    io = mc.data_io(ctx, DTYPES, MAX_RANK)
    in_shape, rank = io.shape, len(io.shape)
    out_shape = mc.static_shape(ctx, io.y, "output")
    b_t, s_t = ctx.input(1), ctx.input(2)
    for what, t in (("begin", b_t), ("size", s_t)):
        if t.dtype not in (mc.I32, mc.I64):
            raise mc.unsupported(ctx, f"{what} {t.name!r} of dtype {t.dtype.name} (int32 or int64)")
        if t.shape is None or tuple(t.shape) != (rank,):
            raise ctx.error(f"{what} {t.name!r} has shape {t.shape}; expected [{rank}]")
    if b_t.dtype != s_t.dtype:
        raise ctx.error(f"begin is {b_t.dtype.name} but size is {s_t.dtype.name}; they must match")
    index = None
    if b_t.is_constant and s_t.is_constant:
        index, sizes = _resolve(in_shape, b_t.data, s_t.data)
        if index is None:
            raise ctx.error(sizes)
        mc.check_output_shape(ctx, sizes)
    return SliceParams(in_shape, out_shape, index, ctx.node.name)


def run(p: SliceParams, x, begin=None, size=None):
    index = p.index
    if index is None:
        index, sizes = _resolve(p.in_shape, np.asarray(begin).reshape(-1), np.asarray(size).reshape(-1))
        if index is None or sizes != p.out_shape:
            raise mc.fail_at_run(p.node, OP, sizes if index is None else
                                 f"begin/size give {list(sizes)}, not the declared output {list(p.out_shape)}")
    return (np.ascontiguousarray(x[index]),)
