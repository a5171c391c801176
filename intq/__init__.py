"""intq: integer-only int8 neural-network inference, bit-exact and explained.

Public API:

* :func:`load` — an ONNX path or proto, or a torch module, as a float graph;
* :func:`calibrate` — the range of every float tensor over representative data;
* :func:`quantize` — the whole pipeline to an integer-only graph (TFLite int8 builtins, NHWC);
* :class:`Interpreter` — run a float or integer graph, see every tensor; integer graphs run
  bit-exactly as a named target runtime (``"tflite"``: TensorFlow Lite Micro, ``"litert-ref"``);
* :func:`export_tflite` — write an integer graph as a ``.tflite`` file;
* :func:`export_onnx` — write it as a QDQ or QOperator ONNX model onnxruntime runs (target ``"ort"``);
* ``intq.qat`` — quantization-aware training in PyTorch (imported on first use: ``import intq``
  does not import torch).

The arithmetic core is :mod:`intq.qmath`; errors are in :mod:`intq.errors`.
"""

from intq.calibration import CalibrationTable, calibrate
from intq.convert import quantize
from intq.errors import ContractError, GraphError, IntqError, QuantizationError, UnsupportedOperatorError
from intq.export.onnx_writer import export_onnx
from intq.export.tflite_writer import export_tflite
from intq.frontends import load
from intq.runtime import Interpreter

__all__ = [
    "load",
    "calibrate",
    "quantize",
    "Interpreter",
    "export_tflite",
    "export_onnx",
    "CalibrationTable",
    "IntqError",
    "QuantizationError",
    "ContractError",
    "GraphError",
    "UnsupportedOperatorError",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``intq.qat`` is imported on first access, so ``import intq`` needs no torch."""
    if name == "qat":
        import importlib

        return importlib.import_module("intq.qat")
    raise AttributeError(f"module 'intq' has no attribute {name!r}")
