"""The native forms of pooling, reductions and data movement: MAX_POOL_2D, MEAN, TRANSPOSE, PAD /
PADV2 (native.c ``intq_max_pool``, ``intq_mean``, ``intq_transpose``, ``intq_pad``), SPLIT,
SPLIT_V, CONCATENATION and GATHER at constant indices (strided block copies, ``intq_copy``),
RESHAPE (no C call: a view, which a step program keeps inside its arena).
"""

from __future__ import annotations

import ctypes

import numpy as np

from intq.ir import Graph, Node
from intq.kernels import REFERENCE
from intq.kernels._pool_common import PoolWindow, QuantizedSumParams
from intq.kernels.concatenation import ConcatenationParams
from intq.kernels.gather import GatherParams
from intq.kernels.pad import PadParams
from intq.kernels.split import SplitParams
from intq.kernels.split_v import SplitVParams
from intq.kernels.reshape import ReshapeParams
from intq.kernels.transpose import TransposeParams
from intq.runtime import native
from intq.runtime.native.bound import Alias, Bound, BoundCopies
from intq.runtime.native.registry import int8_io, native_form


@native_form("MAX_POOL_2D")
def max_pool_2d(nat: native.Native, node: Node, graph: Graph, p: PoolWindow) -> Bound | None:
    """MAX_POOL_2D (the reference kernel) of a rank-4 tensor."""
    if not int8_io(node, graph):
        return None
    lib = nat.lib
    g = p.geometry
    shape = graph.tensors[node.inputs[0]].shape
    out = graph.tensors[node.outputs[0]].shape
    if shape is None or out is None or len(shape) != 4 or tuple(out) != (shape[0], g.out_h, g.out_w, shape[3]):
        return None
    params = native.PoolParams(batch=shape[0], in_h=g.in_h, in_w=g.in_w, c=shape[3], out_h=g.out_h, out_w=g.out_w,
                               filter_h=g.filter_h, filter_w=g.filter_w, stride_h=g.stride_h, stride_w=g.stride_w,
                               pad_h=g.pad_h, pad_w=g.pad_w, act_min=p.act_min, act_max=p.act_max)
    return Bound(lib.intq_max_pool, params, [], int(np.prod(shape)), tuple(out))


