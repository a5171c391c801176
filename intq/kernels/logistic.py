"""LOGISTIC (sigmoid): ``y = 1 / (1 + exp(-x))`` on int8, output fixed at scale 1/256, zero point -128.

Contract (spec 003): input int8 per tensor, any scale and zero point; output int8 per tensor with
``(1/256, -128)`` exactly, same shape. Other output parameters are refused here although the
runtimes differ: LiteRT's reference kernel checks only the scale (any zero point is used in its
table), TFLite Micro checks only the zero point (it computes as if the scale were 1/256).

The two runtimes use different algorithms, and intq reproduces each for its target:

* ``tflite`` — TensorFlow Lite Micro, ``logistic_common.cc`` (CalculateArithmeticOpDataLogistic)
  and ``reference_integer_ops::Logistic``: ``x - Z_in`` is rescaled to Q4.27 by
  ``MultiplyByQuantizedMultiplier`` with ``(m, shift) = frexp(s_in * 2^27)`` (``m = round(q * 2^31)``);
  inputs at or beyond the radius ``floor(15 * 2^27 / 2^shift)`` saturate to -128 / 127; otherwise
  ``gemmlowp::logistic`` (fixed-point exp and Newton-Raphson division) gives Q0.31, and the output
  is ``clamp(RoundingDivideByPOT(., 23) - 128)``. Integer-only.
* ``litert-ref`` — LiteRT ``BUILTIN_REF``, ``activations.cc`` SigmoidPrepare<kReference>:
  a 256-entry table from ``LUTPopulate<int8_t>`` computed in float32 with the C library's
  ``expf`` (``1.0f / (1.0f + expf(-s_in * (v - Z_in)))``, times ``1/s_out``, ``std::round``,
  ``+ Z_out``), then ``LookupTable``.

The two agree except where a value lies within about 1e-7 of a rounding boundary of the output:
a search over 20000 input scales found such an input code in roughly one model in a thousand
(tests/kernels/test_lut_ops.py pins some). Either way the result depends only on the int8 input
code, so ``prepare`` evaluates the target's algorithm on all 256 codes (the fixed-point one in
integers, LiteRT's in float32 as LiteRT does) and ``run`` is a table lookup ``table[uint8(x)]``
(:func:`intq.kernels._fixedpoint_lut.prepare_q4_table`, shared with TANH).

``litert-opt``: LiteRT's optimized kernel builds the same table (measured equal). ``xnnpack``:
XNNPACK takes every int8 node and builds its own table, rounding half to even with the output
zero point added in float (:func:`intq.kernels._fixedpoint_lut.xnnpack_float_lut`; measured on
every input code of tie-prone scales).
"""

from __future__ import annotations

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel

OP = "LOGISTIC"
FUNCTION = fp.Q4Function("logistic", fp.logistic, output_bits=8, output_zero_point=-128)  # output (1/256, -128)


@kernel(OP)
def prepare(ctx: KernelContext) -> fp.LutParams | _ort.OrtLut:
    if _ort.is_ort(ctx):  # QLinearSigmoid: MLAS's float32 logistic per code
        return _ort.prepare_unary(ctx, _ort.mlas_logistic)
    return fp.prepare_q4_table(ctx, FUNCTION)


def run(p: fp.LutParams | _ort.OrtLut, x):
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (p.table[x.view(np.uint8)],)
