"""ONNX format constants and tables intq's writer and quantized-ONNX reader share.

* :data:`IR_VERSION`: 10, the IR version opset 21 needs and onnxruntime 1.2x reads (onnx 1.2x's
  default is newer than onnxruntime accepts).
* :data:`DEFAULT_OPSET` 21 (``ai.onnx``), :data:`MIN_OPSET` 13: per-axis ``QuantizeLinear`` /
  ``DequantizeLinear`` (the ``axis`` attribute) and ``Split``'s sizes as an input need 13.
* :data:`MS_DOMAIN` ``com.microsoft``, version 1: onnxruntime's contrib quantized operators
  (QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
  QLinearGlobalAveragePool, QGemm), which onnxruntime's CPU provider runs and other runtimes may not.
* :data:`OP_SINCE`: the first ``ai.onnx`` opset whose form of an operator intq writes (with int8 /
  uint8 tensors where intq gives it them), read from onnx's operator changelog.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

IR_VERSION = 10
DEFAULT_OPSET = 21
MIN_OPSET = 13
MAX_OPSET = 21
MS_DOMAIN = "com.microsoft"
MS_DOMAIN_VERSION = 1

#: numpy dtype -> ONNX element type, for the dtypes intq's graphs hold.
ELEMENT_TYPES: dict[np.dtype, int] = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}
#: ONNX element type -> numpy dtype.
ELEMENT_DTYPES: dict[int, np.dtype] = {v: k for k, v in ELEMENT_TYPES.items()}

#: ``ai.onnx`` operator -> the first opset of the form intq writes (int8 / uint8 where used).
OP_SINCE: dict[str, int] = {
    "QuantizeLinear": 13,  # per-axis (axis attribute): 13; per-tensor: 10
    "DequantizeLinear": 13,
    "QLinearConv": 10,
    "Conv": 11,
    "Gemm": 11,  # C optional
    "MatMul": 13,
    "Transpose": 13,
    "Reshape": 13,
    "MaxPool": 12,  # int8 / uint8 inputs
    "GlobalAveragePool": 1,
    "AveragePool": 19,  # dilations (19); count_include_pad and pads since 7
    "Pad": 13,  # pads and constant_value as inputs (11), int8 / uint8 (13)
    "Clip": 13,  # min / max as inputs, int8 / uint8 (12)
    "Split": 13,  # split sizes as an input
    "Concat": 13,
    "Add": 13,
    "Mul": 13,
    "Sub": 13,
    "Relu": 13,
    "LeakyRelu": 6,
    "Sigmoid": 13,
    "HardSwish": 14,
    "Tanh": 13,
    "Identity": 13,
    "Gather": 13,
    "Softmax": 13,
    "Slice": 13,
    "Resize": 13,  # roi and scales optional (13); int8 / uint8 since 11
    "Shape": 13,
    "Cast": 13,
    "Unsqueeze": 13,  # axes as an input
    "QLinearMatMul": 10,
    "ConvInteger": 10,
    "MatMulInteger": 10,
    "Sqrt": 13,
    "Reciprocal": 13,
    "Expand": 13,
    "Max": 13,  # int8 / uint8 since 12
    "Min": 13,
    "ReduceMax": 13,  # int8 / uint8 since 12 (13: bfloat16); axes an input from 18 (the writer follows the opset)
    "ReduceMin": 13,
    "ArgMax": 13,  # select_last_index since 12
    "ArgMin": 13,
    "Equal": 13,
    "Greater": 13,
    "GreaterOrEqual": 16,  # 12 introduced it; 16 adds bfloat16 (ONNX's current version below 21)
    "Less": 13,
    "LessOrEqual": 16,
    "Not": 1,
    "Where": 9,  # int8 / uint8 data; 16 adds bfloat16
    "PRelu": 16,  # int8 data not used: float island; 16 adds bfloat16 only, 9 has broadcasting  # axis -1 over the last dimension only
}


def element_type(dtype) -> int:
    """The ONNX element type of a numpy dtype intq writes (an internal invariant: intq's dtypes)."""
    return ELEMENT_TYPES[np.dtype(dtype)]
