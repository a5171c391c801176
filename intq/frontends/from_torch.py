"""Import a ``torch.nn.Module`` through ONNX, in memory.

The module is exported with PyTorch's TorchScript-based ONNX exporter (``dynamo=False``, which
needs nothing beyond torch) at :data:`EXPORT_OPSET`, then imported by :func:`load_onnx` with the
example inputs' shapes bound. The module is put in eval mode for the export (batch norm uses its
running statistics, dropout is off) and restored to its previous mode afterwards.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from intq.errors import IntqError
from intq.frontends.from_onnx import load_onnx
from intq.ir import Graph

EXPORT_OPSET = 17


class TorchExportError(IntqError, ValueError):
    """PyTorch could not export the module to ONNX."""


def load_torch(module, example_inputs, *, input_names: Sequence[str] | None = None, opset: int = EXPORT_OPSET,
               keep_batch_norm: bool = False) -> Graph:
    """Export ``module`` with ``example_inputs`` (a tensor or tuple of tensors) and import it.

    ``keep_batch_norm``: export batch norms as BatchNormalization nodes (PyTorch's
    ``TrainingMode.PRESERVE``) instead of letting the exporter fold them away; quantization-aware
    training needs them to simulate the folding itself.
    """
    import warnings

    import onnx
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TorchExportError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if example_inputs is None:
        raise TorchExportError("a torch.nn.Module needs example_inputs= (a tensor or a tuple of tensors) to export")
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if not all(isinstance(a, torch.Tensor) for a in args):
        raise TorchExportError("example_inputs must be torch tensors")
    names = list(input_names) if input_names else [f"input_{i}" if len(args) > 1 else "input" for i in range(len(args))]
    buf = io.BytesIO()
    was_training = module.training
    module.eval()
    try:
        training = torch.onnx.TrainingMode.PRESERVE if keep_batch_norm else torch.onnx.TrainingMode.EVAL
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "constant folding in training mode": eval here
            torch.onnx.export(module, args, buf, dynamo=False, opset_version=opset, input_names=names,
                              training=training, do_constant_folding=True)
    except Exception as e:
        raise TorchExportError(f"torch.onnx.export failed for {type(module).__name__}: {type(e).__name__}: {e}") from e
    finally:
        module.train(was_training)
    proto = onnx.load_from_string(buf.getvalue())
    proto.graph.name = type(module).__name__
    return load_onnx(proto, input_shapes={n: tuple(a.shape) for n, a in zip(names, args)})
