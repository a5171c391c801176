"""TANH: ``y = tanh(x)`` on int8, output fixed at scale 1/128, zero point 0.

Contract (spec 003): input int8 per tensor, any scale and zero point; output int8 per tensor with
``(1/128, 0)`` exactly, same shape. Other output parameters are refused here although neither
runtime checks them: LiteRT's reference table uses whatever output parameters it is given,
TensorFlow Lite Micro computes as if they were (1/128, 0).

TensorFlow Lite Micro (``tanh.cc`` CalculateArithmeticOpData and ``reference_integer_ops::Tanh``):
``x - Z_in`` is rescaled to Q4.27 by ``MultiplyByQuantizedMultiplier`` with ``(m, shift) =
frexp(s_in * 2^27)``; inputs at or beyond the radius ``floor(15 * 2^27 / 2^shift)`` saturate to
-128 / 127; otherwise ``gemmlowp::tanh`` (fixed-point ``exp(-2|x|)`` and Newton-Raphson division)
gives Q0.31, and the output is ``clamp(RoundingDivideByPOT(., 24))`` (no zero point added).
Integer-only.

The result depends only on the int8 input code; ``prepare`` evaluates the fixed point on all 256
codes and ``run`` is a table lookup, as for LOGISTIC (:mod:`intq.kernels.logistic`;
:func:`intq.kernels._fixedpoint_lut.prepare_q4_table` serves both).

**16x8** (int16 activations, int8 weights): ``y = tanh(x) = 2 sigmoid(2x) - 1`` on int16, output
scale 2^-15, zero point 0.

LiteRT 2.3 (``TanhEval`` int16 → ``reference_integer_ops::Tanh``) and TFLM (``tanh.cc`` → the same
function) compute, with ``d`` the scaled input of :mod:`intq.kernels._int16_sigmoid` (1/24 of
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

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_sigmoid import (
    SigmoidInput,
    interpolate,
    prepare_sigmoid_input,
    scaled_input,
)

OP = "TANH"
FUNCTION = fp.Q4Function("tanh", fp.tanh, output_bits=7, output_zero_point=0)  # output (1/128, 0)


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
POT_SHIFTS = (0, 1)


def run_int16(p: SigmoidInput, x):
    d = scaled_input(p, x)
    r, saturated = interpolate(np.abs(d), 8)
    r = np.where(saturated, 0xFFFF << 8, r)
    r = np.where(d >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return ((r >> 8).astype(np.int16),)  # in [-32768, 32767]
