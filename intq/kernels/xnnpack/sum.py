"""XNNPACK's int8 SUM: XNNPACK takes every int8
SUM and computes its MEAN without ``1/N`` (:mod:`intq.kernels.xnnpack.mean`): ``clamp(nearbyint(
float32(sum q_in) * r + Y_z))``, ``Y_z = float32(Z_out - float32(N Z_in) * r)``, over any axes.
"""

from __future__ import annotations

from intq.kernels._pool_common import prepare_quantized_sum
from intq.kernels.base import KernelContext, variant
from intq.kernels.sum import OP
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.mean import XnnpackMeanParams, run, xnnpack_reduce  # noqa: F401 (run: XNNPACK's MEAN's)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> XnnpackMeanParams:
    ctx.check_emulated()
    return xnnpack_reduce(ctx, prepare_quantized_sum(ctx, mean=False), mean=False)
