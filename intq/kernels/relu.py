"""RELU: ``y = clamp(MultiplyByQuantizedMultiplier(x - Z_in, s_in / s_out) + Z_out, Z_out, 127)``.

TFLite's int8 RELU requantizes: input and output may have different parameters (LiteRT
activations.cc ReluPrepare / ReluEval -> QuantizedReluX -> ReluX; TFLM activations_common.cc
CalculateReluOpData / ReluQuantized). The lower bound is the output's zero point (real 0).
Targets differ only in the multiplier's arithmetic: ``litert-ref`` float32 ``s_in / s_out``,
``tflite`` (TFLM) double. Contract: int8 per-tensor input and output of the same shape.

**16x8** (int16 activations, int8 weights): int16 in and out, zero point 0
(:func:`intq.kernels._int16_common.prepare_relu_16x8`).

LiteRT requantizes to the output's parameters under every resolver (``QuantizedReluX<int16_t>``;
XNNPACK takes no int16 tensor, and LiteRT's optimized resolver runs the same function: measured
equal on every random model of tests/kernels/test_int16x8.py); TFLM requantizes with a double multiplier.
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu, run_relu
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_common import Relu16x8Params, prepare_relu_16x8, run_relu_16x8

OP = "RELU"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams:
    return prepare_relu(ctx, "RELU")


def run(p: ReluParams, x):
    return (run_relu(p, x),)


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Relu16x8Params:
    return prepare_relu_16x8(ctx, "RELU")


def run_int16(p: Relu16x8Params, x):
    return (run_relu_16x8(p, x),)
