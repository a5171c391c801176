"""The float operator table: ONNX op type -> numpy function that executes it.

Calling convention (every entry of :data:`FLOAT_OPS`)::

    outputs = FLOAT_OPS[node.op_type](*inputs, **attributes)

- ``inputs`` are numpy arrays in ONNX input order; an omitted optional input is ``None``
  (trailing omitted inputs may also be left out). Activations are float32; shapes, indices and
  axes are int64.
- ``attributes`` are the node's ONNX attributes under their ONNX names, as Python ints, floats,
  strings, lists, or numpy arrays (tensor attributes). Every attribute is keyword-only and its
  Python default is the ONNX default; an attribute the function does not know is a TypeError.
- The result is a tuple with one array per ONNX output, in ONNX order, including the optional
  outputs that cost little (Dropout's mask, LayerNormalization's mean and inverse standard
  deviation). A caller binds the first ``len(node.outputs)`` of them. The one optional output
  that costs real work, MaxPool's Indices, is computed only when the caller adds the keyword
  ``return_indices=True`` (not an ONNX attribute) for a node that binds it; a caller should
  check that the tuple is at least as long as the node's output list.
- Operators follow opset 21 semantics only (the ONNX frontend upgrades every model to it).
- A function never writes into its inputs. An output may be a view of an input (Reshape,
  Transpose, Squeeze, Identity, Expand, Split, ...), so a caller must not write into outputs
  either.
- A problem a user can cause raises :class:`intq.errors.UnsupportedOperatorError` (an operator
  or attribute value intq does not implement) or :class:`intq.errors.GraphError` (tensors that
  do not fit the operator's contract); messages name the operator and the offending value. The
  caller adds the node's name.

Each family module (``conv``, ``pool``, ...) registers its functions with :func:`register`;
importing :mod:`intq.runtime.float_ops` imports them all.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np

from intq.errors import UnsupportedOperatorError

FloatOp = Callable[..., tuple[np.ndarray, ...]]
F = TypeVar("F", bound=FloatOp)

#: ONNX op type -> function; filled by the family modules at import.
FLOAT_OPS: dict[str, FloatOp] = {}


def register(op_type: str | F) -> F | Callable[[F], F]:
    """Add a function to :data:`FLOAT_OPS`: ``@register`` (under the function's name) or
    ``@register("OpType")``. Registering one op type twice is a programming error."""

    def add(fn: F, name: str) -> F:
        assert name not in FLOAT_OPS, f"float op {name!r} registered twice"
        FLOAT_OPS[name] = fn
        return fn

    if callable(op_type):
        return add(op_type, op_type.__name__)
    return lambda fn: add(fn, op_type)


def lookup(op_type: str) -> FloatOp:
    """The function for ``op_type``; an unknown op type raises an error listing every known one."""
    try:
        return FLOAT_OPS[op_type]
    except KeyError:
        known = ", ".join(sorted(FLOAT_OPS))
        raise UnsupportedOperatorError(
            f"no float implementation of ONNX operator {op_type!r}; implemented: {known}"
        ) from None
