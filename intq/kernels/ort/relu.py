"""RELU as intq writes it for onnxruntime: DequantizeLinear -> Relu -> QuantizeLinear, per code."""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtLut, clip, lookup, prepare_unary

OP = "RELU"


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtLut:
    return prepare_unary(ctx, clip(0, None))


def run(p: OrtLut, x):
    return (lookup(p, x),)
