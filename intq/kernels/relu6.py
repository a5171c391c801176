"""RELU6: ``y = clamp(x)`` to the reals [0, 6], requantized (LiteRT) or not (TFLM).

* ``litert-ref`` (activations.cc ReluPrepare / Relu6Eval -> QuantizedReluX(0, 6)):
  ``clamp(MultiplyByQuantizedMultiplier(x - Z_in, float(s_in / s_out)) + Z_out,
  Z_out, Z_out + roundf(6 / s_out))`` within int8.
* ``tflite`` (TFLM activations_common.cc Relu6Prepare, Relu6Quantized): no requantization,
  ``clamp(x, Z_in, clamp(round(6 / s_in) + Z_in))`` — TFLM assumes the output has the input's
  scale and zero point and ignores the output's own; intq's ``tflite`` target does the same.

Contract: int8 per-tensor input and output of the same shape.
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu, run_relu
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel

OP = "RELU6"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams | _ort.OrtLut:
    if _ort.is_ort(ctx):  # DequantizeLinear -> Clip -> QuantizeLinear, per code
        return _ort.prepare_unary(ctx, _ort.clip(0, 6))
    return prepare_relu(ctx, "RELU6", tflm_clamp_only=True)


def run(p: ReluParams | _ort.OrtLut, x):
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (run_relu(p, x),)
