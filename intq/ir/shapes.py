"""Static shape inference for float graphs: every tensor's shape and dtype from per-op rules,
without running an operator.

:func:`infer_shapes` walks the graph in order; each node's rule (:data:`SHAPE_RULES`, one per ONNX
operator of intq's float graphs, opset-21 forms as :mod:`intq.runtime.float_ops` implements them)
computes its outputs' ``(shape, dtype)`` from its inputs' shapes and dtypes, its attributes and the
values of its **constant** inputs (a Reshape's target, a Slice's starts, a Resize's scales...).

What it does not know it leaves unknown, never guesses:

* a shape that depends on a non-constant tensor's *values* — a Reshape whose target is computed
  (``Shape -> Gather -> Concat -> Reshape``), NonZero of an activation, a Range of computed
  bounds. The rule gives what it can (the rank when the target's length is known) and ``None``
  for the rest. :func:`intq.passes.simplify` alternates this inference with constant folding
  (``Shape`` of a static tensor is a constant, and so is the arithmetic after it) until nothing
  changes, which resolves the shape arithmetic exporters write; a shape that still depends on data
  after that (NonZero of an activation) is measured once by running the graph:
  :func:`intq.runtime.infer_shapes` (the pipeline calls it only then, :mod:`intq.pipeline`).
* an operator without a rule keeps the shape and dtype its tensors declare (the importer's).

A rule raises :class:`~intq.errors.GraphError` naming the node when its inputs contradict the
operator (shapes that do not broadcast, a reshape of the wrong size...). Integer graphs (TFLite
builtins) have static shapes from their files or from the converter and need no inference.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from intq.errors import GraphError
from intq.ir.graph import Graph, Node, Tensor
from intq.ir.windows import pads_of, transposed_output_size, window_output_size
from intq.registry import Registry

#: ONNX ``TensorProto`` element types (the ``to`` of Cast) -> numpy dtypes, for the types intq's
#: float graphs hold (the codes are onnx.proto's: FLOAT=1, UINT8=2, INT8=3, UINT16=4, INT16=5,
#: INT32=6, INT64=7, BOOL=9, FLOAT16=10, DOUBLE=11, UINT32=12, UINT64=13).
ONNX_DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
}

Dims = tuple  # of int | None


@dataclass(frozen=True)
class Info:
    """What is known of one tensor: ``shape`` (None: unknown rank; a None dim: unknown size),
    ``dtype``, and ``value`` for a constant."""

    shape: Dims | None
    dtype: np.dtype
    value: np.ndarray | None = None

    @property
    def static(self) -> bool:
        return self.shape is not None and None not in self.shape

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


Out = tuple  # (shape | None, dtype)
ShapeRule = Callable[[Node, list], list]

#: ONNX op type -> rule ``(node, inputs: list[Info | None]) -> [(shape, dtype) per output]``.
SHAPE_RULES: Registry[ShapeRule] = Registry("shape rule", GraphError)


def infer_shapes(graph: Graph) -> Graph:
    """``graph`` with the static shape and dtype of every node output its rules can tell (module
    docstring); other tensors keep what they declare. Requires every graph input's shape to be
    static (bind them at import). Returns ``graph`` itself when nothing changed."""
    for name in graph.inputs:
        if not graph.tensors[name].is_static:
            raise GraphError(f"input {name!r} has shape {graph.tensors[name].shape}; bind it with input_shapes=")
    known: dict[str, Info] = {}
    for name, t in graph.tensors.items():
        known[name] = Info(t.shape, t.dtype, t.data)
    tensors = dict(graph.tensors)
    changed = False
    for node in graph.nodes:
        rule = SHAPE_RULES.get(node.op_type)
        if rule is None or node.domain not in ("", "ai.onnx"):
            continue
        ins = [known.get(i) if i else None for i in node.inputs]
        try:
            outs = rule(node, ins)
        except GraphError as e:
            raise GraphError(f"node {node.name!r} ({node.op_type}): {e}") from None
        for name, (shape, dtype) in zip(node.outputs, outs):
            if not name:
                continue
            t = tensors.get(name)
            if t is not None and t.is_constant:
                continue
            dtype = np.dtype(dtype)
            shape = None if shape is None else tuple(None if d is None else int(d) for d in shape)
            if shape is None or None in shape:  # keep what the tensor declares where the rule cannot tell
                shape = _merge(shape, t.shape if t is not None else None)
            known[name] = Info(shape, dtype)
            if t is None or t.shape != shape or t.dtype != dtype:
                tensors[name] = Tensor(name, dtype=dtype, shape=shape, qparams=None if t is None else t.qparams)
                changed = True
    return graph.replace(tensors=tensors) if changed else graph


def unknown_shapes(graph: Graph) -> list[str]:
    """The tensors read or written by a node whose shape is not static, in graph order."""
    seen, out = set(), []
    for n in graph.nodes:
        for name in (*n.inputs, *n.outputs):
            if name and name not in seen:
                seen.add(name)
                t = graph.tensors.get(name)
                if t is not None and not t.is_static:
                    out.append(name)
    return out


def _merge(inferred: Dims | None, declared: Dims | None) -> Dims | None:
    """Dims the rule found, completed by the declared ones where the rule has none."""
    if declared is None:
        return inferred
    if inferred is None:
        return tuple(declared)
    if len(inferred) != len(declared):
        return inferred
    return tuple(d if d is not None else e for d, e in zip(inferred, declared))


# ---------------------------------------------------------------------------------- helpers

def _fail(why: str) -> GraphError:
    return GraphError(why)


def _ints(info: Info | None) -> list[int] | None:
    """The values of a constant integer input (None when omitted or not constant)."""
    if info is None or info.value is None:
        return None
    return [int(v) for v in np.asarray(info.value).reshape(-1)]


def _omitted(info: Info | None) -> bool:
    return info is None or (info.value is not None and np.asarray(info.value).size == 0 and info.shape == (0,))


def _axis(value: int, rank: int, what: str = "axis") -> int:
    if not -rank <= value < rank:
        raise _fail(f"{what}={value} is out of range for rank {rank}")
    return value + rank if value < 0 else value


def broadcast(*shapes: Dims | None) -> Dims | None:
    """Multidirectional (numpy / ONNX) broadcasting of shapes with unknown dims (None); None when a
    rank is unknown. Known dims that do not broadcast are a :class:`GraphError`."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        dims = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise _fail(f"input shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _same(node: Node, ins: list) -> list:
    x = ins[0]
    return [(x.shape, x.dtype)]


