"""Read a ``.tflite`` file: the parsed model, its operator codes, tensors, buffers and metadata.

:func:`read_model` parses a path or bytes into LiteRT's schema objects (``ModelT``) and checks
what every later step indexes with (the identifier, subgraph 0, tensor indices);
:func:`read_tensor` gives one tensor as the file stores it (dtype, shape and signature, constant
data, affine parameters). Every error is a :class:`TfliteImportError` naming the file. Building
an intq graph from what is read is :mod:`intq.frontends.from_tflite`'s job.

Storage conventions read here (those of the TFLite converter):

* a constant's buffer holds its data little-endian in C order, inside the flatbuffer or, for
  models over 2 GB, after it at ``offset`` (an offset of 0 or 1 means "no data");
* ``shape_signature`` marks dynamic dimensions with -1; ``shape`` holds them at batch 1;
* one scale is per tensor, several are along ``quantized_dimension``; float tensors ignore
  stored parameters, as the runtimes do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.limits import check_tensor_size
from intq.tflite.errors import TfliteImportError
from intq.tflite.schema import FILE_IDENTIFIER, TENSOR_TYPE_DTYPES, TENSOR_TYPE_NAMES, is_tflite_bytes

__all__ = ["TfliteFile", "StoredTensor", "read_model", "read_tensor", "operator_code_entry", "metadata_bytes",
           "ints", "text"]


@dataclass(frozen=True)
class TfliteFile:
    """A parsed ``.tflite`` file: its bytes, where they came from, and the schema objects."""

    data: bytes
    where: str  # the path, or "<bytes>": every message names it
    model: schema.ModelT


@dataclass(frozen=True)
class StoredTensor:
    """A tensor as the file stores it, before intq decides what it means."""

    dtype: np.dtype
    shape: tuple[int, ...]  # the stored shape (dynamic dimensions at batch 1)
    dynamic: tuple[bool, ...]  # shape_signature == -1
    data: np.ndarray | None  # the buffer as a C-order array; None for an empty buffer
    scale: np.ndarray | None  # float64 of the stored float32 scales; None: not quantized
    zero_point: np.ndarray | None  # int64, as many as scales
    axis: int | None  # quantized_dimension when there are several scales


def read_model(model: str | os.PathLike | bytes) -> TfliteFile:
    """Parse a ``.tflite`` path or bytes; a file that is not a readable ``.tflite`` raises."""
    data, where = _read(model)
    return TfliteFile(data, where, _parse(data, where))


def ints(values) -> list[int]:
    """A flatbuffer int vector (or None) as a list of Python ints."""
    return [] if values is None else [int(v) for v in values]


def text(value) -> str:
    """A flatbuffer string (bytes, or None) as ``str``."""
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def operator_code_entry(f: TfliteFile, op: schema.OperatorT, index: int) -> schema.OperatorCodeT:
    """The ``OperatorCode`` operator ``index`` of subgraph 0 refers to."""
    codes = f.model.operatorCodes or []
    if not 0 <= op.opcodeIndex < len(codes):
        raise TfliteImportError(f"{f.where}: corrupt .tflite: operator {index} has opcode index {op.opcodeIndex}")
    return codes[op.opcodeIndex]


def read_tensor(f: TfliteFile, i: int, what: str, subgraph: int = 0) -> StoredTensor:
    """Tensor ``i`` of ``subgraph`` (0: the model) as stored; ``what`` names it in errors
    (``"file: tensor 3 'x'"``)."""
    t = f.model.subgraphs[subgraph].tensors[i]
    dtype = TENSOR_TYPE_DTYPES.get(t.type)
    if dtype is None:
        raise TfliteImportError(f"{what} is {TENSOR_TYPE_NAMES.get(t.type, t.type)}; intq reads "
                                f"{', '.join(d.name for d in TENSOR_TYPE_DTYPES.values())}")
    if t.sparsity is not None or t.externalBuffer:
        raise TfliteImportError(f"{what} is sparse or stored outside the model; densify it when converting")
    shape = tuple(ints(t.shape))
    signature = ints(t.shapeSignature) or list(shape)
    if len(signature) != len(shape):
        raise TfliteImportError(f"{what}: shape {list(shape)} and shape_signature {signature} differ in rank")
    if any(d < 0 for d in shape) or any(s < -1 for s in signature):
        raise TfliteImportError(f"{what}: shape {list(shape)} / shape_signature {signature} has a negative dimension "
                                "(only a signature may say -1: dynamic)")
    check_tensor_size(shape, dtype, what)  # before any buffer of that size is made
    dynamic = tuple(s == -1 for s in signature)
    data = _constant(f, t, dtype, shape, what)
    scale, zero_point, axis = _affine(t, dtype, shape, what)
    return StoredTensor(dtype, shape, dynamic, data, scale, zero_point, axis)


def metadata_bytes(f: TfliteFile, name: str) -> bytes | None:
    """The contents of the model metadata entry ``name``; None when absent or empty."""
    entry = next((e for e in f.model.metadata or [] if text(e.name) == name), None)
    if entry is None or not 0 <= entry.buffer < len(f.model.buffers or []):
        return None
    return _buffer_bytes(f, entry.buffer)


# ----------------------------------------------------------------------------------- private


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
        raise TfliteImportError(f"{where}: not a .tflite model (no {FILE_IDENTIFIER.decode()!r} flatbuffer identifier; "
                                f"{len(data)} bytes)")
    try:
        m = schema.ModelT.InitFromPackedBuf(data, 0)
    except Exception as e:  # a damaged flatbuffer fails anywhere inside the generated reader
        raise TfliteImportError(f"{where}: corrupt .tflite flatbuffer ({type(e).__name__}: {e})") from None
    if not m.subgraphs:
        raise TfliteImportError(f"{where}: the model has no subgraph")
    sub = m.subgraphs[0]
    if not ints(sub.outputs):
        raise TfliteImportError(f"{where}: subgraph 0 declares no outputs, so it computes nothing")
    count = len(sub.tensors or [])
    refs = [*ints(sub.inputs), *ints(sub.outputs)]
    refs += [i for op in sub.operators or [] for i in (*ints(op.inputs), *ints(op.outputs)) if i != -1]
    bad = sorted({i for i in refs if not 0 <= i < count})
    if bad:
        raise TfliteImportError(f"{where}: corrupt .tflite: tensor indices {bad[:5]} out of range (0..{count - 1})")
    return m


def _buffer_bytes(f: TfliteFile, index: int) -> bytes | None:
    """Buffer ``index``'s contents, inside the flatbuffer or at its offset after it; None if empty."""
    buf = f.model.buffers[index]
    if buf.data is not None and len(buf.data):
        return np.asarray(buf.data, np.uint8).tobytes()
    if buf.offset > 1:  # large models keep buffers after the flatbuffer, at an offset in the file
        if buf.offset + buf.size > len(f.data):
            raise TfliteImportError(f"{f.where}: buffer {index} lies at bytes {buf.offset}..{buf.offset + buf.size}, "
                                    f"beyond the end of the file ({len(f.data)} bytes)")
        return f.data[buf.offset:buf.offset + buf.size]
    return None


