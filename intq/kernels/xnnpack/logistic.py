"""XNNPACK's qs8 LOGISTIC: XNNPACK takes every int8 node and builds its own 256-entry table in
float32, rounding half to even with the output zero point added in float
(:func:`xnnpack_float_lut`; measured on every input code of
tie-prone scales, tests/kernels/test_optimized_targets.py).
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.logistic import FUNCTION, OP, run  # noqa: F401 (run: the reference's table lookup)
from intq.kernels.xnnpack import FAMILY
from intq.qmath import QuantParams


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> fp.LutParams:
    in_qp, out_qp = fp.check_q4_io(ctx, FUNCTION)
    return fp.LutParams(xnnpack_float_lut(in_qp, out_qp, FUNCTION.transform), FAMILY)


def xnnpack_float_lut(input_qp: QuantParams, output_qp: QuantParams, transform: str) -> np.ndarray:
    """XNNPACK's qs8 LOGISTIC / TANH table (the ``xnnpack`` target; measured on LiteRT 2.3's
    XNNPACK, every one of 256 input codes on tie-prone scales where the candidate formulas disagree):
    ``d = float32(s_in * (v - Z_in))``; ``f`` the float32 value of ``1/(1 + exp(-d))`` correctly
    rounded (computed in double; LiteRT's two float32 roundings of ``1.0f / (1.0f + expf(-d))``
    differ from it on some codes), or the C library's ``tanhf(d)`` (glibc's, not always correctly
    rounded: -0.38066086 gives -0.36328128, and XNNPACK's table follows it);
    ``q = rint(float32(f * float32(1 / s_out))
    + float32(Z_out))`` — half to **even** where LiteRT's ``LUTPopulate`` rounds half away, and the
    zero point added in float before rounding — clamped to [-128, 127]; indexed by ``uint8(v)``."""
    v = np.arange(-128, 128, dtype=np.int64)
    s_in = np.float32(input_qp.tensor_scale)
    d = (s_in * (v - input_qp.tensor_zero_point).astype(np.float32)).astype(np.float32)
    with np.errstate(over="ignore"):
        if transform == "logistic":
            f = (1.0 / (1.0 + np.exp(-d.astype(np.float64)))).astype(np.float32)
        elif transform == "tanh":
            f = fp.c_float32_function("tanhf", d)
        else:
            raise AssertionError(transform)
    inverse_scale = np.float32(1.0) / np.float32(output_qp.tensor_scale)
    q = np.rint((f * inverse_scale).astype(np.float32) + np.float32(output_qp.tensor_zero_point))
    return fp.int8_table(np.clip(q, -128, 127))