def _result_type(*infos: Info) -> np.dtype:
    return np.result_type(*(i.dtype for i in infos))


# ---------------------------------------------------------------------------------- elementwise

_UNARY = ("Abs", "Ceil", "Celu", "Cos", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Identity",
          "LeakyRelu", "Log", "Mish", "Neg", "Reciprocal", "Relu", "Round", "Rsqrt", "Selu", "SiLU", "Sigmoid", "Sign",
          "Sin", "Softplus", "Softsign", "Sqrt", "Swish", "Tanh", "ThresholdedRelu", "Softmax", "LogSoftmax", "Clip",
          "BatchNormalization", "InstanceNormalization", "GroupNormalization")
SHAPE_RULES.register(*_UNARY)(_same)


@SHAPE_RULES.register("Not", "IsNaN", "IsInf")
def _predicate(node: Node, ins: list) -> list:
    return [(ins[0].shape, np.bool_)]


@SHAPE_RULES.register("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Sum", "Mean")
def _arithmetic(node: Node, ins: list) -> list:
    xs = [i for i in ins if i is not None]
    return [(broadcast(*(i.shape for i in xs)), _result_type(*xs))]


@SHAPE_RULES.register()
def Pow(node: Node, ins: list) -> list:
    return [(broadcast(ins[0].shape, ins[1].shape), ins[0].dtype)]


@SHAPE_RULES.register()
def PRelu(node: Node, ins: list) -> list:
    return [(broadcast(ins[0].shape, ins[1].shape), _result_type(ins[0], ins[1]))]


@SHAPE_RULES.register("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor")
def _comparison(node: Node, ins: list) -> list:
    return [(broadcast(ins[0].shape, ins[1].shape), np.bool_)]


@SHAPE_RULES.register()
def Where(node: Node, ins: list) -> list:
    return [(broadcast(*(i.shape for i in ins)), _result_type(ins[1], ins[2]))]


@SHAPE_RULES.register()
def Cast(node: Node, ins: list) -> list:
    to = int(node.attrs["to"])
    return [(ins[0].shape, ONNX_DTYPES.get(to, ins[0].dtype))]


@SHAPE_RULES.register()
def CastLike(node: Node, ins: list) -> list:
    return [(ins[0].shape, ins[1].dtype)]


