"""Import an ONNX model as an intq float :class:`~intq.ir.Graph`.

What the importer does, in order, before any heavy work:

1. reads the model (a path or an ``onnx.ModelProto``) and checks its default-domain opset is one
   intq knows (:data:`MIN_OPSET` to :data:`MAX_OPSET`);
2. lists every operator intq cannot execute, with the nodes using it, in ONE error;
3. binds the graph inputs' dynamic dimensions from ``input_shapes`` (a dynamic batch alone, dimension
   0 of an input of rank >= 2, defaults to 1: every run binds its own batch; any other dynamic
   dimension unbound is refused, naming the input and suggesting sizes) and runs ONNX shape
   inference with data propagation;
4. turns initializers and ``Constant`` nodes into constant tensors, and rewrites each node into
   its opset-21 form (:data:`NORMALIZERS`: axes/pads/min/max as inputs, Upsample as Resize,
   pre-13 Softmax as flatten-softmax-reshape...), so that later stages know one semantics per op;
5. writes out the padding of Conv / ConvTranspose / pools (:func:`intq.passes.explicit_pads`).

Names of tensors and nodes are kept (unnamed nodes are named ``<OpType>_<index>``).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from intq.errors import GraphError, IntqError, UnsupportedOperatorError
from intq.frontends.onnx_if import bind_constant_inputs, fold_constant_ifs
from intq.frontends.shapes import InputShapeError, is_dynamic
from intq.ir import Graph, Node, Tensor, topological_order
from intq.ir.names import claim
from intq.onnx_format import checks
from intq.onnx_format.errors import OnnxImportError
from intq.onnx_format.reader import check_contrib_nodes, is_quantized, load_quantized_onnx
from intq.passes.padding import explicit_pads
from intq.registry import Registry
from intq.runtime.float_ops import FLOAT_OPS

#: Default-domain opsets the importer accepts. Older models predate the operator forms intq
#: normalises from; newer ones may change semantics intq has not checked.
MIN_OPSET = 7
MAX_OPSET = 23
#: The opset whose operator semantics an imported graph follows.
TARGET_OPSET = 21

#: Operators handled by the importer itself (they never reach the executor).
IMPORTER_OPS = frozenset({"Constant", "Upsample"})


class OnnxInputShapeError(OnnxImportError, InputShapeError):
    """An ONNX input's dynamic dims are not bound, or the shape given contradicts the file."""


# ------------------------------------------------------------------------------- normalisation

@dataclass
class _Context:
    """State of one import: constants created by normalisers, unique names, inferred info."""

    opset: int
    ranks: dict[str, int]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)

    def unique(self, hint: str) -> str:
        return claim(hint, self.taken)

    def const(self, hint: str, value) -> str:
        name = self.unique(hint)
        self.constants[name] = np.asarray(value)
        return name


Normalizer = Callable[[Node, _Context], list[Node]]

#: ONNX op type -> the function rewriting its older forms; each joins with ``@NORMALIZERS.register(...)``.
NORMALIZERS: Registry[Normalizer] = Registry("opset-21 normaliser", OnnxImportError)


def _attrs_without(node: Node, *names: str) -> dict[str, Any]:
    return {k: v for k, v in node.attrs.items() if k not in names}


def _pad_inputs(inputs: Sequence[str], n: int) -> list[str]:
    return list(inputs) + [""] * (n - len(inputs))


@NORMALIZERS.register("Squeeze", "Unsqueeze")
def _axes_attr_to_input_13(node: Node, ctx: _Context) -> list[Node]:
    if ctx.opset >= 13 or "axes" not in node.attrs:
        return [node]
    axes = ctx.const(f"{node.name}/axes", np.asarray(node.attrs["axes"], dtype=np.int64))
    return [node.with_(inputs=(node.inputs[0], axes), attrs=_attrs_without(node, "axes"))]


@NORMALIZERS.register("ReduceSum")
def _reduce_sum(node: Node, ctx: _Context) -> list[Node]:
    return _reduce_axes(node, ctx, since=13)


@NORMALIZERS.register("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
             "ReduceLogSum", "ReduceLogSumExp")
