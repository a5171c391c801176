"""RELU_N1_TO_1: ``y = clamp(x)`` to the reals [-1, 1], requantized.

LiteRT (activations.cc ReluPrepare / Relu1Eval -> QuantizedReluX(-1, 1)):
``clamp(MultiplyByQuantizedMultiplier(x - Z_in, float(s_in / s_out)) + Z_out,
Z_out + roundf(-1 / s_out), Z_out + roundf(1 / s_out))`` within int8.

TensorFlow Lite Micro has no RELU_N1_TO_1 kernel (its op resolver rejects the model), so both
targets compute LiteRT's reference function, multiplier included; it is tested against LiteRT
only. Contract: int8 per-tensor input and output of
the same shape.
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu, run_relu
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel

OP = "RELU_N1_TO_1"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams | _ort.OrtLut:
    if _ort.is_ort(ctx):  # DequantizeLinear -> Clip -> QuantizeLinear, per code
        return _ort.prepare_unary(ctx, _ort.clip(-1, 1))
    return prepare_relu(ctx, "RELU_N1_TO_1", tflm_has_kernel=False)


def run(p: ReluParams | _ort.OrtLut, x):
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (run_relu(p, x),)
