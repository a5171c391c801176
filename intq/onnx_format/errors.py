"""Errors of the ONNX writer (and reader of quantized ONNX): each names the node or file and the fix."""

from __future__ import annotations

from intq.errors import GraphError, IntqError


class OnnxExportError(IntqError, ValueError):
    """An integer graph cannot be written as the ONNX model asked for (nothing is written)."""


class OnnxOpError(OnnxExportError, GraphError):
    """A node has no ONNX form in the chosen format / opset; the message names the node and the alternative."""


class OnnxRuntimeRefusedError(OnnxExportError):
    """onnxruntime refuses to load or run the written model (an intq bug; the file is removed)."""
