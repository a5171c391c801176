"""onnxruntime's QLinearSigmoid: ``QuantizeLinear(logistic(DequantizeLinear(q)))`` per code, with
MLAS's float32 logistic (``MlasComputeLogistic``, FMA3 kernel; logistic.cpp, Eigen's coefficients).
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtLut, _mlas_odd_rational, lookup, prepare_unary

OP = "LOGISTIC"

#: MLAS's logistic (logistic.cpp, Eigen's coefficients): ``p(x) / q(x) + 0.5`` on x clamped to
#: [-18, 18], p odd of degree 9, q even of degree 10, in float32 with FMA3 (x86 AVX2 kernel).
_LOGISTIC_P = tuple(np.float32(c) for c in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                                            8.51377133304701e-03, 2.48287947061529e-01))

_LOGISTIC_Q = tuple(np.float32(c) for c in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                                            1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01))

_LOGISTIC_RANGE = np.float32(18.0)  # MLAS clamps the input to [-18, 18]

def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """MLAS's float32 logistic (``MlasComputeLogistic``, FMA3 kernel): Horner steps as fma, the
    products ``x * x`` and ``p * x`` and the quotient rounded separately, result clamped to [0, 1]."""
    r = _mlas_odd_rational(x, _LOGISTIC_RANGE, _LOGISTIC_P, _LOGISTIC_Q)
    return np.clip(r + np.float32(0.5), np.float32(0), np.float32(1)).astype(np.float32)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtLut:
    return prepare_unary(ctx, mlas_logistic)


def run(p: OrtLut, x):
    return (lookup(p, x),)