def _reduce_other(node: Node, ctx: _Context) -> list[Node]:
    return _reduce_axes(node, ctx, since=18)


def _reduce_axes(node: Node, ctx: _Context, since: int) -> list[Node]:
    if ctx.opset >= since or "axes" not in node.attrs:
        return [node]
    axes = ctx.const(f"{node.name}/axes", np.asarray(node.attrs["axes"], dtype=np.int64))
    return [node.with_(inputs=(node.inputs[0], axes), attrs=_attrs_without(node, "axes"))]


@NORMALIZERS.register("Split")
def _split(node: Node, ctx: _Context) -> list[Node]:
    attrs = _attrs_without(node, "split")
    inputs = list(node.inputs)
    if ctx.opset < 13 and "split" in node.attrs:
        inputs = [inputs[0], ctx.const(f"{node.name}/split", np.asarray(node.attrs["split"], dtype=np.int64))]
    if (len(inputs) < 2 or not inputs[1]) and "num_outputs" not in attrs:
        attrs["num_outputs"] = len(node.outputs)  # pre-18: equal parts, one per output
    return [node.with_(inputs=inputs, attrs=attrs)]


@NORMALIZERS.register("Clip")
def _clip(node: Node, ctx: _Context) -> list[Node]:
    if ctx.opset >= 11:
        return [node]
    lo = node.attrs.get("min")
    hi = node.attrs.get("max")
    inputs = [node.inputs[0],
              ctx.const(f"{node.name}/min", np.float32(lo)) if lo is not None else "",
              ctx.const(f"{node.name}/max", np.float32(hi)) if hi is not None else ""]
    return [node.with_(inputs=inputs, attrs=_attrs_without(node, "min", "max"))]


@NORMALIZERS.register("Pad")
def _pad(node: Node, ctx: _Context) -> list[Node]:
    if ctx.opset >= 11:
        return [node]
    pads = ctx.const(f"{node.name}/pads", np.asarray(node.attrs.get("pads", node.attrs.get("paddings")), dtype=np.int64))
    value = ctx.const(f"{node.name}/value", np.float32(node.attrs.get("value", 0.0)))
    return [node.with_(inputs=(node.inputs[0], pads, value), attrs=_attrs_without(node, "pads", "paddings", "value"))]


@NORMALIZERS.register("Slice")
def _slice(node: Node, ctx: _Context) -> list[Node]:
    if ctx.opset >= 10:
        return [node]
    starts = ctx.const(f"{node.name}/starts", np.asarray(node.attrs["starts"], dtype=np.int64))
    ends = ctx.const(f"{node.name}/ends", np.asarray(node.attrs["ends"], dtype=np.int64))
    inputs = [node.inputs[0], starts, ends]
    if "axes" in node.attrs:
        inputs.append(ctx.const(f"{node.name}/axes", np.asarray(node.attrs["axes"], dtype=np.int64)))
    return [node.with_(inputs=inputs, attrs={})]


def _legacy_resize(node: Node, scales: str, mode: str) -> Node:
    # Upsample-7/9 and Resize-10 index the input as x_in = x_out / scale ("asymmetric") and take
    # the floor for nearest, which is Resize-11+'s asymmetric + nearest_mode="floor".
    attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return node.with_(op_type="Resize", inputs=(node.inputs[0], "", scales), attrs=attrs)


@NORMALIZERS.register("Upsample")
def _upsample(node: Node, ctx: _Context) -> list[Node]:
    mode = node.attrs.get("mode", "nearest")
    if len(node.inputs) > 1 and node.inputs[1]:
        scales = node.inputs[1]
    else:
        scales = ctx.const(f"{node.name}/scales", np.asarray(node.attrs["scales"], dtype=np.float32))
    return [_legacy_resize(node, scales, mode)]


@NORMALIZERS.register("Resize")
def _resize(node: Node, ctx: _Context) -> list[Node]:
    if ctx.opset >= 11:
        return [node]
    return [_legacy_resize(node, node.inputs[1], node.attrs.get("mode", "nearest"))]


