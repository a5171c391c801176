"""LiteRT's 16x8 FULLY_CONNECTED: (LiteRT 2.3 ``reference_integer_ops::FullyConnected[PerChannel]`` with the
float-scale arguments): ``static_cast<int32_t>(round(double(acc) * M))`` with
``M = double(s_in) * double(s_w[n]) / double(s_out)`` — no fixed-point multiplier (the same
``Requant.DOUBLE_PRODUCT`` float emulation as the int8 kernel on ``litert-ref``, whose row names it:
for int16 every LiteRT resolver runs it, the optimized one where it leaves the layer to its
reference kernel, :mod:`intq.kernels.litert_opt.fully_connected`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.kernels._conv_common import conv_scales
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.fully_connected import OP, int16_layer, int64_sums
from intq.kernels.litert import FAMILY
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant


@dataclass(frozen=True, eq=False)
class DoubleProductFullyConnected16x8Params:
    weights_t: np.ndarray  # int64 [K, N]
    bias: np.ndarray  # int64 [N]
    k: int
    out_shape: tuple[int, ...]
    requant: Requantizer  # Requant.DOUBLE_PRODUCT, int16 out


@variant(OP, family=FAMILY, activations=(INT16,))
def prepare(ctx: KernelContext) -> DoubleProductFullyConnected16x8Params:
    layer = int16_layer(ctx)
    real = conv_scales(layer.in_qp, layer.w_qp, layer.out_qp, layer.w.shape[0])
    try:
        r = make_requantizer(real, Requant.DOUBLE_PRODUCT, 0, layer.act_min, layer.act_max, np.int16)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    return DoubleProductFullyConnected16x8Params(layer.w.astype(np.int64).T.copy(), layer.bias, layer.w.shape[1],
                                                 layer.out_shape, r)


def run(p: DoubleProductFullyConnected16x8Params, x, w=None, b=None):
    return (requantize(p.requant, int64_sums(p, x)).reshape(p.out_shape),)