@SHAPE_RULES.register()
def Dropout(node: Node, ins: list) -> list:
    return [(ins[0].shape, ins[0].dtype), (ins[0].shape, np.bool_)]


@SHAPE_RULES.register()
def LayerNormalization(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype)] * 3
    a = _axis(int(node.attrs.get("axis", -1)), len(x.shape))
    stats = tuple(x.shape[:a]) + (1,) * (len(x.shape) - a)
    return [(x.shape, x.dtype), (stats, x.dtype), (stats, x.dtype)]


# ---------------------------------------------------------------------------------- shapes

@SHAPE_RULES.register()
def Shape(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, np.int64)]
    start, end = node.attrs.get("start", 0), node.attrs.get("end")
    return [((len(range(len(x.shape))[slice(int(start), None if end is None else int(end))]),), np.int64)]


@SHAPE_RULES.register()
def Size(node: Node, ins: list) -> list:
    return [((), np.int64)]


@SHAPE_RULES.register()
def Constant(node: Node, ins: list) -> list:
    attrs = node.attrs
    if attrs.get("value") is not None:
        v = np.asarray(attrs["value"])
        return [(v.shape, v.dtype)]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if attrs.get(key) is not None:
            return [(np.shape(attrs[key]), dtype)]
    return [(None, np.float32)]


@SHAPE_RULES.register()
def ConstantOfShape(node: Node, ins: list) -> list:
    value = node.attrs.get("value")
    dtype = np.float32 if value is None else np.asarray(value).dtype
    dims = _ints(ins[0])
    if dims is None:
        n = ins[0].shape[0] if ins[0].shape is not None and len(ins[0].shape) == 1 else None
        return [(None if n is None else (None,) * n, dtype)]
    return [(tuple(dims), dtype)]


@SHAPE_RULES.register()
def Reshape(node: Node, ins: list) -> list:
    x, target = ins[0], _ints(ins[1])
    if target is None:
        n = ins[1].shape[0] if ins[1].shape is not None and len(ins[1].shape) == 1 else None
        return [(None if n is None else (None,) * n, x.dtype)]
    if target.count(-1) > 1:
        raise _fail(f"shape {target} has more than one -1")
    allowzero = int(node.attrs.get("allowzero", 0))
    dims: list = list(target)
    if not allowzero:
        for i, d in enumerate(target):
            if d == 0:
                if x.shape is None or i >= len(x.shape):
                    if x.shape is not None:
                        raise _fail(f"shape {target} copies dim {i} (0) but the input {list(x.shape)} has rank "
                                    f"{len(x.shape)}")
                    dims[i] = None
                else:
                    dims[i] = x.shape[i]
    if -1 in dims:
        k = dims.index(-1)
        rest = [d for i, d in enumerate(dims) if i != k]
        if x.static and None not in rest:
            size, known = math.prod(x.shape), math.prod(rest)
            if known == 0 or size % known:
                raise _fail(f"cannot reshape {list(x.shape)} ({size} elements) to {target}")
            dims[k] = size // known
        else:
            dims[k] = None
    elif x.static and None not in dims and math.prod(dims) != math.prod(x.shape):
        raise _fail(f"cannot reshape {list(x.shape)} ({math.prod(x.shape)} elements) to {target}")
    return [(tuple(dims), x.dtype)]


@SHAPE_RULES.register()
def Flatten(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [((None, None), x.dtype)]
    rank, axis = len(x.shape), int(node.attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        raise _fail(f"axis={axis} is out of range for rank {rank} ([{-rank}, {rank}])")
    a = axis % rank if axis < 0 else axis
    outer, inner = x.shape[:a], x.shape[a:]
    return [((None if None in outer else math.prod(outer), None if None in inner else math.prod(inner)), x.dtype)]


@SHAPE_RULES.register()
def Transpose(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype)]
    perm = node.attrs.get("perm")
    p = list(reversed(range(len(x.shape)))) if perm is None else [int(v) for v in perm]
    if sorted(p) != list(range(len(x.shape))):
        raise _fail(f"perm={p} is not a permutation of the {len(x.shape)} axes")
    return [(tuple(x.shape[k] for k in p), x.dtype)]


@SHAPE_RULES.register()
def Squeeze(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype)]
    axes_in = ins[1] if len(ins) > 1 else None
    if axes_in is None:
        if None in x.shape:
            return [(None, x.dtype)]
        return [(tuple(d for d in x.shape if d != 1), x.dtype)]
    axes = _ints(axes_in)
    if axes is None:
        return [(None, x.dtype)]
    ax = {_axis(a, len(x.shape), "axes") for a in axes}
    bad = [a for a in sorted(ax) if x.shape[a] not in (1, None)]
    if bad:
        raise _fail(f"axes {bad} of shape {list(x.shape)} are not of size 1")
    return [(tuple(d for k, d in enumerate(x.shape) if k not in ax), x.dtype)]


