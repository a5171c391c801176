"""LiteRT's optimized DEPTHWISE_CONV_2D (optimized/integer_ops/depthwise_conv.h
``DepthwiseConvGeneral``; measured with single-op models, tests/kernels/test_conv.py): the int32
accumulators are the same; its output stage (``optimized_ops::Quantize``) requantizes output
channels in groups of 8 with NEON ``vqrdmulh`` + ``vrshl`` (NEON_2_SSE on x86:
``Requant.DOUBLE_HALF_UP``, the second rounding half up) and the remaining ``C_out % 8`` channels
with the scalar ``MultiplyByQuantizedMultiplier`` (gemmlowp, ``Requant.DOUBLE``). It dereferences
the bias: a node without bias crashes LiteRT (segfault, measured), so intq refuses it
(:data:`BIAS_REFUSED`).
"""

from __future__ import annotations

from intq.kernels._conv_common import ConvOperands
from intq.kernels.base import KernelContext, variant
from intq.kernels.depthwise_conv_2d import OP, DepthwiseConv2DParams, prepare_depthwise, run  # noqa: F401
from intq.kernels.litert_opt import FAMILY
from intq.kernels.requantize import Requantizer
from intq.kernels.targets import Requant

VECTOR_CHANNELS = 8  # LiteRT's optimized output stage: channel groups of 8 through NEON, the rest scalar
#: LiteRT's optimized depthwise kernel reads the bias unconditionally; under the XNNPACK resolver a node
#: without bias crashes LiteRT too (measured)
BIAS_REFUSED = "crashes (measured) on"


def channel_groups(ctx: KernelContext, ops: ConvOperands, c_out: int) -> tuple[Requantizer, Requantizer | None, int]:
    """The vector channels ``[0, 8 floor(C_out / 8))`` with the target's rounding (``DOUBLE_HALF_UP``),
    the rest with gemmlowp's (``DOUBLE``)."""
    split, tail = c_out, None
    if ctx.target.requant_for(OP) is Requant.DOUBLE_HALF_UP:
        split = c_out - c_out % VECTOR_CHANNELS
        if split < c_out:
            tail = ops.requantizer(ctx, OP, mode=Requant.DOUBLE, select=slice(split, None))
    if split > 0:
        return ops.requantizer(ctx, OP, select=slice(0, split)), tail, split
    return tail, None, c_out


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> DepthwiseConv2DParams:
    return prepare_depthwise(ctx, bias_refused=BIAS_REFUSED, requantizers=channel_groups)
