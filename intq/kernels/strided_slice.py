"""STRIDED_SLICE: ``y = x[b_0:e_0:s_0, ...]`` with TFLite's masks, clamping and quirks.

Inputs: data, then ``begin``, ``end``, ``strides`` (int32 constants of equal length). Options:
``begin_mask``, ``end_mask``, ``shrink_axis_mask``, ``ellipsis_mask``, ``new_axis_mask``,
``offset``. The integers are copied; neither runtime compares quantization parameters.

Per (effective) axis of size ``n`` and stride ``s != 0`` both runtimes evaluate
(``StartForAxis``/``EndForAxis`` of ``strided_slice_logic.h``): ``start = begin`` (+n if
negative) clamped to [0, n] (s > 0) or [-1, n-1] (s < 0), then 0 / n-1 under ``begin_mask``;
``stop = end`` (+``start`` if ``offset``, +n if negative) clamped likewise, then n / -1 under
``end_mask``; a shrunk axis reads ``[start, start + 1)``. The elements are ``start, start + s, ...``
while ``< stop`` (s > 0) or ``> stop`` (s < 0), written in order.

Where the runtimes differ:

* LiteRT (``strided_slice.cc``, any 8/16/32/64-bit dtype): expands ``ellipsis_mask`` and
  ``new_axis_mask`` into an effective input shape (a new axis is a size-1 dimension taking
  ``[0, 1)``; the ellipsis takes every dimension no spec names; dimensions past the specs are
  taken whole) and sizes each output dimension as ``ceil((stop - start) / s)`` (0 if the signs
  differ) — with ``offset``, from the raw ``end`` value instead.
* TFLM (``strided_slice.cc``/``strided_slice_common.cc``: int8, int16, int32, rank <= 4):
  ignores ``ellipsis_mask``, ``new_axis_mask`` and ``offset``, reads one ``begin``/``end``/
  ``strides`` entry per input dimension, and rejects the model unless the declared output shape
  is the one it computes.

intq raises for the cases where a runtime would write fewer (or other) elements than its output
holds — a shrunk axis whose index is out of range or whose stride is negative (both runtimes
then write nothing for it), an ``offset`` slice whose clamped range disagrees with the size taken
from ``end``, more than one ellipsis, mask bits past ``begin``'s length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "STRIDED_SLICE"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16, mc.I32)}
MAX_RANK = {mc.LITERT: 8, mc.TFLM: 4}
_INT32_MIN = -(2**31)
_MASKS = ("begin_mask", "end_mask", "shrink_axis_mask", "ellipsis_mask", "new_axis_mask")


@dataclass(frozen=True)
class StridedSliceParams:
    effective_shape: tuple[int, ...]  # the input with new axes inserted (LiteRT)
    index: tuple[np.ndarray, ...]  # open-mesh indices (np.ix_) per effective axis
    out_shape: tuple[int, ...]


@dataclass
class _Axis:
    size: int
    begin: int = 0
    end: int = 0
    stride: int = 1
    begin_mask: bool = False
    end_mask: bool = False
    shrink: bool = False


def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def _clamp(v: int, lo: int, hi: int) -> int:
    return hi if v > hi else lo if v < lo else v


def _start(a: _Axis) -> int:
    start = a.begin + a.size if a.begin < 0 else a.begin
    start = _clamp(start, 0, a.size) if a.stride > 0 else _clamp(start, -1, a.size - 1)
    if a.begin_mask:
        start = 0 if a.stride > 0 else a.size - 1
    return start


def _stop(a: _Axis, start: int, offset: bool) -> int:
    if a.shrink:
        return start if start >= a.size else start + 1
    stop = a.end + start if offset else a.end
    stop = stop + a.size if stop < 0 else stop
    stop = _clamp(stop, 0, a.size) if a.stride > 0 else _clamp(stop, -1, a.size - 1)
    if a.end_mask:
        stop = a.size if a.stride > 0 else -1
    return stop


def _count(start: int, stop: int, stride: int) -> int:
    """Iterations of ``for (i = start; stride > 0 ? i < stop : i > stop; i += stride)``."""
    span = stop - start
    if span == 0 or (span < 0) != (stride < 0):
        return 0
    return -(-span // stride) if stride > 0 else -(-(-span) // (-stride))


def _litert_axes(ctx, shape, begin, end, strides, masks) -> list[_Axis]:
    """LiteRT's BuildStridedSliceParams: the effective axes after ellipsis / new-axis expansion."""
    rank, count = len(shape), len(begin)
    ellipsis, new_axis = masks["ellipsis_mask"], masks["new_axis_mask"]
    num_add = sum(1 for i in range(count) if _bit(new_axis, i) and not _bit(ellipsis, i))
    dims = rank + num_add
    eff_ellipsis, eff_new, ellipsis_start, expanded = set(), set(), dims, 0
    i = 0
    while i < dims:
        if _bit(ellipsis, i):
            ellipsis_start = i
            ellipsis_end = max(i + 1, min(i + 1 + num_add + rank - count, dims))
            expanded = ellipsis_end - ellipsis_start - 1
            eff_ellipsis.update(range(i, ellipsis_end))
            i = ellipsis_end
            continue
        if _bit(new_axis, i - expanded):
            eff_new.add(i)
        i += 1
    axes, added_ellipsis, added_axes = [], 0, 0
    for i in range(dims):
        if i in eff_ellipsis:
            added_ellipsis = max(0, i - ellipsis_start)
            axes.append(_Axis(shape[i - added_axes], begin_mask=True, end_mask=True))
        elif i in eff_new:
            axes.append(_Axis(1, 0, 1, 1))
            added_axes += 1
        elif i >= count + expanded:
            axes.append(_Axis(shape[i - added_axes], begin_mask=True, end_mask=True))
        else:
            k = i - added_ellipsis
            axes.append(_Axis(shape[i - added_axes], begin[k], end[k], strides[k], _bit(masks["begin_mask"], k),
                              _bit(masks["end_mask"], k), _bit(masks["shrink_axis_mask"], k)))
    return axes