@SHAPE_RULES.register()
def Unsqueeze(node: Node, ins: list) -> list:
    x, axes = ins[0], _ints(ins[1])
    if x.shape is None or axes is None:
        return [(None, x.dtype)]
    rank = len(x.shape) + len(axes)
    ax = {_axis(a, rank, "axes") for a in axes}
    rest = iter(x.shape)
    return [(tuple(1 if k in ax else next(rest) for k in range(rank)), x.dtype)]


@SHAPE_RULES.register()
def Concat(node: Node, ins: list) -> list:
    xs = [i for i in ins if i is not None]
    dtype = _result_type(*xs)
    if any(x.shape is None for x in xs):
        return [(None, dtype)]
    rank = len(xs[0].shape)
    a = _axis(int(node.attrs["axis"]), rank)
    if any(len(x.shape) != rank for x in xs):
        raise _fail(f"shapes {', '.join(str(list(x.shape)) for x in xs)} do not fit along axis {a}")
    out = []
    for k in range(rank):
        dims = [x.shape[k] for x in xs]
        if k == a:
            out.append(None if None in dims else sum(dims))
        else:
            known = {d for d in dims if d is not None}
            if len(known) > 1:
                raise _fail(f"shapes {', '.join(str(list(x.shape)) for x in xs)} do not fit along axis {a}")
            out.append(known.pop() if known else None)
    return [(tuple(out), dtype)]


