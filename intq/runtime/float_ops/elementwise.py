"""Elementwise arithmetic, math, comparison and logic ops, Where, Cast, Identity, Dropout.

Binary and variadic ops broadcast numpy-style (ONNX multidirectional broadcasting); outputs
keep the input dtype (float32 activations, int64 shape arithmetic), comparisons give bool.
Domain errors follow IEEE float semantics silently (log(0) = -inf, sqrt(-1) = nan), as
onnxruntime does. Integer Div and Mod follow onnxruntime: Div truncates toward zero (C++
``/``), Mod takes the divisor's sign (fmod=0) or the dividend's (fmod=1, C ``fmod``); an
integer division by zero raises GraphError (it is undefined behaviour in onnxruntime).
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import onnx

from intq.errors import GraphError, UnsupportedOperatorError

from . import _checks, _libm
from ._erf import erf
from .registry import FLOAT_OPS


def _broadcast(op: str, fn, *arrays):
    """``fn(*arrays)`` as an ndarray; a broadcasting failure becomes a GraphError naming ``op``, a
    broadcast result over the size limit a TensorTooLargeError (before it is computed)."""
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError as err:
        shapes = ", ".join(str(list(np.shape(a))) for a in arrays)
        raise GraphError(f"{op}: input shapes {shapes} do not broadcast ({err})") from None
    _checks.output_size(op, shape, np.result_type(*arrays))
    return np.asarray(fn(*arrays))


def _is_int(x: np.ndarray) -> bool:
    return np.issubdtype(x.dtype, np.integer)


def _no_int_zero_divisor(op: str, B: np.ndarray) -> None:
    if _is_int(B) and not np.all(B):
        raise GraphError(f"{op}: integer division by zero (the divisor input contains 0)")


@FLOAT_OPS.register()
def Add(A, B):
    """C = A + B."""
    return (_broadcast("Add", np.add, A, B),)


@FLOAT_OPS.register()
def Sub(A, B):
    """C = A - B."""
    return (_broadcast("Sub", np.subtract, A, B),)


@FLOAT_OPS.register()
def Mul(A, B):
    """C = A * B."""
    return (_broadcast("Mul", np.multiply, A, B),)


def _trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer a / b rounded toward zero: floor quotient, plus one where a remainder is left
    and the signs differ."""
    q = np.floor_divide(a, b)
    q += (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q


@FLOAT_OPS.register()
def Div(A, B):
    """C = A / B; integers: truncated toward zero (onnxruntime, C++ semantics)."""
    if _is_int(A) and _is_int(B):
        _no_int_zero_divisor("Div", B)
        return (_broadcast("Div", _trunc_divide, A, B),)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (_broadcast("Div", np.divide, A, B),)


@FLOAT_OPS.register()
def Mod(A, B, *, fmod=0):
    """C = A mod B: sign of B (fmod=0, Python %), or sign of A (fmod=1, C fmod)."""
    if not fmod and not (_is_int(A) and _is_int(B)):
        raise GraphError("Mod: float inputs require fmod=1 (ONNX)")
    _no_int_zero_divisor("Mod", B)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (_broadcast("Mod", np.fmod if fmod else np.remainder, A, B),)


@FLOAT_OPS.register()
def Pow(X, Y):
    """Z = X ** Y in X's dtype (Y may have another type, as ONNX allows)."""
    if np.issubdtype(X.dtype, np.floating):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return (_broadcast("Pow", np.power, X, Y.astype(X.dtype, copy=False)),)
    if _is_int(Y) and np.all(Y >= 0):
        return (_broadcast("Pow", np.power, X, Y.astype(X.dtype, copy=False)),)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = _broadcast("Pow", np.power, X.astype(np.float64), Y.astype(np.float64))
    return (z.astype(X.dtype),)


def _unary(op: str, fn, formula: str, *, quiet: bool = False):
    """Register ``op`` as Y = fn(X); ``quiet`` silences IEEE domain warnings (nan/inf results)."""

    def run(X):
        if quiet:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return (np.asarray(fn(X)),)
        return (np.asarray(fn(X)),)

    run.__name__ = run.__qualname__ = op
    run.__doc__ = f"Y = {formula}, elementwise."
    return FLOAT_OPS.register(op)(run)


Sqrt = _unary("Sqrt", np.sqrt, "sqrt(X)", quiet=True)
# intq-domain (TFLite's RSQRT; intq.passes.sqrt writes it for a / sqrt(b)): 1 / sqrt(x) rounded
# twice in the input's dtype, as LiteRT's float kernel computes ``1.f / std::sqrt(f)``
Rsqrt = _unary("Rsqrt", lambda x: np.reciprocal(np.sqrt(x)), "1 / sqrt(X)", quiet=True)
Exp = _unary("Exp", _libm.exp, "exp(X) (float32: the C library's expf, as TFLite's float kernels)", quiet=True)
Log = _unary("Log", _libm.log, "log(X) (float32: the C library's logf)", quiet=True)
Neg = _unary("Neg", np.negative, "-X")
Abs = _unary("Abs", np.abs, "|X|")
Floor = _unary("Floor", np.floor, "floor(X)")
Ceil = _unary("Ceil", np.ceil, "ceil(X)")
Round = _unary("Round", np.rint, "X rounded half to even (ONNX Round)")
Sign = _unary("Sign", np.sign, "sign(X)")
Sin = _unary("Sin", _libm.sin, "sin(X) (float32: the C library's sinf, as TFLite's float kernels)")
Cos = _unary("Cos", _libm.cos, "cos(X) (float32: the C library's cosf)")
Erf = _unary("Erf", erf, "erf(X) (see _erf)")
Not = _unary("Not", np.logical_not, "not X")
IsNaN = _unary("IsNaN", np.isnan, "X is NaN")


@FLOAT_OPS.register()
def Reciprocal(X):
    """Y = 1 / X."""
    with np.errstate(divide="ignore"):
        return (np.asarray(np.reciprocal(X)),)


@FLOAT_OPS.register()
def IsInf(X, *, detect_negative=1, detect_positive=1):
    """Y = X is +inf (if detect_positive) or -inf (if detect_negative)."""
    pos = np.isposinf(X) if detect_positive else np.zeros(X.shape, bool)
    return (np.asarray(pos | np.isneginf(X) if detect_negative else pos),)


def _variadic(op: str, ufunc, inputs) -> np.ndarray:
    if not inputs:
        raise GraphError(f"{op}: needs at least one input")
    if len(inputs) == 1:
        return np.asarray(inputs[0])
    return _broadcast(op, lambda *xs: reduce(ufunc, xs), *inputs)


@FLOAT_OPS.register()
def Min(*inputs):
    """Elementwise minimum of all inputs (broadcast); NaN propagates."""
    return (_variadic("Min", np.minimum, inputs),)


@FLOAT_OPS.register()
def Max(*inputs):
    """Elementwise maximum of all inputs (broadcast); NaN propagates."""
    return (_variadic("Max", np.maximum, inputs),)


@FLOAT_OPS.register()
def Sum(*inputs):
    """Elementwise sum of all inputs (broadcast), added left to right."""
    return (_variadic("Sum", np.add, inputs),)


@FLOAT_OPS.register()
def Mean(*inputs):
    """Elementwise sum of all inputs (broadcast) divided by their count."""
    total = _variadic("Mean", np.add, inputs)
    return (np.asarray(total / np.asarray(len(inputs), total.dtype)),)


def _compare(op: str, ufunc):
    """Register ``op`` as C = ufunc(A, B) with broadcasting (bool result)."""

    def run(A, B):
        return (_broadcast(op, ufunc, A, B),)

    run.__name__ = run.__qualname__ = op
    run.__doc__ = f"C = {ufunc.__name__}(A, B), broadcast, bool."
    return FLOAT_OPS.register(op)(run)


Equal = _compare("Equal", np.equal)
Less = _compare("Less", np.less)
LessOrEqual = _compare("LessOrEqual", np.less_equal)
Greater = _compare("Greater", np.greater)
GreaterOrEqual = _compare("GreaterOrEqual", np.greater_equal)
And = _compare("And", np.logical_and)
Or = _compare("Or", np.logical_or)
Xor = _compare("Xor", np.logical_xor)


@FLOAT_OPS.register()
def Where(condition, X, Y):
    """output = X where condition else Y (all three broadcast)."""
    if condition.dtype != np.bool_:
        raise GraphError(f"Where: condition must be bool, got {condition.dtype}")
    return (_broadcast("Where", np.where, condition, X, Y),)


#: ONNX TensorProto data types that Cast handles, as numpy dtypes.
_CAST_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.UINT16: np.uint16,
    onnx.TensorProto.UINT32: np.uint32,
    onnx.TensorProto.UINT64: np.uint64,
    onnx.TensorProto.BOOL: np.bool_,
}


