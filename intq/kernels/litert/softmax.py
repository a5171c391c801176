"""LiteRT's 16x8 SOFTMAX (``activations.cc`` SoftmaxPrepare / SoftmaxEval): the reference kernel's
``reference_ops::SoftmaxInt16`` with Prepare's own floating point the tables from
``LUTPopulate<int16_t>`` in **double** with ``std::exp`` (input range ``(10 / 65535) * [-65535,
0]``, output range ``(2 / 65535) * [-32768, 32767]``), and ``s_in * beta`` multiplied in float32
before the double division; LiteRT accepts ranks 1 to 4 only (``SoftmaxQuantized<int16_t,
int16_t>``: "Only 1D, 2D, 3D and 4D").
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _int16_lut as _lut
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.softmax import OP, Softmax16x8Params, _RANGE, check_int16_output, int16_io, int16_params, run_int16  # noqa: F401


def _litert_tables() -> tuple[np.ndarray, np.ndarray]:
    f64 = np.float64
    exp = _lut.populate(_lut.c_exp, f64(10.0 / _RANGE) * -65535, f64(10.0 / _RANGE) * 0, f64(2.0 / _RANGE) * -32768,
                        f64(2.0 / _RANGE) * 32767, np.float64)
    recip = _lut.populate(lambda v: (f64(1.0) / (f64(1.0) + v)).astype(np.float64), f64(1.0 / _RANGE) * 0,
                          f64(1.0 / _RANGE) * 65535, f64(2.0 / _RANGE) * -32768, f64(2.0 / _RANGE) * 32767, np.float64)
    return exp, recip


@variant(OP, family=FAMILY, activations=(INT16,), run="run_int16")
def prepare_int16(ctx: KernelContext) -> Softmax16x8Params:
    in_qp, out_qp, shape = int16_io(ctx)
    if len(shape) > 4:
        raise ctx.error(f"LiteRT's int16 SOFTMAX takes ranks 1 to 4, got rank {len(shape)}")
    check_int16_output(ctx, out_qp)
    beta = np.float32(ctx.attr("beta", 1.0))
    s_in = np.float32(in_qp.tensor_scale)
    real = float(np.float32(s_in * beta)) / (10.0 / 65535.0)
    return int16_params(ctx, real, s_in * beta, *_litert_tables())
