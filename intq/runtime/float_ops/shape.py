"""Shape and data-movement ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split,
Slice, Gather, GatherElements, Shape, Size, ConstantOfShape, Range, Expand, Tile, Pad,
DepthToSpace, SpaceToDepth, Constant, NonZero.

They move or index data without arithmetic, so they are exact for every dtype. Where numpy can
express the result as a view (Reshape, Transpose, Squeeze, Unsqueeze, Split, basic Slice,
Expand) no data is copied. Shape arguments are int64 tensors, as ONNX passes them.
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError, UnsupportedOperatorError

from . import _checks
from ._checks import choice, ints
from .registry import FLOAT_OPS


@FLOAT_OPS.register()
def Reshape(data, shape, *, allowzero=0):
    """reshaped = data with dims ``shape``: a 0 copies the input dim at that position (unless
    allowzero=1, where 0 is a real zero-size dim), one -1 is inferred from the element count."""
    target = ints(shape)
    if target.count(-1) > 1:
        raise GraphError(f"Reshape: shape {target} has more than one -1")
    if allowzero and 0 in target and -1 in target:
        raise GraphError(f"Reshape: shape {target} with allowzero=1 cannot have both 0 and -1")
    if not allowzero:
        for i, d in enumerate(target):
            if d == 0:
                if i >= data.ndim:
                    raise GraphError(f"Reshape: shape {target} copies dim {i} (0) but the input "
                                     f"{list(data.shape)} has rank {data.ndim}")
                target[i] = data.shape[i]
    try:
        return (data.reshape(target),)
    except ValueError:
        raise GraphError(f"Reshape: cannot reshape {list(data.shape)} ({data.size} elements) "
                         f"to {ints(shape)}") from None


@FLOAT_OPS.register()
def Flatten(input, *, axis=1):
    """output = input as 2-D (prod(dims[:axis]), prod(dims[axis:])); axis in [-rank, rank]."""
    rank = input.ndim
    if not -rank <= axis <= rank:
        raise GraphError(f"Flatten: axis={axis} is out of range for rank {rank} ([{-rank}, {rank}])")
    a = axis % rank if axis < 0 else axis
    outer = int(np.prod(input.shape[:a], dtype=np.int64))
    return (input.reshape(outer, int(np.prod(input.shape[a:], dtype=np.int64))),)


@FLOAT_OPS.register()
def Transpose(data, *, perm=None):
    """transposed[i...] = data permuted so that output axis k is input axis perm[k] (default:
    reversed). A view."""
    if perm is None:
        return (data.transpose(),)
    p = ints(perm)
    if sorted(p) != list(range(data.ndim)):
        raise GraphError(f"Transpose: perm={p} is not a permutation of the {data.ndim} axes")
    return (data.transpose(p),)


@FLOAT_OPS.register()
def Squeeze(data, axes=None):
    """squeezed = data without the listed size-1 axes (all size-1 axes if axes is omitted)."""
    if _checks.is_omitted(axes):
        return (np.squeeze(data),)
    ax = _checks.axes("Squeeze", axes, data.ndim)
    bad = [a for a in ax if data.shape[a] != 1]
    if bad:
        raise GraphError(f"Squeeze: axes {bad} of shape {list(data.shape)} are not of size 1")
    return (np.squeeze(data, axis=ax),)


@FLOAT_OPS.register()
def Unsqueeze(data, axes):
    """expanded = data with size-1 axes inserted at ``axes`` (positions in the output)."""
    ax = _checks.axes("Unsqueeze", axes, data.ndim + len(ints(axes)))
    return (np.expand_dims(data, ax),)


@FLOAT_OPS.register()
def Concat(*inputs, axis):
    """concat_result = the inputs joined along ``axis``."""
    if not inputs:
        raise GraphError("Concat: needs at least one input")
    a = _checks.axis("Concat", axis, inputs[0].ndim)
    try:
        return (np.concatenate(inputs, axis=a),)
    except ValueError:
        shapes = ", ".join(str(list(x.shape)) for x in inputs)
        raise GraphError(f"Concat: shapes {shapes} do not fit along axis {axis}") from None


@FLOAT_OPS.register()
def Split(input, split=None, *, axis=0, num_outputs=None):
    """outputs = consecutive parts of input along ``axis``: sizes from the ``split`` input, or
    ``num_outputs`` parts of ceil(dim / num_outputs) (the last one smaller). Views."""
    a = _checks.axis("Split", axis, input.ndim)
    dim = input.shape[a]
    if not _checks.is_omitted(split):
        sizes = ints(split)
        if sum(sizes) != dim or any(s < 0 for s in sizes):
            raise GraphError(f"Split: split={sizes} does not add up to dim {dim} of axis {axis}")
    elif num_outputs is not None:
        if num_outputs < 1:
            raise GraphError(f"Split: num_outputs={num_outputs} must be positive")
        part = -(-dim // num_outputs)
        sizes = [min(part, max(0, dim - i * part)) for i in range(num_outputs)]
    else:
        raise GraphError("Split: give either the split input or the num_outputs attribute")
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.split(input, cuts, axis=a))


@FLOAT_OPS.register()
def Slice(data, starts, ends, axes=None, steps=None):
    """output = data[start:end:step] on the given axes, ONNX clamping: negative values count
    from the end; then start is clamped to [0, dim] (step > 0) or [0, dim-1] (step < 0), end to
    [0, dim] or [-1, dim-1] (-1 meaning "through index 0"). A view."""
    st, en = ints(starts), ints(ends)
    if len(st) != len(en):
        raise GraphError(f"Slice: starts {st} and ends {en} differ in length")
    ax = (_checks.axes("Slice", axes, data.ndim) if not _checks.is_omitted(axes)
          else tuple(range(len(st))))
    sp = ints(steps) if not _checks.is_omitted(steps) else [1] * len(st)
    if not len(ax) == len(sp) == len(st):
        raise GraphError(f"Slice: starts {st}, ends {en}, axes {list(ax)} and steps {sp} must "
                         f"have the same length")
    index = [slice(None)] * data.ndim
    for a, s, e, step in zip(ax, st, en, sp):
        dim = data.shape[a]
        if step == 0:
            raise GraphError(f"Slice: step 0 on axis {a}")
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if step > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        index[a] = slice(s, None if e < 0 else e, step)
    return (data[tuple(index)],)


def _indices(op: str, indices: np.ndarray, dim: int) -> np.ndarray:
    """Indices in [-dim, dim) made non-negative; anything else is a GraphError."""
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise GraphError(f"{op}: indices must lie in [{-dim}, {dim - 1}], got "
                         f"[{idx.min()}, {idx.max()}]")
    return np.where(idx < 0, idx + dim, idx)


@FLOAT_OPS.register()
def Gather(data, indices, *, axis=0):
    """output = take(data, indices, axis): indexes axis ``axis`` with an index tensor of any
    rank (negative indices count from the end); output rank = r + q - 1."""
    a = _checks.axis("Gather", axis, data.ndim)
    _checks.output_size("Gather", data.shape[:a] + np.shape(indices) + data.shape[a + 1:], data.dtype)
    return (np.take(data, _indices("Gather", indices, data.shape[a]), axis=a),)


@FLOAT_OPS.register()
def GatherElements(data, indices, *, axis=0):
    """output[i][j][k] = data[index][j][k] with index = indices[i][j][k] on ``axis`` (0 here)."""
    a = _checks.axis("GatherElements", axis, data.ndim)
    return (np.take_along_axis(data, _indices("GatherElements", indices, data.shape[a]), axis=a),)


@FLOAT_OPS.register()
def Shape(data, *, end=None, start=0):
    """shape = data's dims [start:end] as int64 (Python slicing: negatives count from the
    end, out-of-range values clamp)."""
    return (np.array(data.shape[start:end], dtype=np.int64),)


@FLOAT_OPS.register()
def Size(data):
    """size = number of elements, an int64 scalar."""
    return (np.array(data.size, dtype=np.int64),)


@FLOAT_OPS.register()
def ConstantOfShape(input, *, value=None):
    """output = a tensor of dims ``input`` filled with ``value`` (one-element tensor
    attribute; default float32 0)."""
    dims = ints(input)
    if any(d < 0 for d in dims):
        raise GraphError(f"ConstantOfShape: shape {dims} has a negative dim")
    fill = np.zeros(1, np.float32) if value is None else _checks.tensor(value).reshape(-1)
    if fill.size != 1:
        raise GraphError(f"ConstantOfShape: value must have one element, got {fill.size}")
    _checks.output_size("ConstantOfShape", dims, fill.dtype)
    return (np.full(dims, fill[0], dtype=fill.dtype),)


@FLOAT_OPS.register()
def Range(start, limit, delta):
    """output[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0), in start's
    dtype."""
    s, l, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    dtype = s.dtype
    if d == 0:
        raise GraphError("Range: delta is 0")
    if np.issubdtype(dtype, np.integer):
        count = max(0, -(-(int(l) - int(s)) // int(d)))
    else:
        span = np.float64(l - s) / np.float64(d)
        if not np.isfinite(span):
            raise GraphError(f"Range: start {s}, limit {l} and delta {d} give no finite length")
        count = max(0, int(np.ceil(span)))
    _checks.output_size("Range", (count,), dtype)
    return ((np.arange(count, dtype=dtype) * d + s).astype(dtype, copy=False),)


@FLOAT_OPS.register()
def Expand(input, shape):
    """output = input broadcast with ``shape`` (bidirectionally: dims of 1 in ``shape`` keep
    the input's). A read-only broadcast view."""
    try:
        out = np.broadcast_shapes(input.shape, tuple(ints(shape)))
    except ValueError:
        raise GraphError(f"Expand: shape {ints(shape)} does not broadcast with input "
                         f"{list(input.shape)}") from None
    _checks.output_size("Expand", out, input.dtype)  # a view, but every consumer materialises it
    return (np.broadcast_to(input, out),)


@FLOAT_OPS.register()
def Tile(input, repeats):
    """output = input repeated repeats[i] times along axis i."""
    reps = ints(repeats)
    if len(reps) != input.ndim or any(r < 0 for r in reps):
        raise GraphError(f"Tile: repeats {reps} needs {input.ndim} non-negative entries")
    _checks.output_size("Tile", [d * r for d, r in zip(input.shape, reps)], input.dtype)
    return (np.tile(input, reps),)


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


@FLOAT_OPS.register()
def Pad(data, pads, constant_value=None, axes=None, *, mode="constant"):
    """output = data padded by pads = [begin_0, ..., begin_k, end_0, ..., end_k] on ``axes``
    (all axes by default). Negative pads remove elements. Modes: constant (constant_value,
    default 0), reflect (mirror without repeating the edge), edge (repeat the edge), wrap
    (periodic)."""
    mode = mode.decode() if isinstance(mode, bytes) else mode
    choice("Pad", "mode", mode, _PAD_MODES)
    ax = (_checks.axes("Pad", axes, data.ndim) if not _checks.is_omitted(axes)
          else tuple(range(data.ndim)))
    p = ints(pads)
    if len(p) != 2 * len(ax):
        raise GraphError(f"Pad: pads {p} must have 2 entries per padded axis ({len(ax)} axes)")
    begin, end = [0] * data.ndim, [0] * data.ndim
    for i, a in enumerate(ax):
        begin[a], end[a] = p[i], p[len(ax) + i]
    # negative pads crop first
    crop = tuple(slice(max(0, -b), d - max(0, -e)) for b, e, d in zip(begin, end, data.shape))
    x = data[crop]
    begin = [max(0, b) for b in begin]
    end = [max(0, e) for e in end]
    if not any(begin) and not any(end):
        return (x,)
    _checks.output_size("Pad", [d + b + e for d, b, e in zip(x.shape, begin, end)], data.dtype)
    if mode == "constant":
        value = 0 if _checks.is_omitted(constant_value) else np.asarray(constant_value).reshape(-1)[0]
        out = np.empty(tuple(d + b + e for d, b, e in zip(x.shape, begin, end)), data.dtype)
        out.fill(value)
        out[tuple(slice(b, b + d) for b, d in zip(begin, x.shape))] = x
        return (out,)
    if x.size == 0:
        raise GraphError(f"Pad: mode={mode!r} cannot pad an empty tensor {list(x.shape)}")
    if mode == "reflect" and any(d < 2 and (b or e) for d, b, e in zip(x.shape, begin, end)):
        raise GraphError(f"Pad: mode='reflect' needs at least 2 elements on every padded axis, "
                         f"got shape {list(x.shape)}")
    return (np.pad(x, list(zip(begin, end)), mode=mode),)


def _block(op: str, x: np.ndarray, blocksize: int) -> tuple[int, int, int, int]:
    if x.ndim != 4:
        raise GraphError(f"{op}: input must be 4-D (N, C, H, W), got shape {list(x.shape)}")
    if blocksize < 1:
        raise GraphError(f"{op}: blocksize={blocksize} must be positive")
    return x.shape


@FLOAT_OPS.register()
def DepthToSpace(input, *, blocksize, mode="DCR"):
    """output (N, C/b^2, H*b, W*b): channel blocks moved into b x b spatial blocks.

    DCR: output[n, c, h*b + i, w*b + j] = input[n, (i*b + j) * C/b^2 + c, h, w];
    CRD: output[n, c, h*b + i, w*b + j] = input[n, c*b^2 + i*b + j, h, w].
    """
    n, c, h, w = _block("DepthToSpace", input, blocksize)
    b = blocksize
    mode = mode.decode() if isinstance(mode, bytes) else mode
    choice("DepthToSpace", "mode", mode, ("DCR", "CRD"))
    if c % (b * b):
        raise GraphError(f"DepthToSpace: channels {c} are not divisible by blocksize^2 = {b * b}")
    if mode == "DCR":
        y = input.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = input.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return (y.reshape(n, c // (b * b), h * b, w * b),)


@FLOAT_OPS.register()
def SpaceToDepth(input, *, blocksize):
    """output (N, C*b^2, H/b, W/b): output[n, (i*b + j)*C + c, h, w] = input[n, c, h*b + i, w*b + j]."""
    n, c, h, w = _block("SpaceToDepth", input, blocksize)
    b = blocksize
    if h % b or w % b:
        raise GraphError(f"SpaceToDepth: spatial dims {h}x{w} are not divisible by blocksize {b}")
    y = input.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return (y.reshape(n, c * b * b, h // b, w // b),)


@FLOAT_OPS.register()
def Constant(*, value=None, value_float=None, value_floats=None, value_int=None, value_ints=None,
             value_string=None, value_strings=None, sparse_value=None):
    """output = the one attribute given: a tensor (value), a float32 or int64 scalar or list, or
    strings. Sparse tensors are not supported."""
    given = {k: v for k, v in dict(value=value, value_float=value_float, value_floats=value_floats,
                                   value_int=value_int, value_ints=value_ints,
                                   value_string=value_string, value_strings=value_strings,
                                   sparse_value=sparse_value).items() if v is not None}
    if len(given) != 1:
        raise GraphError(f"Constant: exactly one value attribute must be set, got {sorted(given)}")
    (name, v), = given.items()
    if name == "sparse_value":
        raise UnsupportedOperatorError("Constant: sparse_value is not supported; store the tensor "
                                       "dense (value)")
    if name in ("value_float", "value_floats"):
        return (np.array(v, dtype=np.float32),)
    if name in ("value_int", "value_ints"):
        return (np.array(v, dtype=np.int64),)
    if name in ("value_string", "value_strings"):
        return (np.array(v, dtype=object),)
    return (_checks.tensor(v),)


@FLOAT_OPS.register()
def NonZero(X):
    """Y = int64 (rank, count) coordinates of the non-zero elements, in row-major order."""
    return (np.array(np.nonzero(np.asarray(X)), dtype=np.int64).reshape(np.ndim(X), -1),)


@FLOAT_OPS.register()
def Einsum(*Inputs, equation):
    """Output = Einstein summation of the inputs by ``equation`` (numpy.einsum's notation,
    which ONNX shares)."""
    try:
        return (np.asarray(np.einsum(equation, *Inputs, optimize=len(Inputs) > 2)),)
    except ValueError as err:
        shapes = ", ".join(str(list(x.shape)) for x in Inputs)
        raise GraphError(f"Einsum: equation {equation!r} does not fit shapes {shapes} ({err})") from None
