"""LiteRT's int8 TANH (``activations.cc`` TanhPrepare<kReference>, and the optimized resolver's):
a 256-entry table from ``LUTPopulate<int8_t>`` computed in float32 with the C library's ``tanhf``
(``tanhf(s_in * (v - Z_in))`` times ``1/s_out``, ``std::round``, ``+ Z_out``), then
``LookupTable`` (:func:`intq.kernels.litert.logistic.litert_float_lut`). It agrees with TFLM's
fixed point (the reference, :mod:`intq.kernels.tanh`) except near a rounding boundary of the
output, as for LOGISTIC (:mod:`intq.kernels.litert.logistic`).
"""

from __future__ import annotations

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.litert.logistic import litert_float_lut
from intq.kernels.tanh import FUNCTION, OP, run  # noqa: F401 (run: the reference's table lookup)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> fp.LutParams:
    in_qp, out_qp = fp.check_q4_io(ctx, FUNCTION)
    return fp.LutParams(litert_float_lut(in_qp, out_qp, FUNCTION.transform), FAMILY)
