"""TFLite builtin operators as intq's integer graphs name them: options <-> node attributes.

An integer graph's node is a TFLite builtin (``op_type="CONV_2D"``) whose attributes are the
fields of its TFLite options table in snake_case (``stride_w``, ``fused_activation_function``),
with enum fields as their TFLite names (``padding="SAME"``, ``fused_activation_function="RELU6"``).
:data:`OPTIONS` says which options table each operator reads; :func:`attrs_to_options` and
:func:`options_to_attrs` convert, so the exporter and the ``.tflite`` importer share one
definition. Missing attributes take the table's defaults. :data:`MAX_VERSION` says which
operator versions the importer accepts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ai_edge_litert import schema_py_generated as schema

from intq.errors import IntqError

#: Builtin operator -> the name of the options table it reads (None: no options).
OPTIONS: dict[str, str | None] = {
    "ADD": "AddOptions",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "BATCH_MATMUL": "BatchMatMulOptions",
    "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions",
    "CONCATENATION": "ConcatenationOptions",
    "CONV_2D": "Conv2DOptions",
    "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "DEQUANTIZE": None,
    "DIV": "DivOptions",
    "EQUAL": "EqualOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "GATHER": "GatherOptions",
    "GREATER": "GreaterOptions",
    "GREATER_EQUAL": "GreaterEqualOptions",
    "HARD_SWISH": "HardSwishOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LEAKY_RELU": "LeakyReluOptions",
    "LESS": "LessOptions",
    "LESS_EQUAL": "LessEqualOptions",
    "LOG_SOFTMAX": "LogSoftmaxOptions",
    "LOGISTIC": None,
    "MAX_POOL_2D": "Pool2DOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MEAN": "ReducerOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "MUL": "MulOptions",
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
    "SHAPE": "ShapeOptions",
    "SLICE": "SliceOptions",
    "SOFTMAX": "SoftmaxOptions",
    "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "SPLIT": "SplitOptions",
    "SQUEEZE": "SqueezeOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "SUB": "SubOptions",
    "SUM": "ReducerOptions",
    "TANH": None,
    "TRANSPOSE": "TransposeOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
}

#: Builtin operator -> the highest operator version LiteRT's builtin resolver registers for it
#: (tflite/core/kernels/register.cc; operators registered without versions: 1). A ``.tflite``
#: operator of a higher version uses a feature newer than intq knows. Only operators intq has
#: kernels for are listed (DIV has options but no integer kernel).
MAX_VERSION: dict[str, int] = {
    "ADD": 5, "ARG_MAX": 3, "ARG_MIN": 3, "AVERAGE_POOL_2D": 3, "BATCH_MATMUL": 4,
    "BATCH_TO_SPACE_ND": 4, "CONCATENATION": 4, "CONV_2D": 8, "DEPTH_TO_SPACE": 2,
    "DEPTHWISE_CONV_2D": 7, "DEQUANTIZE": 6, "EQUAL": 5, "FULLY_CONNECTED": 13, "GATHER": 7,
    "GREATER": 2, "GREATER_EQUAL": 3, "HARD_SWISH": 1, "L2_NORMALIZATION": 2, "LEAKY_RELU": 2,
    "LESS": 3, "LESS_EQUAL": 2, "LOG_SOFTMAX": 2, "LOGISTIC": 3, "MAX_POOL_2D": 3, "MAXIMUM": 4,
    "MEAN": 3, "MINIMUM": 4, "MUL": 7, "NOT_EQUAL": 4, "PACK": 4, "PAD": 5, "PADV2": 5, "PRELU": 1,
    "QUANTIZE": 4, "REDUCE_MAX": 3, "REDUCE_MIN": 3, "RELU": 3, "RELU6": 3, "RELU_N1_TO_1": 1,
    "RESHAPE": 1, "RESIZE_BILINEAR": 4, "RESIZE_NEAREST_NEIGHBOR": 4, "SHAPE": 1, "SLICE": 6,
    "SOFTMAX": 3, "SPACE_TO_BATCH_ND": 4, "SPACE_TO_DEPTH": 2, "SPLIT": 4, "SQUEEZE": 2,
    "STRIDED_SLICE": 8, "SUB": 5, "SUM": 2, "TANH": 3, "TRANSPOSE": 7, "TRANSPOSE_CONV": 5,
}

#: Option fields whose values are TFLite enums, stored in attributes by their names.
ENUM_FIELDS: dict[str, type] = {
    "padding": schema.Padding,
    "fused_activation_function": schema.ActivationFunctionType,
    "weights_format": schema.FullyConnectedOptionsWeightsFormat,
    "quantized_bias_type": schema.TensorType,
    "output_type": schema.TensorType,
    "out_type": schema.TensorType,
}

#: Fields that describe a storage detail the converter fills in, not the operator's meaning.
_IGNORED_FIELDS = frozenset({"quant_spec", "quantized_bias_type"})  # converter storage details


class TfliteOpError(IntqError, ValueError):
    """An operator or attribute has no TFLite equivalent."""


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
