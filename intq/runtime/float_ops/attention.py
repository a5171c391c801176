"""Float ops of transformer graphs: ONNX ``GatherND`` and intq's ``MaskedSoftmax``.

``GatherND`` (opset 13 semantics, ``batch_dims``) is what torch's dynamo exporter writes for
``mask[:, None, None, :]``. ``MaskedSoftmax`` is intq-domain: :mod:`intq.passes.attention` writes
it for ``Softmax(scores + additive_mask)`` where the additive mask is 0 on kept positions and a
large negative (``-inf``, ``finfo.min``, ``-10000``) elsewhere, so that calibration sees the scores
and the probabilities and never the mask's non-finite or huge values::

    MaskedSoftmax(X, condition; axis, keep)_i = exp(x_i - m) / sum_{j kept} exp(x_j - m)   if i kept
                                              = 0                                          otherwise
    kept = condition (keep=1) or not condition (keep=0), broadcast to X;  m = max over the kept x_j

``condition`` is bool, or an integer tensor read as ``condition != 0`` (the attention mask's ids
themselves: the pass folds their ``Cast`` to bool into this op, so the integer graph reads the ids).

A row with no kept position is all 0 (what the ``Where(IsNaN(softmax), 0, softmax)`` guard of the
``-inf`` exports gives; a finite-fill export gives the uniform row there instead). Elsewhere it equals
``Softmax(X + M)`` bit for bit wherever ``exp(x - m + M)`` underflows to 0 in float32 for the fill
``M`` (any ``M <= -1e4`` with scores of magnitude below ~9900).
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError

from . import _checks
from .registry import FLOAT_OPS
from .softmax import Softmax


@FLOAT_OPS.register()
def GatherND(data, indices, *, batch_dims=0):
    """output[b..., i...] = data[b..., indices[b..., i..., :]] (ONNX GatherND): the last axis of
    ``indices`` (length k <= rank - batch_dims) indexes the first k non-batch axes of ``data``;
    negative indices count from the end."""
    idx = np.asarray(indices, dtype=np.int64)
    b = int(batch_dims)
    if idx.ndim < 1 or b < 0 or b >= min(data.ndim, idx.ndim):
        raise GraphError(f"GatherND: batch_dims {b} for data of rank {data.ndim} and indices of rank {idx.ndim}")
    k = idx.shape[-1]
    if data.shape[:b] != idx.shape[:b] or k > data.ndim - b:
        raise GraphError(f"GatherND: indices {list(idx.shape)} do not fit data {list(data.shape)} with batch_dims {b}")
    dims = np.asarray(data.shape[b:b + k], dtype=np.int64)
    if idx.size and (np.any(idx < -dims) or np.any(idx >= dims)):
        raise GraphError(f"GatherND: an index is outside data's dimensions {dims.tolist()}")
    idx = np.where(idx < 0, idx + dims, idx)
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = idx.reshape((batch, -1, k))
    out_shape = idx.shape[:-1] + data.shape[b + k:]
    _checks.output_size("GatherND", out_shape, data.dtype)
    rows = [flat_data[i][tuple(flat_idx[i].T)] for i in range(batch)]
    return (np.stack(rows).reshape(out_shape),)


@FLOAT_OPS.register()
def MaskedSoftmax(X, condition, *, axis=-1, keep=1):
    """Softmax of ``X`` over the positions ``condition`` keeps (``keep=1``: where it is True / non-zero;
    0: where it is False / zero), 0 at the others and on rows with none kept (the module docstring)."""
    if condition.dtype != np.bool_:
        if condition.dtype.kind not in "iu":
            raise GraphError(f"MaskedSoftmax: condition must be bool or integer, got {condition.dtype}")
        condition = condition != 0
    try:
        kept = np.broadcast_to(condition if keep else ~condition, X.shape)
    except ValueError:
        raise GraphError(f"MaskedSoftmax: condition {list(condition.shape)} does not broadcast to "
                         f"{list(X.shape)}") from None
    a = _checks.axis("MaskedSoftmax", axis, X.ndim)
    filled = np.where(kept, X, X.dtype.type(-np.inf))
    with np.errstate(invalid="ignore"):  # a row with nothing kept: -inf - -inf
        (y,) = Softmax(filled, axis=a)
    return (np.where(np.any(kept, axis=a, keepdims=True), y, y.dtype.type(0)).astype(X.dtype),)
