"""Import a ``.tflite`` model as intq's integer graph: the TFLite builtins it already is.

A ``.tflite`` file from TensorFlow's converter (int8, or 16x8: int16 activations, int8 weights,
int64 biases) or from :func:`intq.export_tflite` becomes the :class:`~intq.ir.Graph` that
``intq.convert`` would have produced for it, so the integer kernels run it unchanged:

* every operator becomes a node named ``{op}_{index}`` (``conv_2d_3``: operator 3 of the file)
  whose ``op_type`` is the builtin's name — the operator code is
  ``max(builtin_code, deprecated_builtin_code)`` (files written before code 127 ran out only fill
  the deprecated field) — and whose attributes are its options table read back with
  :func:`intq.export.tflite_ops.options_to_attrs`; an omitted optional input (``-1``) is ``""``;
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

Only subgraph 0 is read. Operators intq has no kernel for, or of a version newer than the ones
LiteRT registers (:data:`intq.export.tflite_ops.MAX_VERSION`), stop the import with one
:class:`~intq.errors.UnsupportedOperatorError` listing them all with their operator indices.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.errors import IntqError, UnsupportedOperatorError
from intq.export.tflite_flatbuffer import TENSOR_TYPE_DTYPES, builtin_op_name
from intq.export.tflite_ops import MAX_VERSION, OPTIONS, options_to_attrs
from intq.export.tflite_writer import INTQ_METADATA, INTQ_METADATA_FORMAT
from intq.ir import Graph, Node, Tensor
from intq.qmath import QuantParams

__all__ = ["TfliteImportError", "load_tflite", "is_tflite_bytes"]

_IDENTIFIER = b"TFL3"  # flatbuffer file identifier, bytes 4..8 of every .tflite file
_WEIGHT_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"})
_TENSOR_TYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
#: Option values the kernels assume (others change the operator's meaning): op -> {attr: value}.
_ASSUMED_OPTIONS = {"FULLY_CONNECTED": {"weights_format": "DEFAULT"}}


class TfliteImportError(IntqError, ValueError):
    """A ``.tflite`` file cannot be read: corrupt, or using a feature intq does not import."""


def is_tflite_bytes(data: bytes) -> bool:
    """True when ``data`` carries the ``.tflite`` flatbuffer identifier ``TFL3``."""
    return len(data) >= 8 and bytes(data[4:8]) == _IDENTIFIER


def load_tflite(model: str | os.PathLike | bytes, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """Read a ``.tflite`` file (path or bytes) as an integer :class:`~intq.ir.Graph`.

    ``input_shapes`` binds dynamic input dimensions (``{"input": (8, 28, 28, 1)}``); without it
    they stay None. Raises :class:`TfliteImportError` (naming the file) for a corrupt file or an
    unreadable tensor, :class:`~intq.errors.UnsupportedOperatorError` listing every operator
    intq cannot run.
    """
    data, where = _read(model)
    m = _parse(data, where)
    sub = m.subgraphs[0]
    ops = _operator_types(m, sub, where)
    names = _tensor_names(sub)
    nodes = [_node(op, ops[k], k, names, where) for k, op in enumerate(sub.operators or [])]
    tensors = _tensors(m, data, sub, names, nodes, input_shapes, where)
    restored, node_names = _intq_metadata(m, data, where)
    if node_names is not None and len(node_names) == len(nodes) and len(set(node_names)) == len(nodes):
        nodes = [n.with_(name=str(name)) for n, name in zip(nodes, node_names)]
    meta = {"source": "tflite", **restored, "tflite_file": where, "tflite_description": _text(m.description),
            "tflite_metadata": tuple(_text(e.name) for e in m.metadata or [])}
    name = _text(sub.name) or (Path(where).stem if where != "<bytes>" else "tflite")
    try:
        return Graph(nodes, tensors, [names[i] for i in _ints(sub.inputs)], [names[i] for i in _ints(sub.outputs)],
                     name=name, metadata=meta)
    except IntqError as e:
        raise TfliteImportError(f"{where}: {e}") from e


# ----------------------------------------------------------------------------------- reading


def _read(model) -> tuple[bytes, str]:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<bytes>"
    path = os.fspath(model)
    try:
        return Path(path).read_bytes(), path
    except OSError as e:
        raise TfliteImportError(f"{path}: cannot read the file ({e.strerror or e})") from e


def _parse(data: bytes, where: str) -> schema.ModelT:
    """The whole model as schema objects; a file that is not a readable .tflite raises."""
    if not is_tflite_bytes(data):
        raise TfliteImportError(f"{where}: not a .tflite model (no 'TFL3' flatbuffer identifier; "
                                f"{len(data)} bytes)")
    try:
        m = schema.ModelT.InitFromPackedBuf(data, 0)
    except Exception as e:  # a damaged flatbuffer fails anywhere inside the generated reader
        raise TfliteImportError(f"{where}: corrupt .tflite flatbuffer ({type(e).__name__}: {e})") from None
    if not m.subgraphs:
        raise TfliteImportError(f"{where}: the model has no subgraph")
    sub = m.subgraphs[0]
    count = len(sub.tensors or [])
    refs = [*_ints(sub.inputs), *_ints(sub.outputs)]
    refs += [i for op in sub.operators or [] for i in (*_ints(op.inputs), *_ints(op.outputs)) if i != -1]
    bad = sorted({i for i in refs if not 0 <= i < count})
    if bad:
        raise TfliteImportError(f"{where}: corrupt .tflite: tensor indices {bad[:5]} out of range (0..{count - 1})")
    return m


def _ints(values) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------------- operators


def _operator_types(m: schema.ModelT, sub: schema.SubGraphT, where: str) -> list[str]:
    """The builtin name of every operator; one error lists every operator intq cannot run."""
    codes = m.operatorCodes or []
    problems: dict[str, list[int]] = {}
    names = []
    for k, op in enumerate(sub.operators or []):
        if not 0 <= op.opcodeIndex < len(codes):
            raise TfliteImportError(f"{where}: corrupt .tflite: operator {k} has opcode index {op.opcodeIndex}")
        oc = codes[op.opcodeIndex]
        code = max(int(oc.builtinCode), int(oc.deprecatedBuiltinCode))
        name = builtin_op_name(code)
        names.append(name or f"<code {code}>")
        if name == "CUSTOM":
            problem = f"custom operator {_text(oc.customCode)!r}"
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
            f"{where}: {sum(map(len, problems.values()))} operator(s) intq cannot run: {listed}. "
            f"intq runs: {', '.join(sorted(MAX_VERSION))}")
    return names


def _unassumed_options(op_type: str, op: schema.OperatorT) -> str:
    """``"weights_format='SHUFFLED4x16INT8'"`` when an option differs from what the kernels assume."""
    assumed = _ASSUMED_OPTIONS.get(op_type)
    if not assumed or op.builtinOptions is None or type(op.builtinOptions).__name__ != f"{OPTIONS[op_type]}T":
        return ""
    attrs = options_to_attrs(op_type, op.builtinOptions)
    return ", ".join(f"{k}={attrs[k]!r}" for k, v in assumed.items() if k in attrs and attrs[k] != v)


def _node(op: schema.OperatorT, op_type: str, index: int, names: list[str], where: str) -> Node:
    """One operator as a node: its options table read back as attributes."""
    options = op.builtinOptions
    expected = OPTIONS[op_type]
    if options is not None and type(options).__name__ != f"{expected}T":
        raise TfliteImportError(f"{where}: operator {index} ({op_type}) carries {type(options).__name__[:-1]}, "
                                f"not {expected}")
    inputs = ["" if i == -1 else names[i] for i in _ints(op.inputs)]
    outputs = [names[i] for i in _ints(op.outputs)]
    return Node(op_type, f"{op_type.lower()}_{index}", inputs, outputs, options_to_attrs(op_type, options))


# ----------------------------------------------------------------------------------- tensors


def _tensor_names(sub: schema.SubGraphT) -> list[str]:
    """Tensor names as stored; an empty or repeated name gets ``_{index}`` appended."""
    names, seen = [], set()
    for i, t in enumerate(sub.tensors or []):
        name = _text(t.name)
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


def _tensors(m: schema.ModelT, data: bytes, sub: schema.SubGraphT, names: list[str], nodes: list[Node],
             input_shapes: Mapping[str, Sequence[int]] | None, where: str) -> dict[str, Tensor]:
    """Every tensor of the subgraph: constants (a buffer, written by nobody) and values."""
    specs = [_tensor_spec(m, data, sub, i, names[i], where) for i in range(len(sub.tensors or []))]
    written = {o for op in sub.operators or [] for o in _ints(op.outputs)} | set(_ints(sub.inputs))
    weights = {n.inputs[1] for n in nodes if n.op_type in _WEIGHT_OPS and len(n.inputs) > 1 and n.inputs[1]}
    scale = _batch_scale(sub, specs, names, input_shapes, where)
    return {names[i]: spec.tensor(spec.data is not None and i not in written, names[i] in weights, scale)
            for i, spec in enumerate(specs)}


def _tensor_spec(m: schema.ModelT, data: bytes, sub: schema.SubGraphT, i: int, name: str, where: str) -> _TensorSpec:
    t = sub.tensors[i]
    what = f"{where}: tensor {i} {name!r}"
    dtype = TENSOR_TYPE_DTYPES.get(t.type)
    if dtype is None:
        raise TfliteImportError(f"{what} is {_TENSOR_TYPE_NAMES.get(t.type, t.type)}; intq reads "
                                f"{', '.join(d.name for d in TENSOR_TYPE_DTYPES.values())}")
    if t.sparsity is not None or t.externalBuffer:
        raise TfliteImportError(f"{what} is sparse or stored outside the model; densify it when converting")
    shape = tuple(_ints(t.shape))
    signature = _ints(t.shapeSignature) or list(shape)
    if len(signature) != len(shape):
        raise TfliteImportError(f"{what}: shape {list(shape)} and shape_signature {signature} differ in rank")
    dynamic = tuple(s == -1 for s in signature)
    data_array = _constant(m, data, t, dtype, shape, what)
    return _TensorSpec(name, dtype, shape, dynamic, data_array, _qparams(t, dtype, shape, what))


def _constant(m: schema.ModelT, data: bytes, t: schema.TensorT, dtype: np.dtype, shape: tuple[int, ...], what: str):
    """The tensor's buffer as a C-order array, or None for an empty buffer."""
    buffers = m.buffers or []
    if not 0 <= t.buffer < len(buffers):
        raise TfliteImportError(f"{what}: buffer {t.buffer} does not exist")
    buf = buffers[t.buffer]
    if buf.data is not None and len(buf.data):
        raw = np.asarray(buf.data, np.uint8).tobytes()
    elif buf.offset > 1:  # large models keep buffers after the flatbuffer, at an offset in the file
        raw = data[buf.offset:buf.offset + buf.size]
    else:
        return None
    want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != want:
        raise TfliteImportError(f"{what}: buffer holds {len(raw)} bytes; shape {list(shape)} of "
                                f"{dtype.name} needs {want}")
    return np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def _qparams(t: schema.TensorT, dtype: np.dtype, shape: tuple[int, ...], what: str) -> QuantParams | None:
    """Affine parameters: one scale per tensor, several along ``quantized_dimension``."""
    q = t.quantization
    if q is None or q.scale is None or len(q.scale) == 0:
        return None
    if q.details is not None:
        raise TfliteImportError(f"{what} uses custom quantization details; intq reads affine scales only")
    if dtype.kind not in "iu":
        return None  # float tensors ignore stored parameters, as the runtimes do
    scale = np.asarray(q.scale, np.float32).astype(np.float64)
    zero_point = np.zeros(len(scale), np.int64) if q.zeroPoint is None or len(q.zeroPoint) == 0 \
        else np.asarray(q.zeroPoint, np.int64)
    axis = None
    if len(scale) > 1:
        axis = int(q.quantizedDimension)
        if not 0 <= axis < len(shape) or shape[axis] != len(scale):
            raise TfliteImportError(f"{what}: {len(scale)} scales do not fit axis {axis} of shape {list(shape)}")
    try:
        return QuantParams(scale, zero_point, dtype, axis)
    except IntqError as e:
        raise TfliteImportError(f"{what}: {e}") from e


