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
from intq.kernels.base import KernelContext, kernel
from intq.kernels.targets import Arithmetic

OP = "RELU_N1_TO_1"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams:
    return prepare_relu(ctx, "RELU_N1_TO_1", arithmetic=Arithmetic.FLOAT32)  # LiteRT's Prepare, on every target


def run(p: ReluParams, x):
    return (run_relu(p, x),)
