"""LOGISTIC, 16x8: ``y = sigmoid(x)`` on int16, output scale 2^-15, zero point 0.

LiteRT 2.3 (``SigmoidEval`` int16 → ``reference_integer_ops::Logistic``) and TFLM
(``logistic.cc`` → the same function) compute, with ``d`` the scaled input of
:mod:`intq.kernels.int16x8._sigmoid` (1/24 of the real input = 2^9)::

    r = 0x7FFF << 10                            if |d| >> 9 >= 255
    r = (T[h] << 9) + (|d| & 511) * (T[h+1] - T[h])   otherwise, h = |d| >> 9
    r = d >= 0 ? r + 2^9 : 2^25 - r + 2^9 - 1
    y = int16(r >> 10)

(unsigned 32-bit arithmetic; ``T`` the sigmoid table). The prepare step is the same in both
runtimes too (power-of-two scales use ``3 << 0`` when ``12 + log2(s_in) == 0``): the targets agree.
The brief expected LiteRT's reference to use its own LUT interpolation; LiteRT 2.3's reference
kernel is this table function (its ``LUTPopulate`` tables serve the int16 SOFTMAX).
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._gemmlowp16 import logistic_table
from intq.kernels.int16x8._sigmoid import (
    GemmlowpSigmoid16x8Params,
    SigmoidInput,
    interpolate,
    prepare_sigmoid_input,
    scaled_input,
)

OP = "LOGISTIC"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> SigmoidInput | GemmlowpSigmoid16x8Params:
    return prepare_sigmoid_input(ctx, pot_shifts=(0,), gemmlowp_table=lambda x, shift: logistic_table(x))


def run(p: SigmoidInput | GemmlowpSigmoid16x8Params, x):
    if isinstance(p, GemmlowpSigmoid16x8Params):  # litert-opt / xnnpack on a power-of-two input scale
        return (p.table[x.view(np.uint16)],)
    d = scaled_input(p, x)
    r, saturated = interpolate(np.abs(d), 9)
    r = np.where(saturated, 0x7FFF << 10, r)
    r = np.where(d >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return ((r >> 10).astype(np.int16),)  # in [0, 32767]
