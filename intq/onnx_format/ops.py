"""The operator table of intq's quantized ONNX: which ONNX forms stand for which integer operator.

The writer (:mod:`intq.onnx_format.writer`) emits these forms and the reader
(:mod:`intq.onnx_format.reader`) reads them back; both take the names from here, so a form one
side knows the other knows too (``tests/onnx_format/test_round_trip.py`` writes and reads every
operator the writer emits).

* :data:`UNITS`: a quantized operator as a unit: QDQ ``DequantizeLinear -> op -> QuantizeLinear``
  (``qdq``, the float operator onnxruntime's graph optimizer fuses into its integer kernel) and
  QOperator (``qoperator``: onnxruntime's integer operator). ``read`` says whether the reader reads
  the unit back as its integer operator (:data:`UNREAD` lists the ones it does not yet, and why).
* :data:`MOVEMENT`: 8-bit data movement, which moves codes unchanged in both formats.
* :data:`INTEGER_OPS`: ONNX's integer operators (no scales): ConvInteger, MatMulInteger.
* :data:`MS_SCHEMAS`: onnxruntime's contrib (``com.microsoft``) operators' input counts and
  attribute types (onnx's checker does not know them).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx


@dataclass(frozen=True)
class Unit:
    """One integer operator's quantized ONNX forms."""

    op: str  # intq's integer operator (TFLite builtin name)
    qdq: str | None  # the float operator between DequantizeLinear and QuantizeLinear
    qoperator: str | None  # onnxruntime's integer operator (None: QDQ in both formats)
    read: bool = True  # the reader reads the unit back as ``op``


UNITS: tuple[Unit, ...] = (
    Unit("CONV_2D", "Conv", "QLinearConv"),
    Unit("DEPTHWISE_CONV_2D", "Conv", "QLinearConv"),
    Unit("FULLY_CONNECTED", "Gemm", "QGemm"),
    Unit("BATCH_MATMUL", "MatMul", "QLinearMatMul"),
    Unit("ADD", "Add", "QLinearAdd"),
    Unit("MUL", "Mul", "QLinearMul"),
    Unit("LOGISTIC", "Sigmoid", "QLinearSigmoid"),
    Unit("LEAKY_RELU", "LeakyRelu", "QLinearLeakyRelu"),
    Unit("SOFTMAX", "Softmax", "QLinearSoftmax"),
    Unit("CONCATENATION", "Concat", "QLinearConcat"),
    Unit("MEAN", "GlobalAveragePool", "QLinearGlobalAveragePool"),
    Unit("HARD_SWISH", "HardSwish", None),
    Unit("RELU", "Relu", None),
    Unit("RELU6", "Clip", None),
    Unit("RELU_N1_TO_1", "Clip", None),
    Unit("AVERAGE_POOL_2D", "AveragePool", "QLinearAveragePool"),
)
#: Units the writer emits that the reader does not read back as their integer operator yet.
UNREAD: dict[str, str] = {}
#: intq operator -> its unit.
UNIT_OF: dict[str, Unit] = {u.op: u for u in UNITS}

#: onnxruntime's QOperator operators the reader reads.
QOPERATORS = frozenset(u.qoperator for u in UNITS if u.qoperator and u.read)
#: The float operators the reader reads as a QDQ unit (data movement included).
QDQ_UNITS = frozenset(u.qdq for u in UNITS if u.qdq and u.read) | {"MaxPool", "Reshape", "Flatten", "Transpose",
                                                                     "Squeeze", "Unsqueeze", "Identity"}
#: ONNX's integer operators (int32 outputs, zero points and no scales): CONV_INTEGER and MATMUL_INTEGER.
INTEGER_OPS = frozenset({"ConvInteger", "MatMulInteger"})
#: 8-bit data movement: codes move unchanged.
MOVEMENT = frozenset({"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "MaxPool", "Pad",
                      "Concat", "Split"})

_INT, _FLOAT = onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT
#: onnxruntime's contrib (com.microsoft) operators read here: (min, max) inputs and each attribute's
#: type, from onnxruntime's contrib schemas (onnx's checker does not know them; the ai.onnx nodes
#: are checked against their schemas by :func:`intq.onnx_format.checks.check_nodes`).
MS_SCHEMAS: dict[str, tuple[int, int, dict[str, int]]] = {
    "QGemm": (6, 9, {"transA": _INT, "transB": _INT, "alpha": _FLOAT, "beta": _FLOAT}),
    "QLinearAdd": (7, 8, {}),
    "QLinearMul": (7, 8, {}),
    "QLinearSigmoid": (4, 5, {}),
    "QLinearLeakyRelu": (4, 5, {"alpha": _FLOAT}),
    "QLinearSoftmax": (4, 5, {"axis": _INT, "opset": _INT}),
    "QLinearConcat": (5, 2 + 3 * 2**16, {"axis": _INT}),
    "QLinearGlobalAveragePool": (5, 5, {"channels_last": _INT}),
    "QLinearAveragePool": (5, 5, {"channels_last": _INT, "kernel_shape": onnx.AttributeProto.INTS,
                                  "strides": onnx.AttributeProto.INTS, "pads": onnx.AttributeProto.INTS,
                                  "count_include_pad": _INT, "auto_pad": onnx.AttributeProto.STRING,
                                  "ceil_mode": _INT, "dilations": onnx.AttributeProto.INTS}),
}