def _batch_scale(sub: schema.SubGraphT, specs: list[_TensorSpec], names: list[str],
                 input_shapes: Mapping[str, Sequence[int]] | None, where: str) -> int | None:
    """How many times its stored size every dynamic dimension is, from ``input_shapes``.

    None when nothing dynamic is bound. Inputs not in ``input_shapes`` keep their stored shape.
    """
    if not input_shapes:
        return None
    by_name = {names[i]: specs[i] for i in _ints(sub.inputs)}
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


def _intq_metadata(m: schema.ModelT, data: bytes, where: str) -> tuple[dict[str, Any], list[str] | None]:
    """The graph metadata and node names :func:`intq.export_tflite` stored, if any."""
    entry = next((e for e in m.metadata or [] if _text(e.name) == INTQ_METADATA), None)
    if entry is None or not 0 <= entry.buffer < len(m.buffers or []):
        return {}, None
    buf = m.buffers[entry.buffer]
    raw = np.asarray(buf.data, np.uint8).tobytes() if buf.data is not None else data[buf.offset:buf.offset + buf.size]
    if not raw:
        return {}, None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise TfliteImportError(f"{where}: the {INTQ_METADATA!r} metadata is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != INTQ_METADATA_FORMAT:
        return {}, None  # a future or foreign layout: the graph itself is still complete
    meta = doc.get("metadata")
    node_names = doc.get("node_names")
    return (_tuples(meta) if isinstance(meta, dict) else {}), (node_names if isinstance(node_names, list) else None)


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples graph metadata holds (dicts stay dicts)."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
