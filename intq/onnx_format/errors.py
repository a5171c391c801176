"""Errors of the ONNX format's reader and writer: each names the node or file and the fix."""

from __future__ import annotations

from intq.errors import GraphError, IntqError, UnsupportedOperatorError


class OnnxImportError(IntqError, ValueError):
    """The file is not a readable ONNX model, or its inputs cannot be bound."""


class QuantizedOnnxError(UnsupportedOperatorError):
    """A quantized ONNX model holds something intq cannot turn into its integer operators."""


class OnnxExportError(IntqError, ValueError):
    """An integer graph cannot be written as the ONNX model asked for (nothing is written)."""


class OnnxOpError(OnnxExportError, GraphError):
    """A node has no ONNX form in the chosen format / opset; the message names the node and the alternative."""
