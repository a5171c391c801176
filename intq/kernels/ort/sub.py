"""SUB as intq writes it for onnxruntime: DequantizeLinear, DequantizeLinear -> Sub -> QuantizeLinear
(onnxruntime has no integer Sub and does not fuse it), on all 65536 code pairs at prepare."""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import INT8_CODES, OrtBinaryLut, lookup2, prepare_binary, quantize_linear
from intq.qmath import QuantParams, dequantize

OP = "SUB"


def float_sub_table(qa: QuantParams, qb: QuantParams, qy: QuantParams, clamp: tuple[int, int]) -> OrtBinaryLut:
    """DequantizeLinear, DequantizeLinear -> Sub -> QuantizeLinear (onnxruntime has no integer Sub and
    does not fuse it): ``QuantizeLinear(float32(DQ(a) - DQ(b)))`` on every pair of codes."""
    da, db = dequantize(INT8_CODES, qa), dequantize(INT8_CODES, qb)
    y = quantize_linear((da[:, None] - db[None, :]).astype(np.float32), qy)
    return OrtBinaryLut(np.clip(y, *clamp).astype(np.int8))


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtBinaryLut:
    """onnxruntime subtracts in float32."""
    return prepare_binary(ctx, lambda qa, qb, qy, clamp, offset: float_sub_table(qa, qb, qy, clamp))


def run(p: OrtBinaryLut, a, b):
    return (lookup2(p, a, b),)
