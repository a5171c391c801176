"""RELU, 16x8: int16 in and out, zero point 0 (:func:`intq.kernels.int16x8._common.prepare_relu_16x8`).

LiteRT requantizes to the output's parameters under every resolver (``QuantizedReluX<int16_t>``;
XNNPACK takes no int16 tensor, and LiteRT's optimized resolver runs the same function: measured
equal on every random model of tests/kernels/test_int16x8.py); TFLM requantizes with a double multiplier.
"""

from __future__ import annotations

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8._common import Relu16x8Params, prepare_relu_16x8, run_relu_16x8

OP = "RELU"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Relu16x8Params:
    return prepare_relu_16x8(ctx, "RELU")


def run(p: Relu16x8Params, x):
    return (run_relu_16x8(p, x),)
