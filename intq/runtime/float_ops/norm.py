"""Normalisations: BatchNormalization (inference form), LayerNormalization,
InstanceNormalization, GroupNormalization (opset 21). Statistics in float32 with a two-pass
variance (mean first, then the mean of squared deviations), more accurate than E[x^2]-E[x]^2.
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError, UnsupportedOperatorError

from . import _checks
from .registry import FLOAT_OPS


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    """Broadcast shape of a per-channel vector against (N, C, *spatial)."""
    return (x.shape[1],) + (1,) * (x.ndim - 2)


@FLOAT_OPS.register()
def BatchNormalization(X, scale, B, input_mean, input_var, *, epsilon=1e-5, momentum=0.9,
                       training_mode=0):
    """Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel (axis 1), computed as
    Y = X * a + b with a = scale / sqrt(var + epsilon) and b = B - mean * a."""
    if training_mode:
        raise UnsupportedOperatorError("BatchNormalization: training_mode=1 is not supported; "
                                       "intq runs inference only (export the model in eval mode)")
    if X.ndim < 2:
        raise GraphError(f"BatchNormalization: input must be (N, C, ...), got shape {list(X.shape)}")
    c = X.shape[1]
    for name, v in (("scale", scale), ("B", B), ("input_mean", input_mean), ("input_var", input_var)):
        if v.shape != (c,):
            raise GraphError(f"BatchNormalization: {name} shape {list(v.shape)} must be [{c}]")
    a = (scale / np.sqrt(input_var + input_var.dtype.type(epsilon))).astype(X.dtype, copy=False)
    b = (B - input_mean * a).astype(X.dtype, copy=False)
    y = X * a.reshape(_channel_shape(X))
    y += b.reshape(_channel_shape(X))
    return (y,)


def _normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float):
    """(x - mean) * inv_std over ``axes``, with mean and inv_std = 1/sqrt(var + eps) (keepdims)."""
    mean = np.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    var = np.mean(np.square(centred), axis=axes, keepdims=True)
    inv_std = 1 / np.sqrt(var + var.dtype.type(epsilon))
    centred *= inv_std
    return centred, mean, inv_std


@FLOAT_OPS.register()
def LayerNormalization(X, Scale, B=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Y = (X - mean) / sqrt(var + epsilon) * Scale + B, statistics over axes [axis, rank).

    Returns (Y, Mean, InvStdDev); Mean and InvStdDev keep the reduced axes as size 1.
    stash_type=1 (float32 statistics) is the only type float32 inputs need.
    """
    a = _checks.axis("LayerNormalization", axis, X.ndim)
    y, mean, inv_std = _normalize(X, tuple(range(a, X.ndim)), epsilon)
    try:
        y *= Scale
        if B is not None:
            y += B
    except ValueError:
        raise GraphError(f"LayerNormalization: Scale {list(Scale.shape)} / B do not broadcast to "
                         f"the normalised shape {list(X.shape[a:])}") from None
    return y, mean, inv_std


@FLOAT_OPS.register()
def InstanceNormalization(input, scale, B, *, epsilon=1e-5):
    """Y = (X - mean) / sqrt(var + epsilon) * scale[c] + B[c], statistics per (n, c) over the
    spatial axes."""
    if input.ndim < 3:
        raise GraphError(f"InstanceNormalization: input must be (N, C, *spatial), got "
                         f"{list(input.shape)}")
    y, _, _ = _normalize(input, tuple(range(2, input.ndim)), epsilon)
    y *= scale.reshape(_channel_shape(input))
    y += B.reshape(_channel_shape(input))
    return (y,)


@FLOAT_OPS.register()
def GroupNormalization(X, scale, bias, *, epsilon=1e-5, num_groups, stash_type=1):
    """Y = (X - mean_g) / sqrt(var_g + epsilon) * scale[c] + bias[c], statistics per (n, group)
    over the group's channels and all spatial axes (opset 21: scale and bias per channel)."""
    n, c = X.shape[:2]
    if num_groups < 1 or c % num_groups:
        raise GraphError(f"GroupNormalization: num_groups={num_groups} must divide the {c} channels")
    grouped = X.reshape((n, num_groups, -1))
    y, _, _ = _normalize(grouped, (2,), epsilon)
    y = y.reshape(X.shape)
    y *= scale.reshape(_channel_shape(X))
    y += bias.reshape(_channel_shape(X))
    return (y,)
