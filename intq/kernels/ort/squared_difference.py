"""SQUARED_DIFFERENCE as intq writes it for onnxruntime: DequantizeLinear, DequantizeLinear -> Sub -> Mul(d, d)
-> QuantizeLinear (ONNX has no squared difference, onnxruntime no integer Sub), on all 65536 code pairs
at prepare: ``QuantizeLinear(float32(d * d))`` with ``d = float32(DQ(a) - DQ(b))``."""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import INT8_CODES, OrtBinaryLut, lookup2, quantize_linear
from intq.qmath import dequantize

OP = "SQUARED_DIFFERENCE"


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtBinaryLut:
    """onnxruntime subtracts and squares in float32, then QuantizeLinear."""
    qa = ctx.per_tensor(ctx.input(0), "input 0")
    qb = ctx.per_tensor(ctx.input(1), "input 1")
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    da, db = dequantize(INT8_CODES, qa), dequantize(INT8_CODES, qb)
    d = (da[:, None] - db[None, :]).astype(np.float32)
    return OrtBinaryLut(quantize_linear((d * d).astype(np.float32), qy).astype(np.int8))


def run(p: OrtBinaryLut, a, b):
    return (lookup2(p, a, b),)
