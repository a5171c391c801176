"""intq: integer-only int8 neural-network inference, bit-exact and explained.

Public API: :func:`load` (ONNX path or proto, torch module), :func:`calibrate` (ranges of every
float tensor over data), :class:`Interpreter` (run a graph, see every tensor). The arithmetic
core is :mod:`intq.qmath`; errors are in :mod:`intq.errors`.
"""

from intq.calibration import CalibrationTable, calibrate
from intq.errors import ContractError, GraphError, IntqError, QuantizationError, UnsupportedOperatorError
from intq.frontends import load
from intq.runtime import Interpreter

__all__ = [
    "load",
    "calibrate",
    "CalibrationTable",
    "Interpreter",
    "IntqError",
    "QuantizationError",
    "ContractError",
    "GraphError",
    "UnsupportedOperatorError",
]
__version__ = "0.1.0"
