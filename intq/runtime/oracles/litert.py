"""Run a ``.tflite`` model under LiteRT and return its outputs (and every tensor) as numpy arrays.

This is intq's oracle: the integer kernels intq mirrors are checked against what
``ai_edge_litert.interpreter.Interpreter`` computes. The interpreter always runs single-threaded.

Resolvers (``resolver=``):

* ``"ref"``: ``OpResolverType.BUILTIN_REF``, TFLite's reference kernels;
* ``"opt"``: ``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES``, the optimized builtin kernels;
* ``"xnnpack"``: ``OpResolverType.BUILTIN``, the optimized kernels with the default XNNPACK
  delegate applied to whatever it supports. Tensors inside a delegated partition are not
  computed by TFLite kernels; their values in ``tensors`` are meaningless, unless
  ``disable_delegate_node_fusion=True`` (LiteRT's ``experimental_disable_delegate_node_fusion``):
  then every delegated operator is its own partition and every tensor between operators is
  written back (what XNNPACK computed for it; XNNPACK no longer fuses e.g. a convolution with
  the next operator, which it does not do for int8 graphs anyway).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from intq.errors import IntqError
from intq.runtime.oracles.inputs import order_inputs

__all__ = ["RESOLVERS", "LiteRtOracleError", "run_litert", "run_litert_sequence"]

RESOLVERS: Mapping[str, OpResolverType] = {
    "ref": OpResolverType.BUILTIN_REF,
    "opt": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    "xnnpack": OpResolverType.BUILTIN,
}


class LiteRtOracleError(IntqError, ValueError):
    """LiteRT could not load or run the model, or the inputs do not match the model's inputs."""


def run_litert(
    model_bytes: bytes,
    inputs: Mapping[str | int, np.ndarray] | Sequence[np.ndarray],
    resolver: str = "ref",
    preserve_all_tensors: bool = True,
    disable_delegate_node_fusion: bool = False,
) -> dict[str, Any]:
    """Run ``model_bytes`` once under LiteRT and return what it computed.

    Args:
        model_bytes: a serialized ``.tflite`` model (one subgraph is run: subgraph 0).
        inputs: one array per model input, either a list in the model's input order or a dict
            keyed by input tensor name or by input position (0, 1, ...). Each array must have
            exactly the input's shape and dtype; nothing is cast or resized.
        resolver: ``"ref"``, ``"opt"`` or ``"xnnpack"`` (see the module docstring).
        preserve_all_tensors: keep intermediate tensors alive so that they can be returned.
        disable_delegate_node_fusion: ``"xnnpack"`` only: one delegate partition per operator,
            so that ``tensors`` holds what XNNPACK computed for every intermediate tensor.

    Returns:
        A dict with
        ``"outputs"``: list of output arrays in the model's output order;
        ``"output_names"``: their tensor names;
        ``"tensors"``: when ``preserve_all_tensors``, ``{name: array}`` for every tensor of the
        model's subgraph 0 that holds data after the run (inputs, constants, intermediates,
        outputs), else ``{}``;
        ``"delegated"``: whether some operators were replaced by a delegate (XNNPACK).
        All arrays are copies.

    Raises:
        LiteRtOracleError: unknown resolver, a model LiteRT rejects, missing/extra/mismatched
            inputs (naming the input), or duplicate tensor names when ``tensors`` is requested.
    """
    return run_litert_sequence(model_bytes, [inputs], resolver, preserve_all_tensors, disable_delegate_node_fusion)[0]


def run_litert_sequence(
    model_bytes: bytes,
    feeds: Sequence[Mapping[str | int, np.ndarray] | Sequence[np.ndarray]],
    resolver: str = "ref",
    preserve_all_tensors: bool = True,
    disable_delegate_node_fusion: bool = False,
) -> list[dict[str, Any]]:
    """Invoke one LiteRT interpreter once per entry of ``feeds``, in order: a streaming model's
    resource variables carry from one invocation to the next. One result per invocation, as
    :func:`run_litert` returns it; arguments as there."""
    if resolver not in RESOLVERS:
        raise LiteRtOracleError(
            f"unknown resolver {resolver!r}; expected one of {sorted(RESOLVERS)}"
        )
    model_bytes = bytes(model_bytes)
    with warnings.catch_warnings():
        # BUILTIN + preserve_all_tensors warns that it is meant for debugging, which this is.
        warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors.*")
        try:
            interpreter = Interpreter(
                model_content=model_bytes,
                num_threads=1,
                experimental_op_resolver_type=RESOLVERS[resolver],
                experimental_preserve_all_tensors=preserve_all_tensors,
                experimental_disable_delegate_node_fusion=disable_delegate_node_fusion,
            )
            interpreter.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            raise LiteRtOracleError(f"LiteRT rejected the model ({resolver=}): {exc}") from exc

    return [_invoke(interpreter, model_bytes, feed, resolver, preserve_all_tensors) for feed in feeds]


def _invoke(interpreter: Interpreter, model_bytes: bytes, inputs, resolver: str, preserve_all_tensors: bool) -> dict:
    input_details = interpreter.get_input_details()
    for detail, array in zip(input_details, order_inputs(input_details, inputs, LiteRtOracleError)):
        interpreter.set_tensor(detail["index"], array)
    try:
        interpreter.invoke()
    except (ValueError, RuntimeError) as exc:
        raise LiteRtOracleError(f"LiteRT failed to run the model ({resolver=}): {exc}") from exc

    output_details = interpreter.get_output_details()
    result: dict[str, Any] = {
        "outputs": [interpreter.get_tensor(d["index"]) for d in output_details],
        "output_names": [d["name"] for d in output_details],
        "tensors": _all_tensors(interpreter, model_bytes) if preserve_all_tensors else {},
        "delegated": any(
            "DELEGATE" in (op["op_name"] or "").upper() for op in interpreter._get_ops_details()
        ),
    }
    return result


def _all_tensors(interpreter: Interpreter, model_bytes: bytes) -> dict[str, np.ndarray]:
    # Only the model's own tensors: delegates and kernels may append temporaries after them.
    sub = schema.Model.GetRootAs(model_bytes, 0).Subgraphs(0)
    count = sub.TensorsLength()
    tensors: dict[str, np.ndarray] = {}
    for detail in interpreter.get_tensor_details():
        index, name = detail["index"], detail["name"]
        if index >= count or sub.Tensors(index).Type() == schema.TensorType.RESOURCE:  # a variable's handle
            continue
        try:
            value = interpreter.get_tensor(index)
        except ValueError:  # no data (e.g. an internal tensor of a delegated partition)
            continue
        if name in tensors:
            raise LiteRtOracleError(
                f"tensor name {name!r} occurs more than once; cannot return tensors by name"
            )
        tensors[name] = value
    return tensors
