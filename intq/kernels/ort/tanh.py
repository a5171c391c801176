"""TANH as intq writes it for onnxruntime (DequantizeLinear -> Tanh -> QuantizeLinear): MLAS's
float32 tanh per code (``MlasComputeTanh``; tanh.cpp, Eigen's coefficients)."""

from __future__ import annotations

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtLut, _mlas_odd_rational, lookup, prepare_unary

OP = "TANH"

#: MLAS's tanh (tanh.cpp, Eigen's coefficients): ``p(x) / q(x)`` on x clamped to [-9, 9], p odd of
#: degree 13, q even of degree 6, in float32 with FMA3 Horner steps (x86 AVX2 kernel).
_TANH_P = tuple(np.float32(c) for c in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                        5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                                        4.89352455891786e-03))

_TANH_Q = tuple(np.float32(c) for c in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                        4.89352518554385e-03))

_TANH_RANGE = np.float32(9.0)  # MLAS clamps the input to [-9, 9]

def mlas_tanh(x: np.ndarray) -> np.ndarray:
    """MLAS's float32 tanh (``MlasComputeTanh``): Horner steps as fma, ``x * x``, ``p * x`` and the
    quotient rounded separately (no final clamp)."""
    return _mlas_odd_rational(x, _TANH_RANGE, _TANH_P, _TANH_Q)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtLut:
    return prepare_unary(ctx, mlas_tanh)


def run(p: OrtLut, x):
    return (lookup(p, x),)
