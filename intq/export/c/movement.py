"""Data movement as strided copies, learned from the kernel's own ``run`` on index-valued inputs.

A data-movement operator (SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, PACK, CONCATENATION, TRANSPOSE,
PAD, BROADCAST_TO, SPACE_TO_DEPTH, DEPTH_TO_SPACE, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, GATHER with
constant indices) writes every output element either as one element of one input or as a constant
(padding). Which one does not depend on the values, so the kernel's ``run`` applied once to inputs
whose elements hold their own positions, ``(k + 1) * 2^40 + flat index`` for input ``k``, returns
the whole map (:func:`index_map`): an output element ``>= 2^40`` names its source, a smaller one is
the constant written there. Exact by construction, like the 256-entry tables of the unary
operators (DESIGN decision 7: the C code re-derives no rule, the kernel defines the movement).

:func:`decompose` turns the map of one output into a few :class:`Box` copies
``dst[dst_base + sum_k i_k ds_k] = src[src_base + sum_k i_k ss_k]`` (element units) — what
``intq_copy`` (csrc/copy.c) executes — plus one fill value. The search is structural: a region
(a sub-box of the output's index space) that is one affine copy from one input is a box; otherwise
it is cut along its outermost dimension and the slices are grouped into arithmetic progressions
(step 1, or 2, 3, ... for interleaved layouts such as BATCH_TO_SPACE_ND) whose slices are
translates of the first one, each group's boxes gaining one dimension. SPACE_TO_DEPTH needs
``block_size`` boxes, BATCH_TO_SPACE_ND ``bh * bw``, a concatenation one per input. Maps that do not
fragment into at most :data:`MAX_BOXES` boxes (a GATHER of scattered indices) are refused here; the
caller uses a dedicated kernel for those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TAG = 1 << 40  # input k's elements hold (k + 1) * TAG + their flat index; anything smaller is a constant
MAX_BOXES = 64  # more copies than this: the movement is not a few strided boxes (use a gather)
MAX_STEP = 16  # the largest interleave step tried when grouping slices


class Fragmented(Exception):
    """The map needs more than :data:`MAX_BOXES` boxes."""


@dataclass(frozen=True)
class Box:
    """One strided copy, in elements: ``dst[dst_base + sum i_k dst_strides_k] = input[source][src_base +
    sum i_k src_strides_k]`` for ``i`` in the index box ``dims`` (outermost first; ``()``: one element)."""

    source: int
    dims: tuple[int, ...]
    dst_base: int
    dst_strides: tuple[int, ...]
    src_base: int
    src_strides: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))

    def contiguous(self) -> bool:
        """Both sides one run of consecutive elements (after dropping unit and merging nested dims)."""
        n = 1
        for d, ds, ss in reversed(list(zip(self.dims, self.dst_strides, self.src_strides))):
            if d == 1:
                continue
            if ds != n or ss != n:
                return False
            n *= d
        return True


@dataclass(frozen=True)
class Movement:
    """How to write one output: ``fill`` everywhere the boxes do not write (None: they write every
    element), then the boxes."""

    fill: int | None
    boxes: tuple[Box, ...]


def index_map(run, params, inputs: list[np.ndarray | None], shapes: list[tuple[int, ...] | None]):
    """``run(params, *args)`` with each data input (``shapes[k]`` not None) replaced by its
    positions (module docstring); constant inputs (``inputs[k]``) passed as they are."""
    args = []
    for k, (value, shape) in enumerate(zip(inputs, shapes)):
        if shape is None:
            args.append(value)
        else:
            args.append((k + 1) * TAG + np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape))
    return [np.asarray(y) for y in run(params, *args)]


def decompose(mapped: np.ndarray) -> Movement:
    """The boxes (and fill) writing an output whose :func:`index_map` is ``mapped``."""
    mapped = np.asarray(mapped, dtype=np.int64)
    shape = mapped.shape
    which = np.where(mapped >= TAG, mapped // TAG - 1, -1)
    flat = np.where(mapped >= TAG, mapped % TAG, 0)
    constants = np.unique(mapped[which < 0])
    if constants.size > 1:
        raise Fragmented(f"{constants.size} different constants")
    fill = int(constants[0]) if constants.size else None
    strides = _contiguous_strides(shape)
    boxes: list[Box] = []
    if mapped.size:
        _region(which, flat, 0, strides, boxes)
    return Movement(fill, tuple(boxes))


def _contiguous_strides(shape) -> tuple[int, ...]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= int(d)
    return tuple(reversed(out))


def _affine(which: np.ndarray, flat: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """``(src_base, src_strides)`` if every element comes from one input at an affine position."""
    first = (0,) * which.ndim
    if which[first] < 0 or not np.all(which == which[first]):
        return None
    base = int(flat[first])
    strides = []
    predicted = np.full(flat.shape, base, dtype=np.int64)
    for k, d in enumerate(flat.shape):
        if d == 1:
            strides.append(0)
            continue
        at = [0] * flat.ndim
        at[k] = 1
        s = int(flat[tuple(at)]) - base
        strides.append(s)
        shape = [1] * flat.ndim
        shape[k] = d
        predicted = predicted + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    if not np.array_equal(predicted, flat):
        return None
    return base, tuple(strides)


def _region(which: np.ndarray, flat: np.ndarray, base: int, strides: tuple[int, ...], out: list[Box]) -> None:
    """Append the boxes of one region (views of the maps; ``base``: its first element's output offset)."""
    live = which >= 0
    if not live.any():
        return
    if not live.all():  # shrink to the bounding box of the copied elements
        index = []
        for k in range(which.ndim):
            other = tuple(j for j in range(which.ndim) if j != k)
            hit = np.flatnonzero(live.any(axis=other)) if other else np.flatnonzero(live)
            lo, hi = int(hit[0]), int(hit[-1]) + 1
            base += lo * strides[k]
            index.append(slice(lo, hi))
        which, flat = which[tuple(index)], flat[tuple(index)]
    affine = _affine(which, flat) if (which >= 0).all() else None
    if affine is not None:
        out.append(Box(int(which.reshape(-1)[0]), tuple(which.shape), base, strides, affine[0], affine[1]))
        if len(out) > MAX_BOXES:
            raise Fragmented(f"more than {MAX_BOXES} boxes")
        return
    d = next(k for k, n in enumerate(which.shape) if n > 1)
    n = which.shape[d]
    inner = strides[:d] + strides[d + 1:]
    done = np.zeros(n, bool)
    for i in range(n):
        if done[i]:
            continue
        w_i, f_i = np.take(which, i, axis=d), np.take(flat, i, axis=d)
        if not (w_i >= 0).any():
            continue  # a slice of constants only: the fill writes it
        sub: list[Box] = []
        _region(w_i, f_i, base + i * strides[d], inner, sub)
        members, deltas = _group(which, flat, d, i, base + i * strides[d], inner, sub, done)
        for j in members:
            done[j] = True
        count, step = len(members), (members[1] - members[0] if len(members) > 1 else 1)
        for b, delta in zip(sub, deltas):
            out.append(Box(b.source, (count, *b.dims), b.dst_base, (step * strides[d], *b.dst_strides), b.src_base,
                           (delta, *b.src_strides)))
        if len(out) > MAX_BOXES:
            raise Fragmented(f"more than {MAX_BOXES} boxes")


def _offsets(dims, strides, base: int) -> np.ndarray:
    """Every offset ``base + sum i_k strides_k`` of an index box, row-major order."""
    out = np.full((1,) * len(dims), base, dtype=np.int64)
    for k, (d, s) in enumerate(zip(dims, strides)):
        shape = [1] * len(dims)
        shape[k] = d
        out = out + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    return out.reshape(-1)


def _group(which, flat, d: int, i: int, slice_base: int, inner: tuple[int, ...], sub: list[Box],
           done: np.ndarray) -> tuple[list[int], list[int]]:
    """The longest progression ``i, i + s, i + 2s, ...`` (s = 1 .. MAX_STEP) of not yet covered slices
    along ``d`` that are translates of slice ``i`` (the same positions copied from the same inputs,
    each box's source shifted by its own constant per step): its members and each box's source
    stride per member."""
    n = which.shape[d]
    w_i, f_i = np.take(which, i, axis=d), np.take(flat, i, axis=d)
    live = w_i >= 0
    # which box of ``sub`` writes each element of the slice (row-major offsets increase)
    positions = _offsets(w_i.shape, inner, slice_base)
    label = np.full(w_i.size, -1, np.int64)
    firsts = []
    for b_index, b in enumerate(sub):
        at = np.searchsorted(positions, _offsets(b.dims, b.dst_strides, b.dst_base))
        label[at] = b_index
        firsts.append(int(at[0]))
    label = label.reshape(w_i.shape)
    best: tuple[list[int], list[int]] = ([i], [0] * len(sub))
    for s in range(1, min(MAX_STEP, n - 1 - i) + 1):
        members: list[int] = [i]
        deltas: list[int] | None = None
        j = i + s
        while j < n and not done[j]:
            w_j, f_j = np.take(which, j, axis=d), np.take(flat, j, axis=d)
            if not np.array_equal(w_j, w_i):
                break
            diff = (f_j - f_i)
            k = len(members)
            if deltas is None:
                deltas = [int(diff.reshape(-1)[p]) for p in firsts]
            expected = np.asarray(deltas, np.int64)[np.maximum(label, 0)] * k
            if not np.array_equal(np.where(live, diff, 0), np.where(live, expected, 0)):
                break
            members.append(j)
            j += s
        if len(members) > len(best[0]):
            best = (members, deltas if deltas is not None else [0] * len(sub))
        if s == 1 and j >= n:
            break  # every remaining slice joined with step 1
    return best
