"""The ``.tflite`` schema facts intq relies on: identifier, tensor types, operator codes, versions.

Every table here is read from (or checked against) LiteRT's generated schema
(``ai_edge_litert.schema_py_generated``), the one description of the format intq uses:

* a ``.tflite`` file is a schema-v3 ``Model`` flatbuffer whose bytes 4..8 are ``TFL3``;
* a tensor's ``TensorType`` code maps one to one onto the numpy dtype intq reads and writes it as;
* a builtin operator's code is ``max(builtin_code, deprecated_builtin_code)``: codes past 126 do
  not fit the deprecated int8 field, which then holds the placeholder 127; files written before
  code 127 ran out fill only the deprecated field.
"""

from __future__ import annotations

import numbers

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.tflite.errors import UnknownOperatorError

#: Flatbuffer file identifier, bytes 4..8 of every ``.tflite`` file.
FILE_IDENTIFIER = b"TFL3"
#: The ``Model.version`` intq writes (the schema version LiteRT and TFLM read).
SCHEMA_VERSION = 3
#: ``deprecated_builtin_code`` of operators whose code does not fit it (127).
PLACEHOLDER_CODE = schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES

#: numpy dtype -> TFLite ``TensorType`` code, for every dtype intq reads and writes.
TENSOR_TYPES: dict[np.dtype, int] = {
    np.dtype(np.int8): schema.TensorType.INT8,
    np.dtype(np.uint8): schema.TensorType.UINT8,
    np.dtype(np.int16): schema.TensorType.INT16,
    np.dtype(np.int32): schema.TensorType.INT32,
    np.dtype(np.int64): schema.TensorType.INT64,
    np.dtype(np.float32): schema.TensorType.FLOAT32,
    np.dtype(np.bool_): schema.TensorType.BOOL,  # comparison outputs
    np.dtype(np.float16): schema.TensorType.FLOAT16,  # the converter's float16 weights (read, widened on import)
}

#: TFLite TensorType code -> the numpy dtype intq reads it as (the inverse of :data:`TENSOR_TYPES`).
TENSOR_TYPE_DTYPES: dict[int, np.dtype] = {code: dtype for dtype, code in TENSOR_TYPES.items()}

#: TFLite TensorType code -> its schema name (``9`` -> ``"INT8"``), for messages.
TENSOR_TYPE_NAMES: dict[int, str] = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}

# Builtin operator name -> code, e.g. "CONV_2D" -> 3 (the placeholder 127 is not an operator).
_BUILTIN_OPS: dict[str, int] = {
    name: value
    for name, value in vars(schema.BuiltinOperator).items()
    if name.isupper() and isinstance(value, int) and value != PLACEHOLDER_CODE
}
_BUILTIN_NAMES: dict[int, str] = {code: name for name, code in _BUILTIN_OPS.items()}

