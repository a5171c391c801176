"""XNNPACK's int8 SUB: taken where its input-to-output scale ratios lie in [2^-10, 2^8)
(:func:`intq.kernels.xnnpack.add.takes`) and computed as its ADD with the second multiplier negated
(:class:`intq.kernels.xnnpack.add.XnnpackAdd`); other SUBs run LiteRT's kernel, the reference one
(LiteRT's optimized int8 SUB computes the same).
"""

from __future__ import annotations

from intq.kernels._elementwise_common import int8_binary
from intq.kernels.base import KernelContext, variant
from intq.kernels.sub import OP
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.add import XnnpackAdd, run, takes, xnnpack_add  # noqa: F401 (run: XNNPACK's add)


@variant(OP, family=FAMILY, applies=takes)
def prepare(ctx: KernelContext) -> XnnpackAdd:
    return xnnpack_add(ctx, int8_binary(ctx), subtract=True)
