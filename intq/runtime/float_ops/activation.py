"""Activation functions: Relu and its relatives, Sigmoid, Tanh, the hard and smooth variants,
Gelu, and Clip. Elementwise on float32 (attributes are Python floats, which numpy keeps at the
array's precision); formulas in each docstring.
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError

from . import _libm
from ._checks import choice
from ._erf import erf
from .registry import FLOAT_OPS

_SQRT_HALF = 0.7071067811865476  # 1 / sqrt(2)
_SQRT_2_OVER_PI = 0.7978845608028654  # sqrt(2 / pi)


@FLOAT_OPS.register()
def Relu(X):
    """Y = max(X, 0)."""
    return (np.maximum(X, X.dtype.type(0)),)


@FLOAT_OPS.register()
def LeakyRelu(X, *, alpha=0.01):
    """Y = X if X >= 0 else alpha * X."""
    return (np.where(X < 0, X * alpha, X),)


@FLOAT_OPS.register()
def PRelu(X, slope):
    """Y = X if X >= 0 else slope * X (slope broadcasts to X)."""
    try:
        return (np.where(X < 0, X * slope, X),)
    except ValueError:
        raise GraphError(f"PRelu: slope shape {list(slope.shape)} does not broadcast to input "
                         f"shape {list(X.shape)}") from None


@FLOAT_OPS.register()
def ThresholdedRelu(X, *, alpha=1.0):
    """Y = X if X > alpha else 0."""
    return (np.where(X > alpha, X, X.dtype.type(0)),)


def _sigmoid(X: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)): accurate over the whole range (exp(-x) = inf gives the exact limit 0)."""
    with np.errstate(over="ignore"):
        y = np.exp(np.negative(X))
    y += 1
    return np.reciprocal(y, out=y)


@FLOAT_OPS.register()
def Sigmoid(X):
    """Y = 1 / (1 + exp(-X)). float32 as TFLite's reference float LOGISTIC computes it
    (:func:`intq.runtime.float_ops._libm.logistic`: the C library's ``expf``, its cutoffs at -9 and
    16.62), so a float island of an integer graph (``precision={name: "float"}``, or a float
    LOGISTIC read from a ``.tflite``) equals LiteRT's and TensorFlow Lite Micro's kernels bit for bit."""
    if np.asarray(X).dtype == np.float32:
        return (_libm.logistic(np.asarray(X)),)
    return (np.asarray(_sigmoid(X)),)


@FLOAT_OPS.register()
def SiLU(X):
    """Y = X * sigmoid(X) (SiLU, a.k.a. swish). An intq-domain op: intq.passes writes it for the
    ``Mul(x, Sigmoid(x))`` pattern; ONNX has no SiLU (opset 24's Swish adds a slope alpha)."""
    y = _sigmoid(X)
    y *= X
    return (y,)


@FLOAT_OPS.register()
def Swish(X, *, alpha=1.0):
    """Y = X * sigmoid(alpha * X) (ONNX opset 24)."""
    y = _sigmoid(X * X.dtype.type(alpha))
    y *= X
    return (y,)


@FLOAT_OPS.register()
def Tanh(X):
    """Y = tanh(X). float32 as TFLite's reference float TANH computes it (``std::tanh(float)``: the C
    library's ``tanhf``, :func:`intq.runtime.float_ops._libm.tanh`; numpy's own float32 tanh differs
    from it in the last bit on about a third of the inputs), so a float island's TANH equals
    LiteRT's reference kernel and TensorFlow Lite Micro bit for bit."""
    return (np.asarray(_libm.tanh(np.asarray(X))),)


@FLOAT_OPS.register()
def HardSigmoid(X, *, alpha=0.2, beta=0.5):
    """Y = max(0, min(1, alpha * X + beta))."""
    y = X * alpha
    y += beta
    return (np.clip(y, 0, 1, out=y),)


@FLOAT_OPS.register()
def HardSwish(X):
    """Y = X * max(0, min(1, X / 6 + 1/2))."""
    y = X / X.dtype.type(6)
    y += 0.5
    np.clip(y, 0, 1, out=y)
    y *= X
    return (y,)


def _expm1_negative_part(X: np.ndarray) -> np.ndarray:
    """exp(min(X, 0)) - 1: the negative branch of the ELU family, without overflow."""
    return np.expm1(np.minimum(X, X.dtype.type(0)))


@FLOAT_OPS.register()
def Elu(X, *, alpha=1.0):
    """Y = X if X > 0 else alpha * (exp(X) - 1)."""
    return (np.where(X > 0, X, alpha * _expm1_negative_part(X)),)


@FLOAT_OPS.register()
def Selu(X, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    """Y = gamma * (X if X > 0 else alpha * (exp(X) - 1)) (ONNX's default alpha and gamma)."""
    return (np.where(X > 0, X * gamma, (alpha * gamma) * _expm1_negative_part(X)),)


@FLOAT_OPS.register()
def Celu(X, *, alpha=1.0):
    """Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))."""
    neg = np.expm1(np.minimum(X / X.dtype.type(alpha), X.dtype.type(0))) * alpha
    return (np.maximum(X, 0) + neg,)


@FLOAT_OPS.register()
def Softplus(X):
    """Y = log(1 + exp(X)), computed as logaddexp(X, 0) (no overflow)."""
    return (np.asarray(np.logaddexp(X, X.dtype.type(0))),)


@FLOAT_OPS.register()
def Softsign(X):
    """Y = X / (1 + |X|)."""
    return (X / (np.abs(X) + 1),)


@FLOAT_OPS.register()
def Mish(X):
    """Y = X * tanh(softplus(X))."""
    return (X * np.tanh(np.logaddexp(X, X.dtype.type(0))),)


@FLOAT_OPS.register()
def Gelu(X, *, approximate="none"):
    """approximate="none": Y = X/2 * (1 + erf(X / sqrt(2)));
    approximate="tanh": Y = X/2 * (1 + tanh(sqrt(2/pi) * (X + 0.044715 X^3)))."""
    choice("Gelu", "approximate", approximate, ("none", "tanh"))
    if approximate == "none":
        inner = erf(X * X.dtype.type(_SQRT_HALF))
    else:
        cube = X * X
        cube *= X
        cube *= 0.044715  # the constant of Hendrycks & Gimpel's tanh approximation
        cube += X
        cube *= _SQRT_2_OVER_PI
        inner = np.tanh(cube, out=cube)
    inner += 1
    inner *= X
    inner *= 0.5
    return (inner,)


@FLOAT_OPS.register()
def Clip(input, min=None, max=None):
    """output = min(max(input, min), max); an omitted bound does not clip. NaN stays NaN."""
    y = input
    if min is not None:
        y = np.maximum(y, np.asarray(min, input.dtype))
    if max is not None:
        y = np.minimum(y, np.asarray(max, input.dtype), out=y if y is not input else None)
    return (np.asarray(y),)