@NORMALIZERS.register("Softmax", "LogSoftmax", "Hardmax")
def _softmax(node: Node, ctx: _Context) -> list[Node]:
    if ctx.opset >= 13:
        return [node]
    # Before opset 13 the input is coerced to 2-D [prod(shape[:axis]), prod(shape[axis:])] and the
    # softmax runs over the second dimension. Equal to the opset-13 op over the last axis when
    # axis is the last dimension; otherwise flatten, softmax, reshape back.
    axis = int(node.attrs.get("axis", 1))
    rank = ctx.ranks.get(node.inputs[0])
    if rank is not None and (axis + rank if axis < 0 else axis) == rank - 1:
        return [node.with_(attrs={"axis": -1})]
    # exact for any rank; with static shapes the Flatten/Reshape pair folds away when it is a no-op
    flat, soft, shape = (ctx.unique(f"{node.name}/{s}") for s in ("flat", "softmax", "shape"))
    ctx.ranks.update({flat: 2, soft: 2})
    return [
        Node("Flatten", ctx.unique(f"{node.name}/flatten"), (node.inputs[0],), (flat,), {"axis": axis}),
        node.with_(inputs=(flat,), outputs=(soft,), attrs={"axis": -1}),
        Node("Shape", ctx.unique(f"{node.name}/shape_of"), (node.inputs[0],), (shape,)),
        Node("Reshape", ctx.unique(f"{node.name}/reshape"), (soft, shape), node.outputs),
    ]


@NORMALIZERS.register("BatchNormalization")
def _batch_norm(node: Node, ctx: _Context) -> list[Node]:
    attrs = {k: v for k, v in node.attrs.items() if k in ("epsilon", "momentum", "training_mode")}
    if attrs.get("training_mode", 0):
        raise GraphError(f"node {node.name!r} (BatchNormalization) is in training mode; export the model in eval mode")
    return [node.with_(outputs=node.outputs[:1], attrs=attrs)]


@NORMALIZERS.register("Dropout")
def _dropout(node: Node, ctx: _Context) -> list[Node]:
    inputs = node.inputs[:1]  # inference: identity (ratio and training_mode do not matter)
    return [node.with_(op_type="Identity", inputs=inputs, outputs=node.outputs[:1], attrs={})]


@NORMALIZERS.register("Gemm", "Add", "Sub", "Mul", "Div")
def _drop_legacy_broadcast(node: Node, ctx: _Context) -> list[Node]:
    return [node.with_(attrs=_attrs_without(node, "broadcast", "axis", "consumed_inputs"))]


#: onnxruntime's contrib float operators (domain ``com.microsoft``) the importer writes as ONNX ones;
#: each joins with ``@CONTRIB_NORMALIZERS.register(...)``.
CONTRIB_DOMAIN = "com.microsoft"
CONTRIB_NORMALIZERS: Registry[Normalizer] = Registry("com.microsoft operator the importer reads", OnnxImportError)


def _with_bias(node: Node, ctx: _Context) -> tuple[list[Node], str]:
    """``x + bias`` when the node has a second input (BiasGelu, FastGelu's optional bias), else ``x``."""
    if len(node.inputs) < 2 or not node.inputs[1]:
        return [], node.inputs[0]
    summed = ctx.unique(f"{node.name}/biased")
    return [Node("Add", ctx.unique(f"{node.name}/bias"), node.inputs[:2], (summed,))], summed


@CONTRIB_NORMALIZERS.register("Gelu", "BiasGelu", "FastGelu")
def _contrib_gelu(node: Node, ctx: _Context) -> list[Node]:
    """com.microsoft ``Gelu(x)`` and ``BiasGelu(x, b)``: ONNX ``Gelu(x [+ b])``; ``FastGelu(x [, b])``:
    its tanh approximation (onnxruntime's ``FastGelu`` is ``0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))``)."""
    pre, x = _with_bias(node, ctx)
    approximate = "tanh" if node.op_type == "FastGelu" else "none"
    return pre + [Node("Gelu", node.name, (x,), node.outputs[:1], {"approximate": approximate})]


# ---------------------------------------------------------------------------------------- loading

