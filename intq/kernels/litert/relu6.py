"""LiteRT's RELU6 (activations.cc ReluPrepare / Relu6Eval -> QuantizedReluX(0, 6)): requantized,
``clamp(MultiplyByQuantizedMultiplier(x - Z_in, float(s_in / s_out)) + Z_out, Z_out, Z_out +
roundf(6 / s_out))`` within int8 — where TFLM's (the reference, :mod:`intq.kernels.relu6`) only
clamps; the same for 16x8 (``QuantizedReluX<int16_t>``). The same under LiteRT's optimized resolver
(and XNNPACK declines int8 RELU6 and takes no int16 tensor).
"""

from __future__ import annotations

from intq.kernels._elementwise_common import ReluParams, prepare_relu
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels._int16_common import Relu16x8Params, prepare_relu_16x8
from intq.kernels.relu6 import OP, run, run_int16  # noqa: F401 (the reference's table lookups)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> ReluParams:
    return prepare_relu(ctx, "RELU6")


@variant(OP, family=FAMILY, activations=(INT16,), run="run_int16")
def prepare_int16(ctx: KernelContext) -> Relu16x8Params:
    return prepare_relu_16x8(ctx, "RELU6")
