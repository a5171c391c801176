"""XNNPACK's clamp: the int8 bounds it derives from a fused activation (``xnn_qs8_quantize``), shared
by its variants that requantize (ADD, MUL, the convolutions, FULLY_CONNECTED)."""

from __future__ import annotations

import numpy as np

from intq.errors import IntqError
from intq.qmath import QuantParams

#: XNNPACK's output range of each fused activation (the TFLite delegate's
#: ConvertActivationToOutputRange), in real units.
XNNPACK_ACTIVATION_BOUNDS: dict[str, tuple[float, float]] = {
    "NONE": (-np.inf, np.inf), "RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def xnnpack_quantize(value: float, scale, zero_point: int) -> int:
    """XNNPACK's ``xnn_qs8_quantize``: ``lrintf(fminf(fmaxf(v / s + (float) Z, -128), 127))`` —
    float32 division and addition, clamped, rounded half to even."""
    with np.errstate(over="ignore"):
        v = np.float32(np.float32(value) / np.float32(scale)) + np.float32(zero_point)
    return int(np.rint(np.clip(v, np.float32(-128), np.float32(127))))


def xnnpack_activation_range(fused_activation: str, qp: QuantParams) -> tuple[int, int]:
    """The int8 clamp XNNPACK derives from a fused activation: both real bounds through
    :func:`xnnpack_quantize` (ties to even, where TFLite's :func:`activation_range` rounds half
    away from zero; they differ when ``6 / s`` or ``1 / s`` is exactly ``k + 1/2``)."""
    key = fused_activation or "NONE"
    if key not in XNNPACK_ACTIVATION_BOUNDS:
        raise IntqError(f"unsupported fused activation {fused_activation!r}; intq fuses RELU, RELU6, RELU_N1_TO_1")
    a, b = XNNPACK_ACTIVATION_BOUNDS[key]
    zp = qp.tensor_zero_point
    return xnnpack_quantize(a, qp.scale[0], zp), xnnpack_quantize(b, qp.scale[0], zp)
