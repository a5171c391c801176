"""intq.kernels.int16x8 — the 16x8 kernels: int16 activations, int8 weights, int64 biases.

TFLite's "16x8" quantization (spec 003; the converter's
``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``) keeps the int8 operators'
semantics with symmetric int16 activations (zero point 0), but both runtimes implement many
operators differently for int16: int64 accumulators and a 16-bit reduced multiplier (conv family),
``left_shift = 15`` (ADD), 513-entry interpolated tables (SOFTMAX), a fixed 256-entry sigmoid
table (LOGISTIC, TANH). One module per operator, with the same contract as :mod:`intq.kernels`
(``OP``, ``prepare``, integer-only ``run``); :data:`KERNELS_16X8` registers them and
:func:`kernel_for` is what the interpreter asks when a node's activations are int16.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from intq.kernels.int16x8 import (
    add,
    average_pool_2d,
    conv_2d,
    depthwise_conv_2d,
    fully_connected,
    leaky_relu,
    logistic,
    max_pool_2d,
    mean,
    mul,
    quantize,
    softmax,
    tanh,
)

KERNELS_16X8: dict[str, ModuleType] = {}
for _module in (fully_connected, conv_2d, depthwise_conv_2d, add, max_pool_2d, average_pool_2d, mean, mul,
                leaky_relu, softmax, logistic, tanh, quantize):  # in the order the work was prioritised
    assert _module.OP not in KERNELS_16X8, _module.__name__
    KERNELS_16X8[_module.OP] = _module


def kernel_for(op: str, input_dtype) -> ModuleType | None:
    """The 16x8 kernel of ``op`` when its activations are int16, else None (the int8 kernels apply)."""
    if input_dtype is None or np.dtype(input_dtype) != np.int16:
        return None
    return KERNELS_16X8.get(op)


__all__ = ["KERNELS_16X8", "kernel_for"]
