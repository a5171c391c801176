"""onnxruntime's QLinearLeakyRelu: ``QuantizeLinear(x >= 0 ? x : float32(x alpha))`` of each
dequantized code, in float32."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels import leaky_relu as reference
from intq.kernels.ort.common import OrtLut, lookup, prepare_unary


def float_leaky_relu(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """QLinearLeakyRelu's float function: ``x >= 0 ? x : float32(x * alpha)``."""
    a = np.float32(alpha)
    return lambda x: np.where(x >= 0, x, (x * a).astype(np.float32)).astype(np.float32)


@variant(reference.OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OrtLut:
    ctx.check_emulated()
    return prepare_unary(ctx, float_leaky_relu(reference.alpha_of(ctx)))


def run(p: OrtLut, x):
    return (lookup(p, x),)