def _cast(op: str, X: np.ndarray, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer) and np.issubdtype(X.dtype, np.floating):
        with np.errstate(invalid="ignore"):  # NaN / out of range: undefined in ONNX, as in C
            return X.astype(dtype)  # truncation toward zero, as C casts
    if dtype == X.dtype:
        return X
    return X.astype(dtype)


@FLOAT_OPS.register()
def Cast(input, *, saturate=1, to):
    """output = input converted to ONNX type ``to`` (float -> int truncates toward zero).

    saturate only concerns float8 targets, which are not supported.
    """
    if to not in _CAST_TYPES:
        name = onnx.TensorProto.DataType.Name(to) if to in onnx.TensorProto.DataType.values() else to
        known = ", ".join(onnx.TensorProto.DataType.Name(t) for t in _CAST_TYPES)
        raise UnsupportedOperatorError(f"Cast: to={name} is not supported; use one of: {known}")
    return (_cast("Cast", input, _CAST_TYPES[to]),)


@FLOAT_OPS.register()
def CastLike(input, target_type, *, saturate=1):
    """output = input converted to target_type's dtype."""
    return (_cast("CastLike", input, target_type.dtype),)


@FLOAT_OPS.register()
def Identity(input):
    """output = input (the same array, not a copy)."""
    return (input,)


@FLOAT_OPS.register()
def Dropout(data, ratio=None, training_mode=None, *, seed=None):
    """Inference Dropout: (output = data, mask = all True, a read-only broadcast view).

    training_mode=True would drop at random, which an inference runtime does not do.
    """
    if training_mode is not None and bool(np.asarray(training_mode)):
        raise UnsupportedOperatorError("Dropout: training_mode=True is not supported; intq "
                                       "runs inference only (export the model in eval mode)")
    return data, np.broadcast_to(np.True_, data.shape)
