"""XNNPACK's int8 DEPTHWISE_CONV_2D: XNNPACK takes every int8 depthwise convolution intq accepts
(measured) and requantizes in float32 (``rint(float(acc) * float(float(s_in * s_w) / s_out))``, half to even,
clamp from ``xnn_qs8_quantize`` of the activation bounds). A node without bias crashes LiteRT
under this resolver as well (measured), so ``xnnpack`` refuses it too.
"""

from __future__ import annotations

from intq.kernels._conv_common import ConvOperands
from intq.kernels.base import KernelContext, variant
from intq.kernels.depthwise_conv_2d import OP, DepthwiseConv2DParams, prepare_depthwise, run  # noqa: F401
from intq.kernels.litert_opt.depthwise_conv_2d import BIAS_REFUSED
from intq.kernels.requantize import Requantizer
from intq.kernels.targets import Requant
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.common import xnnpack_activation_range


def _float32(ctx: KernelContext, ops: ConvOperands, c_out: int) -> tuple[Requantizer, None, int]:
    return ops.requantizer(ctx, OP, mode=Requant.FLOAT32_RNE, bounds=xnnpack_activation_range), None, c_out


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> DepthwiseConv2DParams:
    return prepare_depthwise(ctx, bias_refused=BIAS_REFUSED, requantizers=_float32)
