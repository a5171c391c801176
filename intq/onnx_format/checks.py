"""Validation of an ONNX model at import: what must hold before intq builds anything from it.

:mod:`intq.frontends.from_onnx` calls these at the start of an import; each raises
:class:`~intq.onnx_format.errors.OnnxImportError` (or :class:`~intq.limits.TensorTooLargeError`)
naming the model, the node or tensor, and what is wrong:

* :func:`check_structure` — each domain imported once; at least one graph output, each named
  once; graph inputs and outputs of a real numeric or bool element type (complex, string and
  undefined types are refused: intq would drop an imaginary part or read objects).
* :func:`check_nodes` — every node against its operator schema in the model's opset
  (``onnx.checker.check_node``: attribute types, required and unknown attributes, input and
  output counts), so no importer, pass or operator meets an attribute of the wrong type.
* :func:`tensor_array` — an initializer or tensor attribute as a numpy array, after checking its
  data type, its dims (non-negative, within the size limit), and that its bytes are exactly what
  the dims need — inline ``raw_data``, the typed fields, or external data, which must be a regular
  file inside the model's folder (symlinks resolved) with an offset and length inside the file.
* :func:`check_sizes` — graph inputs and every tensor whose static shape ONNX shape inference
  knows, against the size limit (:mod:`intq.limits`): a 20-byte ``Expand`` to a terabyte is
  refused here, before anything is allocated.
* :func:`check_declared_outputs` — a graph output whose declared static shape contradicts the
  shape its operators compute.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from intq.limits import check_tensor_size
from intq.onnx_format.errors import OnnxImportError

#: Element types intq reads as numpy arrays (numbers and bool); the rest are refused by name.
READABLE_TYPES = frozenset({TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16,
                            TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL,
                            TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT32, TensorProto.UINT64})
#: ONNX's 4- and 2-bit integer types: read by the quantized importer at the float boundary only (a
#: DequantizeLinear of a graph input, a QuantizeLinear writing a graph output), as int8 codes.
NARROW_TYPES = frozenset({TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2})
#: Typed field holding the values when there is no raw_data (ONNX's TensorProto layout).
_TYPED_FIELD = {TensorProto.FLOAT: "float_data", TensorProto.DOUBLE: "double_data", TensorProto.INT64: "int64_data",
                TensorProto.UINT32: "uint64_data", TensorProto.UINT64: "uint64_data"}


def _error(message: str) -> OnnxImportError:
    return OnnxImportError(message)


def type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"unknown type {elem_type}"


def check_structure(proto: onnx.ModelProto, where: str, narrow: bool = False) -> None:
    """Opset entries, graph outputs, graph input and output types (module docstring); ``narrow``:
    graph inputs and outputs may also be of :data:`NARROW_TYPES` (a quantized model)."""
    domains = [o.domain or "ai.onnx" for o in proto.opset_import]
    repeated = sorted({d for d in domains if domains.count(d) > 1})
    if repeated:
        versions = [o.version for o in proto.opset_import if (o.domain or "ai.onnx") == repeated[0]]
        raise _error(f"{where}: the model imports the domain {repeated[0]!r} more than once (versions {versions}); "
                     "an exporter writes each domain once")
    g = proto.graph
    if not len(g.output):
        raise _error(f"{where}: the graph declares no outputs, so it computes nothing; add the tensors you want as "
                     "graph outputs")
    names = [o.name for o in g.output]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _error(f"{where}: graph output {twice[0]!r} is declared {names.count(twice[0])} times")
    inits = {t.name for t in g.initializer}
    for v in list(g.input) + list(g.output):
        if v.name in inits or not v.type.HasField("tensor_type"):
            continue
        elem = v.type.tensor_type.elem_type
        if elem not in READABLE_TYPES and not (narrow and elem in NARROW_TYPES):
            kind = "input" if any(v is i for i in g.input) else "output"
            raise _error(f"{where}: graph {kind} {v.name!r} has element type {type_name(elem)}; intq runs real "
                         "numbers and bools only (float, integer or bool types)")
    valid = set(TensorProto.DataType.values())
    for v in g.value_info:
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type not in valid:
            raise _error(f"{where}: value_info {v.name!r} has element type {v.type.tensor_type.elem_type}, which is "
                         "not an ONNX type")


#: integer attributes ONNX defines as flags (0 or 1); runtimes read other values differently
#: (onnxruntime's keepdims is ``value == 1``, intq's was ``value != 0``), so they are refused
FLAG_ATTRIBUTES = frozenset({"keepdims", "ceil_mode", "count_include_pad", "transA", "transB", "select_last_index",
                             "noop_with_empty_axes", "training_mode", "exclusive", "reverse", "allowzero",
                             "detect_negative", "detect_positive", "sorted", "largest", "storage_order", "fmod",
                             "center_point_box", "new_axis", "is_case_sensitive", "antialias", "exclude_outside",
                             "saturate", "transpose_a", "transpose_b"})


def check_nodes(proto: onnx.ModelProto, where: str) -> None:
    """Each node against its schema at the model's opset (nodes with subgraphs are refused earlier)."""
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = max(int(proto.ir_version), 3)
    ctx.opset_imports = {o.domain: int(o.version) for o in proto.opset_import}
    scope = onnx.checker.C.LexicalScopeContext()
    for i, node in enumerate(proto.graph.node):
        try:
            onnx.checker.C.check_node(node.SerializeToString(), ctx, scope)
        except Exception as e:  # onnx.checker.ValidationError (or a schema lookup failure)
            text = str(e).split("\n==>")[0].strip()
            raise _error(f"{where}: node {node.name or i!r} ({node.op_type}) does not fit the operator's definition "
                         f"in its opset: {text}") from None
        for a in node.attribute:
            if a.name in FLAG_ATTRIBUTES and a.type == onnx.AttributeProto.INT and a.i not in (0, 1):
                raise _error(f"{where}: node {node.name or i!r} ({node.op_type}) has {a.name}={a.i}; it is a flag: "
                             "0 or 1")


