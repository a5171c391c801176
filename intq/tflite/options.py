"""TFLite builtin operators' options tables as intq's node attributes, both ways.

An integer graph's node is a TFLite builtin (``op_type="CONV_2D"``) whose attributes are the
fields of its TFLite options table in snake_case (``stride_w``, ``fused_activation_function``),
with enum fields as their TFLite names (``padding="SAME"``, ``fused_activation_function="RELU6"``).
:data:`OPTIONS` says which options table each operator reads; :func:`attrs_to_options` and
:func:`options_to_attrs` convert, so the exporter and the ``.tflite`` importer share one
definition. Missing attributes take the table's defaults. :func:`check_options` says where a
schema options object goes in an ``Operator`` (``builtin_options`` or ``builtin_options_2``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from ai_edge_litert import schema_py_generated as schema

from intq.tflite.errors import TfliteOpError, UnknownOperatorError

#: Builtin operator -> the name of the options table it reads (None: no options).
OPTIONS: dict[str, str | None] = {
    "ABS": "AbsOptions",  # float-only builtins (float islands, float .tflite): ABS ... SQUARE
    "ADD": "AddOptions",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions",
    "BROADCAST_TO": "BroadcastToOptions",
    "CAST": "CastOptions",
    "CONCATENATION": "ConcatenationOptions",
    "CONV_2D": "Conv2DOptions",
    "COS": "CosOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "DEQUANTIZE": None,
    "DIV": "DivOptions",
    "EQUAL": "EqualOptions",
    "EXP": "ExpOptions",
    "FLOOR": None,
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "GATHER": "GatherOptions",
    "GELU": "GeluOptions",
    "GREATER": "GreaterOptions",
    "GREATER_EQUAL": "GreaterEqualOptions",
    "HARD_SWISH": "HardSwishOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "LESS": "LessOptions",
    "LESS_EQUAL": "LessEqualOptions",
    "LOG": None,
    "LOG_SOFTMAX": "LogSoftmaxOptions",
    "LOGISTIC": None,
    "MAX_POOL_2D": "Pool2DOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MEAN": "ReducerOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "MUL": "MulOptions",
    "NEG": "NegOptions",
    "NOT_EQUAL": "NotEqualOptions",
    "PACK": "PackOptions",
    "PAD": "PadOptions",
    "PADV2": "PadV2Options",
    "PRELU": None,
    "QUANTIZE": None,
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "RELU": None,
    "RELU6": None,
    "RELU_N1_TO_1": None,
    "RESHAPE": "ReshapeOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "RSQRT": None,
    "SELECT_V2": "SelectV2Options",
    "SHAPE": "ShapeOptions",
    "SIN": None,
    "SLICE": "SliceOptions",
    "SOFTMAX": "SoftmaxOptions",
    "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "SPLIT": "SplitOptions",
    "SPLIT_V": "SplitVOptions",
    "SQRT": None,
    "SQUARE": "SquareOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions",
    "SQUEEZE": "SqueezeOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "SUB": "SubOptions",
    "SUM": "ReducerOptions",
    "TANH": None,
    "TRANSPOSE": "TransposeOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
}

#: Option fields whose values are TFLite enums, stored in attributes by their names.
ENUM_FIELDS: dict[str, type] = {
    "padding": schema.Padding,
    "fused_activation_function": schema.ActivationFunctionType,
    "weights_format": schema.FullyConnectedOptionsWeightsFormat,
    "quantized_bias_type": schema.TensorType,
    "output_type": schema.TensorType,
    "out_type": schema.TensorType,
    "in_data_type": schema.TensorType,
    "out_data_type": schema.TensorType,
}

#: Fields that describe a storage detail the converter fills in, not the operator's meaning.
#: (``quantized_bias_type`` is kept: LiteRT's optimized 16x8 CONV_2D, TRANSPOSE_CONV and
#: FULLY_CONNECTED choose their kernel by it; the converter writes INT64.)
_IGNORED_FIELDS = frozenset({"quant_spec"})  # converter storage details

#: Operators whose default options (stride 0, no window) are unusable: options are mandatory.
REQUIRED_OPTIONS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D"})


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _enum_names(enum: type) -> dict[int, str]:
    # not k.isupper(): some members have lower-case letters (SHUFFLED4x16INT8)
    return {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}


def options_class(op: str):
    """The schema options class (``Conv2DOptionsT``) of ``op``, or None."""
    if op not in OPTIONS:
        raise TfliteOpError(f"{op!r} is not an operator intq writes; known: {', '.join(sorted(OPTIONS))}")
    name = OPTIONS[op]
    return None if name is None else getattr(schema, f"{name}T")


def default_attrs(op: str) -> dict[str, Any]:
    """The attributes of ``op`` with TFLite's defaults."""
    cls = options_class(op)
    return {} if cls is None else options_to_attrs(op, cls())


