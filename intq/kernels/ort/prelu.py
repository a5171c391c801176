"""PRELU as intq writes it for onnxruntime: DequantizeLinear -> PRelu -> QuantizeLinear with a
constant slope, one per-code table per slope element."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import INT8_CODES, quantize_linear
from intq.qmath import dequantize

OP = "PRELU"


@dataclass(frozen=True, eq=False)
class OrtPrelu:
    """DequantizeLinear -> PRelu -> QuantizeLinear with a constant slope: per slope element ``a``,
    the code table ``QuantizeLinear(x >= 0 ? x : float32(x a))`` (float32 throughout)."""

    tables: np.ndarray  # int8 [A, 256]: one row per element of the slope tensor
    rows: np.ndarray  # intp, the slope element each output element uses (the output's shape)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtPrelu:
    qx, qy = ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output")
    alpha_t = ctx.input(1)
    qa = ctx.per_tensor(alpha_t, "alpha")
    alpha = ctx.constant(1, "alpha (a constant slope: onnxruntime's PRelu is written as a float island)")
    slopes = dequantize(alpha.reshape(-1), qa)
    x = dequantize(INT8_CODES, qx)
    products = (x[None, :] * slopes[:, None]).astype(np.float32)
    y = np.where(x[None, :] >= 0, x[None, :], products).astype(np.float32)
    tables = quantize_linear(y, qy).astype(np.int8)
    shape = ctx.static_shape(ctx.outputs[0], "output")
    rows = np.broadcast_to(np.arange(alpha.size).reshape(alpha.shape), shape)
    return OrtPrelu(tables, np.ascontiguousarray(rows))


def run(p: OrtPrelu, x, alpha):
    return (p.tables[p.rows, np.asarray(x).view(np.uint8)],)
