"""XNNPACK's int8 TRANSPOSE_CONV: the delegate takes an int8 TRANSPOSE_CONV (``VisitTransposeConvNode``) unless its
padding is SAME with a kernel smaller than the stride (:func:`takes`), and requantizes
like its convolutions: ``rint(float32(acc) * float32(float32(s_in * s_w) / s_out))``, half to
even, clamp from ``xnn_qs8_quantize`` (``Requant.FLOAT32_RNE``). A node it declines runs LiteRT's
optimized kernel, as ``litert-opt``.
"""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.targets import Requant
from intq.kernels.transpose_conv import OP, TransposeConvParams, run, transpose_parts  # noqa: F401 (run)
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.common import xnnpack_activation_range


def xnnpack_takes(padding: str, kernel_hw: tuple[int, int], stride_hw: tuple[int, int]) -> bool:
    """Whether LiteRT's XNNPACK delegate takes an int8 TRANSPOSE_CONV intq accepts for LiteRT
    (``CalculateTransposeConvPaddings``): SAME padding needs each kernel dimension >= its stride
    (VALID's "output smaller than the kernel" cannot pass LiteRT's size check)."""
    return padding != "SAME" or all(k >= s for k, s in zip(kernel_hw, stride_hw))


def takes(ctx: KernelContext) -> bool:
    """:func:`xnnpack_takes` on the node's padding, kernel (weights ``[C_out, KH, KW, C_in]``) and strides."""
    w = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    strides = (ctx.attr("stride_h", 0), ctx.attr("stride_w", 0))
    if w is None or w.shape is None or len(w.shape) != 4 or not all(isinstance(s, int) for s in strides):
        return False  # the contract check the kernels share reports it
    return xnnpack_takes(ctx.attr("padding", "SAME"), tuple(w.shape[1:3]), strides)


@variant(OP, family=FAMILY, applies=takes)
def prepare(ctx: KernelContext) -> TransposeConvParams:
    parts = transpose_parts(ctx, size_checked=True)
    return parts.params(parts.ops.requantizer(ctx, OP, mode=Requant.FLOAT32_RNE, bounds=xnnpack_activation_range))
