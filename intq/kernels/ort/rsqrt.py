"""RSQRT as intq writes it for onnxruntime (ONNX has no integer or float Rsqrt): DequantizeLinear ->
Sqrt -> Reciprocal -> QuantizeLinear, which onnxruntime computes per element in float32: a per-code
table, an input below the zero point giving NaN and so the lowest code (no error, unlike TFLite's
kernels), the zero point +inf and so the highest."""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtLut, lookup, prepare_unary

OP = "RSQRT"

def rsqrt(x: np.ndarray) -> np.ndarray:
    """onnxruntime's Sqrt then Reciprocal in float32 (``sqrtps``, ``divps``: both correctly rounded):
    ``float32(1 / float32(sqrt(x)))``; 0 gives +inf, a negative input NaN (measured)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.float32(1) / np.sqrt(np.asarray(x, np.float32))).astype(np.float32)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtLut:
    return prepare_unary(ctx, rsqrt)


def run(p: OrtLut, x):
    return (lookup(p, x),)
