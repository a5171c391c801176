"""Resize (opset 19+ form; roi, scales, sizes as inputs): nearest, linear and cubic, separable
over the resized axes, any rank.

For each resized axis with input length L, output length R and scale s, output index x maps
to a coordinate in the input (``coordinate_transformation_mode``):

    half_pixel            (x + 1/2) / s - 1/2
    half_pixel_symmetric  c * (1 - R / (s * L)) + (x + 1/2) / s - 1/2,  c = L / 2
    pytorch_half_pixel    (x + 1/2) / s - 1/2 if R > 1 else 0
    align_corners         x * (L - 1) / (R - 1) if R > 1 else 0
    asymmetric            x / s
    tf_half_pixel_for_nn  (x + 1/2) / s
    tf_crop_and_resize    roi_start * (L-1) + x * (roi_end - roi_start) * (L-1) / (R-1)
                          (R = 1: (roi_start + roi_end) / 2 * (L-1)); outside [0, L-1]
                          the output is extrapolation_value

With ``scales``, R = floor(L * s); with ``sizes``, s = R / L (or, with keep_aspect_ratio_policy
not_larger / not_smaller, one s = min / max of sizes/L over the axes and R = round(s * L)).
Coordinates are computed in float32 in the order onnxruntime evaluates them, so nearest
rounding ties resolve identically.

- nearest: the coordinate rounded by nearest_mode, clamped to [0, L-1]; a pure gather.
- linear: the coordinate clamped to [0, L-1], then (1-w) * x[i] + w * x[i+1].
- cubic: Keys' cubic convolution with coefficient a over taps i-1..i+2, indices clamped to
  the edge; exclude_outside=1 zeroes the weights of taps outside and renormalises.
Antialiased downsampling (antialias=1 with a scale < 1 in linear/cubic mode) is not supported.
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError, UnsupportedOperatorError

from . import _checks
from ._checks import choice
from .registry import FLOAT_OPS

_MODES = ("nearest", "linear", "cubic")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")
_F = np.float32


def _str(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _coordinates(transform: str, out_len: int, in_len: int, scale: np.float32,
                 roi_start: np.float32, roi_end: np.float32) -> np.ndarray:
    """Input coordinate (float32) of every output index along one axis (module table)."""
    x = np.arange(out_len, dtype=_F)
    half = _F(0.5)
    if transform == "half_pixel":
        return (x + half) / scale - half
    if transform == "half_pixel_symmetric":
        adjustment = _F(out_len) / (scale * _F(in_len))
        offset = _F(in_len) / _F(2) * (_F(1) - adjustment)
        return offset + (x + half) / scale - half
    if transform == "pytorch_half_pixel":
        return (x + half) / scale - half if out_len > 1 else np.zeros(out_len, _F)
    if transform == "align_corners":
        return x * _F(in_len - 1) / _F(out_len - 1) if out_len > 1 else np.zeros(out_len, _F)
    if transform == "asymmetric":
        return x / scale
    if transform == "tf_half_pixel_for_nn":
        return (x + half) / scale
    # tf_crop_and_resize
    if out_len > 1:
        return roi_start * _F(in_len - 1) + x * (roi_end - roi_start) * _F(in_len - 1) / _F(out_len - 1)
    return np.full(out_len, half * (roi_start + roi_end) * _F(in_len - 1), _F)


def _nearest_index(coord: np.ndarray, nearest_mode: str, in_len: int) -> np.ndarray:
    if nearest_mode == "floor":
        idx = np.floor(coord)
    elif nearest_mode == "ceil":
        idx = np.ceil(coord)
    else:
        frac = coord - np.floor(coord)
        tie = frac == _F(0.5)
        up = (frac > _F(0.5)) | (tie & (nearest_mode == "round_prefer_ceil"))
        idx = np.floor(coord) + up
    return np.clip(idx, 0, in_len - 1).astype(np.intp)


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' kernel weights (out, 4) for taps -1, 0, 1, 2 at fractional offset t in [0, 1)."""
    a = _F(a)
    s0, s2, s3 = t + 1, 1 - t, 2 - t
    return np.stack([
        ((a * s0 - 5 * a) * s0 + 8 * a) * s0 - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * s2 - (a + 3)) * s2 * s2 + 1,
        ((a * s3 - 5 * a) * s3 + 8 * a) * s3 - 4 * a,
    ], axis=1).astype(_F)


