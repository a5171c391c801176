"""LOGISTIC (sigmoid): ``y = 1 / (1 + exp(-x))`` on int8, output fixed at scale 1/256, zero point -128.

Contract (spec 003): input int8 per tensor, any scale and zero point; output int8 per tensor with
``(1/256, -128)`` exactly, same shape. Other output parameters are refused here although the
runtimes differ: LiteRT's reference kernel checks only the scale (any zero point is used in its
table), TFLite Micro checks only the zero point (it computes as if the scale were 1/256).

TensorFlow Lite Micro (``logistic_common.cc`` CalculateArithmeticOpDataLogistic and
``reference_integer_ops::Logistic``): ``x - Z_in`` is rescaled to Q4.27 by
``MultiplyByQuantizedMultiplier`` with ``(m, shift) = frexp(s_in * 2^27)`` (``m = round(q * 2^31)``);
inputs at or beyond the radius ``floor(15 * 2^27 / 2^shift)`` saturate to -128 / 127; otherwise
``gemmlowp::logistic`` (fixed-point exp and Newton-Raphson division) gives Q0.31, and the output is
``clamp(RoundingDivideByPOT(., 23) - 128)``. Integer-only.

The result depends only on the int8 input code, so ``prepare`` evaluates the fixed point on all
256 codes and ``run`` is a table lookup ``table[uint8(x)]``
(:func:`intq.kernels._fixedpoint_lut.prepare_q4_table`, shared with TANH; the runtimes whose
tables are built otherwise run the same lookup on their own table).

**16x8** (int16 activations, int8 weights): ``y = sigmoid(x)`` on int16, output scale 2^-15, zero point 0.

LiteRT 2.3 (``SigmoidEval`` int16 → ``reference_integer_ops::Logistic``) and TFLM
(``logistic.cc`` → the same function) compute, with ``d`` the scaled input of
:mod:`intq.kernels._int16_sigmoid` (1/24 of the real input = 2^9)::

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

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_sigmoid import (
    SigmoidInput,
    interpolate,
    prepare_sigmoid_input,
    scaled_input,
)

OP = "LOGISTIC"
FUNCTION = fp.Q4Function("logistic", fp.logistic, output_bits=8, output_zero_point=-128)  # output (1/256, -128)


@kernel(OP)
def prepare(ctx: KernelContext) -> fp.LutParams:
    return fp.prepare_q4_table(ctx, FUNCTION)


def run(p: fp.LutParams, x):
    return (p.table[x.view(np.uint8)],)


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> SigmoidInput:
    return prepare_sigmoid_input(ctx, pot_shifts=POT_SHIFTS)


#: the left shifts of the input scales the kernel takes as powers of two (multiplier ``3 << shift``)
POT_SHIFTS = (0,)


def run_int16(p: SigmoidInput, x):
    d = scaled_input(p, x)
    r, saturated = interpolate(np.abs(d), 9)
    r = np.where(saturated, 0x7FFF << 10, r)
    r = np.where(d >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return ((r >> 10).astype(np.int16),)  # in [0, 32767]
