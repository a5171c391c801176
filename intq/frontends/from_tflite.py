"""Import a ``.tflite`` model as intq's integer graph: the TFLite builtins it already is.

A ``.tflite`` file from TensorFlow's converter (int8, or 16x8: int16 activations, int8 weights,
int64 biases) or from :func:`intq.export_tflite` becomes the :class:`~intq.ir.Graph` that
``intq.convert`` would have produced for it, so the integer kernels run it unchanged:

* every operator becomes a node named ``{op}_{index}`` (``conv_2d_3``: operator 3 of the file)
  whose ``op_type`` is the builtin's name — the operator code is
  ``max(builtin_code, deprecated_builtin_code)`` (files written before code 127 ran out only fill
  the deprecated field) — and whose attributes are its options table read back with
  :func:`intq.tflite.options.options_to_attrs`; an omitted optional input (``-1``) is ``""``;
* every tensor keeps its name (empty or repeated names get ``_{index}``), dtype, constant buffer
  (little-endian, C order) and quantization: one scale is per tensor, several are per axis
  ``quantized_dimension``; int8 weights of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and
  TRANSPOSE_CONV with zero point 0 are marked narrow range ([-127, 127], the TFLite spec);
* a dynamic dimension (``shape_signature`` -1) is None. ``input_shapes`` binds it: the converter
  stores each tensor's shape at batch 1 beside its signature, and a dynamic dimension scales with
  the batch, so binding an input's batch to ``B`` makes every dynamic dimension ``B`` times its
  stored size (the kernels check every shape again when they are prepared);
* the ``"intq"`` metadata entry that :func:`intq.export_tflite` writes restores the graph's
  metadata (``float_tensor_of``, ``conversion_notes``, ...; its ``source`` stays the original
  model's) and node names. Every imported graph's metadata also has ``tflite_file`` (the path, or
  ``"<bytes>"``), ``tflite_description`` and ``tflite_metadata`` (the file's entry names).

The file is parsed and its tensors read by :mod:`intq.tflite.reader`; this module decides what
they mean as a graph. Only subgraph 0 is read. Operators intq has no kernel for, or of a version newer than the ones
LiteRT registers (:data:`intq.tflite.schema.MAX_VERSION`), stop the import with one
:class:`~intq.errors.UnsupportedOperatorError` listing them all with their operator indices.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.errors import IntqError, UnsupportedOperatorError
from intq.frontends.tflite_float import float_islands_as_onnx
from intq.frontends.tflite_state import StatePlan, state_plan
from intq.ir import Graph, Node, Tensor
from intq.limits import check_tensor_size
from intq.qmath import QuantParams
from intq.ir.facts import STORED_SHAPES
from intq.tflite import metadata
from intq.tflite.errors import TfliteImportError
from intq.tflite.options import OPTIONS, options_to_attrs
from intq.tflite.reader import TfliteFile, ints, metadata_bytes, operator_code_entry, read_model, read_tensor, text
from intq.tflite.schema import MAX_VERSION, builtin_op_name, operator_code

__all__ = ["TfliteImportError", "load_tflite"]

_WEIGHT_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"})
#: Option values the kernels assume (others change the operator's meaning): op -> {attr: value}.
_ASSUMED_OPTIONS = {"FULLY_CONNECTED": {"weights_format": "DEFAULT"}}


def load_tflite(model: str | os.PathLike | bytes, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Read a ``.tflite`` file (path or bytes) as an integer :class:`~intq.ir.Graph`.

    ``input_shapes`` binds dynamic input dimensions (``{"input": (8, 28, 28, 1)}``); without it
    they stay None and ``metadata["stored_shapes"]`` keeps the shapes the file stores for those
    tensors (their batch-1 sizes), from which :class:`intq.Interpreter` binds the batch of each
    run (:func:`intq.runtime.plan.rebatch`), as LiteRT's ``resize_tensor_input`` does. A file intq
    wrote from a graph with bound shapes comes back with those shapes (its -1 signatures are there
    for LiteRT; the interpreter binds any batch anyway). Raises :class:`TfliteImportError` (naming the file) for a corrupt file or an
    unreadable tensor, :class:`~intq.errors.UnsupportedOperatorError` listing every operator
    intq cannot run.
    """
    f = read_model(model)
    m, where = f.model, f.where
    sub = m.subgraphs[0]
    plan = state_plan(f) or StatePlan()
    ops = _operator_types(f, plan.dropped)
    names = _tensor_names(sub)
    nodes = [_node(op, ops[k], k, names, where, plan.rename) for k, op in enumerate(sub.operators or [])
             if k not in plan.dropped]
    restored, node_names = _intq_metadata(f)
    # a file intq wrote from a bound graph comes back bound (its -1 only let LiteRT resize it)
    bind_stored = node_names is not None and STORED_SHAPES not in restored
    tensors = _tensors(f, names, nodes, input_shapes, plan.resource_tensors, bind_stored)
    for t in tensors.values():  # a bound dynamic batch multiplies the stored sizes: check them again
        if t.is_static and not t.is_constant:
            check_tensor_size(t.shape, t.dtype, f"{where}: tensor {t.name!r} (input_shapes bound)")
    if node_names is not None and len(node_names) == len(nodes) and len(set(node_names)) == len(nodes):
        nodes = [n.with_(name=str(name)) for n, name in zip(nodes, node_names)]
    meta = {"source": "tflite", **restored, "tflite_file": where, "tflite_description": text(m.description),
            "tflite_metadata": tuple(text(e.name) for e in m.metadata or [])}
    meta.pop(STORED_SHAPES, None)  # an exported graph's own entry: this file's shapes decide
    stored = _stored_shapes(f, names, tensors)
    if stored:
        meta[STORED_SHAPES] = stored
    if plan.variables:  # resource variables: state in and out (intq.frontends.tflite_state)
        meta["state"] = tuple({"variable": v["variable"], "input": names[v["input"]] if v["input"] is not None else None,
                               "output": names[v["output"]], "initial": v["initial"].tolist(),
                               "dtype": v["initial"].dtype.name} for v in plan.variables)
    name = text(sub.name) or (Path(where).stem if where != "<bytes>" else "tflite")
    inputs = [names[i] for i in ints(sub.inputs) + plan.inputs]
    outputs = [names[plan.rename.get(i, i)] for i in ints(sub.outputs)] + [names[i] for i in plan.outputs]
    try:
        graph = Graph(nodes, tensors, inputs, outputs, name=name, metadata=meta)
        return float_islands_as_onnx(graph)
    except IntqError as e:
        raise type(e)(f"{where}: {e}") from e


