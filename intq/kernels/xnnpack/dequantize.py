"""XNNPACK's DEQUANTIZE: XNNPACK takes every int8 node (``xnn_qs8_f32_vcvt``) and its result equals
the reference (measured on every element); int16 input is LiteRT's optimized kernel's, which on
zero-point-0 int16 equals the reference too; other inputs are refused as there
(:func:`intq.kernels.litert_opt.dequantize.measured`).
"""

from __future__ import annotations

from intq.kernels import dequantize as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.dequantize import DequantizeParams, run  # noqa: F401 (run: the reference's)
from intq.kernels.litert_opt.dequantize import measured
from intq.kernels.xnnpack import FAMILY


@variant(reference.OP, family=FAMILY)
def prepare(ctx: KernelContext) -> DequantizeParams:
    x, qp = reference.operands(ctx)
    measured(ctx, x, qp)
    return DequantizeParams(qp)
