"""XNNPACK's int8 LEAKY_RELU (measured, explained from XNNPACK's
``xnn_init_qs8_lrelu_scalar_params`` and its qs8 ``vlrelu`` kernels): XNNPACK takes the node
when ``P = float32(s_in / s_out)`` lies in [2^-8, 2^7] and ``N = float32(P * alpha)`` satisfies ``2^-8 <= |N|``, ``-0x1.FFFCp+6 <= N <= 2^7`` (its
asserts; the delegate's acceptance coincides, measured), and computes with 8-bit fixed-point
multipliers ``m_p = lrintf(256 P)``, ``m_n = lrintf(256 N)`` (half to even)::

    y = clamp(((v * (v >= 0 ? m_p : m_n) + 128) >> 8) + Z_out)           (integers only)

Otherwise LiteRT's kernel runs, which for LEAKY_RELU is the reference one (``litert-opt`` too).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_BY_BITS, INT8_MAX, INT8_MIN, fp32, int8_table, int8_unary, requant_mode, scale_of, zero_point_of)
from intq.kernels.base import KernelContext, variant
from intq.kernels.leaky_relu import OP, LeakyReluParams, alpha_of, run  # noqa: F401 (run: the table lookup)
from intq.kernels.xnnpack import FAMILY


def xnnpack_leaky_relu_table(s_in, s_out, alpha, z_in: int, z_out: int) -> np.ndarray | None:
    """XNNPACK's qs8 LEAKY_RELU on every int8 (module docstring), or None where XNNPACK declines."""
    positive = np.float32(np.float32(s_in) / np.float32(s_out))
    negative = np.float32(positive * np.float32(alpha))
    if not (2.0**-8 <= positive <= 2.0**7 and abs(negative) >= 2.0**-8
            and -float.fromhex("0x1.FFFCp+6") <= negative <= 2.0**7):
        return None
    m_p, m_n = (int(np.rint(np.float32(256) * v)) for v in (positive, negative))  # lrintf
    v = INT8_BY_BITS - z_in
    y = ((v * np.where(v >= 0, m_p, m_n) + 128) >> 8) + z_out
    return int8_table(np.clip(y, INT8_MIN, INT8_MAX), np.int8)


def _table(ctx: KernelContext) -> np.ndarray | None:
    """XNNPACK's table of the node, or None where it declines it or the node breaks the contract
    (which LiteRT's kernel then reports)."""
    x = ctx.inputs[0] if len(ctx.inputs) == 1 else None
    y = ctx.outputs[0] if len(ctx.outputs) == 1 else None
    alpha = ctx.attr("alpha", 0.2)
    if (x is None or y is None or isinstance(alpha, bool) or not isinstance(alpha, (int, float))
            or not np.isfinite(alpha) or any(t.dtype != np.int8 or t.qparams is None or t.qparams.per_axis
                                             for t in (x, y))):
        return None
    qx, qy = x.qparams, y.qparams
    return xnnpack_leaky_relu_table(scale_of(qx), scale_of(qy), fp32(alpha), zero_point_of(qx), zero_point_of(qy))


def takes(ctx: KernelContext) -> bool:
    return _table(ctx) is not None


@variant(OP, family=FAMILY, applies=takes)
def prepare(ctx: KernelContext) -> LeakyReluParams:
    ctx.check_emulated()
    alpha_of(ctx)
    io = int8_unary(ctx)
    requant_mode(ctx)
    return LeakyReluParams(zero_point_of(io.qx), zero_point_of(io.qy), None, None, 1, _table(ctx))
