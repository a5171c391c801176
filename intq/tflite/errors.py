"""The errors of reading and writing ``.tflite`` files (each an :class:`~intq.errors.IntqError`)."""

from __future__ import annotations

from intq.errors import GraphError, IntqError


class TfliteImportError(IntqError, ValueError):
    """A ``.tflite`` file cannot be read: corrupt, or using a feature intq does not import."""


class TfliteExportError(IntqError, ValueError):
    """A ``.tflite`` model cannot be written as requested."""


class TfliteOpError(TfliteExportError):
    """A node's operator or attribute has no TFLite equivalent (its options table cannot be written)."""


class UnknownOperatorError(TfliteExportError):
    """The operator is not a TFLite builtin operator, or its options do not fit it."""


class TensorSpecError(TfliteExportError):
    """A tensor's name, shape, dtype, constant data or quantization parameters are invalid."""


class TfliteGraphError(TfliteExportError, GraphError):
    """Operators or subgraph inputs/outputs refer to tensors in an impossible way.

    A :class:`~intq.errors.GraphError` (the one graph error of intq) raised while writing a file.
    """
