"""LiteRT's int8 LOGISTIC (``activations.cc`` SigmoidPrepare<kReference>, and the optimized
resolver's, measured equal): a 256-entry table from ``LUTPopulate<int8_t>`` computed in float32
with the C library's ``expf`` (``1.0f / (1.0f + expf(-s_in * (v - Z_in)))``, times ``1/s_out``,
``std::round``, ``+ Z_out``), then ``LookupTable``
(:func:`litert_float_lut`).

It agrees with TFLM's fixed-point kernel (the reference, :mod:`intq.kernels.logistic`) except
where a value lies within about 1e-7 of a rounding boundary of the output: a search over 20000
input scales found such an input code in roughly one model in a thousand
(tests/kernels/test_lut_ops.py pins some).
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.logistic import FUNCTION, OP, run  # noqa: F401 (run: the reference's table lookup)
from intq.qmath import QuantParams


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> fp.LutParams:
    in_qp, out_qp = fp.check_q4_io(ctx, FUNCTION)
    return fp.LutParams(litert_float_lut(in_qp, out_qp, FUNCTION.transform), FAMILY)


def litert_float_lut(input_qp: QuantParams, output_qp: QuantParams, transform: str) -> np.ndarray:
    """LiteRT's ``LUTPopulate<int8_t>`` (:func:`intq.kernels._fixedpoint_lut.lut_populate_int8`) of
    ``1/(1 + expf(-d))`` (``"logistic"``) or ``tanhf(d)`` (``"tanh"``), in float32 with the C library's
    functions."""
    if transform == "logistic":
        def f(d):
            return (np.float32(1.0) / (np.float32(1.0) + fp.c_float32_function("expf", -d))).astype(np.float32)
    elif transform == "tanh":
        def f(d):
            return fp.c_float32_function("tanhf", d)
    else:
        raise AssertionError(transform)
    return fp.lut_populate_int8(input_qp, output_qp, f)
