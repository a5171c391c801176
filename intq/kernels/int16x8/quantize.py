"""QUANTIZE with an int16 input: requantization to int16 (or int8), e.g. the converter's rescale of a
CONCATENATION input in a 16x8 model.

Both runtimes (LiteRT 2.3 ``quantize.cc`` → ``reference_ops::Requantize``, TFLM ``quantize_common.cc``
→ the same function) compute ``clamp(MultiplyByQuantizedMultiplier(x - Z_in, m, shift) + Z_out)``
(gemmlowp double rounding) with ``(m, shift) = QuantizeMultiplier(double(s_in) / double(s_out))``
— the scales divided in **double**, as intq's int8 QUANTIZE does too: measured on 60 random
int16 → int16 models, a float32 quotient disagrees with both runtimes on 11 of them, the double
one on none. The targets agree. A float input is the graph boundary and stays with
:mod:`intq.kernels.quantize`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import runtime_16x8, scale64
from intq.qmath.raw import mbqm
from intq.qmath import quantize_multiplier

OP = "QUANTIZE"


@dataclass(frozen=True)
class Requantize16Params:
    input_zero_point: int
    multiplier: int
    shift: int
    zero_point: int
    qmin: int
    qmax: int
    out_dtype: np.dtype


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Requantize16Params:
    runtime_16x8(ctx)
    in_qp = ctx.per_tensor(ctx.input(0), "input", (np.int16,))
    y = ctx.outputs[0]
    out_qp = ctx.per_tensor(y, "output", (np.int16, np.int8))
    if ctx.input(0).shape != y.shape:
        raise ctx.error("input and output must have the same shape")
    real = scale64(in_qp) / scale64(out_qp)
    qm = quantize_multiplier(real)
    if int(qm.shift) > 30:
        raise ctx.error(f"s_in / s_out = {real:.6g} is too large for TFLite's fixed-point multiplier")
    return Requantize16Params(in_qp.tensor_zero_point, int(qm.multiplier), int(qm.shift), out_qp.tensor_zero_point,
                              out_qp.qmin, out_qp.qmax, y.dtype)


def run(p: Requantize16Params, x):
    y = mbqm(x.astype(np.int64) - p.input_zero_point, p.multiplier, p.shift) + p.zero_point  # x * 2^left wraps as in C
    return (np.clip(y, p.qmin, p.qmax).astype(p.out_dtype),)
