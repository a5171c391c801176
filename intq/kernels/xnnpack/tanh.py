"""XNNPACK's qs8 TANH: XNNPACK takes every int8 node and builds its own 256-entry table in
float32, rounding half to even with the output zero point added in float
(:func:`intq.kernels.xnnpack.logistic.xnnpack_float_lut`; measured on every input code of
tie-prone scales, tests/kernels/test_optimized_targets.py).
"""

from __future__ import annotations

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.tanh import FUNCTION, OP, run  # noqa: F401 (run: the reference's table lookup)
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.logistic import xnnpack_float_lut


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> fp.LutParams:
    in_qp, out_qp = fp.check_q4_io(ctx, FUNCTION)
    return fp.LutParams(xnnpack_float_lut(in_qp, out_qp, FUNCTION.transform), FAMILY)
