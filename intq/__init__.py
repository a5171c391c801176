"""intq: integer-only int8 neural-network inference, bit-exact and explained.

Public API:

* :func:`load` — an ONNX path or proto, or a torch module, as a float graph;
* :func:`calibrate` — the range of every float tensor over representative data;
* :func:`quantize` — the whole pipeline to an integer-only graph (TFLite int8 builtins, NHWC;
  :mod:`intq.pipeline`: load, simplify, check, calibrate, convert, and export with its check);
* :func:`compare` — float vs integer, tensor by tensor (SQNR, error in LSB, hints);
* :class:`Interpreter` — run a float or integer graph, see every tensor; integer graphs run
  bit-exactly as a named target runtime (``"tflite"``: TensorFlow Lite Micro, ``"litert-ref"``);
* :func:`export_tflite` — write an integer graph as a ``.tflite`` file;
* :func:`export_c` — write it as C99 (``.c`` + ``.h``) for microcontrollers, bit-exact with TFLite Micro;
* :func:`export_onnx` — write it as a QDQ or QOperator ONNX model onnxruntime runs (target ``"ort"``);
* :func:`set_threads` — the BLAS/OpenMP threads intq's work runs with (default 1; ``INTQ_THREADS``);
  every exporter runs the file in its runtime on a few samples before writing it and refuses a
  difference from the target that claims it (:mod:`intq.export.check`; the report is ``.check``);
* ``intq.qat`` — quantization-aware training in PyTorch (``import intq`` does not import torch).

The arithmetic core is :mod:`intq.qmath`; errors are in :mod:`intq.errors`.

``import intq`` is cheap: each name above (and each subpackage, ``intq.kernels``...) is imported
on first use (PEP 562), so the ``intq`` command starts, and answers Ctrl-C, at once.
"""

from importlib import import_module

from intq.errors import ContractError, GraphError, IntqError, QuantizationError, UnsupportedOperatorError

#: public name -> the module that defines it (imported on first access)
_LAZY = {
    "load": "intq.frontends",
    "calibrate": "intq.calibration",
    "CalibrationTable": "intq.calibration",
    "quantize": "intq.pipeline",
    "compare": "intq.analysis",
    "Interpreter": "intq.runtime",
    "export_tflite": "intq.export.tflite_writer",
    "export_c": "intq.export.c",
    "compile_c": "intq.export.c",
    "export_onnx": "intq.export.onnx",
    "set_threads": "intq.threads",
    "get_threads": "intq.threads",
}

__all__ = [
    "load",
    "calibrate",
    "quantize",
    "compare",
    "Interpreter",
    "export_tflite",
    "export_c",
    "compile_c",
    "export_onnx",
    "CalibrationTable",
    "set_threads",
    "get_threads",
    "IntqError",
    "QuantizationError",
    "ContractError",
    "GraphError",
    "UnsupportedOperatorError",
]
from intq.version import __version__  # noqa: E402  (the one copy)


def __getattr__(name: str):
    """The public names and the subpackages (``intq.qat``, ``intq.kernels``...), imported on first access."""
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:
            return import_module(f"intq.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"intq.{name}":
                raise
    raise AttributeError(f"module 'intq' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
