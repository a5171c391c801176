"""Write ``.tflite`` flatbuffers tensor by tensor and operator by operator.

:class:`TfliteModelBuilder` collects tensors (with their constant data and affine quantization
parameters) and builtin operators of one subgraph, then serializes them with the object API of
LiteRT's generated schema (``ai_edge_litert.schema_py_generated``) into a schema-v3 model with the
``TFL3`` file identifier. It only writes flatbuffers: it does not choose quantization parameters,
infer shapes, or check that an operator's inputs make sense for that operator.

Conventions of the written file, which follow the TFLite converter:

* buffer 0 is the empty sentinel; every constant tensor gets a buffer of its own, aligned to 16
  bytes, holding its data little-endian in C order; every other tensor points to buffer 0;
* scales are stored as float32 (TFLite's storage type), zero points as int64;
* one ``OperatorCode`` per distinct (builtin code, version), with both ``builtinCode`` and
  ``deprecatedBuiltinCode`` (``min(code, 127)``) set;
* model metadata entries (:meth:`TfliteModelBuilder.add_metadata`) get buffers after the tensors'.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.qmath import dtype_range
from intq.tflite.errors import TensorSpecError, TfliteExportError, TfliteGraphError, UnknownOperatorError
from intq.tflite.options import check_options
from intq.tflite.schema import (FILE_IDENTIFIER, SCHEMA_VERSION, TENSOR_TYPES, builtin_op_code, builtin_op_name,
                                deprecated_code)

__all__ = ["TfliteModelBuilder"]

_BUFFER_ALIGNMENT = 16  # bytes; the converter aligns every buffer so that kernels may read it in place


@dataclass(frozen=True)
class _Tensor:
    name: str
    shape: tuple[int, ...]
    type_code: int
    data: bytes | None
    scale: np.ndarray | None  # float32, length 1 or C
    zero_point: np.ndarray | None  # int64, same length as scale
    quantized_dimension: int
    shape_signature: tuple[int, ...] | None = None  # -1 on dynamic dimensions; None: none written


@dataclass(frozen=True)
class _Operator:
    opcode_index: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options_field: str | None  # "builtinOptions" or "builtinOptions2"
    options_type: int
    options: Any


class _AlignedBufferT(schema.BufferT):
    """A ``BufferT`` whose bytes are packed at a 16-byte aligned position, as the converter does."""

    def __init__(self, payload: bytes) -> None:
        super().__init__()
        self.payload = payload

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 (schema API name)
        size = len(self.payload)
        builder.StartVector(1, size, _BUFFER_ALIGNMENT)
        builder.head -= size
        builder.Bytes[builder.head : builder.head + size] = self.payload
        data = builder.EndVector()
        schema.BufferStart(builder)
        schema.BufferAddData(builder, data)
        return schema.BufferEnd(builder)


class TfliteModelBuilder:
    """Collects the tensors and builtin operators of a one-subgraph model and serializes it.

    Typical use::

        b = TfliteModelBuilder()
        x = b.add_tensor("x", (1, 4), np.int8, scale=[0.5], zero_point=[-3])
        w = b.add_tensor("w", (2, 4), np.int8, data=w_q, scale=[0.01], zero_point=[0])
        y = b.add_tensor("y", (1, 2), np.int8, scale=[0.25], zero_point=[1])
        b.add_operator("FULLY_CONNECTED", [x, w, -1], [y], schema.FullyConnectedOptionsT())
        b.set_io([x], [y])
        model_bytes = b.to_bytes()

    Tensors and operators are referred to by the integer indices the ``add_*`` methods return;
    ``-1`` marks an omitted optional operator input, as in TFLite. Every argument is validated
    when it is added, and the dataflow when the model is serialized; violations raise a
    :class:`TfliteExportError` subclass naming the tensor or operator. Operators run in the
    order they are added. Added items cannot be changed or removed.
    """

    def __init__(self, description: str = "intq", subgraph_name: str = "main") -> None:
        self._description = description
        self._subgraph_name = subgraph_name
        self._tensors: list[_Tensor] = []
        self._names: dict[str, int] = {}
        self._producer: dict[int, int] = {}  # tensor index -> index of the operator writing it
        self._operators: list[_Operator] = []
        self._opcodes: dict[tuple[int, int], int] = {}  # (builtin code, version) -> opcode index
        self._inputs: tuple[int, ...] | None = None
        self._outputs: tuple[int, ...] | None = None
        self._metadata: dict[str, bytes] = {}  # model metadata entries: name -> contents

    @property
    def num_tensors(self) -> int:
        """Number of tensors added so far (the next tensor gets this index)."""
        return len(self._tensors)

    def tensor_index(self, name: str) -> int:
        """Index of the tensor called ``name``; raises :class:`TensorSpecError` if there is none."""
        try:
            return self._names[name]
        except KeyError:
            raise TensorSpecError(f"no tensor named {name!r} has been added") from None

    # ----------------------------------------------------------------------------- tensors

    def add_tensor(
        self,
        name: str,
        shape: Sequence[int],
        dtype: Any,
        data: Any = None,
        scale: Any = None,
        zero_point: Any = None,
        quantized_dimension: int = 0,
        shape_signature: Sequence[int] | None = None,
    ) -> int:
        """Add a tensor and return its index.

        Args:
            name: unique, non-empty tensor name.
            shape: static shape, a sequence of non-negative ints (``()`` for a scalar).
            dtype: one of numpy int8, uint8, int16, int32, int64, float32.
            data: constant contents (array-like of exactly ``shape``); ``None`` for a
                non-constant tensor. Values must convert to ``dtype`` without change.
            scale, zero_point: affine quantization ``real = scale * (q - zero_point)``; give
                both or neither. Each is a scalar or 1-D array-like of length 1 (per-tensor) or
                ``shape[quantized_dimension]`` (per-axis); both must have the same length.
                Scales must be positive and finite *after* rounding to float32, which is what
                is stored; zero points must be integers representable in ``dtype``.
                Only integer tensors can be quantized.
            quantized_dimension: the axis of per-axis parameters (stored also for per-tensor).
            shape_signature: ``shape`` with -1 on the dimensions a runtime may resize (LiteRT's
                ``resize_tensor_input``: a dynamic batch); None writes no signature (all static).

        Raises:
            TensorSpecError: naming the tensor, for any violation of the above.
        """
        if not isinstance(name, str) or not name:
            raise TensorSpecError(f"tensor name must be a non-empty string, got {name!r}")
        if name in self._names:
            raise TensorSpecError(
                f"tensor {name!r}: name already used by tensor {self._names[name]}"
            )
        dims = _check_shape(name, shape)
        signature = None
        if shape_signature is not None:
            signature = tuple(int(d) for d in shape_signature)
            if len(signature) != len(dims) or any(s not in (d, -1) for s, d in zip(signature, dims)):
                raise TensorSpecError(f"tensor {name!r}: shape_signature {list(signature)} must be the shape "
                                      f"{list(dims)} with -1 on dynamic dimensions")
            if data is not None and -1 in signature:
                raise TensorSpecError(f"tensor {name!r}: a constant cannot have a dynamic dimension")
        np_dtype = _check_dtype(name, dtype)
        payload = None if data is None else _constant_bytes(name, data, dims, np_dtype)
        scale_arr, zp_arr = _check_quantization(
            name, dims, np_dtype, scale, zero_point, quantized_dimension
        )
        index = len(self._tensors)
        self._tensors.append(
            _Tensor(
                name=name,
                shape=dims,
                type_code=TENSOR_TYPES[np_dtype],
                data=payload,
                scale=scale_arr,
                zero_point=zp_arr,
                quantized_dimension=int(quantized_dimension),
                shape_signature=signature,
            )
        )
        self._names[name] = index
        return index

    # --------------------------------------------------------------------------- operators

    def add_operator(
        self,
        op: str | int,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: Any = None,
        *,
        version: int = 1,
    ) -> int:
        """Add a builtin operator (run after all previously added ones) and return its index.

        Args:
            op: builtin operator name (``"CONV_2D"``, case-insensitive) or code.
            inputs: tensor indices, ``-1`` for an omitted optional input.
            outputs: tensor indices of non-constant tensors no other operator writes.
            options: a schema options object such as ``Conv2DOptionsT()`` (copied); the
                ``BuiltinOptions``/``BuiltinOptions2`` union type is derived from its class.
                Mandatory for CONV_2D, DEPTHWISE_CONV_2D and the 2-D pools.
            version: operator version written to the ``OperatorCode`` (>= 1).

        Raises:
            UnknownOperatorError: unknown operator, or options of the wrong table.
            TfliteGraphError: a bad tensor index, a constant or already-written output.
        """
        code = builtin_op_code(op)
        op_name = builtin_op_name(code)
        where = f"operator {len(self._operators)} ({op_name})"
        if not isinstance(version, numbers.Integral) or isinstance(version, bool) or version < 1:
            raise UnknownOperatorError(f"{where}: version must be an int >= 1, got {version!r}")
        field, options_type, options_copy = check_options(where, op_name, options)
        ins = self._check_indices(where, "inputs", inputs, allow_omitted=True)
        outs = self._check_indices(where, "outputs", outputs, allow_omitted=False)
        if not outs:
            raise TfliteGraphError(f"{where}: an operator needs at least one output")
        for t in outs:
            tensor = self._tensors[t]
            if tensor.data is not None:
                raise TfliteGraphError(f"{where}: output tensor {tensor.name!r} is a constant")
            if t in self._producer or outs.count(t) > 1:
                raise TfliteGraphError(f"{where}: output tensor {tensor.name!r} is written twice")

        key = (code, int(version))
        opcode_index = self._opcodes.setdefault(key, len(self._opcodes))
        index = len(self._operators)
        self._operators.append(
            _Operator(opcode_index, ins, outs, field, options_type, options_copy)
        )
        for t in outs:
            self._producer[t] = index
        return index

    # ---------------------------------------------------------------------------- metadata

    def add_metadata(self, name: str, data: bytes) -> None:
        """Add a model metadata entry: ``data`` in a buffer of its own, found by ``name``.

        TFLite keeps such entries beside the graph (the converter writes ``min_runtime_version``);
        runtimes ignore names they do not know. Raises :class:`TfliteExportError` for an empty or
        repeated name, or contents that are not bytes.
        """
        if not isinstance(name, str) or not name:
            raise TfliteExportError(f"metadata name must be a non-empty string, got {name!r}")
        if name in self._metadata:
            raise TfliteExportError(f"metadata {name!r} is already set")
        if not isinstance(data, (bytes, bytearray)):
            raise TfliteExportError(f"metadata {name!r}: contents must be bytes, got {type(data).__name__}")
        self._metadata[name] = bytes(data)

    # ---------------------------------------------------------------------------- subgraph

    def set_io(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Declare the subgraph's input and output tensors (replacing any earlier declaration).

        Inputs must be non-constant tensors that no operator writes; outputs any tensors.
        Neither list may repeat a tensor. Raises :class:`TfliteGraphError`.
        """
        ins = self._check_indices("subgraph", "inputs", inputs, allow_omitted=False)
        outs = self._check_indices("subgraph", "outputs", outputs, allow_omitted=False)
        for kind, idx in (("inputs", ins), ("outputs", outs)):
            if len(set(idx)) != len(idx):
                raise TfliteGraphError(f"subgraph {kind} repeat a tensor: {list(idx)}")
        for t in ins:
            tensor = self._tensors[t]
            if tensor.data is not None:
                raise TfliteGraphError(f"subgraph input {tensor.name!r} is a constant tensor")
            if t in self._producer:
                raise TfliteGraphError(
                    f"subgraph input {tensor.name!r} is written by operator {self._producer[t]}"
                )
        self._inputs, self._outputs = ins, outs

    def to_bytes(self) -> bytes:
        """Serialize the model to ``.tflite`` bytes.

        Requires :meth:`set_io` to have been called, every non-constant operator input to be a
        subgraph input or written by an earlier operator, and every subgraph output to be
        written by an operator or be a subgraph input or constant. Raises :class:`TfliteGraphError`.
        The builder is not modified; it can be serialized again or extended afterwards.
        """
        if self._inputs is None or self._outputs is None:
            raise TfliteGraphError("set_io() must declare the subgraph inputs and outputs first")
        self._check_dataflow()
        model = self._model()
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=FILE_IDENTIFIER)
        return bytes(builder.Output())

    # ----------------------------------------------------------------------------- private

    def _check_indices(
        self, where: str, kind: str, indices: Sequence[int], *, allow_omitted: bool
    ) -> tuple[int, ...]:
        if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence):
            raise TfliteGraphError(f"{where}: {kind} must be a sequence of tensor indices")
        result = []
        for i in indices:
            if not isinstance(i, numbers.Integral) or isinstance(i, bool):
                raise TfliteGraphError(f"{where}: {kind} contain {i!r}, which is not a tensor index")
            i = int(i)
            if i == -1:
                if not allow_omitted:
                    raise TfliteGraphError(f"{where}: {kind} cannot be omitted (-1)")
                result.append(i)
                continue
            if not 0 <= i < len(self._tensors):
                raise TfliteGraphError(
                    f"{where}: {kind} contain tensor index {i}, but only "
                    f"{len(self._tensors)} tensors exist"
                )
            result.append(i)
        return tuple(result)

    def _check_dataflow(self) -> None:
        assert self._inputs is not None and self._outputs is not None
        available = {t for t, tensor in enumerate(self._tensors) if tensor.data is not None}
        available.update(self._inputs)
        for index, op in enumerate(self._operators):
            for t in op.inputs:
                if t != -1 and t not in available:
                    name = self._tensors[t].name
                    writer = self._producer.get(t)
                    why = "is never written" if writer is None else f"is written later by {writer}"
                    raise TfliteGraphError(
                        f"operator {index} ({self._op_name(op)}) reads tensor {name!r}, which "
                        f"is not a subgraph input or constant and {why}"
                    )
            available.update(op.outputs)
        for t in self._outputs:
            if t not in available:
                raise TfliteGraphError(f"subgraph output {self._tensors[t].name!r} is never written")

    def _op_name(self, op: _Operator) -> str:
        code = next(c for (c, _), i in self._opcodes.items() if i == op.opcode_index)
        return builtin_op_name(code)

    def _model(self) -> schema.ModelT:
        buffers: list[schema.BufferT] = [schema.BufferT()]  # index 0: the empty sentinel
        tensors = []
        for spec in self._tensors:
            t = schema.TensorT()
            t.name = spec.name
            t.shape = list(spec.shape)
            if spec.shape_signature is not None and -1 in spec.shape_signature:
                t.shapeSignature = list(spec.shape_signature)
            t.type = spec.type_code
            t.buffer = 0
            if spec.data is not None:
                t.buffer = len(buffers)
                buffers.append(_AlignedBufferT(spec.data))
            if spec.scale is not None:
                q = schema.QuantizationParametersT()
                q.scale = spec.scale.copy()
                q.zeroPoint = spec.zero_point.copy()
                q.quantizedDimension = spec.quantized_dimension
                t.quantization = q
            tensors.append(t)

        operators = []
        for spec in self._operators:
            o = schema.OperatorT()
            o.opcodeIndex = spec.opcode_index
            o.inputs = list(spec.inputs)
            o.outputs = list(spec.outputs)
            if spec.options_field == "builtinOptions":
                o.builtinOptionsType = spec.options_type
                o.builtinOptions = copy.deepcopy(spec.options)
            elif spec.options_field == "builtinOptions2":
                o.builtinOptions2Type = spec.options_type
                o.builtinOptions2 = copy.deepcopy(spec.options)
            operators.append(o)

        opcodes = []
        for (code, version), _ in sorted(self._opcodes.items(), key=lambda kv: kv[1]):
            c = schema.OperatorCodeT()
            c.builtinCode = code
            c.deprecatedBuiltinCode = deprecated_code(code)
            c.version = version
            opcodes.append(c)

        subgraph = schema.SubGraphT()
        subgraph.tensors = tensors
        subgraph.inputs = list(self._inputs or ())
        subgraph.outputs = list(self._outputs or ())
        subgraph.operators = operators
        subgraph.name = self._subgraph_name

        entries = []
        for name, payload in self._metadata.items():
            entry = schema.MetadataT()
            entry.name = name
            entry.buffer = len(buffers)
            buffers.append(_AlignedBufferT(payload))
            entries.append(entry)

        model = schema.ModelT()
        model.version = SCHEMA_VERSION
        model.description = self._description
        model.operatorCodes = opcodes
        model.subgraphs = [subgraph]
        model.buffers = buffers
        model.metadata = entries or None
        return model