def _element_count(dims: Sequence[int], what: str) -> int:
    n = 1
    for d in dims:
        if d < 0:
            raise _error(f"{what}: dims {list(dims)} have a negative dimension")
        n *= int(d)
    return n


def tensor_array(t: onnx.TensorProto, what: str, folder: Path | None, narrow: bool = False) -> np.ndarray:
    """``t`` as a numpy array once its type, dims and bytes are consistent (module docstring).

    ``what`` names it in errors ("ONNX model 'm': initializer 'w'"); ``folder`` is the model's
    folder (external data must lie inside it; None: the model came as a proto, so external data
    cannot be located). ``narrow``: :data:`NARROW_TYPES` are read too (packed two or four codes a
    byte, low bits first; returned as ml_dtypes' int4 / uint4 / int2 / uint2 arrays).
    """
    if narrow and t.data_type in NARROW_TYPES:
        return _narrow_array(t, what, folder)
    if t.data_type not in READABLE_TYPES:
        raise _error(f"{what} has data type {type_name(t.data_type)}; intq reads numeric and bool tensors")
    dims = [int(d) for d in t.dims]
    count = _element_count(dims, what)
    dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
    check_tensor_size(dims, dtype, what)
    nbytes = count * np.dtype(dtype).itemsize
    if t.data_location == TensorProto.EXTERNAL:
        t = _with_external_bytes(t, what, folder, nbytes)
    elif t.HasField("raw_data") or t.raw_data:
        if len(t.raw_data) != nbytes:
            raise _error(f"{what}: holds {len(t.raw_data)} bytes; dims {dims} of {np.dtype(dtype).name} need {nbytes}")
    else:
        field = _TYPED_FIELD.get(t.data_type, "int32_data")
        have = len(getattr(t, field))
        if have != count:
            raise _error(f"{what}: holds {have} values in {field}; dims {dims} need {count}")
    try:
        return numpy_helper.to_array(t)
    except Exception as e:  # a layout numpy_helper cannot convert that the checks above did not foresee
        raise _error(f"{what}: cannot be read ({type(e).__name__}: {e})") from None


