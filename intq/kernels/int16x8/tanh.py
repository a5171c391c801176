"""TANH, 16x8: ``y = tanh(x) = 2 sigmoid(2x) - 1`` on int16, output scale 2^-15, zero point 0.

LiteRT 2.3 (``TanhEval`` int16 → ``reference_integer_ops::Tanh``) and TFLM (``tanh.cc`` → the same
function) compute, with ``d`` the scaled input of :mod:`intq.kernels.int16x8._sigmoid` (1/24 of
twice the real input = 2^8)::

    r = 0xFFFF << 8                             if |d| >> 8 >= 255
    r = (T[h] << 8) + (|d| & 255) * (T[h+1] - T[h])   otherwise, h = |d| >> 8
    r = d >= 0 ? r - 2^23 + 2^7 : -r + 2^23 + 2^7 - 1
    y = int16(r >> 8)                           (arithmetic shift)

``T`` the sigmoid table. Power-of-two input scales with ``12 + log2(s_in)`` in {0, 1} use the
multiplier ``3 << shift`` without shifting. Prepare is the same in both runtimes: the targets agree.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._gemmlowp16 import tanh_table
from intq.kernels.int16x8._sigmoid import (
    GemmlowpSigmoid16x8Params,
    SigmoidInput,
    interpolate,
    prepare_sigmoid_input,
    scaled_input,
)

OP = "TANH"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> SigmoidInput | GemmlowpSigmoid16x8Params:
    return prepare_sigmoid_input(ctx, pot_shifts=(0, 1), gemmlowp_table=tanh_table)


def run(p: SigmoidInput | GemmlowpSigmoid16x8Params, x):
    if isinstance(p, GemmlowpSigmoid16x8Params):  # litert-opt / xnnpack on a power-of-two input scale
        return (p.table[x.view(np.uint16)],)
    d = scaled_input(p, x)
    r, saturated = interpolate(np.abs(d), 8)
    r = np.where(saturated, 0xFFFF << 8, r)
    r = np.where(d >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return ((r >> 8).astype(np.int16),)  # in [-32768, 32767]
