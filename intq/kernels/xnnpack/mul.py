"""XNNPACK's int8 MUL: XNNPACK takes an int8 MUL whose ``float(float(s_a * s_b) / s_y)`` lies in
[2^-16, 2^8) and requantizes in float32 (``xnn_qs8_vmul_minmax_fp32``: ``rint(float((a - Z_a)(b -
Z_b)) * S)``, half to even; clamp from ``xnn_qs8_quantize``).
The other MULs fall back to LiteRT's optimized kernel (the ``litert_opt`` family).
"""

from __future__ import annotations

import numpy as np

from intq.errors import IntqError
from intq.kernels._elementwise_common import int8_binary, scale_of, scale_ratio, zero_point_of
from intq.kernels.base import KernelContext, variant
from intq.kernels.mul import OP, MulParams, run  # noqa: F401 (run: the reference's, on XNNPACK's requantizer)
from intq.kernels.requantize import make_requantizer
from intq.kernels.targets import Arithmetic, Requant
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.common import xnnpack_activation_range

SCALE_RANGE = (2.0**-16, 2.0**8)  # the TFLite delegate's check on float(float(s_a * s_b) / s_y)


def _scale(qa, qb, qy) -> float:
    """XNNPACK's float32 scale: LiteRT's multiplier ``float(float(s_a * s_b) / s_y)``."""
    return scale_ratio(Arithmetic.FLOAT32, (scale_of(qa), scale_of(qb)), scale_of(qy))


def takes(ctx: KernelContext) -> bool:
    """int8 per-tensor operands (else LiteRT's kernel reports the contract) whose scale lies in
    :data:`SCALE_RANGE`."""
    ts = (*ctx.inputs, *ctx.outputs)
    if len(ctx.inputs) != 2 or len(ctx.outputs) != 1 or any(
            t is None or t.dtype != np.int8 or t.qparams is None or t.qparams.per_axis for t in ts):
        return False
    return SCALE_RANGE[0] <= _scale(*(t.qparams for t in ts)) < SCALE_RANGE[1]


@variant(OP, family=FAMILY, applies=takes)
def prepare(ctx: KernelContext) -> MulParams:
    io = int8_binary(ctx)
    qa, qb, qy = io.qa, io.qb, io.qy
    try:
        lo, hi = xnnpack_activation_range(ctx.attr("fused_activation_function", "NONE"), qy)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    r = make_requantizer(_scale(qa, qb, qy), Requant.FLOAT32_RNE, zero_point_of(qy), lo, hi, np.int8)
    return MulParams(zero_point_of(qa), zero_point_of(qb), r)