@SHAPE_RULES.register()
def Split(node: Node, ins: list) -> list:
    x, n = ins[0], len(node.outputs)
    if x.shape is None:
        return [(None, x.dtype)] * n
    a = _axis(int(node.attrs.get("axis", 0)), len(x.shape))
    dim = x.shape[a]
    split = ins[1] if len(ins) > 1 else None
    if split is not None:
        sizes = _ints(split)
    elif node.attrs.get("num_outputs") is not None and dim is not None:
        parts = int(node.attrs["num_outputs"])
        part = -(-dim // parts)
        sizes = [min(part, max(0, dim - i * part)) for i in range(parts)]
    else:
        sizes = None
    if sizes is None:
        return [(x.shape[:a] + (None,) + x.shape[a + 1:], x.dtype)] * n
    if dim is not None and (sum(sizes) != dim or any(s < 0 for s in sizes)):
        raise _fail(f"split={sizes} does not add up to dim {dim} of axis {a}")
    return [(x.shape[:a] + (s,) + x.shape[a + 1:], x.dtype) for s in sizes]


def slice_length(dim: int, start: int, end: int, step: int) -> int:
    """Elements ONNX Slice keeps of an axis of length ``dim``: negative ``start``/``end`` count from
    the end, then ``start`` clamps to [0, dim] (step > 0) or [0, dim-1] (step < 0) and ``end`` to
    [0, dim] or [-1, dim-1] (-1: through index 0)."""
    s = start + dim if start < 0 else start
    e = end + dim if end < 0 else end
    if step > 0:
        s, e = min(max(s, 0), dim), min(max(e, 0), dim)
    else:
        s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
    return len(range(s, e, step))


@SHAPE_RULES.register()
def Slice(node: Node, ins: list) -> list:
    x = ins[0]
    starts, ends = _ints(ins[1]), _ints(ins[2])
    axes_in = ins[3] if len(ins) > 3 else None
    steps_in = ins[4] if len(ins) > 4 else None
    if x.shape is None:
        return [(None, x.dtype)]
    axes = _ints(axes_in) if axes_in is not None else None
    steps = _ints(steps_in) if steps_in is not None else None
    if starts is None or ends is None or (axes_in is not None and axes is None) or (steps_in is not None
                                                                                     and steps is None):
        return [((None,) * len(x.shape), x.dtype)]
    if len(starts) != len(ends):
        raise _fail(f"starts {starts} and ends {ends} differ in length")
    ax = [_axis(a, len(x.shape), "axes") for a in axes] if axes is not None else list(range(len(starts)))
    sp = steps if steps is not None else [1] * len(starts)
    if not len(ax) == len(sp) == len(starts):
        raise _fail(f"starts {starts}, ends {ends}, axes {ax} and steps {sp} must have the same length")
    out = list(x.shape)
    for a, s, e, step in zip(ax, starts, ends, sp):
        if step == 0:
            raise _fail(f"step 0 on axis {a}")
        out[a] = None if x.shape[a] is None else slice_length(x.shape[a], s, e, step)
    return [(tuple(out), x.dtype)]


@SHAPE_RULES.register()
def Gather(node: Node, ins: list) -> list:
    x, idx = ins[0], ins[1]
    if x.shape is None or idx.shape is None:
        return [(None, x.dtype)]
    a = _axis(int(node.attrs.get("axis", 0)), len(x.shape))
    return [(x.shape[:a] + tuple(idx.shape) + x.shape[a + 1:], x.dtype)]


@SHAPE_RULES.register()
def GatherND(node: Node, ins: list) -> list:
    """``indices.shape[:-1] + data.shape[batch_dims + k:]``, ``k = indices.shape[-1]``."""
    x, idx = ins[0], ins[1]
    if x.shape is None or idx.shape is None or not idx.shape or idx.shape[-1] is None:
        return [(None, x.dtype)]
    b, k = int(node.attrs.get("batch_dims", 0)), int(idx.shape[-1])
    if b < 0 or b + k > len(x.shape):
        raise _fail(f"GatherND: indices {list(idx.shape)} do not fit data {list(x.shape)} with batch_dims {b}")
    return [(tuple(idx.shape[:-1]) + tuple(x.shape[b + k:]), x.dtype)]


@SHAPE_RULES.register()
def MaskedSoftmax(node: Node, ins: list) -> list:
    """intq's masked softmax (:mod:`intq.passes.attention`): the scores' shape and dtype."""
    return [(ins[0].shape, ins[0].dtype)]


@SHAPE_RULES.register()
def GatherElements(node: Node, ins: list) -> list:
    return [(ins[1].shape, ins[0].dtype)]


def range_length(start, limit, delta) -> int:
    """Elements of ONNX Range (``start + i*delta`` for ``i < ceil((limit - start) / delta)``, at least 0),
    in ``start``'s dtype (numpy 0-d values); delta 0 or a non-finite length is a :class:`GraphError`."""
    s, l, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    if d == 0:
        raise _fail("Range: delta is 0")
    if np.issubdtype(s.dtype, np.integer):
        return max(0, -(-(int(l) - int(s)) // int(d)))
    span = np.float64(l - s) / np.float64(d)
    if not np.isfinite(span):
        raise _fail(f"Range: start {s}, limit {l} and delta {d} give no finite length")
    return max(0, int(np.ceil(span)))


@SHAPE_RULES.register()
def Range(node: Node, ins: list) -> list:
    dtype = ins[0].dtype
    if any(i.value is None for i in ins[:3]):
        return [((None,), dtype)]
    return [((range_length(ins[0].value, ins[1].value, ins[2].value),), dtype)]


@SHAPE_RULES.register()
def NonZero(node: Node, ins: list) -> list:
    x = ins[0]
    rank = None if x.shape is None else len(x.shape)
    count = None if x.value is None else int(np.count_nonzero(x.value))
    return [(None if rank is None else (rank, count), np.int64)]


@SHAPE_RULES.register()
def Expand(node: Node, ins: list) -> list:
    x, target = ins[0], _ints(ins[1])
    if target is None:
        n = ins[1].shape[0] if ins[1].shape is not None and len(ins[1].shape) == 1 else None
        if n is None or x.shape is None:
            return [(None, x.dtype)]
        rank = max(n, len(x.shape))
        return [((None,) * rank, x.dtype)]
    return [(broadcast(x.shape, tuple(target)), x.dtype)]


@SHAPE_RULES.register()
def Tile(node: Node, ins: list) -> list:
    x, reps = ins[0], _ints(ins[1])
    if x.shape is None:
        return [(None, x.dtype)]
    if reps is None:
        return [((None,) * len(x.shape), x.dtype)]
    if len(reps) != len(x.shape) or any(r < 0 for r in reps):
        raise _fail(f"repeats {reps} needs {len(x.shape)} non-negative entries")
    return [(tuple(None if d is None else d * r for d, r in zip(x.shape, reps)), x.dtype)]


@SHAPE_RULES.register()
def Pad(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype)]
    pads = _ints(ins[1])
    axes_in = ins[3] if len(ins) > 3 else None
    axes = _ints(axes_in) if axes_in is not None else None
    if pads is None or (axes_in is not None and axes is None):
        return [((None,) * len(x.shape), x.dtype)]
    ax = [_axis(a, len(x.shape), "axes") for a in axes] if axes is not None else list(range(len(x.shape)))
    if len(pads) != 2 * len(ax):
        raise _fail(f"pads {pads} must have 2 entries per padded axis ({len(ax)} axes)")
    out = list(x.shape)
    for i, a in enumerate(ax):
        out[a] = None if out[a] is None else out[a] + pads[i] + pads[len(ax) + i]
    return [(tuple(out), x.dtype)]


@SHAPE_RULES.register()
def DepthToSpace(node: Node, ins: list) -> list:
    x, b = ins[0], int(node.attrs["blocksize"])
    if x.shape is None or len(x.shape) != 4 or None in x.shape:
        return [(None if x.shape is None else (None,) * len(x.shape), x.dtype)]
    n, c, h, w = x.shape
    if c % (b * b):
        raise _fail(f"channels {c} are not divisible by blocksize^2 = {b * b}")
    return [((n, c // (b * b), h * b, w * b), x.dtype)]


@SHAPE_RULES.register()
def SpaceToDepth(node: Node, ins: list) -> list:
    x, b = ins[0], int(node.attrs["blocksize"])
    if x.shape is None or len(x.shape) != 4 or None in x.shape:
        return [(None if x.shape is None else (None,) * len(x.shape), x.dtype)]
    n, c, h, w = x.shape
    if h % b or w % b:
        raise _fail(f"spatial dims {h}x{w} are not divisible by blocksize {b}")
    return [((n, c * b * b, h // b, w // b), x.dtype)]


# ---------------------------------------------------------------------------------- reductions

@SHAPE_RULES.register("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2",
                      "ReduceSumSquare", "ReduceLogSumExp")
def _reduce(node: Node, ins: list) -> list:
    x = ins[0]
    keep = bool(int(node.attrs.get("keepdims", 1)))
    axes_in = ins[1] if len(ins) > 1 else None
    if x.shape is None:
        return [(None, x.dtype)]
    if axes_in is None or _omitted(axes_in):
        if int(node.attrs.get("noop_with_empty_axes", 0)):
            return [(x.shape, x.dtype)]
        ax = set(range(len(x.shape)))
    else:
        axes = _ints(axes_in)
        if axes is None:
            return [(None if not keep else (None,) * len(x.shape), x.dtype)]
        ax = {_axis(a, len(x.shape), "axes") for a in axes}
    if keep:
        return [(tuple(1 if k in ax else d for k, d in enumerate(x.shape)), x.dtype)]
    return [(tuple(d for k, d in enumerate(x.shape) if k not in ax), x.dtype)]


@SHAPE_RULES.register("ArgMax", "ArgMin")
def _arg(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, np.int64)]
    a = _axis(int(node.attrs.get("axis", 0)), len(x.shape))
    if int(node.attrs.get("keepdims", 1)):
        return [(x.shape[:a] + (1,) + x.shape[a + 1:], np.int64)]
    return [(x.shape[:a] + x.shape[a + 1:], np.int64)]


# ---------------------------------------------------------------------------------- linear algebra

@SHAPE_RULES.register()
def MatMul(node: Node, ins: list) -> list:
    a, b = ins[0], ins[1]
    dtype = _result_type(a, b)
    if a.shape is None or b.shape is None:
        return [(None, dtype)]
    sa, sb = list(a.shape), list(b.shape)
    if not sa or not sb:
        raise _fail(f"shapes {sa} and {sb} do not multiply")
    drop_a, drop_b = len(sa) == 1, len(sb) == 1
    if drop_a:
        sa = [1] + sa
    if drop_b:
        sb = sb + [1]
    if sa[-1] is not None and sb[-2] is not None and sa[-1] != sb[-2]:
        raise _fail(f"shapes {list(a.shape)} and {list(b.shape)} do not multiply")
    batch = broadcast(tuple(sa[:-2]), tuple(sb[:-2]))
    out = list(batch) + ([] if drop_a else [sa[-2]]) + ([] if drop_b else [sb[-1]])
    return [(tuple(out), dtype)]


@SHAPE_RULES.register()
def Gemm(node: Node, ins: list) -> list:
    a, b = ins[0], ins[1]
    dtype = _result_type(a, b)
    if a.shape is None or b.shape is None:
        return [((None, None), dtype)]
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise _fail(f"A and B must be 2-D, got shapes {list(a.shape)} and {list(b.shape)}")
    m, k = a.shape[::-1] if int(node.attrs.get("transA", 0)) else a.shape
    k2, n = b.shape[::-1] if int(node.attrs.get("transB", 0)) else b.shape
    if k is not None and k2 is not None and k != k2:
        raise _fail(f"A' {[m, k]} and B' {[k2, n]} do not multiply")
    return [((m, n), dtype)]


@SHAPE_RULES.register()
def Einsum(node: Node, ins: list) -> list:
    dtype = _result_type(*ins)
    if any(i.shape is None for i in ins):
        return [(None, dtype)]
    return [(einsum_shape(str(node.attrs["equation"]), [i.shape for i in ins]), dtype)]


def einsum_shape(equation: str, shapes: Sequence[Dims]) -> Dims:
    """The output shape of ``numpy.einsum(equation, *operands of shapes)`` (ONNX Einsum's notation:
    ``ab,bc->ac``, ``...`` for broadcast axes, implicit output = the labels used once, sorted)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _fail(f"equation {equation!r} has {len(terms)} operands, got {len(shapes)}")
    sizes: dict[str, int | None] = {}
    ellipsis: Dims = ()
    counts: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        labels = term.replace("...", "")
        if any(c not in string.ascii_letters for c in labels):
            raise _fail(f"equation {equation!r}: labels must be letters")
        n_ell = len(shape) - len(labels)
        if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0):
            raise _fail(f"equation {equation!r} does not fit shapes {[list(s) for s in shapes]}")
        before = term.split("...")[0] if "..." in term else term
        dims = list(shape)
        ell = tuple(dims[len(before):len(before) + n_ell]) if "..." in term else ()
        label_dims = dims[:len(before)] + dims[len(before) + n_ell:]
        ellipsis = broadcast(ellipsis, ell)
        for c, d in zip(labels, label_dims):
            counts[c] = counts.get(c, 0) + 1
            old = sizes.get(c)
            if old is not None and d is not None and old != d and 1 not in (old, d):
                raise _fail(f"equation {equation!r}: label {c!r} has sizes {old} and {d}")
            sizes[c] = d if old in (None, 1) else old
    if arrow:
        out_labels = rhs
    else:
        out_labels = ("..." if "..." in lhs else "") + "".join(sorted(c for c, k in counts.items() if k == 1))
    if any(c not in sizes for c in out_labels.replace("...", "")):
        raise _fail(f"equation {equation!r}: an output label is not in the inputs")
    if "..." in out_labels:
        pre, post = out_labels.split("...")
        return tuple([sizes[c] for c in pre] + list(ellipsis or ()) + [sizes[c] for c in post])
    return tuple(sizes[c] for c in out_labels)


# ---------------------------------------------------------------------------------- windows

def _spatial(node: Node, x: Info, kernel: Sequence[int], transposed: bool = False) -> Dims:
    nd = len(kernel)
    attrs = node.attrs
    strides = [int(v) for v in attrs.get("strides") or [1] * nd]
    dilations = [int(v) for v in attrs.get("dilations") or [1] * nd]
    if len(strides) != nd or len(dilations) != nd:
        raise _fail(f"strides {strides} / dilations {dilations} need {nd} entries")
    where = node.op_type
    begin, end = pads_of(where, {k: attrs[k] for k in ("auto_pad", "pads", "output_shape") if k in attrs}, nd)
    spatial = x.shape[2:]
    if len(spatial) != nd:
        raise _fail(f"kernel {list(kernel)} has {nd} axes but the input {list(x.shape)} has {len(spatial)} spatial axes")
    out = []
    if transposed:
        adj = [int(v) for v in attrs.get("output_padding") or [0] * nd]
        for n, k, s, d, b, e, a in zip(spatial, kernel, strides, dilations, begin, end, adj):
            out.append(None if n is None else transposed_output_size(n, k, s, d, b, e, a))
        if any(o is not None and o < 1 for o in out):
            raise _fail(f"pads {begin + end} leave no output")
        return tuple(out)
    ceil_mode = bool(int(attrs.get("ceil_mode", 0)))
    for n, k, s, d, b, e in zip(spatial, kernel, strides, dilations, begin, end):
        out.append(None if n is None else window_output_size(where, n, k, s, d, b, e, ceil_mode))
    return tuple(out)


@SHAPE_RULES.register()
def Conv(node: Node, ins: list) -> list:
    x, w = ins[0], ins[1]
    dtype = _result_type(x, w)
    if x.shape is None or w.shape is None or None in w.shape[2:]:
        return [(None, dtype)]
    return [((x.shape[0], w.shape[0]) + _spatial(node, x, w.shape[2:]), dtype)]


@SHAPE_RULES.register()
def ConvTranspose(node: Node, ins: list) -> list:
    x, w = ins[0], ins[1]
    dtype = _result_type(x, w)
    group = int(node.attrs.get("group", 1))
    if x.shape is None or w.shape is None or None in w.shape[1:]:
        return [(None, dtype)]
    return [((x.shape[0], w.shape[1] * group) + _spatial(node, x, w.shape[2:], transposed=True), dtype)]


@SHAPE_RULES.register("MaxPool", "AveragePool")
def _pool(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype), (None, np.int64)]
    kernel = [int(k) for k in node.attrs["kernel_shape"]]
    y = tuple(x.shape[:2]) + _spatial(node, x, kernel)
    return [(y, x.dtype), (y, np.int64)]


@SHAPE_RULES.register("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype)]
    if len(x.shape) < 3:
        raise _fail(f"input must be (N, C, *spatial), got shape {list(x.shape)}")
    return [(tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2), x.dtype)]


def resize_lengths(in_len: Sequence[int], scales=None, sizes=None, policy: str = "stretch") -> tuple[list[int], list]:
    """``(output lengths, float32 scales)`` of ONNX Resize on the resized axes: from ``scales``,
    ``floor(float32(scale) * float32(n))``; from ``sizes``, the sizes with the scales ``size / n``
    (``stretch``), or one common scale (the smallest ratio for ``not_larger``, the largest for
    ``not_smaller``) and lengths ``floor(scale * n + 0.5)``, all in float32 as onnxruntime computes."""
    f = np.float32
    if scales is not None:
        scale = [f(s) for s in np.asarray(scales, f).reshape(-1)]
        if len(scale) != len(in_len) or any(not 0 < s < np.inf for s in scale):
            raise _fail(f"Resize: scales {[float(s) for s in scale]} need {len(in_len)} positive finite values")
        return [int(np.floor(s * f(n))) for s, n in zip(scale, in_len)], scale
    out_len = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if len(out_len) != len(in_len) or any(r < 1 for r in out_len):
        raise _fail(f"Resize: sizes {out_len} need {len(in_len)} positive values")
    if policy == "stretch":
        return out_len, [f(r) / f(n) for r, n in zip(out_len, in_len)]
    ratios = [f(r) / f(n) for r, n in zip(out_len, in_len)]
    common = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(np.floor(common * f(n) + f(0.5))) for n in in_len], [common] * len(in_len)


@SHAPE_RULES.register()
def Resize(node: Node, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [(None, x.dtype)]
    scales = ins[2] if len(ins) > 2 and ins[2] is not None and not _omitted(ins[2]) else None
    sizes = ins[3] if len(ins) > 3 and ins[3] is not None and not _omitted(ins[3]) else None
    axes = node.attrs.get("axes")
    ax = [_axis(int(a), len(x.shape), "axes") for a in axes] if axes is not None else list(range(len(x.shape)))
    given = scales if scales is not None else sizes
    if given is None or given.value is None or any(x.shape[a] is None for a in ax):
        return [(tuple(None if k in ax else d for k, d in enumerate(x.shape)), x.dtype)]
    policy = node.attrs.get("keep_aspect_ratio_policy", "stretch")
    policy = policy.decode() if isinstance(policy, bytes) else policy
    lengths, _ = resize_lengths([x.shape[a] for a in ax], scales.value if scales is not None else None,
                                sizes.value if sizes is not None else None, policy)
    out = list(x.shape)
    for a, n in zip(ax, lengths):
        out[a] = n
    return [(tuple(out), x.dtype)]


@SHAPE_RULES.register()
def LSTM(node: Node, ins: list) -> list:
    x, w, r = ins[0], ins[1], ins[2]
    dtype = x.dtype
    if x.shape is None or w.shape is None or r.shape is None or len(x.shape) != 3:
        return [(None, dtype)] * 3
    seq, batch = x.shape[0], x.shape[1]
    dirs, hidden = w.shape[0], r.shape[-1]
    return [((seq, dirs, batch, hidden), dtype), ((dirs, batch, hidden), dtype), ((dirs, batch, hidden), dtype)]
