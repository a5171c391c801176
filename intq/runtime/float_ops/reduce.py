"""Reductions over axes (opset 18+ form: axes is an optional int64 input), ArgMax, ArgMin.

    ReduceX(data, axes): reduce ``data`` over ``axes`` (all axes when axes is omitted or empty,
    unless noop_with_empty_axes=1, which returns data unchanged); keepdims=1 keeps the reduced
    axes as size 1.

Float sums use numpy's pairwise summation in the input dtype.
"""

from __future__ import annotations

import numpy as np

from . import _checks
from .registry import FLOAT_OPS


def _reduce(op: str, fn, data, axes, keepdims, noop_with_empty_axes):
    if _checks.is_omitted(axes):
        if noop_with_empty_axes:
            return (data,)
        ax = None
    else:
        ax = _checks.axes(op, axes, data.ndim)
    return (np.asarray(fn(data, axis=ax, keepdims=bool(keepdims))),)


def _log_sum_exp(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)  # all -inf (or inf) rows: no shift
    y = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return y if keepdims else np.squeeze(y, axis=axis)


def _l1(x, axis, keepdims):
    return np.sum(np.abs(x), axis=axis, keepdims=keepdims)


def _sum_square(x, axis, keepdims):
    return np.sum(np.square(x), axis=axis, keepdims=keepdims)


def _l2(x, axis, keepdims):
    return np.sqrt(_sum_square(x, axis, keepdims))


def _make(op: str, fn, what: str):
    """Register ``op`` as the reduction ``fn(data, axis=..., keepdims=...)``."""

    def run(data, axes=None, *, keepdims=1, noop_with_empty_axes=0):
        return _reduce(op, fn, data, axes, keepdims, noop_with_empty_axes)

    run.__name__ = run.__qualname__ = op
    run.__doc__ = f"reduced = {what} of data over axes (see module docstring)."
    return FLOAT_OPS.register(op)(run)


#: (ONNX operator, numpy reduction, what it computes): one registered float op each.
_REDUCTIONS = (
    ("ReduceMean", np.mean, "mean"), ("ReduceMax", np.max, "max"), ("ReduceMin", np.min, "min"),
    ("ReduceSum", np.sum, "sum"), ("ReduceProd", np.prod, "product"), ("ReduceL1", _l1, "sum of |x|"),
    ("ReduceL2", _l2, "sqrt of the sum of x^2"), ("ReduceSumSquare", _sum_square, "sum of x^2"),
)
for _op, _fn, _what in _REDUCTIONS:
    _make(_op, _fn, _what)
ReduceLogSumExp = _make("ReduceLogSumExp", _log_sum_exp, "log of the sum of exp(x) (max-shifted)")


def _arg(op: str, fn, data, axis, keepdims, select_last_index):
    a = _checks.axis(op, axis, data.ndim)
    if select_last_index:
        idx = data.shape[a] - 1 - fn(np.flip(data, axis=a), axis=a)
    else:
        idx = fn(data, axis=a)
    idx = np.asarray(idx, dtype=np.int64)
    return (np.expand_dims(idx, a) if keepdims else idx,)


@FLOAT_OPS.register()
def ArgMax(data, *, axis=0, keepdims=1, select_last_index=0):
    """reduced = int64 index of the maximum along ``axis`` (first one, or last if
    select_last_index)."""
    return _arg("ArgMax", np.argmax, data, axis, keepdims, select_last_index)


@FLOAT_OPS.register()
def ArgMin(data, *, axis=0, keepdims=1, select_last_index=0):
    """reduced = int64 index of the minimum along ``axis`` (first one, or last if
    select_last_index)."""
    return _arg("ArgMin", np.argmin, data, axis, keepdims, select_last_index)
