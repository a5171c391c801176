"""intq.frontends — import models as intq float graphs: ONNX files or protos, torch modules."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

import onnx

from intq.errors import IntqError
from intq.frontends.from_onnx import OnnxImportError, load_onnx
from intq.ir import Graph


def load(model, input_shapes: Mapping[str, Sequence[int]] | None = None, example_inputs=None) -> Graph:
    """Load a model as an intq float graph.

    ``model`` is a path to an ``.onnx`` file, an ``onnx.ModelProto``, or a ``torch.nn.Module``
    (with ``example_inputs``). ``input_shapes`` binds dynamic input dimensions of ONNX models.
    """
    if isinstance(model, onnx.ModelProto):
        return load_onnx(model, input_shapes)
    if isinstance(model, (str, os.PathLike)):
        suffix = os.fspath(model).lower().rsplit(".", 1)[-1]
        if suffix == "onnx":
            return load_onnx(model, input_shapes)
        raise IntqError(f"{os.fspath(model)}: intq reads .onnx files (and torch modules); got a .{suffix} file")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        from intq.frontends.from_torch import load_torch

        return load_torch(model, example_inputs)
    raise IntqError(f"cannot load a {type(model).__name__}: give an .onnx path, an onnx.ModelProto or a torch.nn.Module")


__all__ = ["load", "load_onnx", "OnnxImportError"]