def _read(model) -> tuple[onnx.ModelProto, str, Path | None]:
    """The proto, the model's name and its folder (None for a proto: external data cannot be found).
    External data is not read here: :func:`intq.onnx_format.checks.tensor_array` reads it,
    confined to the model's folder, once its size is checked."""
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "model", None
    path = Path(os.fspath(model))
    if not path.is_file():
        raise OnnxImportError(f"{path}: no such file; give the path of an .onnx model")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf DecodeError...
        raise OnnxImportError(f"{path}: not a readable ONNX model ({type(e).__name__}: {e})") from None
    return proto, path.stem, path.parent


def _default_opset(proto: onnx.ModelProto, where: str) -> int:
    versions = {o.domain: o.version for o in proto.opset_import}
    opset = versions.get("", versions.get("ai.onnx"))
    if opset is None:
        raise OnnxImportError(f"{where}: the model does not import the default ONNX domain")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxImportError(
            f"{where}: opset {opset} is outside the range intq supports ({MIN_OPSET}-{MAX_OPSET}); "
            "convert it with onnx.version_converter.convert_version(model, 17)"
        )
    return opset


def float_node(node: Node, opset: int, ranks: Mapping[str, int], taken: set[str]
               ) -> tuple[list[Node], dict[str, np.ndarray]] | None:
    """``node`` (an ONNX float operator of a model at ``opset``) in intq's opset-21 form: the nodes
    its normaliser writes and the constants they add (``ranks``: its inputs' ranks; ``taken``: names
    in use); None for an operator intq's float executor does not run. The quantized-ONNX reader
    (:mod:`intq.onnx_format.reader`) hands it a float operator outside any quantized unit."""
    if node.op_type not in FLOAT_OPS:
        return None
    ctx = _Context(opset=opset, ranks=dict(ranks), taken=set(taken))
    normalise = NORMALIZERS.get(node.op_type)
    return (normalise(node, ctx) if normalise else [node]), ctx.constants


def supported_ops() -> frozenset[str]:
    """Every ONNX op type the importer accepts (the float executor's ops and importer-only ops)."""
    return frozenset(FLOAT_OPS) | IMPORTER_OPS


