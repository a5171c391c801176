"""The integer target's requantization of a linear layer: what CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED compute on the ``tflite`` target (TensorFlow Lite Micro).

For output channel ``c``::

    acc_c = sum (q_x - Z_x) * q_w + q_b                                 (int32, exact)
    y_c   = clamp(RDBP(SRDHM(acc_c << left_c, m_c), right_c) + Z_y, act_min, act_max)

with ``(m_c, shift_c)`` the Q0.31 pair of ``M_c = S_x * S_w[c] / S_y`` (TFLite's
``QuantizeMultiplier``), SRDHM gemmlowp's saturating rounding doubling high multiply
``floor((x * m + 2^30) / 2^31)``, RDBP its rounding divide by a power of two (half away from zero)
— ``docs/arithmetic.md`` section 4.1. The integers come from intq's own
:func:`intq.kernels.requantize.make_requantizer` and the clamp from
:func:`~intq.kernels.requantize.activation_range`; ``M_c`` from :func:`intq.qmath.effective_scale`
with the product precision each kernel uses (double for convolutions and per-channel fully
connected, float32 for per-tensor fully connected, as TFLM's ``FULLY_CONNECTED``).

:func:`requantize` is the whole-tensor PyTorch form; the QAT layers run the same arithmetic fused
(:func:`intq.qat._fused.requantize_output`). Contract: ``acc`` holds int32 values and
``|acc << left| < 2^31`` (multipliers below 1 have no left shift).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from intq.kernels.requantize import Requantizer, activation_range, make_requantizer
from intq.kernels.targets import Requant
from intq.qat.errors import QATError
from intq.qmath import QuantParams, effective_scale, quantize_multiplier


@lru_cache(maxsize=1024)
def _clamp(output_scale: float, output_zero_point: int, activation: str | None) -> tuple[int, int]:
    return activation_range(activation or "NONE", QuantParams(np.float32(output_scale), output_zero_point, np.int8))


def make_layer_requantizer(input_scale: float, weight_scales: np.ndarray, output_scale: float, output_zero_point: int,
                           activation: str | None, channels: int, *, fully_connected: bool) -> Requantizer:
    """The requantization of a layer with ``channels`` outputs (per-channel arrays of ``channels``
    entries; one weight scale is broadcast)."""
    per_channel = np.size(weight_scales) > 1
    s_w = np.broadcast_to(np.asarray(weight_scales, np.float64), (channels,))
    product = np.float32 if (fully_connected and not per_channel) else np.float64
    real = np.atleast_1d(effective_scale(input_scale, s_w, output_scale, product_dtype=product))
    lo, hi = _clamp(float(output_scale), int(output_zero_point), activation)
    return make_requantizer(real, Requant.DOUBLE, output_zero_point, lo, hi, np.int8)


def layer_requantizer_arrays(input_scale: float, weight_scales: np.ndarray, output_scale: float, output_zero_point: int,
                             activation: str | None, channels: int, *, fully_connected: bool):
    """What :func:`make_layer_requantizer` gives, lean (the per-step hot path): ``(arrays, act_min,
    act_max)`` with ``arrays = (multiplier, left, right, nudge, right_pos)`` int64 — the
    multiplier from :func:`intq.qmath.quantize_multiplier`, the rest as
    :func:`intq.kernels.requantize.make_requantizer` derives them (tests require equality)."""
    per_channel = np.size(weight_scales) > 1
    s_w = np.broadcast_to(np.asarray(weight_scales, np.float64), (channels,))
    product = np.float32 if (fully_connected and not per_channel) else np.float64
    real = np.atleast_1d(effective_scale(input_scale, s_w, output_scale, product_dtype=product))
    qm = quantize_multiplier(real)
    shift = np.array(qm.shift, dtype=np.int64)
    if np.any(shift > 30):
        raise QATError(f"requantization multiplier {real.max():.6g} is too large (>= 2^30) for TFLite's fixed point")
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    arrays = (np.array(qm.multiplier, dtype=np.int64), left, right, (np.int64(1) << right) >> 1, (right > 0).astype(np.int64))
    lo, hi = _clamp(float(output_scale), int(output_zero_point), activation)
    return arrays, lo, hi


def fused_arrays(r: Requantizer) -> tuple[np.ndarray, ...]:
    """``(multiplier, left, right, nudge, right_pos)`` as contiguous int64 arrays, for
    :func:`intq.qat._fused.requantize_output`."""
    return tuple(np.array(v, dtype=np.int64) for v in (r.multiplier, r.left, r.right, r.round_nudge, r.right_pos))


def requantize(r: Requantizer, acc: torch.Tensor, channel_view: tuple[int, ...] = (-1,)) -> torch.Tensor:
    """``RDBP(SRDHM(acc << left, m), right) + Z_y`` as int64, *before* the clamp, channels laid out
    as ``channel_view`` (e.g. ``(1, -1, 1, 1)`` for NCHW conv outputs)."""
    m, left, right, nudge, right_pos = (torch.from_numpy(v).reshape(channel_view) for v in fused_arrays(r))
    x = acc << left
    h = (x * m + (1 << 30)) >> 31  # SRDHM: floor((x*m + 2^30) / 2^31), m > 0
    return ((h + nudge - ((h < 0).long() * right_pos)) >> right) + r.zero_point