def _litert_shape(axes: list[_Axis], end: list[int], offset: bool) -> list[int]:
    """LiteRT's ResizeOutputTensor (with ``offset``: ``end[i]`` is the extent, read at effective ``i``)."""
    shape = []
    for i, a in enumerate(axes):
        if a.shrink:
            continue
        if offset:
            span = end[i]
        else:
            start = _start(a)
            span = _stop(a, start, False) - start
        shape.append(_count(0, span, a.stride))
    return shape


def _tflm_shape(axes: list[_Axis]) -> list[int]:
    """TFLM's CheckOutputSize: the old StartForAxis/StopForAxis (a shrunk axis: begin + 1), ceil of a float ratio."""
    shape = []
    for a in axes:
        start = _start(a)
        if a.shrink:
            continue
        shape.append(_count(start, _stop(a, start, False), a.stride))
    return shape


@kernel(OP)
def prepare(ctx: KernelContext) -> StridedSliceParams:
    x, y = ctx.input(0), ctx.outputs[0]
    rt = mc.runtime(ctx)
    mc.check_dtype(ctx, x, "input", DTYPES[mc.LITERT], DTYPES[mc.TFLM])
    mc.same_dtype(ctx, x, y)
    shape = mc.static_shape(ctx, x, "input")
    mc.check_rank(ctx, len(shape), "an input", MAX_RANK[mc.LITERT], MAX_RANK[mc.TFLM])
    begin, end, strides = ([int(v) for v in mc.constant_ints(ctx, i, what, (mc.I32,), (None,))]
                           for i, what in ((1, "begin"), (2, "end"), (3, "strides")))
    if not len(begin) == len(end) == len(strides):
        raise ctx.error(f"begin, end and strides have {len(begin)}, {len(end)}, {len(strides)} entries; "
                        "they must match")
    masks = {k: int(ctx.attr(k, 0) or 0) for k in _MASKS}
    offset = bool(ctx.attr("offset", False))
    if any(s == 0 or s == _INT32_MIN for s in strides):
        raise ctx.error(f"strides {strides} must be non-zero (and not INT32_MIN)")

    if rt == mc.LITERT:
        if len(begin) > 31:
            raise mc.unsupported(ctx, f"{len(begin)} indices (at most 31)")
        if bin(masks["ellipsis_mask"]).count("1") > 1:
            raise ctx.error(f"ellipsis_mask {masks['ellipsis_mask']:#b} has more than one ellipsis")
        if (masks["ellipsis_mask"] | masks["new_axis_mask"]) >> len(begin):
            raise ctx.error("ellipsis_mask/new_axis_mask have bits past the length of begin")
        axes = _litert_axes(ctx, shape, begin, end, strides, masks)
        if offset and (masks["ellipsis_mask"] or masks["new_axis_mask"] or len(axes) != len(begin)):
            raise mc.unsupported(ctx, "offset=True with an ellipsis, new axes or fewer indices than dimensions "
                                      "(it would size the output from entries of end past its length)")
        declared = _litert_shape(axes, end, offset)
    else:
        if len(begin) < len(shape):
            raise mc.unsupported(ctx, f"{len(begin)} begin/end/strides entries for a rank-{len(shape)} input "
                                      "(it reads one per input dimension)")
        axes = [_Axis(n, begin[k], end[k], strides[k], _bit(masks["begin_mask"], k), _bit(masks["end_mask"], k),
                      _bit(masks["shrink_axis_mask"], k)) for k, n in enumerate(shape)]
        offset = False  # TFLM ignores offset, ellipsis_mask and new_axis_mask
        declared = _tflm_shape(axes)
    out_shape = mc.check_output_shape(ctx, declared)

    index = []
    for k, a in enumerate(axes):
        start = _start(a)
        stop = _stop(a, start, offset)
        if a.shrink and (a.stride < 0 or _count(start, stop, a.stride) != 1):
            raise ctx.error(f"shrink_axis_mask on axis {k} with begin {a.begin}, stride {a.stride} selects no element "
                            f"of size {a.size} (the runtimes would leave the output unwritten)")
        index.append(np.arange(start, stop, a.stride, dtype=np.intp) if _count(start, stop, a.stride) else
                     np.zeros(0, np.intp))
    written = [len(ix) for ix, a in zip(index, axes) if not a.shrink]
    if written != list(out_shape):
        raise ctx.error(f"the slice writes {written} elements per axis but the output is {list(out_shape)} "
                        "(offset extents disagree with the clamped range)")
    return StridedSliceParams(tuple(a.size for a in axes), tuple(np.ix_(*index)) if index else (), out_shape)


def run(p: StridedSliceParams, x, begin=None, end=None, strides=None):
    return (np.ascontiguousarray(x.reshape(p.effective_shape)[p.index]).reshape(p.out_shape),)
