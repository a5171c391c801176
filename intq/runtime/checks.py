"""What the interpreter checks at its boundary: the graph it is given, the inputs of each run, and
every tensor an integer kernel computes against the tensor the graph declares.

* :func:`check_graph` — an :class:`~intq.ir.Graph`, not a path or a string (``intq.load`` makes one).
* :func:`run_inputs` — ``{name: array}`` for exactly the graph's inputs, each of its shape (the
  leading, batch dimension of a rank >= 2 input is free: the interpreter binds it), of a real
  numeric dtype (float inputs take any real number and are cast; integer inputs must have their
  exact dtype — a cast would change the quantized values — except int64 ids that fit an int32
  index input), finite. Complex, string, object and bool arrays are refused by name, as is anything
  that is not an array.
* :func:`check_produced` — an integer kernel's outputs have the shapes and dtypes the graph
  declares. An execution plan (:mod:`intq.runtime.plan`) calls it on its first run only (a plan's
  shapes never change): a ``.tflite`` whose declared shapes disagree with what its operators
  compute is refused at its first run, naming the node and both shapes.
* :func:`check_output_ranks` — every graph output has the rank the model declares. An ONNX model's
  intermediate shapes may be symbolic or stale, but the importer normalises axes (Softmax's
  ``axis``, reductions) with the declared ranks, so an output whose rank contradicts its
  declaration means those rewrites read a shape the operators do not compute (fuzz campaign seed
  2026 case 17358: a Softmax ``axis=1`` taken as the last axis of a declared ``[N, 5]`` that is
  ``[5]`` when run). Ranks only: a dynamic or bound batch changes dimensions, never the rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from intq.ir import Graph, Node, Tensor


def _error(message: str):
    from intq.runtime.interpreter import InterpreterError

    return InterpreterError(message)


def check_graph(graph) -> None:
    if not isinstance(graph, Graph):
        what = f"the string {graph!r}" if isinstance(graph, str) else f"a {type(graph).__name__}"
        raise _error(f"Interpreter takes an intq Graph (from intq.load(...) or intq.quantize(...)), got {what}")


def run_inputs(graph: Graph, declared: Sequence[tuple[str, Tensor]], inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """The run's inputs in graph order, checked and cast (module docstring); ``declared``: each
    input's name and tensor (the shapes the interpreter's base plan has). Errors name the input."""
    if not isinstance(inputs, Mapping):
        raise _error(f"run() takes a dict {{input name: array}} for inputs {list(graph.inputs)}, "
                     f"got a {type(inputs).__name__}")
    if len(inputs) != len(declared) or any(n not in inputs for n, _ in declared):
        missing = [n for n in graph.inputs if n not in inputs]
        extra = [n for n in inputs if n not in graph.inputs]
        raise _error(f"graph {graph.name!r} takes inputs {list(graph.inputs)}; missing {missing}, unexpected {extra}")
    values = []
    for name, t in declared:
        given = inputs[name]
        if given is None or isinstance(given, (str, bytes)):
            raise _error(f"input {name!r} must be an array, got {type(given).__name__}")
        try:
            arr = np.asarray(given)
        except Exception as e:  # ragged nested lists and other objects numpy cannot hold as one array
            raise _error(f"input {name!r} is not an array ({type(e).__name__}: {e})") from None
        want = np.dtype(t.dtype)
        if arr.dtype != want:
            if arr.dtype.kind not in "iuf":
                lost = ": the imaginary part would be lost" if arr.dtype.kind == "c" else ""
                raise _error(f"input {name!r} must be {want.name} (real numbers), got {arr.dtype}{lost}")
            if want.kind != "f" and not _fits_index(arr, t):
                raise _error(f"input {name!r} must be {want.name} (quantized values), got {arr.dtype.name}")
            arr = arr.astype(want)
        shape = t.shape
        free = 1 if arr.ndim >= 2 else 0  # the batch (leading) dimension of a rank >= 2 input is free
        if shape is not None and (arr.ndim != len(shape) or any(
                d is not None and d != s for d, s in zip(shape[free:], arr.shape[free:]))):
            raise _error(f"input {name!r} must have shape {graph.tensors[name].shape}, got {arr.shape}")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise _error(f"input {name!r} contains NaN or Inf")
        _check_narrow_codes(graph, name, arr)
        values.append(arr)
    return values


def _check_narrow_codes(graph: Graph, name: str, arr: np.ndarray) -> None:
    """An input an imported ONNX model declares 4- or 2-bit (``metadata["onnx_narrow_tensors"]``,
    its codes carried as int8 values) must hold codes of that type: an int8 value outside it would
    be dequantized as if the type had it."""
    onnx_type = (graph.metadata.get("onnx_narrow_tensors") or {}).get(name)
    if onnx_type is None or arr.size == 0:
        return
    from intq.kernels.ort.common import NARROW_RANGES

    lo, hi = NARROW_RANGES[onnx_type]
    if int(arr.min()) < lo or int(arr.max()) > hi:
        raise _error(f"input {name!r} is {onnx_type} in the ONNX model: its codes must lie in [{lo}, {hi}], got "
                     f"values in [{int(arr.min())}, {int(arr.max())}]")


def _fits_index(arr: np.ndarray, t) -> bool:
    """An integer array for an unquantized integer input whose dtype holds every value (int64 ids
    into an int32 index input: ONNX's ids, TFLite's GATHER)."""
    if t.qparams is not None or not (np.issubdtype(t.dtype, np.integer) and np.issubdtype(arr.dtype, np.integer)):
        return False
    info = np.iinfo(t.dtype)
    return arr.size == 0 or (info.min <= int(arr.min()) and int(arr.max()) <= info.max)


def check_produced(graph: Graph, node: Node, results: Sequence, dtypes: bool = True) -> None:
    """An integer kernel's outputs: as many as the node binds, each of the declared static shape
    and dtype (integer graphs have static shapes: the kernels were prepared with them). A float
    island of a ``.tflite`` is checked for shapes only (``dtypes=False``): TFLite Micro computes on
    the file's declared shapes, LiteRT resizes, so a contradiction cannot be run as either."""
    if not isinstance(results, tuple) or len(results) < sum(1 for o in node.outputs if o):
        raise _error(f"node {node.name!r} ({node.op_type}) produced {len(results)} outputs for "
                     f"{len(node.outputs)} declared")
    for name, value in zip(node.outputs, results):
        if not name:
            continue
        t = graph.tensors[name]
        shape = tuple(np.shape(value))
        dtype = getattr(value, "dtype", None)
        if t.shape is not None and all(d is not None for d in t.shape) and shape != tuple(t.shape):
            raise _error(f"node {node.name!r} ({node.op_type}) computes {list(shape)} for {name!r}, but the model "
                         f"declares {list(t.shape)}: the file's shapes contradict its operators")
        if dtypes and dtype is not None and np.dtype(dtype) != np.dtype(t.dtype):
            raise _error(f"node {node.name!r} ({node.op_type}) computes {np.dtype(dtype).name} for {name!r}, but "
                         f"the model declares {np.dtype(t.dtype).name}")


def check_output_ranks(graph: Graph, outputs: Sequence[tuple[str, Any]]) -> None:
    """Each ``(name, value)`` graph output has the rank its declared shape gives (module docstring);
    outputs declared without a shape are not checked."""
    for name, value in outputs:
        declared = graph.tensors[name].shape
        shape = tuple(np.shape(value))
        if declared is not None and len(shape) != len(declared):
            raise _error(f"output {name!r} is declared {['?' if d is None else d for d in declared]} "
                         f"(rank {len(declared)}) but the model computes {list(shape)} (rank {len(shape)}): "
                         "the file's declared shapes contradict its operators, and intq's axis "
                         "normalisations read the declared ones; re-export the model or fix its output shapes")