# ---------------------------------------------------------------------------- validation helpers


def _check_shape(name: str, shape: Any) -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        raise TensorSpecError(f"tensor {name!r}: shape must be a sequence, got {shape!r}") from None
    for d in dims:
        if not isinstance(d, numbers.Integral) or isinstance(d, bool) or d < 0:
            raise TensorSpecError(
                f"tensor {name!r}: shape {shape!r} must contain non-negative ints only "
                "(dynamic dimensions are not supported)"
            )
    return tuple(int(d) for d in dims)


def _check_dtype(name: str, dtype: Any) -> np.dtype:
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        np_dtype = None
    if np_dtype not in TENSOR_TYPES:
        allowed = ", ".join(str(d) for d in TENSOR_TYPES)
        raise TensorSpecError(f"tensor {name!r}: dtype {dtype!r} is not one of {allowed}")
    return np_dtype


def _constant_bytes(name: str, data: Any, dims: tuple[int, ...], dtype: np.dtype) -> bytes:
    arr = np.asarray(data)
    if arr.shape != dims:
        raise TensorSpecError(
            f"tensor {name!r}: constant data has shape {arr.shape}, but the tensor's is {dims}"
        )
    if arr.size == 0:
        raise TensorSpecError(f"tensor {name!r}: constant data must not be empty")
    if arr.dtype.kind not in "biuf":
        raise TensorSpecError(f"tensor {name!r}: constant data of dtype {arr.dtype} is not numeric")
    with np.errstate(all="ignore"):
        converted = arr.astype(dtype)
        lossless = bool(np.array_equal(converted, arr))
    if not lossless:
        raise TensorSpecError(
            f"tensor {name!r}: constant data of dtype {arr.dtype} does not convert to {dtype} "
            "without changing values; convert (round/clip) it explicitly first"
        )
    return converted.astype(dtype.newbyteorder("<"), copy=False).tobytes(order="C")