#: Builtin operator -> the highest operator version LiteRT's builtin resolver registers for it
#: (tflite/core/kernels/register.cc; operators registered without versions: 1). A ``.tflite``
#: operator of a higher version uses a feature newer than intq knows. Listed: operators intq has
#: kernels for, and the float ones it reads as float operators (DIV, ABS ... SQUARE: version 1).
MAX_VERSION: dict[str, int] = {
    "ADD": 5, "ARG_MAX": 3, "ARG_MIN": 3, "AVERAGE_POOL_2D": 3, "BATCH_MATMUL": 4,
    "BATCH_TO_SPACE_ND": 4, "BROADCAST_TO": 3, "CAST": 6, "CONCATENATION": 4, "CONV_2D": 8, "DEPTH_TO_SPACE": 2,
    "DEPTHWISE_CONV_2D": 7, "DEQUANTIZE": 6, "DIV": 2, "EQUAL": 5, "FULLY_CONNECTED": 13, "GATHER": 7, "GELU": 2,
    "GREATER": 2, "GREATER_EQUAL": 3, "HARD_SWISH": 1, "L2_NORMALIZATION": 2, "LEAKY_RELU": 2,
    "LESS": 3, "LESS_EQUAL": 2, "LOG_SOFTMAX": 2, "LOGISTIC": 3, "MAX_POOL_2D": 3, "MAXIMUM": 4,
    "MEAN": 3, "MINIMUM": 4, "MUL": 7, "NOT_EQUAL": 4, "PACK": 4, "PAD": 5, "PADV2": 5, "PRELU": 1,
    "QUANTIZE": 4, "REDUCE_MAX": 3, "REDUCE_MIN": 3, "RELU": 3, "RELU6": 3, "RELU_N1_TO_1": 1,
    "RESHAPE": 1, "SELECT_V2": 2, "RESIZE_BILINEAR": 4, "RESIZE_NEAREST_NEIGHBOR": 4, "RSQRT": 3, "SHAPE": 1, "SLICE": 6,
    "SOFTMAX": 3, "SPACE_TO_BATCH_ND": 4, "SPACE_TO_DEPTH": 2, "SPLIT": 4, "SPLIT_V": 2, "SQUARED_DIFFERENCE": 2, "SQUEEZE": 2,
    "STRIDED_SLICE": 8, "SUB": 5, "SUM": 2, "TANH": 3, "TRANSPOSE": 7, "TRANSPOSE_CONV": 5,
    # float-only (float .tflite, float islands of "int8" files): version 1 is the float32 form
    "ABS": 1, "COS": 1, "EXP": 1, "FLOOR": 1, "LOG": 1, "NEG": 1, "SIN": 1, "SQRT": 1, "SQUARE": 1,
}

#: Builtin operator -> the version intq writes when it is not 1: LiteRT registers these from a
#: later version only (register.cc: BROADCAST_TO from 2; TFLM ignores versions).
MIN_VERSION: dict[str, int] = {"BROADCAST_TO": 2}


def is_tflite_bytes(data: bytes) -> bool:
    """True when ``data`` carries the ``.tflite`` flatbuffer identifier ``TFL3`` (bytes 4..8)."""
    return len(data) >= 8 and bytes(data[4:8]) == FILE_IDENTIFIER


def builtin_op_code(op: str | int) -> int:
    """Return the TFLite ``BuiltinOperator`` code of ``op`` (a name like ``"CONV_2D"`` or a code).

    Names are matched case-insensitively. Raises :class:`UnknownOperatorError` for anything
    that is not a builtin operator of the installed schema.
    """
    if isinstance(op, str):
        code = _BUILTIN_OPS.get(op.upper())
        if code is None:
            raise UnknownOperatorError(
                f"{op!r} is not a TFLite builtin operator name (expected e.g. 'CONV_2D', "
                "'FULLY_CONNECTED'; see ai_edge_litert.schema_py_generated.BuiltinOperator)"
            )
        return code
    if isinstance(op, numbers.Integral) and not isinstance(op, bool):
        if int(op) not in _BUILTIN_NAMES:
            raise UnknownOperatorError(f"{op!r} is not a TFLite builtin operator code")
        return int(op)
    raise UnknownOperatorError(f"operator must be a builtin name or code, got {op!r}")


def builtin_op_name(code: int) -> str | None:
    """The builtin operator name of ``code`` (``3`` -> ``"CONV_2D"``), or None if there is none."""
    return _BUILTIN_NAMES.get(int(code))


def operator_code(oc: schema.OperatorCodeT) -> int:
    """The builtin code an ``OperatorCode`` stands for: ``max(builtin_code, deprecated_builtin_code)``."""
    return max(int(oc.builtinCode), int(oc.deprecatedBuiltinCode))


def deprecated_code(code: int) -> int:
    """The ``deprecated_builtin_code`` written beside ``code``: ``min(code, 127)``."""
    return min(code, PLACEHOLDER_CODE)
