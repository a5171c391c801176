"""LiteRT's CONV_2D (``conv.cc``, every resolver): the reference kernel's arithmetic, but Prepare
requires the bias input (``TF_LITE_ENSURE(context, has_bias)``, and an index -1 fails "Tensor at
index 2 was optional but was expected"); TFLite Micro accepts a convolution without one
(:mod:`intq.kernels.conv_2d`); the same for 16x8 layers. LiteRT's optimized kernel's rounding is the
``litert-opt`` row's contract (``DOUBLE_HALF_UP``), which the reference kernel reads.
"""

from __future__ import annotations

from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.conv_2d import (  # noqa: F401 (run, run_int16: the reference's)
    OP, Conv2D16x8Params, Conv2DParams, prepare_conv, prepare_conv_int16, run, run_int16)
from intq.kernels.litert import FAMILY

#: why LiteRT refuses a CONV_2D without bias (:func:`intq.kernels._conv_common.conv_bias`)
BIAS_REFUSED = "refuses"


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> Conv2DParams:
    return prepare_conv(ctx, bias_refused=BIAS_REFUSED)


@variant(OP, family=FAMILY, activations=(INT16,), run="run_int16")
def prepare_int16(ctx: KernelContext) -> Conv2D16x8Params:
    return prepare_conv_int16(ctx, bias_refused=BIAS_REFUSED)
