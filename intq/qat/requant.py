"""The integer target's requantization of a linear layer: what CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED compute on the ``tflite`` target (TensorFlow Lite Micro).

For output channel ``c``::

    acc_c = sum (q_x - Z_x) * q_w + q_b                                 (int32, exact)
    y_c   = clamp(RDBP(SRDHM(acc_c << left_c, m_c), right_c) + Z_y, act_min, act_max)

with ``(m_c, shift_c)`` the Q0.31 pair of ``M_c = S_x * S_w[c] / S_y`` (TFLite's
``QuantizeMultiplier``), SRDHM gemmlowp's saturating rounding doubling high multiply
``floor((x * m + 2^30) / 2^31)``, RDBP its rounding divide by a power of two (half away from zero)
— ``docs/arithmetic.md`` section 4.1.

Nothing here re-derives the kernels' rules: the :class:`~intq.kernels.requantize.Requantizer`
(``M_c``'s product precision — double for convolutions and per-channel fully connected, float32
for per-tensor fully connected, as TFLM's ``FULLY_CONNECTED`` —, the multiplier and shifts, the
fused activation's clamp) is what the integer kernels' ``prepare`` computes for :data:`TARGET`:
:func:`intq.kernels._conv_common.conv_requantizer` (CONV_2D, DEPTHWISE_CONV_2D) and
:func:`intq.kernels.fully_connected.fc_requantizer`, called with a :class:`KernelContext` that
names the operator and the target.

:func:`requantize` is the whole-tensor PyTorch form; the QAT layers run the same arithmetic fused
(:func:`intq.qat._fused.requantize_output`). Contract: ``acc`` holds int32 values and
``|acc << left| < 2^31`` (multipliers below 1 have no left shift).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from intq.errors import IntqError
from intq.ir import Node
from intq.kernels._conv_common import conv_requantizer
from intq.kernels.base import KernelContext
from intq.kernels.fully_connected import fc_requantizer
from intq.kernels.requantize import Requantizer
from intq.kernels.targets import Requant, get_target
from intq.qat.errors import QATError
from intq.qmath import QuantParams, raw

#: The integer target quantization-aware training reproduces: TensorFlow Lite Micro's kernels
#: (double rounding, which :func:`requantize` and the fused pass compute).
TARGET = get_target("tflite")


@lru_cache(maxsize=None)
def _context(op: str) -> KernelContext:
    """The context a kernel's requantization reads (the op and the target; no tensors)."""
    return KernelContext(Node(op, f"quantization-aware {op}", (), ()), (), (), TARGET)


def make_layer_requantizer(input_scale: float, weight_scales: np.ndarray, output_scale: float, output_zero_point: int,
                           activation: str | None, channels: int, *, fully_connected: bool) -> Requantizer:
    """The kernel's requantization of a layer with ``channels`` outputs: FULLY_CONNECTED's when
    ``fully_connected``, else CONV_2D's (which DEPTHWISE_CONV_2D shares on :data:`TARGET`); one
    weight scale means per-tensor weights. A multiplier the kernel cannot represent is a QATError."""
    s_w = np.asarray(weight_scales, np.float64).reshape(-1)
    w_qp = QuantParams(s_w, np.zeros(s_w.size, np.int64), np.int8, axis=0 if s_w.size > 1 else None)
    in_qp = QuantParams(np.float32(input_scale), 0, np.int8)
    out_qp = QuantParams(np.float32(output_scale), int(output_zero_point), np.int8)
    act = activation or "NONE"
    try:
        if fully_connected:
            r = fc_requantizer(_context("FULLY_CONNECTED"), in_qp, w_qp, out_qp, act, np.int8)
        else:
            r = conv_requantizer(_context("CONV_2D"), "CONV_2D", in_qp, w_qp, out_qp, channels, act, np.int8)
    except IntqError as e:
        raise QATError(f"layer requantization: {e}") from None
    assert r.mode is Requant.DOUBLE, r.mode  # the only rounding requantize / _fused compute
    return r


def layer_requantizer_arrays(input_scale: float, weight_scales: np.ndarray, output_scale: float, output_zero_point: int,
                             activation: str | None, channels: int, *, fully_connected: bool):
    """:func:`make_layer_requantizer` as the fused pass takes it (the per-step hot path):
    ``(arrays, act_min, act_max)`` with ``arrays = (multiplier, left, right)``, contiguous int64 of
    ``channels`` entries each."""
    r = make_layer_requantizer(input_scale, weight_scales, output_scale, output_zero_point, activation, channels,
                               fully_connected=fully_connected)
    arrays = tuple(np.ascontiguousarray(np.broadcast_to(v, (channels,))) for v in fused_arrays(r))
    return arrays, r.act_min, r.act_max


def fused_arrays(r: Requantizer) -> tuple[np.ndarray, ...]:
    """``(multiplier, left, right)`` as contiguous int64 arrays, for
    :func:`intq.qat._fused.requantize_output`."""
    return tuple(np.array(v, dtype=np.int64) for v in (r.multiplier, r.left, r.right))


def requantize(r: Requantizer, acc: torch.Tensor, channel_view: tuple[int, ...] = (-1,)) -> torch.Tensor:
    """``MultiplyByQuantizedMultiplier(acc, m, shift) + Z_y`` (:func:`intq.qmath.raw.mbqm`, the
    kernels' double rounding) as int64, *before* the clamp, channels laid out as ``channel_view``
    (e.g. ``(1, -1, 1, 1)`` for NCHW conv outputs)."""
    m, shift = (np.asarray(v, np.int64).reshape(channel_view) for v in (r.multiplier, r.shift))
    return torch.from_numpy(raw.mbqm(acc.numpy(), m, shift) + r.zero_point)