def _check_quantization(
    name: str,
    dims: tuple[int, ...],
    dtype: np.dtype,
    scale: Any,
    zero_point: Any,
    quantized_dimension: Any,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    if (scale is None) != (zero_point is None):
        raise TensorSpecError(
            f"tensor {name!r}: give both scale and zero_point, or neither (got only "
            f"{'scale' if zero_point is None else 'zero_point'})"
        )
    if (
        not isinstance(quantized_dimension, numbers.Integral)
        or isinstance(quantized_dimension, bool)
        or not (0 <= quantized_dimension < max(len(dims), 1))
    ):
        raise TensorSpecError(
            f"tensor {name!r}: quantized_dimension {quantized_dimension!r} is not an axis of "
            f"shape {dims}"
        )
    if scale is None:
        return None, None
    if dtype.kind not in "iu":
        raise TensorSpecError(f"tensor {name!r}: only integer tensors can be quantized, not {dtype}")

    scale64 = np.atleast_1d(np.asarray(scale))
    zp_raw = np.atleast_1d(np.asarray(zero_point))
    if scale64.ndim != 1 or zp_raw.ndim != 1:
        raise TensorSpecError(f"tensor {name!r}: scale and zero_point must be scalars or 1-D")
    if scale64.dtype.kind not in "iuf" or zp_raw.dtype.kind not in "iuf":
        raise TensorSpecError(f"tensor {name!r}: scale and zero_point must be numeric")
    if len(scale64) != len(zp_raw):
        raise TensorSpecError(
            f"tensor {name!r}: {len(scale64)} scales but {len(zp_raw)} zero points"
        )
    count = len(scale64)
    if count == 0:
        raise TensorSpecError(f"tensor {name!r}: scale and zero_point must not be empty")
    if count > 1:
        axis_len = dims[quantized_dimension] if dims else 1
        if count != axis_len:
            raise TensorSpecError(
                f"tensor {name!r}: {count} per-axis scales, but axis {quantized_dimension} of "
                f"shape {dims} has length {axis_len} (use 1 scale for per-tensor)"
            )

    with np.errstate(all="ignore"):
        scale32 = scale64.astype(np.float32)
    bad = ~(np.isfinite(scale32) & (scale32 > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TensorSpecError(
            f"tensor {name!r}: scale[{i}] = {scale64[i].item()!r} is not positive and finite "
            "as float32"
        )

    lo, hi = dtype_range(dtype)
    zps = []
    for i, z in enumerate(zp_raw.tolist()):
        if isinstance(z, float) and not (math.isfinite(z) and z.is_integer()):
            raise TensorSpecError(f"tensor {name!r}: zero_point[{i}] = {z!r} is not an integer")
        if not lo <= int(z) <= hi:
            raise TensorSpecError(
                f"tensor {name!r}: zero_point[{i}] = {int(z)} is outside the {dtype} range "
                f"[{lo}, {hi}]"
            )
        zps.append(int(z))
    return scale32, np.asarray(zps, dtype=np.int64)