def _check_operators(proto: onnx.ModelProto, opset: int, where: str, *, if_pending: bool = False) -> None:
    """One error listing every operator intq cannot execute and its nodes. ``if_pending``: the
    ``If`` nodes are not checked yet (they may still fold, :mod:`intq.frontends.onnx_if`)."""
    known = supported_ops()
    missing: dict[str, list[str]] = defaultdict(list)
    for i, n in enumerate(proto.graph.node):
        if n.domain == CONTRIB_DOMAIN and n.op_type in CONTRIB_NORMALIZERS:
            continue  # written as ONNX operators at import
        domain_ok = n.domain in ("", "ai.onnx")
        if if_pending and domain_ok and n.op_type == "If":
            continue
        if not domain_ok or n.op_type not in known:
            key = n.op_type if domain_ok else f"{n.domain}::{n.op_type}"
            missing[key].append(n.name or f"{n.op_type}_{i}")
        elif any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            missing[f"{n.op_type} (with a subgraph)"].append(n.name or f"{n.op_type}_{i}")
    if missing:
        lines = []
        for op, nodes in sorted(missing.items()):
            shown = ", ".join(repr(x) for x in nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
            lines.append(f"  {op}: {len(nodes)} node(s): {shown}")
        hint = ""
        if "If" in missing:
            hint = ("\nAn If folds at import when its condition is fixed by constants and static shapes: bind the "
                    "inputs that select a branch with constant_inputs={'NAME': value} (command line: --input-value NAME=VALUE); "
                    "an If left here depends on data.")
        raise UnsupportedOperatorError(
            f"{where} (opset {opset}) uses {len(missing)} operator type(s) intq does not support:\n"
            + "\n".join(lines) + hint
            + "\nSupported: " + ", ".join(sorted(known))
            + "; and " + ", ".join(f"{CONTRIB_DOMAIN}::{op}" for op in sorted(CONTRIB_NORMALIZERS))
        )


def _dims(type_proto: onnx.TypeProto) -> tuple[int | None, ...] | None:
    """The declared dims, None for each dynamic one (``dim_param``, unnamed, or ``dim_value`` <= 0:
    paddle2onnx writes -1); None for an unknown rank."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") and not is_dynamic(d.dim_value) else None
                 for d in type_proto.tensor_type.shape.dim)


def _symbols(type_proto: onnx.TypeProto) -> tuple[str, ...]:
    """A display name per dim: its size, its ``dim_param``, or ``?``."""
    return tuple(str(d.dim_value) if d.HasField("dim_value") and not is_dynamic(d.dim_value) else (d.dim_param or "?")
                 for d in type_proto.tensor_type.shape.dim)


def _known_type(type_proto: onnx.TypeProto) -> bool:
    """A tensor type whose element type numpy can represent (inference may report others)."""
    return type_proto.HasField("tensor_type") and type_proto.tensor_type.elem_type in checks.READABLE_TYPES


def _dtype(type_proto: onnx.TypeProto) -> np.dtype:
    elem = type_proto.tensor_type.elem_type
    if not elem:
        return np.dtype(np.float32)
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def _bind_inputs(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None, where: str):
    """Each real graph input's shape: its declared static dims, with the dynamic ones (None, see
    :func:`_dims`) taken from ``input_shapes``. Static dims must match what the caller gives."""
    init_names = {t.name for t in proto.graph.initializer}
    real_inputs = [i for i in proto.graph.input if i.name not in init_names]
    given = dict(input_shapes or {})
    names = [i.name for i in real_inputs]
    unknown = sorted(set(given) - set(names))
    if unknown and real_inputs:
        first = real_inputs[0]
        raise OnnxInputShapeError(where, f"the shapes given name {unknown}, but the model's inputs are {names}",
                              first.name, _dims(first.type), symbols=_symbols(first.type))
    bound: dict[str, tuple[int, ...]] = {}
    for inp in real_inputs:
        dims, symbols = _dims(inp.type), _symbols(inp.type)
        shape = given.get(inp.name)
        fail = None
        if shape is not None:
            shape = tuple(int(d) for d in shape)
            if dims is not None and len(dims) != len(shape):
                fail = f"input {inp.name!r} has rank {len(dims)} {list(symbols)}, the shape given is {shape}"
            elif dims is not None and any(d is not None and d != s for d, s in zip(dims, shape)):
                fail = f"input {inp.name!r} has static shape {dims} (None: dynamic), the shape given is {shape}"
            elif any(s <= 0 for s in shape):
                fail = f"input {inp.name!r}: the shape given, {shape}, must be positive"
            else:
                bound[inp.name] = shape
        elif dims is None:
            fail = f"input {inp.name!r} has an unknown rank"
        elif len(dims) >= 2 and dims[0] is None and all(d is not None for d in dims[1:]):
            bound[inp.name] = (1, *dims[1:])  # only the batch is dynamic: 1 (every run binds its own batch)
        elif any(d is None for d in dims):
            fail = f"input {inp.name!r} has dynamic dimensions {list(symbols)}"
        else:
            bound[inp.name] = dims
        if fail:
            raise OnnxInputShapeError(where, fail, inp.name, dims, shape, symbols)
    return real_inputs, bound


_SHAPE_ONLY_ELEMENTS = 4096  # initializers larger than this are weights: inference needs their shape only


def _value_info(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """Every value_info and graph output of an inferred model, by name (the entry that knows the shape)."""
    value_info: dict[str, onnx.ValueInfoProto] = {}
    for v in list(model.graph.output) + list(model.graph.value_info):
        if v.name not in value_info or _dims(value_info[v.name].type) is None:
            value_info[v.name] = v
    return value_info


def _with_bound_inputs(proto: onnx.ModelProto, bound: Mapping[str, tuple[int, ...]],
                       check: Callable[[dict[str, onnx.ValueInfoProto]], None] | None = None) -> onnx.ModelProto:
    """ONNX shape inference (with data propagation) on a copy whose inputs are bound and whose
    large initializers are turned into typed graph inputs, so weights are not serialised.

    Two passes: without data propagation first, whose shapes ``check`` sees (the size limit),
    then with it — ONNX's data propagation materialises the values it propagates (a Cast of a
    constant Range of 2^48 elements allocates them), so it runs only on a model whose statically
    known tensors are within the limit."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    for out in model.graph.output:  # inference computes output shapes (onnx_format.checks compares the declared ones)
        out.type.tensor_type.ClearField("shape")
    big = [t for t in model.graph.initializer
           if t.data_location == onnx.TensorProto.EXTERNAL or int(np.prod(t.dims, dtype=object)) > _SHAPE_ONLY_ELEMENTS]
    declared = {i.name for i in model.graph.input}
    for t in big:
        model.graph.initializer.remove(t)
        if t.name not in declared:
            model.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for inp in model.graph.input:
        if inp.name in bound:
            dims = inp.type.tensor_type.shape.dim
            del dims[:]
            for d in bound[inp.name]:
                dims.add().dim_value = d
    try:
        first = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=False)
    except Exception:  # inference is an aid: shapes are re-derived by execution later
        return model
    if check is not None:
        check(_value_info(first))
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:
        return first


