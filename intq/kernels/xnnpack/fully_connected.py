"""XNNPACK's int8 FULLY_CONNECTED: XNNPACK takes every int8 FULLY_CONNECTED intq accepts (measured) and requantizes in
float32: ``rint(float(acc) * float(float(s_in * s_w) / s_out))``, half to even, clamped to
``xnn_qs8_quantize`` of the activation bounds.
"""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.fully_connected import OP, FullyConnectedParams, prepare_fc, run  # noqa: F401 (run)
from intq.kernels.targets import Requant
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.common import xnnpack_activation_range


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> FullyConnectedParams:
    return prepare_fc(ctx, mode=Requant.FLOAT32_RNE, bounds=xnnpack_activation_range)
