"""XNNPACK's int8 CONV_2D: it takes every one intq accepts (grouped ones too) and requantizes in
float32 (``rint(float(acc) * float(float(s_in * s_w) / s_out))``, half to even, clamp from
``xnn_qs8_quantize``); LiteRT's Prepare still requires the bias (measured,
tools/probe_litert_rounding.py and tests/kernels/test_conv.py).
"""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.conv_2d import OP, Conv2DParams, prepare_conv, run  # noqa: F401 (run: the reference's)
from intq.kernels.litert.conv_2d import BIAS_REFUSED
from intq.kernels.targets import Requant
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.common import xnnpack_activation_range


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> Conv2DParams:
    return prepare_conv(ctx, bias_refused=BIAS_REFUSED, mode=Requant.FLOAT32_RNE, bounds=xnnpack_activation_range)
