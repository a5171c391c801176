"""RELU: ``y = clamp(MultiplyByQuantizedMultiplier(x - Z_in, s_in / s_out) + Z_out, Z_out, 127)``.

TFLite's int8 RELU requantizes: input and output may have different parameters (LiteRT
activations.cc ReluPrepare / ReluEval -> QuantizedReluX -> ReluX; TFLM activations_common.cc
CalculateReluOpData / ReluQuantized). The lower bound is the output's zero point (real 0).
Targets differ only in the multiplier's arithmetic: ``litert-ref`` float32 ``s_in / s_out``,
``tflite`` (TFLM) double. Contract: int8 per-tensor input and output of the same shape.
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu, run_relu
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel

OP = "RELU"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams | _ort.OrtLut:
    if _ort.is_ort(ctx):  # DequantizeLinear -> Relu -> QuantizeLinear, per code
        return _ort.prepare_unary(ctx, _ort.clip(0, None))
    return prepare_relu(ctx, "RELU")


def run(p: ReluParams | _ort.OrtLut, x):
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    return (run_relu(p, x),)
