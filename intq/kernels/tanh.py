"""TANH: ``y = tanh(x)`` on int8, output fixed at scale 1/128, zero point 0.

Contract (spec 003): input int8 per tensor, any scale and zero point; output int8 per tensor with
``(1/128, 0)`` exactly, same shape. Other output parameters are refused here although neither
runtime checks them: LiteRT's reference table uses whatever output parameters it is given,
TensorFlow Lite Micro computes as if they were (1/128, 0).

The two runtimes use different algorithms, and intq reproduces each for its target:

* ``tflite`` — TensorFlow Lite Micro, ``tanh.cc`` (CalculateArithmeticOpData) and
  ``reference_integer_ops::Tanh``: ``x - Z_in`` is rescaled to Q4.27 by
  ``MultiplyByQuantizedMultiplier`` with ``(m, shift) = frexp(s_in * 2^27)``; inputs at or beyond
  the radius ``floor(15 * 2^27 / 2^shift)`` saturate to -128 / 127; otherwise ``gemmlowp::tanh``
  (fixed-point ``exp(-2|x|)`` and Newton-Raphson division) gives Q0.31, and the output is
  ``clamp(RoundingDivideByPOT(., 24))`` (no zero point added). Integer-only.
* ``litert-ref`` — LiteRT ``BUILTIN_REF``, ``activations.cc`` TanhPrepare<kReference>: a
  256-entry table from ``LUTPopulate<int8_t>`` computed in float32 with the C library's ``tanhf``
  (``tanhf(s_in * (v - Z_in))`` times ``1/s_out``, ``std::round``, ``+ Z_out``), then
  ``LookupTable``.

The two agree except near a rounding boundary of the output, and both depend only on the int8
input code; ``prepare`` evaluates the target's algorithm on all 256 codes and ``run`` is a table
lookup, as for LOGISTIC (:mod:`intq.kernels.logistic`, which also names the ``litert-opt`` and
``xnnpack`` tables; :func:`intq.kernels._fixedpoint_lut.prepare_q4_table` serves both).
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel

OP = "TANH"
FUNCTION = fp.Q4Function("tanh", fp.tanh, output_bits=7, output_zero_point=0)  # output (1/128, 0)


@kernel(OP)
def prepare(ctx: KernelContext) -> fp.LutParams | _ort.OrtLut:
    if _ort.is_ort(ctx):  # DequantizeLinear -> Tanh -> QuantizeLinear: MLAS's float32 tanh per code
        return _ort.prepare_unary(ctx, _ort.mlas_tanh)
    return fp.prepare_q4_table(ctx, FUNCTION)


def run(p: fp.LutParams | _ort.OrtLut, x):
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (p.table[x.view(np.uint8)],)