def _narrow_array(t: onnx.TensorProto, what: str, folder: Path | None) -> np.ndarray:
    """A 4- or 2-bit tensor once its packed byte count fits its dims (``ceil(n * bits / 8)`` bytes)."""
    dims = [int(d) for d in t.dims]
    count = _element_count(dims, what)
    bits = 4 if t.data_type in (TensorProto.INT4, TensorProto.UINT4) else 2
    nbytes = -(-count * bits // 8)
    if t.data_location == TensorProto.EXTERNAL:
        t = _with_external_bytes(t, what, folder, nbytes)
    elif t.HasField("raw_data") or t.raw_data:
        if len(t.raw_data) != nbytes:
            raise _error(f"{what}: holds {len(t.raw_data)} bytes; dims {dims} of {bits}-bit codes need {nbytes}")
    elif len(t.int32_data) != nbytes:  # packed bytes, one per int32 value
        raise _error(f"{what}: holds {len(t.int32_data)} values in int32_data; dims {dims} of {bits}-bit codes "
                     f"need {nbytes} packed bytes")
    try:
        return numpy_helper.to_array(t)
    except Exception as e:
        raise _error(f"{what}: cannot be read ({type(e).__name__}: {e})") from None


def _with_external_bytes(t: onnx.TensorProto, what: str, folder: Path | None, nbytes: int) -> onnx.TensorProto:
    """A copy of ``t`` with its external bytes inline, once the location is confined and the
    offset and length fit the file and the dims."""
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    if folder is None:
        raise _error(f"{what}: is stored in an external file ({location!r}); load the model from its path so "
                     "that the file can be found next to it")
    if not location or os.path.isabs(location):
        raise _error(f"{what}: external data location {location!r} must be a file name relative to the model's folder")
    base = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(base, location))
    if not path.startswith(base + os.sep):
        raise _error(f"{what}: external data {location!r} points outside the model's folder {folder}; intq reads "
                     "external data only from files next to the model")
    if not os.path.isfile(path):
        raise _error(f"{what}: external data file {location!r} does not exist in {folder}")
    try:
        offset = int(info.get("offset", 0))
        length = int(info.get("length", -1)) if "length" in info else None
    except ValueError:
        raise _error(f"{what}: external data offset/length {info.get('offset')!r}/{info.get('length')!r} are not "
                     "integers") from None
    size = os.path.getsize(path)
    if offset < 0 or offset > size:
        raise _error(f"{what}: external data offset {offset} is outside {location!r} ({size} bytes)")
    length = size - offset if length is None else length
    if length != nbytes or offset + length > size:
        raise _error(f"{what}: external data in {location!r} is {length} bytes at offset {offset} (file: {size} "
                     f"bytes); its dims need {nbytes}")
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(nbytes)
    inline = onnx.TensorProto()
    inline.CopyFrom(t)
    inline.data_location = TensorProto.DEFAULT
    del inline.external_data[:]
    inline.raw_data = data
    return inline


def check_sizes(where: str, bound: Mapping[str, Sequence[int]], dtypes: Mapping[str, np.dtype],
                inferred: Mapping[str, tuple[tuple[int | None, ...] | None, np.dtype]]) -> None:
    """Graph inputs (as bound) and every tensor whose inferred shape is static, within the size limit."""
    for name, shape in bound.items():
        check_tensor_size(shape, dtypes.get(name, np.float32), f"{where}: input {name!r}")
    for name, (shape, dtype) in inferred.items():
        if shape is not None and all(d is not None for d in shape):
            check_tensor_size(shape, dtype, f"{where}: tensor {name!r} (its shape as ONNX shape inference computes it)")


def check_declared_outputs(where: str, declared: Mapping[str, tuple[int | None, ...] | None],
                           computed: Mapping[str, tuple[int | None, ...] | None]) -> None:
    """A graph output's declared static dims must equal the ones its operators compute (where both are known)."""
    for name, want in declared.items():
        got = computed.get(name)
        if want is None or got is None:
            continue
        if len(want) != len(got) or any(w is not None and g is not None and w != g for w, g in zip(want, got)):
            raise _error(f"{where}: graph output {name!r} is declared with shape {['?' if w is None else w for w in want]}"
                         f", but its operators compute {['?' if g is None else g for g in got]}")