def merged_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The same byte permutation on fewer axes: axes of length 1 dropped, and input axes that stay
    neighbours in the same order in the output merged into one (the [1, T, 3, H, D] -> [3, 1, H, T, D]
    of attention's heads is a rank-4 transpose of [T, 3, H, D]). Returns ``(shape, perm)``."""
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    if not kept:
        return (1,), (0,)
    position = {a: i for i, a in enumerate(kept)}
    order = [position[a] for a in perm if shape[a] != 1]  # kept input axes, in output order
    groups: list[list[int]] = []
    for q in order:
        if groups and q == groups[-1][-1] + 1:
            groups[-1].append(q)
        else:
            groups.append([q])
    by_input = sorted(range(len(groups)), key=lambda g: groups[g][0])
    dims = tuple(int(np.prod([shape[kept[q]] for q in groups[g]], dtype=np.int64)) for g in by_input)
    rank_of = {g: i for i, g in enumerate(by_input)}
    return dims, tuple(rank_of[g] for g in range(len(groups)))


@native_form("TRANSPOSE")
def transpose(nat: native.Native, node: Node, graph: Graph, p: TransposeParams) -> Bound | None:
    """TRANSPOSE of an int8 tensor whose permutation is one of rank <= 4 after
    :func:`merged_transpose` (data movement: the same bytes)."""
    lib = nat.lib
    shape = graph.tensors[node.inputs[0]].shape
    out = graph.tensors[node.outputs[0]].shape
    if not int8_io(node, graph) or shape is None or out is None or not shape or 0 in shape:
        return None
    if tuple(out) != tuple(shape[k] for k in p.perm):
        return None
    dims, perm = merged_transpose(tuple(shape), tuple(p.perm))
    if len(dims) > 4:
        return None
    pad = 4 - len(dims)
    strides = [int(np.prod(dims[k + 1:], dtype=np.int64)) for k in range(len(dims))]
    params = native.TransposeParams((ctypes.c_int64 * 4)(*([1] * pad + [dims[k] for k in perm])),
                                    (ctypes.c_int64 * 4)(*([0] * pad + [strides[k] for k in perm])))
    return Bound(lib.intq_transpose, params, [], int(np.prod(shape)), tuple(out))


@native_form("PAD", "PADV2")
def pad(nat: native.Native, node: Node, graph: Graph, p: PadParams) -> Bound | None:
    """PAD / PADV2 of an int8 tensor of rank <= 4 with a constant value (data movement)."""
    lib = nat.lib
    shape = graph.tensors[node.inputs[0]].shape
    out = graph.tensors[node.outputs[0]].shape
    if (not int8_io(node, graph) or p.value is None or not -128 <= int(p.value) <= 127 or shape is None
            or out is None or not 1 <= len(shape) <= 4 or 0 in shape):
        return None
    if tuple(out) != tuple(d + a + b for d, (a, b) in zip(shape, p.widths)):
        return None
    pad = 4 - len(shape)
    c4 = ctypes.c_int64 * 4
    params = native.PadParams(c4(*([1] * pad + list(shape))), c4(*([1] * pad + list(out))),
                              c4(*([0] * pad + [a for a, _ in p.widths])), int(p.value))
    return Bound(lib.intq_pad, params, [], int(np.prod(shape)), tuple(out))


@native_form("MEAN", families=(REFERENCE, "litert_opt"))
def mean(nat: native.Native, node: Node, graph: Graph, p: QuantizedSumParams) -> Bound | None:
    """MEAN over a contiguous block of axes (QuantizedMeanOrSum of the reference kernel, which
    LiteRT's optimized kernel runs too where it prepares the reference's parameters): the input as
    [batch, pixels, c] with the reduced axes in the middle — axes {1, 2} of NHWC (a CNN's spatial
    mean), the last axis (LayerNorm's mean and variance, c = 1) — the multiplier without left shift."""
    lib = nat.lib
    shape = graph.tensors[node.inputs[0]].shape
    axes = sorted(p.axes) if type(p) is QuantizedSumParams else []
    if (not axes or not int8_io(node, graph) or p.bytes_as_uint8 or shape is None or 0 in shape
            or axes != list(range(axes[0], axes[-1] + 1)) or axes[-1] >= len(shape)
            or not -31 <= p.shift <= 31 or not 0 <= p.multiplier < 2**31 or (256 * p.count) << max(p.shift, 0) >= 2**31):
        return None  # (256 count) << left < 2^31: every partial sum from -Z_in count, shifted, fits int32
    batch, pixels, c = (int(np.prod(part, dtype=np.int64)) for part in (
        shape[:axes[0]], shape[axes[0]:axes[-1] + 1], shape[axes[-1] + 1:]))
    if pixels != p.count or int(np.prod(p.out_shape, dtype=np.int64)) != batch * c:
        return None
    acc = np.zeros(c, np.int32)
    params = native.MeanParams(batch=batch, pixels=pixels, c=c, offset=int(p.input_offset),
                               mult=int(p.multiplier), right=max(-int(p.shift), 0), out_zp=int(p.zero_point),
                               left=max(int(p.shift), 0), acc=acc.ctypes.data)
    return Bound(lib.intq_mean, params, [acc], int(np.prod(shape)), tuple(p.out_shape))


@native_form("RESHAPE", library=False)
def reshape(nat: native.Native | None, node: Node, graph: Graph, p: ReshapeParams) -> Alias | None:
    """RESHAPE of an int8 tensor whose output shape is fixed at plan time (no shape input to check
    at run time): :class:`~intq.runtime.native.bound.Alias`, so that a step program runs on
    through it instead of ending at it."""
    if p.check_shape_input or not int8_io(node, graph):
        return None
    return Alias(tuple(p.out_shape))


# ------------------------------------------------------------------------------ strided block copies

_MAX_PARTS = 64  # copies per node (GATHER: one per constant index): more keeps the kernel's run


def _int8(graph: Graph, names) -> bool:
    """Every tensor of ``names`` int8 with a static shape (empty ones included: their copies move nothing)."""
    return all(t and graph.tensors[t].dtype == np.int8 and graph.tensors[t].shape is not None for t in names)


def _block(rows: int, run: int, in_row: int, out_row: int, in_offset: int, out_offset: int) -> native.CopyParams:
    """``rows`` runs of ``run`` contiguous bytes, ``in_row`` / ``out_row`` apart, from ``in_offset`` to
    ``out_offset``."""
    c4 = ctypes.c_int64 * 4
    return native.CopyParams(c4(1, 1, rows, run), c4(0, 0, in_row, 1), c4(0, 0, out_row, 1), in_offset, out_offset)


def _axis_view(shape, axis: int) -> tuple[int, int, int]:
    """``shape`` as [outer, shape[axis], inner]."""
    return (int(np.prod(shape[:axis], dtype=np.int64)), int(shape[axis]), int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _pieces(nat: native.Native, node: Node, graph: Graph, data: int, axis: int, offsets) -> BoundCopies | None:
    """SPLIT / SPLIT_V: output k is the slice ``offsets[k]:offsets[k + 1]`` of input ``data`` along ``axis``."""
    x = node.inputs[data]
    if not _int8(graph, (x, *node.outputs)) or len(offsets) != len(node.outputs) + 1:
        return None
    shape = graph.tensors[x].shape
    outer, size, inner = _axis_view(shape, axis)
    parts = []
    for k, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        if tuple(graph.tensors[node.outputs[k]].shape) != tuple(b - a if d == axis else n for d, n in enumerate(shape)):
            return None
        parts.append((data, k, _block(outer, (b - a) * inner, size * inner, (b - a) * inner, a * inner, 0)))
    return BoundCopies(nat.lib.intq_copy, parts, {data: outer * size * inner},
                       [graph.tensors[o].shape for o in node.outputs])


@native_form("SPLIT")
def split(nat: native.Native, node: Node, graph: Graph, p: SplitParams) -> BoundCopies | None:
    """SPLIT of an int8 tensor (input 1; input 0 is the constant axis): one block copy per output."""
    size = graph.tensors[node.inputs[1]].shape[p.axis] if graph.tensors[node.inputs[1]].shape else 0
    piece = size // max(p.num_splits, 1)
    return _pieces(nat, node, graph, 1, p.axis, [piece * k for k in range(p.num_splits + 1)])


@native_form("SPLIT_V")
def split_v(nat: native.Native, node: Node, graph: Graph, p: SplitVParams) -> BoundCopies | None:
    """SPLIT_V of an int8 tensor (input 0): one block copy per output."""
    return _pieces(nat, node, graph, 0, p.axis, list(p.offsets))


@native_form("CONCATENATION")
def concatenation(nat: native.Native, node: Node, graph: Graph, p: ConcatenationParams) -> BoundCopies | None:
    """CONCATENATION of int8 tensors (copied: the kernel's int8 contract, every input with the
    output's parameters): one block copy per input into its place in the output."""
    if any(t is not None for t in p.tables) or len(node.outputs) != 1 or not _int8(graph, (*node.inputs, *node.outputs)):
        return None
    out = graph.tensors[node.outputs[0]].shape
    outer, total, inner = _axis_view(out, p.axis)
    parts, start, sizes = [], 0, {}
    for k, t in enumerate(node.inputs):
        c = int(graph.tensors[t].shape[p.axis])
        parts.append((k, 0, _block(outer, c * inner, c * inner, total * inner, 0, start * inner)))
        sizes[k] = outer * c * inner
        start += c
    if start != total:
        return None
    return BoundCopies(nat.lib.intq_copy, parts, sizes, [out])


@native_form("GATHER")
def gather(nat: native.Native, node: Node, graph: Graph, p: GatherParams) -> BoundCopies | None:
    """GATHER of an int8 tensor at constant indices (a class token's row, a fixed channel pick), all
    in range (the kernel's run reports one out of range): one block copy per index."""
    x, idx = (graph.tensors[t] for t in node.inputs[:2])
    if len(node.outputs) != 1 or not _int8(graph, (node.inputs[0], *node.outputs)) or not idx.is_constant or idx.data is None:
        return None
    b, o, a, i = p.view
    indices = np.asarray(idx.data).astype(np.int64).reshape(b, -1)
    coords = indices.shape[1]
    if b * coords > _MAX_PARTS or (indices.size and (int(indices.min()) < 0 or int(indices.max()) >= a)):
        return None
    parts = [(0, 0, _block(o, i, a * i, coords * i, (n * o * a + int(indices[n, j])) * i, (n * o * coords + j) * i))
             for n in range(b) for j in range(coords)]
    return BoundCopies(nat.lib.intq_copy, parts, {0: b * o * a * i}, [tuple(p.out_shape)])
