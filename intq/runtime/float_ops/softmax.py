"""Softmax and LogSoftmax along one axis (opset 13 semantics), numerically stable.

    Softmax(x)_i    = exp(x_i - m) / sum_j exp(x_j - m)
    LogSoftmax(x)_i = (x_i - m) - log(sum_j exp(x_j - m)),      m = max_j x_j

Subtracting the maximum changes nothing mathematically and keeps exp() from overflowing.
"""

from __future__ import annotations

import numpy as np

from . import _checks
from .registry import FLOAT_OPS


def _shifted(op: str, x: np.ndarray, axis: int) -> tuple[np.ndarray, int]:
    axis = _checks.axis(op, axis, x.ndim)
    with np.errstate(invalid="ignore"):  # a row of -inf (a fully masked attention row): NaN, as in ONNX
        return x - np.max(x, axis=axis, keepdims=True), axis


@FLOAT_OPS.register()
def Softmax(input, *, axis=-1):
    """output = exp(x - max) / sum(exp(x - max)) along ``axis``."""
    y, axis = _shifted("Softmax", input, axis)
    np.exp(y, out=y)
    y /= np.sum(y, axis=axis, keepdims=True)
    return (y,)


@FLOAT_OPS.register()
def LogSoftmax(input, *, axis=-1):
    """output = (x - max) - log(sum(exp(x - max))) along ``axis``."""
    y, axis = _shifted("LogSoftmax", input, axis)
    y -= np.log(np.sum(np.exp(y), axis=axis, keepdims=True))
    return (y,)
