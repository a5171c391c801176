"""MAXIMUM: ``y = max(a, b)`` on the raw int8 values, numpy broadcasting.

TFLite's MAXIMUM (tflite/kernels/maximum_minimum.cc, reference_ops::MaximumMinimumBroadcastSlow;
TFLM maximum_minimum.cc) compares the stored integers and never rescales, which is the real
maximum only when every tensor has the same scale and zero point — the restriction of spec 003.
intq checks that restriction at prepare instead of silently comparing numbers on different
scales. No arithmetic, so both targets compute the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._elementwise_common import same_quantization
from intq.kernels.base import KernelContext, kernel

OP = "MAXIMUM"


@dataclass(frozen=True)
class MaximumParams:
    pass  # nothing to prepare: the contract is checked, the values are compared as stored


@kernel(OP)
def prepare(ctx: KernelContext) -> MaximumParams:
    same_quantization(ctx)
    return MaximumParams()


def run(p: MaximumParams, a, b):
    return (np.asarray(np.maximum(a, b)),)  # a 0-d result stays an array