# --------------------------------------------------------------------------------- operators


def _operator_types(f: TfliteFile, skip: set[int] = frozenset()) -> list[str]:
    """The builtin name of every operator; one error lists every operator intq cannot run (the
    operators in ``skip``, resource-variable ones :mod:`intq.frontends.tflite_state` rewrote, aside)."""
    problems: dict[str, list[int]] = {}
    names = []
    for k, op in enumerate(f.model.subgraphs[0].operators or []):
        oc = operator_code_entry(f, op, k)
        code = operator_code(oc)
        name = builtin_op_name(code)
        names.append(name or f"<code {code}>")
        if k in skip:
            continue
        if name == "CUSTOM" and text(oc.customCode) in CUSTOM_OPS:
            names[-1] = text(oc.customCode)
            continue
        if name == "CUSTOM":
            problem = f"custom operator {text(oc.customCode)!r}"
        elif name not in MAX_VERSION:
            problem = f"{name or f'unknown builtin code {code}'}"
        elif oc.version > MAX_VERSION[name]:
            problem = f"{name} version {oc.version} (intq reads versions 1..{MAX_VERSION[name]})"
        elif unassumed := _unassumed_options(name, op):
            problem = f"{name} with {unassumed}"
        else:
            continue
        problems.setdefault(problem, []).append(k)
    if problems:
        listed = "; ".join(f"{p} at operator{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))}"
                           for p, ks in problems.items())
        raise UnsupportedOperatorError(
            f"{f.where}: {sum(map(len, problems.values()))} operator(s) intq cannot run: {listed}. "
            f"intq runs: {', '.join(sorted(MAX_VERSION))}")
    return names


def _unassumed_options(op_type: str, op: schema.OperatorT) -> str:
    """``"weights_format='SHUFFLED4x16INT8'"`` when an option differs from what the kernels assume."""
    assumed = _ASSUMED_OPTIONS.get(op_type)
    if not assumed or op.builtinOptions is None or type(op.builtinOptions).__name__ != f"{OPTIONS[op_type]}T":
        return ""
    attrs = options_to_attrs(op_type, op.builtinOptions)
    return ", ".join(f"{k}={attrs[k]!r}" for k, v in assumed.items() if k in attrs and attrs[k] != v)


