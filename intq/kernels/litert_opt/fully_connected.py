"""LiteRT's optimized 16x8 FULLY_CONNECTED (XNNPACK takes no int16 tensor; measured on 150 random
models without bias, 43 of which differ from the reference; explained from fully_connected.cc): with
an int64 bias, or with the option ``quantized_bias_type`` INT64 (which TensorFlow's 16x8 converter
writes on every layer, bias or not), LiteRT's optimized resolver runs its reference kernel
(:mod:`intq.kernels.litert.fully_connected`); **without a bias and without that option** (intq's
exports; measured: the converter's bias-less layer follows the reference, the same layer without the
option takes ruy) it takes ``optimized_integer_ops::FullyConnected`` through cpu_backend_gemm (ruy):
an int32 accumulator (wrapping: the sum is taken modulo 2^32) and the int8 optimized kernel's
fixed-point output stage, ``Requant.DOUBLE_HALF_UP`` with ``M`` from the float32 product per tensor
and the double product per channel (:func:`intq.kernels.fully_connected.fc_multipliers`) —
:class:`OptimizedFullyConnected16x8Params`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.fully_connected import OP, fc_multipliers, int16_layer
from intq.kernels.litert_opt import FAMILY
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.qmath.raw import wrap32


@dataclass(frozen=True, eq=False)
class OptimizedFullyConnected16x8Params:
    """LiteRT's optimized 16x8 FULLY_CONNECTED without bias (module docstring): int32 sums, NEON-style
    double rounding with the second step half up."""

    weights_t: np.ndarray  # int64 [K, N]
    k: int
    out_shape: tuple[int, ...]
    requant: Requantizer  # Requant.DOUBLE_HALF_UP, int16 out


def takes_ruy(ctx: KernelContext) -> bool:
    """No bias input and no ``quantized_bias_type`` INT64: LiteRT's optimized resolver takes ruy."""
    return not ctx.has_input(2) and ctx.attr("quantized_bias_type") != "INT64"


@variant(OP, family=FAMILY, activations=(INT16,), applies=takes_ruy)
def prepare(ctx: KernelContext) -> OptimizedFullyConnected16x8Params:
    layer = int16_layer(ctx)
    mode = ctx.target.requant_for(OP)
    try:
        r = make_requantizer(fc_multipliers(layer.in_qp, layer.w_qp, layer.out_qp, mode), mode, 0, layer.act_min,
                             layer.act_max, np.int16)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    return OptimizedFullyConnected16x8Params(layer.w.astype(np.int64).T.copy(), layer.w.shape[1], layer.out_shape, r)


def run(p: OptimizedFullyConnected16x8Params, x, w=None, b=None):
    acc = wrap32(x.reshape(-1, p.k).astype(np.int64) @ p.weights_t)  # ruy's int32 sum, wrapping
    return (requantize(p.requant, acc).reshape(p.out_shape),)
