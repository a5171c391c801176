"""intq.frontends — import models as intq graphs: ONNX files or protos and torch modules (float
graphs), ``.tflite`` files or bytes (integer graphs of TFLite builtins)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import onnx

from intq.errors import IntqError
from intq.frontends.from_onnx import OnnxImportError, load_onnx
from intq.frontends.from_tflite import TfliteImportError, load_tflite
from intq.frontends.shapes import InputShapeError
from intq.frontends.tpu_mlir import TpuMlirImportError, load_tpu_mlir
from intq.ir import Graph
from intq.tflite.schema import FILE_IDENTIFIER, is_tflite_bytes


def load(model, input_shapes: Mapping[str, Sequence[int]] | None = None, example_inputs=None,
         constant_inputs: Mapping[str, Any] | None = None) -> Graph:
    """Load a model as an intq graph.

    ``model`` is a path to an ``.onnx`` file, an ``onnx.ModelProto``, or a ``torch.nn.Module``
    (with ``example_inputs``): a float graph; or a path to a ``.tflite`` file or its bytes: an
    integer graph (:func:`load_tflite`); or a TPU-MLIR int8 ``*_tpu.mlir`` (its weight ``.npz`` beside
    it): an integer graph for the ``tpu-mlir`` target (:func:`load_tpu_mlir`). ``input_shapes`` binds dynamic input dimensions (ONNX
    ``dim_param``, unnamed dims and ``dim_value`` -1 or 0); an unbound or contradicting shape raises
    :class:`InputShapeError`, whose ``cli_message()`` gives the fix as ``--input-shape``.
    ``constant_inputs`` (ONNX) fixes inputs to values, e.g. ``{"sr": 16000}``: they become constants
    of the graph, and ``If`` nodes they (and the static shapes) decide are folded at import.
    """
    if constant_inputs and not (isinstance(model, onnx.ModelProto) or (
            isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".onnx"))):
        raise IntqError("constant_inputs= applies to ONNX models (their If nodes fold at import); "
                        f"got a {type(model).__name__}")
    if isinstance(model, onnx.ModelProto):
        return load_onnx(model, input_shapes, constant_inputs)
    if isinstance(model, (bytes, bytearray, memoryview)):
        if is_tflite_bytes(model):
            return load_tflite(model, input_shapes)
        raise IntqError(f"these bytes are not a .tflite model (no {FILE_IDENTIFIER.decode()!r} identifier); give ONNX "
                        "models as a path or an onnx.ModelProto")
    if isinstance(model, (str, os.PathLike)):
        suffix = os.fspath(model).lower().rsplit(".", 1)[-1]
        if suffix == "onnx":
            return load_onnx(model, input_shapes, constant_inputs)
        if suffix == "tflite":
            return load_tflite(model, input_shapes)
        if suffix == "mlir":
            return load_tpu_mlir(model)
        raise IntqError(f"{os.fspath(model)}: intq reads .onnx files, .tflite files, TPU-MLIR int8 *_tpu.mlir files "
                        f"(and torch modules); got a .{suffix} file")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        from intq.frontends.from_torch import load_torch

        return load_torch(model, example_inputs)
    raise IntqError(f"cannot load a {type(model).__name__}: give an .onnx or .tflite path, .tflite bytes, an "
                    "onnx.ModelProto or a torch.nn.Module")


__all__ = ["load", "load_onnx", "OnnxImportError", "load_tflite", "TfliteImportError", "load_tpu_mlir",
           "TpuMlirImportError", "InputShapeError"]