def _convolution_2d_transpose_bias(options: bytes, where: str) -> dict[str, Any]:
    """MediaPipe's ``Convolution2DTransposeBias`` (mediapipe/util/tflite/operations/
    transpose_conv_bias.cc): its custom options are TFLite's ``TfLiteTransposeConvParams`` struct,
    copied raw — int32 ``padding`` (1 SAME, 2 VALID), ``stride_width``, ``stride_height``."""
    if len(options) < 12:
        raise TfliteImportError(f"{where}: Convolution2DTransposeBias options hold {len(options)} bytes, "
                                "not the 12 of (padding, stride_width, stride_height)")
    padding, stride_w, stride_h = (int(v) for v in np.frombuffer(options[:12], "<i4"))
    if padding not in (1, 2) or stride_w < 1 or stride_h < 1:
        raise TfliteImportError(f"{where}: Convolution2DTransposeBias options padding={padding}, strides "
                                f"{stride_h}x{stride_w} are not a transposed convolution's")
    return {"padding": "SAME" if padding == 1 else "VALID", "stride_w": stride_w, "stride_h": stride_h}


#: Custom operators intq reads: custom code -> parser of its custom options into attributes. Each is a
#: float operator whose semantics its authors' source documents; :mod:`intq.frontends.tflite_float`
#: writes it in intq's float ops (so it converts to builtins).
CUSTOM_OPS = {"Convolution2DTransposeBias": _convolution_2d_transpose_bias}


def _node(op: schema.OperatorT, op_type: str, index: int, names: list[str], where: str,
          rename: Mapping[int, int] = {}) -> Node:  # noqa: B006 (read only)
    """One operator as a node: its options table read back as attributes; an input in ``rename``
    reads the tensor it maps to (a variable read after its assignment)."""
    inputs = ["" if i == -1 else names[rename.get(i, i)] for i in ints(op.inputs)]
    outputs = [names[i] for i in ints(op.outputs)]
    if not any(inputs) or not outputs or -1 in ints(op.outputs):
        raise TfliteImportError(f"{where}: operator {index} ({op_type}) has inputs {ints(op.inputs)} and outputs "
                                f"{ints(op.outputs)}; every operator intq runs reads a tensor and writes one")
    if op_type in CUSTOM_OPS:
        options = bytes(op.customOptions) if op.customOptions is not None else b""
        return Node(op_type, f"{op_type.lower()}_{index}", inputs, outputs,
                    CUSTOM_OPS[op_type](options, f"{where}: operator {index} ({op_type})"))
    options = op.builtinOptions
    expected = OPTIONS[op_type]
    if options is not None and type(options).__name__ != f"{expected}T":
        raise TfliteImportError(f"{where}: operator {index} ({op_type}) carries {type(options).__name__[:-1]}, "
                                f"not {expected}")
    if options is None and expected is not None:
        options = _absent_options(expected)
    return Node(op_type, f"{op_type.lower()}_{index}", inputs, outputs, options_to_attrs(op_type, options))


def _absent_options(table: str):
    """The options an operator has when its file omits the table: what LiteRT's and TFLite Micro's
    shared parser (flatbuffer_conversions.cc) gives, a zero-initialised parameter struct — every
    number 0, every flag false (not the schema's defaults: a LEAKY_RELU without options has alpha 0,
    not 0.2; a CONV_2D has stride 0, which its kernel refuses)."""
    options = getattr(schema, f"{table}T")()
    for field, value in vars(options).items():
        if isinstance(value, bool):
            setattr(options, field, False)
        elif isinstance(value, (int, float)):
            setattr(options, field, type(value)(0))
    return options


# ----------------------------------------------------------------------------------- tensors


def _tensor_names(sub: schema.SubGraphT) -> list[str]:
    """Tensor names as stored; an empty or repeated name gets ``_{index}`` appended."""
    names, seen = [], set()
    for i, t in enumerate(sub.tensors or []):
        name = text(t.name)
        if not name or name in seen:
            name = f"{name or 'tensor'}_{i}"
        seen.add(name)
        names.append(name)
    return names


