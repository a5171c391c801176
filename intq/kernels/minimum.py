"""MINIMUM: ``y = min(a, b)`` on the raw int8 or int16 (16x8) values, numpy broadcasting.

MAXIMUM's counterpart in the same TFLite kernel (:mod:`intq.kernels.maximum`: sources, and the
contract of one scale and zero point for every tensor, checked at prepare).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import StoredValueParams, same_quantization
from intq.kernels._int16_common import same_quantization_int16
from intq.kernels.base import INT16, KernelContext, kernel

OP = "MINIMUM"


@kernel(OP)
def prepare(ctx: KernelContext) -> StoredValueParams:
    return same_quantization(ctx)


def run(p: StoredValueParams, a, b):
    return (np.asarray(np.minimum(a, b)),)  # a 0-d result stays an array


@kernel(OP, INT16)
def prepare_int16(ctx: KernelContext) -> StoredValueParams:
    """16x8: int16 inputs and output with one scale and zero point 0 (the same comparison)."""
    same_quantization_int16(ctx)
    return StoredValueParams()