def attrs_to_options(op: str, attrs: Mapping[str, Any], node_name: str = "?"):
    """Build the options object of ``op`` from node attributes (unknown attributes are errors)."""
    cls = options_class(op)
    known = set(default_attrs(op))
    unknown = sorted(k for k in attrs if k not in known)
    if unknown:
        raise TfliteOpError(f"node {node_name!r} ({op}): attributes {unknown} are not TFLite options; known: {sorted(known)}")
    if cls is None:
        return None
    opts = cls()
    for key, value in attrs.items():
        if key in ENUM_FIELDS and isinstance(value, str):
            names = {n: v for v, n in _enum_names(ENUM_FIELDS[key]).items()}
            if value not in names:
                raise TfliteOpError(f"node {node_name!r} ({op}): {key}={value!r}; expected one of {sorted(names)}")
            value = names[value]
        if isinstance(value, tuple):
            value = list(value)
        setattr(opts, _camel(key), value)
    return opts


def options_to_attrs(op: str, options) -> dict[str, Any]:
    """Node attributes from an options object (enums by name, lists as tuples)."""
    if options is None:
        return {}
    attrs = {}
    for field, value in vars(options).items():
        key = _snake(field)
        if key in _IGNORED_FIELDS:
            continue
        if key in ENUM_FIELDS and isinstance(value, int):
            value = _enum_names(ENUM_FIELDS[key]).get(value, value)
        if hasattr(value, "tolist"):
            value = value.tolist()
        if isinstance(value, list):
            value = tuple(value)
        attrs[key] = value
    return attrs


def check_options(where: str, op_name: str, options: Any) -> tuple[str | None, int, Any]:
    """``(union field, union type code, a copy of options)`` of an operator's options object.

    The field is ``"builtinOptions"`` or ``"builtinOptions2"`` (None, type 0 without options).
    Options of another table than :data:`OPTIONS` names are rejected, because TFLite would
    silently parse the operator with default options instead; :data:`REQUIRED_OPTIONS` cannot
    go without. Raises :class:`UnknownOperatorError` naming ``where``.
    """
    expected = OPTIONS.get(op_name)
    if options is None:
        if op_name in REQUIRED_OPTIONS:
            raise UnknownOperatorError(f"{where}: needs a {expected}T options object")
        return None, 0, None
    cls = type(options)
    cls_name = cls.__name__
    table = cls_name[:-1] if cls_name.endswith("T") else ""
    if not table or getattr(schema, cls_name, None) is not cls:
        raise UnknownOperatorError(
            f"{where}: options must be a schema options object such as Conv2DOptionsT, got "
            f"{cls_name}"
        )
    if expected is not None and table != expected:
        raise UnknownOperatorError(f"{where}: takes {expected}T, not {cls_name}")
    for field, union in (("builtinOptions", schema.BuiltinOptions),
                         ("builtinOptions2", schema.BuiltinOptions2)):
        code = getattr(union, table, None)
        if isinstance(code, int) and code != 0:
            return field, code, copy.deepcopy(options)
    raise UnknownOperatorError(f"{where}: {cls_name} is not a builtin options table")
