"""HARD_SWISH as intq writes it for onnxruntime (DequantizeLinear -> HardSwish -> QuantizeLinear):
onnxruntime's float32 HardSwish per code."""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtLut, lookup, prepare_unary

OP = "HARD_SWISH"

_SIXTH = np.float32(1.0 / 6.0)  # HardSwish's alpha, as onnxruntime stores it (float32)

def hard_swish(x: np.ndarray) -> np.ndarray:
    """onnxruntime's HardSwish: ``x * clamp(float32(x * (1/6)) + 0.5, 0, 1)`` in float32 (measured)."""
    x = np.asarray(x, np.float32)
    gate = np.clip((x * _SIXTH).astype(np.float32) + np.float32(0.5), np.float32(0), np.float32(1))
    return (x * gate).astype(np.float32)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtLut:
    return prepare_unary(ctx, hard_swish)


def run(p: OrtLut, x):
    return (lookup(p, x),)