@dataclass(frozen=True)
class _TensorSpec:
    """A tensor as the file describes it, before dynamic dimensions are bound."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]  # the stored shape (dynamic dimensions at batch 1)
    dynamic: tuple[bool, ...]  # shape_signature == -1
    data: np.ndarray | None
    qparams: QuantParams | None

    def tensor(self, constant: bool, weights: bool, batch_scale: int | None) -> Tensor:
        qp = self.qparams
        if weights and qp is not None and self.dtype == np.int8 and not np.any(qp.zero_point):
            qp = QuantParams(qp.scale, qp.zero_point, qp.dtype, qp.axis, narrow_range=True)
        if constant:
            return Tensor(self.name, self.dtype, data=self.data, qparams=qp)
        shape = tuple(None if dyn and batch_scale is None else d * batch_scale if dyn else d
                      for d, dyn in zip(self.shape, self.dynamic))
        return Tensor(self.name, self.dtype, shape, qparams=qp)


def _tensors(f: TfliteFile, names: list[str], nodes: list[Node],
             input_shapes: Mapping[str, Sequence[int]] | None, skip: set[int] = frozenset(),
             bind_stored: bool = False) -> dict[str, Tensor]:
    """Every tensor of the subgraph: constants (a buffer, written by nobody) and values; those in
    ``skip`` (resource handles) are not tensors of the graph. With ``bind_stored`` and no
    ``input_shapes``, dynamic dimensions take their stored sizes."""
    sub = f.model.subgraphs[0]
    specs = {i: _tensor_spec(f, i, names[i]) for i in range(len(sub.tensors or [])) if i not in skip}
    written = {o for op in sub.operators or [] for o in ints(op.outputs)} | set(ints(sub.inputs))
    weights = {n.inputs[1] for n in nodes if n.op_type in _WEIGHT_OPS and len(n.inputs) > 1 and n.inputs[1]}
    scale = _batch_scale(sub, specs, names, input_shapes, f.where)
    if scale is None and bind_stored:
        scale = 1
    return {names[i]: spec.tensor(spec.data is not None and i not in written, names[i] in weights, scale)
            for i, spec in specs.items()}


def _stored_shapes(f: TfliteFile, names: list[str], tensors: Mapping[str, Tensor]) -> dict[str, tuple[int, ...]]:
    """``{name: the shape the file stores}`` for every non-constant tensor left with a dynamic
    (None) dimension."""
    out = {}
    for i, name in enumerate(names):
        t = tensors.get(name)
        if t is None:  # a resource handle, not a tensor of the graph
            continue
        if not t.is_constant and t.shape is not None and None in t.shape:
            out[name] = tuple(int(d) for d in read_tensor(f, i, name).shape)
    return out


def _tensor_spec(f: TfliteFile, i: int, name: str) -> _TensorSpec:
    what = f"{f.where}: tensor {i} {name!r}"
    t = read_tensor(f, i, what)
    qp = None
    if t.scale is not None:
        try:
            qp = QuantParams(t.scale, t.zero_point, t.dtype, t.axis)
        except IntqError as e:
            raise TfliteImportError(f"{what}: {e}") from e
    return _TensorSpec(name, t.dtype, t.shape, t.dynamic, t.data, qp)


def _batch_scale(sub: schema.SubGraphT, specs: Mapping[int, _TensorSpec], names: list[str],
                 input_shapes: Mapping[str, Sequence[int]] | None, where: str) -> int | None:
    """How many times its stored size every dynamic dimension is, from ``input_shapes``.

    None when nothing dynamic is bound. Inputs not in ``input_shapes`` keep their stored shape.
    """
    if not input_shapes:
        return None
    by_name = {names[i]: specs[i] for i in ints(sub.inputs)}
    unknown = sorted(set(input_shapes) - set(by_name))
    if unknown:
        raise TfliteImportError(f"{where}: input_shapes names {unknown}; the model's inputs are {sorted(by_name)}")
    factors = set()
    for name, bound in input_shapes.items():
        spec, bound = by_name[name], tuple(int(d) for d in bound)
        fixed_ok = all(b == d for b, d, dyn in zip(bound, spec.shape, spec.dynamic) if not dyn)
        if len(bound) != len(spec.shape) or not fixed_ok:
            sig = ["?" if dyn else d for d, dyn in zip(spec.shape, spec.dynamic)]
            raise TfliteImportError(f"{where}: input {name!r} has shape {sig}; cannot bind it to {list(bound)}")
        for b, d, dyn in zip(bound, spec.shape, spec.dynamic):
            if dyn:
                if d < 1 or b < 1 or b % d:
                    raise TfliteImportError(f"{where}: input {name!r}: a dynamic dimension stored as {d} "
                                            f"cannot be bound to {b}")
                factors.add(b // d)
    if len(factors) > 1:
        raise TfliteImportError(f"{where}: input_shapes scale the dynamic dimensions differently {sorted(factors)}; "
                                "intq binds one batch size for the whole model")
    return factors.pop() if factors else None


# ---------------------------------------------------------------------------------- metadata


def _intq_metadata(f: TfliteFile) -> tuple[dict[str, Any], list[str] | None]:
    """The graph metadata and node names :func:`intq.export_tflite` stored, if any."""
    raw = metadata_bytes(f, metadata.INTQ_METADATA)
    return metadata.decode(raw, f.where) if raw else ({}, None)