def _along(w: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """Reshape per-output-index weights (R,) to broadcast along ``axis`` of a rank-ndim array."""
    return w.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _resample_axis(x: np.ndarray, axis: int, coord: np.ndarray, mode: str, nearest_mode: str,
                   cubic_coeff_a: float, exclude_outside: int) -> np.ndarray:
    in_len = x.shape[axis]
    if mode == "nearest":
        return np.take(x, _nearest_index(coord, nearest_mode, in_len), axis=axis)
    if mode == "linear":
        c = np.clip(coord, _F(0), _F(in_len - 1))
        i0 = np.minimum(c.astype(np.intp), in_len - 1)
        i1 = np.minimum(i0 + 1, in_len - 1)
        w0 = i1.astype(_F) - c  # weight of x[i0]: distance to the other neighbour
        w1 = c - i0.astype(_F)
        same = i0 == i1
        w0[same] = _F(0.5)
        w1[same] = _F(0.5)
        y = np.take(x, i0, axis=axis)
        y *= _along(w0, axis, x.ndim)
        y += np.take(x, i1, axis=axis) * _along(w1, axis, x.ndim)
        return y
    # cubic
    base = np.floor(coord)
    weights = _cubic_weights(coord - base, cubic_coeff_a)
    taps = base.astype(np.intp)[:, None] + np.arange(-1, 3)
    if exclude_outside:
        weights[(taps < 0) | (taps >= in_len)] = 0
        weights /= weights.sum(axis=1, keepdims=True)
    taps = np.clip(taps, 0, in_len - 1)
    y = None
    for k in range(4):
        term = np.take(x, taps[:, k], axis=axis)
        term *= _along(weights[:, k], axis, x.ndim)
        y = term if y is None else np.add(y, term, out=y)
    return y


@FLOAT_OPS.register()
def Resize(X, roi=None, scales=None, sizes=None, *, antialias=0, axes=None,
           coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=0,
           extrapolation_value=0.0, keep_aspect_ratio_policy="stretch", mode="nearest",
           nearest_mode="round_prefer_floor"):
    """ONNX Resize (module docstring); returns (Y,)."""
    mode, transform = _str(mode), _str(coordinate_transformation_mode)
    nearest_mode, policy = _str(nearest_mode), _str(keep_aspect_ratio_policy)
    choice("Resize", "mode", mode, _MODES)
    choice("Resize", "coordinate_transformation_mode", transform, _TRANSFORMS)
    choice("Resize", "nearest_mode", nearest_mode, _NEAREST)
    choice("Resize", "keep_aspect_ratio_policy", policy, _POLICIES)
    if mode != "nearest" and not np.issubdtype(X.dtype, np.floating):
        raise UnsupportedOperatorError(f"Resize: mode={mode!r} on {X.dtype} input is not "
                                       f"supported; resize the float tensor")
    ax = _checks.axes("Resize", axes, X.ndim) if axes is not None else tuple(range(X.ndim))
    in_len = [X.shape[a] for a in ax]
    have_scales, have_sizes = not _checks.is_omitted(scales), not _checks.is_omitted(sizes)
    if have_scales == have_sizes:
        raise GraphError("Resize: exactly one of the scales and sizes inputs must be given")
    if have_scales:
        scale = [_F(s) for s in np.asarray(scales, _F).reshape(-1)]
        if len(scale) != len(ax) or any(not 0 < s < np.inf for s in scale):
            raise GraphError(f"Resize: scales {[float(s) for s in scale]} need {len(ax)} positive finite values")
        out_len = [int(np.floor(s * _F(n))) for s, n in zip(scale, in_len)]
    else:
        out_len = _checks.ints(sizes)
        if len(out_len) != len(ax) or any(r < 1 for r in out_len):
            raise GraphError(f"Resize: sizes {out_len} need {len(ax)} positive values")
        if policy == "stretch":
            scale = [_F(r) / _F(n) for r, n in zip(out_len, in_len)]
        else:
            ratios = [_F(r) / _F(n) for r, n in zip(out_len, in_len)]
            common = min(ratios) if policy == "not_larger" else max(ratios)
            scale = [common] * len(ax)
            out_len = [int(np.floor(common * _F(n) + _F(0.5))) for n in in_len]
    if antialias and mode != "nearest" and any(s < 1 for s in scale):
        raise UnsupportedOperatorError(f"Resize: antialias=1 with downsampling scales "
                                       f"{[float(s) for s in scale]} is not supported")
    if transform == "tf_crop_and_resize":
        r = np.asarray(roi, _F).reshape(-1) if not _checks.is_omitted(roi) else None
        if r is None or r.size != 2 * len(ax):
            raise GraphError(f"Resize: tf_crop_and_resize needs roi with 2*{len(ax)} values")
        roi_start, roi_end = r[: len(ax)], r[len(ax):]
    else:
        roi_start = roi_end = np.zeros(len(ax), _F)
    shape = list(X.shape)
    for a, n in zip(ax, out_len):
        shape[a] = n
    _checks.output_size("Resize", shape, X.dtype)
    y = X
    outside = None
    for i, a in enumerate(ax):
        if transform != "tf_crop_and_resize" and out_len[i] == in_len[i] and scale[i] == 1:
            continue  # identity along this axis
        coord = _coordinates(transform, out_len[i], in_len[i], scale[i], roi_start[i], roi_end[i])
        y = _resample_axis(y, a, coord, mode, nearest_mode, cubic_coeff_a, exclude_outside)
        if transform == "tf_crop_and_resize":
            off = (coord < 0) | (coord > _F(in_len[i] - 1))
            off = off.reshape((-1,) + (1,) * (X.ndim - 1 - a))
            outside = off if outside is None else outside | off
    if outside is not None and outside.any():
        y = np.where(outside, y.dtype.type(extrapolation_value), y)
    return (y,)
