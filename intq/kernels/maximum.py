"""MAXIMUM: ``y = max(a, b)`` on the raw int8 or int16 (16x8) values, numpy broadcasting.

TFLite's MAXIMUM (tflite/kernels/maximum_minimum.cc, reference_ops::MaximumMinimumBroadcastSlow;
TFLM maximum_minimum.cc) compares the stored integers and never rescales, which is the real
maximum only when every tensor has the same scale and zero point — the restriction of spec 003,
which :func:`intq.kernels._elementwise_common.same_quantization` checks at prepare instead of
silently comparing numbers on different scales. No arithmetic, so both targets compute the same.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import StoredValueParams, same_quantization
from intq.kernels._int16_common import same_quantization_int16
from intq.kernels.base import INT16, KernelContext, kernel

OP = "MAXIMUM"


@kernel(OP)
def prepare(ctx: KernelContext) -> StoredValueParams:
    return same_quantization(ctx)


def run(p: StoredValueParams, a, b):
    return (np.asarray(np.maximum(a, b)),)  # a 0-d result stays an array


@kernel(OP, INT16)
def prepare_int16(ctx: KernelContext) -> StoredValueParams:
    """16x8: int16 inputs and output with one scale and zero point 0 (the same comparison)."""
    same_quantization_int16(ctx)
    return StoredValueParams()
