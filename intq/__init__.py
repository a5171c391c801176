"""intq: integer-only int8 neural-network inference, bit-exact and explained.

The arithmetic core lives in :mod:`intq.qmath`; the error types in :mod:`intq.errors`.
"""

from intq.errors import ContractError, IntqError, QuantizationError

__all__ = ["IntqError", "QuantizationError", "ContractError"]
__version__ = "0.1.0"
