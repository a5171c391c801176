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

Each family module (``conv``, ``pool``, ...) registers its functions with
``@FLOAT_OPS.register()`` (an :class:`intq.registry.Registry`); importing
:mod:`intq.runtime.float_ops` imports them all.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from intq.errors import UnsupportedOperatorError
from intq.registry import Registry

FloatOp = Callable[..., tuple[np.ndarray, ...]]

#: ONNX op type -> function; filled by the family modules at import.
FLOAT_OPS: Registry[FloatOp] = Registry("float implementation of ONNX operator", UnsupportedOperatorError)

