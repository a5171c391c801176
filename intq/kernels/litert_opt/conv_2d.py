"""LiteRT's optimized CONV_2D on a grouped convolution (``G > 1``): the optimized resolver runs its
reference kernel there (measured: ``DOUBLE`` matches, ``DOUBLE_HALF_UP`` does not), so the node
rounds twice as gemmlowp does. Other convolutions are LiteRT's optimized kernel
(optimized/integer_ops/conv.h: im2col and cpu_backend_gemm, i.e. ruy), which computes the same
accumulators and multipliers and rounds the second step half up (``Requant.DOUBLE_HALF_UP``: SRDHM,
then ``(h + 2^(r-1)) >> r``; measured, tools/probe_litert_rounding.py and tests/kernels/test_conv.py):
the ``litert-opt`` row's contract, on LiteRT's CONV_2D (:mod:`intq.kernels.litert.conv_2d`).
"""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.conv_2d import OP, Conv2DParams, prepare_conv, run  # noqa: F401 (run: the reference's)
from intq.kernels.litert.conv_2d import BIAS_REFUSED
from intq.kernels.litert_opt import FAMILY
from intq.kernels.targets import Requant


def grouped(ctx: KernelContext) -> bool:
    """Whether the weights ``[C_out, KH, KW, C_g]`` have fewer channels than the NHWC input."""
    x, w = (ctx.inputs[i] if i < len(ctx.inputs) else None for i in (0, 1))
    return (x is not None and w is not None and x.shape is not None and w.shape is not None and len(x.shape) == 4
            and len(w.shape) == 4 and x.shape[3] is not None and w.shape[3] < x.shape[3])


@variant(OP, family=FAMILY, applies=grouped)
def prepare(ctx: KernelContext) -> Conv2DParams:
    return prepare_conv(ctx, bias_refused=BIAS_REFUSED, mode=Requant.DOUBLE)
