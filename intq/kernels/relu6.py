"""RELU6: ``y = clamp(x)`` to the reals [0, 6], not requantized.

TFLM (activations_common.cc Relu6Prepare, Relu6Quantized): no requantization,
``clamp(x, Z_in, clamp(round(6 / s_in) + Z_in))`` — TFLM assumes the output has the input's scale
and zero point and ignores the output's own; intq does the same. (LiteRT requantizes: its variant.)

Contract: int8 per-tensor input and output of the same shape.

**16x8** (int16 activations, int8 weights): int16 in and out, zero point 0
(:func:`intq.kernels._int16_common.prepare_relu_16x8`).

LiteRT requantizes to the output's parameters under every resolver (``QuantizedReluX<int16_t>``;
XNNPACK takes no int16 tensor, and LiteRT's optimized resolver runs the same function: measured
equal on every random model of tests/kernels/test_int16x8.py); TFLM clamps in the input's scale and
ignores the output's parameters (as for int8).
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu, run_relu
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels._int16_common import Relu16x8Params, prepare_relu_16x8, run_relu_16x8

OP = "RELU6"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReluParams:
    return prepare_relu(ctx, "RELU6", clamp_only=True)


def run(p: ReluParams, x):
    return (run_relu(p, x),)


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Relu16x8Params:
    return prepare_relu_16x8(ctx, "RELU6", clamp_only=True)


def run_int16(p: Relu16x8Params, x):
    return (run_relu_16x8(p, x),)
