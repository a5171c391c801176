"""Weights to int8 and biases to int32 (spec 003, spec 004).

Weights: symmetric int8 in [-127, 127], zero point 0, per output channel (``axis``) or per
tensor: ``S_c = max|w_c| / 127`` (float32), ``q = round_half_away(w / S_c)``.

A channel whose scale would be below ``2^-16`` times the layer's largest (all zero, or weights of
1e-40 left by a folded batch norm of a dead channel) gets that floor: its weights lose nothing
that the layer's largest channel's rounding does not already lose, and its bias scale and
requantization multiplier stay ordinary (TFLite refuses a multiplier below 2^-31; float32 bias
scales underflow to 0 near 1e-45).

Bias: int32 with scale ``S_in * S_w[c]`` and zero point 0: ``q_b = round(b / (S_in * S_w[c]))``.
When ``|b_c| / (S_in * S_w[c])`` exceeds the int32 room the accumulator leaves (a tiny weight
scale next to a large bias: a pruned-to-almost-zero channel), intq does not wrap: it raises that
channel's weight scale to ``|b_c| / (S_in * L)`` — the smallest scale whose bias fits — with
``L = 2^31 - 1 - K * 255 * 127`` for a reduction of ``K`` products: the largest bias that still
leaves room for every ``(x - Z_x) * w`` term, so the kernels' accumulator bound holds. The channel's
weights are requantized with it (they lose resolution, the bias stays exact). Every adjusted
channel is reported in :class:`BiasFit`.

16x8 layers (int16 activations, ``activations="int16"``): the same int8 weights, an int64 bias and
the int64 accumulator's bound ``2^47`` (TFLite's MultiplyByQuantizedMultiplier(int64)) in place of
int32's, with ``|x * w| <= 2^15 * 127``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


from intq.convert.context import ConversionError
from intq.qmath import QuantParams, Rounding, quantize, round_float

INT32_MAX = 2**31 - 1
PRODUCT_BOUND = 255 * 127  # the largest |(x - Z_x) * w| of an int8 activation and an int8 weight
#: 16x8 layers (int16 activations, zero point 0): an int64 bias and accumulator, whose
#: MultiplyByQuantizedMultiplier(int64) needs |acc| < 2^47 (intq.kernels._int16_common).
INT64_ACC_MAX = 2**47 - 1
PRODUCT_BOUND_16 = 2**15 * 127  # the largest |x * w| of an int16 activation and an int8 weight
#: The smallest per-channel weight scale, relative to the layer's largest (:func:`weight_scales`).
SCALE_FLOOR = 2.0**-16


@dataclass(frozen=True)
class BiasFit:
    """Channels whose weight scale was raised so their int32 bias fits (empty if none)."""

    channels: tuple[int, ...]
    old_scales: tuple[float, ...]
    new_scales: tuple[float, ...]


def weight_scales(w: np.ndarray, axis: int | None) -> np.ndarray:
    """Symmetric int8 scales ``max|w| / 127`` per channel of ``axis`` (float32 values, >0)."""
    a = np.abs(w.astype(np.float64))
    if axis is None:
        t = np.array([a.max(initial=0.0)])
    else:
        t = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1).max(axis=1, initial=0.0)
    s = (t / 127.0).astype(np.float32).astype(np.float64)
    if not np.any(s > 0):
        return np.ones_like(s)  # all zero: any scale; 1.0 keeps the multipliers ordinary
    # A channel far below the layer's largest (all zero, or weights of 1e-40 left by a folded
    # batch norm of a dead channel) gets SCALE_FLOOR times the largest scale: below it, its weights
    # are noise under the layer's own rounding, and its bias scale S_in * S_w and requantization
    # multiplier stay ordinary float32 values (a 16x8 layer's S_in is 256 times smaller than int8's).
    floor = np.float32(s.max() * SCALE_FLOOR)
    return np.maximum(s, np.float64(floor))


def quantize_weights(w: np.ndarray, scales: np.ndarray, axis: int | None) -> tuple[np.ndarray, QuantParams]:
    """int8 weights for the given scales (narrow range [-127, 127])."""
    qp = QuantParams(scales, np.zeros(len(scales), np.int64), np.int8, axis, narrow_range=True)
    return quantize(w.astype(np.float32), qp, compute_dtype=np.float64), qp


def quantize_linear_layer(w: np.ndarray, b: np.ndarray | None, input_scale: float, axis: int | None,
                          activations: str = "int8"):
    """Quantize a layer's weights (``axis`` = output channel) and bias together.

    Returns ``(w_q, w_qp, b_q, b_qp, fit)``; ``b_q`` is None when there is no bias. With
    ``activations="int16"`` (a 16x8 layer, spec 003) the bias is int64, as TensorFlow's converter
    writes it, and its room is the int64 accumulator's 2^47 bound (:data:`INT64_ACC_MAX`) less
    ``K * 2^15 * 127``; the weights are the same int8.
    """
    if activations not in ("int8", "int16"):
        raise ValueError(f"activations must be 'int8' or 'int16', got {activations!r}")
    wide = activations == "int16"
    acc_max, product_bound = (INT64_ACC_MAX, PRODUCT_BOUND_16) if wide else (INT32_MAX, PRODUCT_BOUND)
    scales = weight_scales(w, axis)
    fit = BiasFit((), (), ())
    if b is not None:
        b64 = np.asarray(b, dtype=np.float64).reshape(-1)
        per = scales if axis is not None else np.full(b64.size, scales[0])
        need = np.abs(b64) / (np.float64(np.float32(input_scale)) * per)
        room = acc_max - (w.size // max(b64.size, 1)) * product_bound  # the accumulator's bias headroom
        if room <= 0:
            raise ConversionError(f"a layer with {w.size // max(b64.size, 1)} products per output can overflow "
                                  f"its {'int64' if wide else 'int32'} accumulator whatever its bias; split the layer")
        over = need > room
        if np.any(over):
            if axis is None:
                grow = (np.abs(b64).max() / (input_scale * room)) * (1 + 2**-20)
                new = np.array([np.float32(grow)], dtype=np.float64)
                fit = BiasFit((0,), (float(scales[0]),), (float(new[0]),))
                scales = new
            else:
                idx = np.flatnonzero(over)
                new = scales.copy()
                new[idx] = (np.abs(b64[idx]) / (input_scale * room) * (1 + 2**-20)).astype(np.float32)
                fit = BiasFit(tuple(int(i) for i in idx), tuple(float(v) for v in scales[idx]), tuple(float(v) for v in new[idx]))
                scales = new
    w_q, w_qp = quantize_weights(w, scales, axis)
    if b is None:
        return w_q, w_qp, None, None, fit
    bias_scales = (np.float32(input_scale) * scales.astype(np.float32)).astype(np.float64)  # float32 product, as TFLite
    per = bias_scales if axis is not None else np.full(np.asarray(b).size, bias_scales[0])
    b_q = round_float(np.asarray(b, np.float64).reshape(-1) / per, Rounding.HALF_AWAY_FROM_ZERO)
    b_dtype = np.int64 if wide else np.int32
    b_q = np.clip(b_q, -acc_max, acc_max).astype(b_dtype)
    b_qp = QuantParams(bias_scales, np.zeros(bias_scales.size, np.int64), b_dtype, 0 if axis is not None else None)
    return w_q, w_qp, b_q, b_qp, fit