def _constant(f: TfliteFile, t: schema.TensorT, dtype: np.dtype, shape: tuple[int, ...], what: str):
    """The tensor's buffer as a C-order array, or None for an empty buffer."""
    if not 0 <= t.buffer < len(f.model.buffers or []):
        raise TfliteImportError(f"{what}: buffer {t.buffer} does not exist")
    raw = _buffer_bytes(f, t.buffer)
    if raw is None:
        return None
    want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != want:
        raise TfliteImportError(f"{what}: buffer holds {len(raw)} bytes; shape {list(shape)} of "
                                f"{dtype.name} needs {want}")
    return np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def _affine(t: schema.TensorT, dtype: np.dtype, shape: tuple[int, ...], what: str):
    """``(scale, zero_point, axis)``: one scale per tensor, several along ``quantized_dimension``."""
    q = t.quantization
    if q is None or q.scale is None or len(q.scale) == 0:
        return None, None, None
    if q.details is not None:
        raise TfliteImportError(f"{what} uses custom quantization details; intq reads affine scales only")
    if dtype.kind not in "iu":
        return None, None, None  # float tensors ignore stored parameters, as the runtimes do
    scale = np.asarray(q.scale, np.float32).astype(np.float64)
    # LiteRT refuses a scale without as many zero points (measured: "non-null scale but null zero_point",
    # "has 0 zero_point values and 1 scale values"); TFLite Micro reads such a tensor as not quantized.
    if q.zeroPoint is None or len(q.zeroPoint) != len(scale):
        got = "no zero points" if q.zeroPoint is None else f"{len(q.zeroPoint)} zero points"
        raise TfliteImportError(f"{what}: {len(scale)} scales and {got}; a quantized tensor needs one zero point "
                                f"per scale (LiteRT refuses the file, TFLite Micro would read it as not quantized)")
    zero_point = np.asarray(q.zeroPoint, np.int64)
    if len(scale) == 1 and q.quantizedDimension:
        # One scale: per tensor, where the converter writes quantized_dimension 0. LiteRT's kernels ignore
        # the field, XNNPACK declines every node touching such an activation (CheckTensorQInt8Type; measured:
        # fuzz campaign seed 2026 case 7768 ran on LiteRT's optimized kernel instead): refused, not guessed.
        raise TfliteImportError(f"{what}: one scale (per-tensor quantization) with quantized_dimension "
                                f"{q.quantizedDimension}; a per-tensor tensor has quantized_dimension 0 (the runtimes "
                                "disagree on the file: XNNPACK declines it, LiteRT's kernels ignore the field)")
    axis = None
    if len(scale) > 1:
        axis = int(q.quantizedDimension)
        if not 0 <= axis < len(shape) or shape[axis] != len(scale):
            raise TfliteImportError(f"{what}: {len(scale)} scales do not fit axis {axis} of shape {list(shape)}")
    return scale, zero_point, axis