#: Operators whose input 1 (weights) and input 2 (bias) must be finite when they are initializers.
_WEIGHTED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def load_onnx(model, input_shapes: Mapping[str, Sequence[int]] | None = None,
              constant_inputs: Mapping[str, Any] | None = None) -> Graph:
    """Import an ONNX model (path or ``ModelProto``) as a float :class:`Graph`.

    ``input_shapes`` binds the dynamic dimensions of the graph inputs (``{"x": (1, 3, 224, 224)}``);
    an input with a dynamic dimension and no given shape is an error naming it. ``constant_inputs``
    fixes inputs to values (``{"sr": 16000}``): they become constants, and ``If`` nodes whose
    condition constants and static shapes decide are folded (:mod:`intq.frontends.onnx_if`). Raises
    :class:`UnsupportedOperatorError` (every unsupported op and its nodes, at once),
    :class:`OnnxImportError` (unreadable file, bad opset or shapes) or :class:`GraphError`.
    """
    proto, model_name, folder = _read(model)
    where = f"ONNX model {model_name!r}"
    checks.check_structure(proto, where, narrow=is_quantized(proto))
    if is_quantized(proto):  # QDQ / QOperator: intq's integer operators (intq.onnx_format.reader)
        checks.check_nodes(proto, where)  # the ai.onnx nodes against their schemas
        check_contrib_nodes(proto, where)  # onnxruntime's com.microsoft nodes against theirs
        return load_quantized_onnx(proto, *_bind_inputs(proto, input_shapes, where), where, model_name, folder=folder,
                                   float_node=float_node)
    opset = _default_opset(proto, where)
    _check_operators(proto, opset, where, if_pending=True)
    proto = bind_constant_inputs(proto, constant_inputs or {}, where)
    real_inputs, bound = _bind_inputs(proto, input_shapes, where)
    proto = fold_constant_ifs(proto, bound, opset)
    _check_operators(proto, opset, where)
    checks.check_nodes(proto, where)

    def check_sizes(value_info: dict[str, onnx.ValueInfoProto]) -> None:
        checks.check_sizes(where, bound, {i.name: _dtype(i.type) for i in real_inputs},
                           {k: (_dims(v.type), _dtype(v.type)) for k, v in value_info.items() if _known_type(v.type)})

    check_sizes({})  # the bound inputs, before inference looks at them
    value_info = _value_info(_with_bound_inputs(proto, bound, check_sizes))
    check_sizes(value_info)
    checks.check_declared_outputs(where, {o.name: _dims(o.type) for o in proto.graph.output},
                                  {k: _dims(v.type) for k, v in value_info.items()})
    for o in proto.graph.output:  # an output inference could not shape keeps its declared shape
        if o.name not in value_info or _dims(value_info[o.name].type) is None:
            value_info[o.name] = o
    ranks = {k: len(d) for k, v in value_info.items() if (d := _dims(v.type)) is not None}
    ranks.update({k: len(v) for k, v in bound.items()})
    ctx = _Context(opset=opset, ranks=ranks)

    tensors: dict[str, Tensor] = {}
    for init in proto.graph.initializer:
        tensors[init.name] = Tensor(init.name, data=checks.tensor_array(init, f"{where}: initializer {init.name!r}",
                                                                        folder))
        ctx.taken.add(init.name)
    for inp in real_inputs:
        tensors[inp.name] = Tensor(inp.name, dtype=_dtype(inp.type), shape=bound[inp.name])
        ctx.taken.add(inp.name)
    for n in proto.graph.node:  # weights of linear ops: a NaN or an infinity makes NaN / ±inf outputs
        if n.op_type in _WEIGHTED_OPS:
            for name in list(n.input)[1:3]:
                t = tensors.get(name)
                if t is not None and t.data is not None and t.data.dtype.kind == "f" and not np.isfinite(t.data).all():
                    raise OnnxImportError(f"{where}: node {n.name or n.op_type!r} ({n.op_type}): its weight {name!r} "
                                          f"holds {int((~np.isfinite(t.data)).sum())} NaN or infinite values; every "
                                          "output they touch would be NaN or infinite (runtimes then differ on NaN)")
    node_names: set[str] = set()
    for n in proto.graph.node:
        ctx.taken.update(o for o in n.output if o)
        if n.name:
            node_names.add(n.name)
    ctx.taken.update(node_names)

    nodes: list[Node] = []
    seen_names: set[str] = set()
    for i, n in enumerate(proto.graph.node):
        attrs = {a.name: _attr_value(a, f"{where}: node {n.name or i!r} ({n.op_type}) attribute {a.name!r}", folder)
                 for a in n.attribute}
        name = n.name or f"{n.op_type}_{i}"
        if name in seen_names:
            name = ctx.unique(name)
        seen_names.add(name)
        if n.op_type == "Constant":
            tensors[n.output[0]] = Tensor(n.output[0], data=_constant_value(name, attrs))
            continue
        node = Node(n.op_type, name, tuple(n.input), tuple(n.output), attrs)
        if n.domain == CONTRIB_DOMAIN:  # checked above: one of CONTRIB_NORMALIZERS
            nodes.extend(CONTRIB_NORMALIZERS.lookup(n.op_type)(node, ctx))
            continue
        normalise = NORMALIZERS.get(n.op_type)
        nodes.extend(normalise(node, ctx) if normalise else [node])

    for cname, value in ctx.constants.items():
        tensors[cname] = Tensor(cname, data=value)
    for node in nodes:
        for o in node.outputs:
            if o and o not in tensors:
                info = value_info.get(o)
                tensors[o] = Tensor(o, dtype=_dtype(info.type) if info else np.float32,
                                    shape=_dims(info.type) if info else None)
    for i in list({i for node in nodes for i in node.inputs if i} - set(tensors)):
        raise GraphError(f"{where}: tensor {i!r} is read but never defined")

    available = set(bound) | {k for k, t in tensors.items() if t.is_constant}
    ordered = topological_order(nodes, available)
    outputs = tuple(o.name for o in proto.graph.output)
    graph = Graph(ordered, tensors, tuple(bound), outputs, name=model_name, opset=TARGET_OPSET,
                  metadata={"source": "onnx", "source_opset": opset, "producer": proto.producer_name})
    return explicit_pads(graph.prune())


def _attr_value(attr: onnx.AttributeProto, what: str = "an attribute", folder: Path | None = None) -> Any:
    value = helper.get_attribute_value(attr)
    try:
        if isinstance(value, bytes):
            return value.decode("utf-8")
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode("utf-8") for v in value]
    except UnicodeDecodeError:
        raise OnnxImportError(f"{what}: the string is not UTF-8") from None
    if isinstance(value, onnx.TensorProto):
        return checks.tensor_array(value, what, folder)
    return value


def _constant_value(node_name: str, attrs: Mapping[str, Any]) -> np.ndarray:
    """The value of an ONNX Constant node, whichever attribute carries it."""
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise UnsupportedOperatorError(
        f"Constant node {node_name!r} uses {sorted(attrs)}; intq reads value, value_float(s), value_int(s)"
    )
