"""onnxruntime's QLinearMul: ``rint(float32(float32((a - Z_a)(b - Z_b)) * r) + float32(Z_y))`` with
``r = float32(float32(s_a s_b) / s_y)`` (the zero point is added before rounding), on all 65536 code
pairs at prepare; run is a table lookup.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import INT8_CODES, OrtBinaryLut, _finish, lookup2, prepare_binary
from intq.qmath import QuantParams

OP = "MUL"


def qlinear_mul_table(qa: QuantParams, qb: QuantParams, qy: QuantParams, clamp: tuple[int, int],
                      offset: int = 0) -> OrtBinaryLut:
    """onnxruntime's QLinearMul on every pair of codes (the zero points cancel in the product)."""
    r = np.float32(np.float32(np.float32(qa.tensor_scale) * np.float32(qb.tensor_scale)) / np.float32(qy.tensor_scale))
    da = INT8_CODES.astype(np.int32) - qa.tensor_zero_point
    db = INT8_CODES.astype(np.int32) - qb.tensor_zero_point
    prod = (da[:, None] * db[None, :]).astype(np.float32)  # |prod| <= 255^2: exact
    v = (prod * r).astype(np.float32) + np.float32(qy.tensor_zero_point + offset)
    return OrtBinaryLut(_finish(v.astype(np.float32), offset, clamp))


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtBinaryLut:
    return prepare_binary(ctx, qlinear_mul_table)


def run(p: OrtBinaryLut, a, b):
    return (lookup2(p, a, b),)
