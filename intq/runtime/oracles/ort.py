"""Run an ONNX model under onnxruntime's CPU provider and return its outputs as numpy arrays.

The oracle of the ``ort`` targets: what :func:`intq.export_onnx` writes is run here (one thread,
``level`` ``"disable_all"`` — every node as written — or ``"enable_all"`` — onnxruntime's graph
optimizations, which fuse DequantizeLinear -> op -> QuantizeLinear into its integer kernels).
Inputs are a list in the model's order or a dict by name; outputs are returned in the model's
order, with their names. intq's int8 codes map to an ``activations="uint8"`` model's codes by
:func:`to_runtime_codes`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from intq.errors import IntqError

__all__ = ["LEVELS", "OrtOracleError", "ort_session", "run_ort", "to_runtime_codes"]

LEVELS = ("disable_all", "enable_all")


class OrtOracleError(IntqError):
    """onnxruntime refused the model or its inputs."""


def ort_session(model: bytes | str | os.PathLike, level: str = "enable_all"):
    """A single-threaded CPU session at optimization ``level`` (one of :data:`LEVELS`)."""
    import onnxruntime as ort

    if level not in LEVELS:
        raise OrtOracleError(f"unknown optimization level {level!r}; choose one of {', '.join(LEVELS)}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if level == "disable_all"
                                     else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    source = model if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise OrtOracleError(f"onnxruntime refuses the model: {e}") from None


def to_runtime_codes(x: np.ndarray, offset: int) -> np.ndarray:
    """intq's int8 codes as a uint8 model's (``offset`` 128), anything else unchanged."""
    if offset and x.dtype == np.int8:
        return (x.astype(np.int16) + offset).astype(np.uint8)
    return x


def run_ort(model: bytes | str | os.PathLike, inputs: Mapping[str | int, np.ndarray] | Sequence[np.ndarray],
            level: str = "enable_all", session: Any = None) -> dict[str, Any]:
    """``{"outputs": [arrays in the model's order], "names": [their names]}`` of one run (pass a
    ``session`` from :func:`ort_session` to reuse it)."""
    sess = session or ort_session(model, level)
    details = [{"name": i.name, "shape": tuple(i.shape), "dtype": None} for i in sess.get_inputs()]
    names = [d["name"] for d in details]
    if isinstance(inputs, Mapping):
        missing = [n for n in names if n not in inputs]
        if missing:
            raise OrtOracleError(f"inputs {missing} are missing; the model takes {names}")
        ordered = [np.ascontiguousarray(inputs[n]) for n in names]
    else:
        if len(inputs) != len(names):
            raise OrtOracleError(f"the model takes {len(names)} inputs {names}, got {len(inputs)}")
        ordered = [np.ascontiguousarray(a) for a in inputs]
    try:
        outs = sess.run(None, dict(zip(names, ordered)))
    except Exception as e:
        raise OrtOracleError(f"onnxruntime fails to run the model: {e}") from None
    return {"outputs": outs, "names": [o.name for o in sess.get_outputs()]}
