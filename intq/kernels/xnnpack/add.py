"""XNNPACK's int8 ADD: it takes an ADD whose input-to-output scale ratios lie in [2^-10, 2^8)
(:func:`takes`) and computes its own single-rounding form (:class:`XnnpackAdd`: 21-bit multipliers,
one shift, ties up; clamp from ``xnn_qs8_quantize``); other ADDs fall back to LiteRT's optimized
kernel (the ``litert_opt`` family). SUB is the same with the second multiplier negated
(:mod:`intq.kernels.xnnpack.sub`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.kernels._elementwise_common import INT8_BY_BITS, Int8Binary, int8_binary, int8_table, lookup, scale_of, zero_point_of
from intq.kernels.base import KernelContext, variant
from intq.kernels.xnnpack import FAMILY
from intq.kernels.xnnpack.common import xnnpack_activation_range
from intq.qmath import QuantParams

OP = "ADD"

XNNPACK_ADD_SCALE_RANGE = (2.0**-10, 2.0**8)  # the TFLite delegate's check on s_in / s_out (else not delegated)


@dataclass(frozen=True, eq=False)
class XnnpackAdd:
    """XNNPACK's qs8 add (``xnn_init_qs8_add_minmax_scalar_params`` and the vadd kernels):
    ``y = clamp(((bias + a * m_a + b * m_b) >> shift) + Z_y, lo, hi)`` on raw int8 ``a``, ``b``.

    ``r_a = float(s_a / s_y)``, ``r_b = float(s_b / s_y)`` (negated for SUB); ``shift = 20 - e`` with
    ``e`` the float32 exponent of ``max(|r_a|, |r_b|)``; ``m = lrintf(r * 2^shift)`` (ties to
    even; the largest ``|m|`` in [2^20, 2^21)); ``bias = 2^(shift-1) - m_a Z_a - m_b Z_b`` — one
    rounding, half up, of the exact sum. ``lo``/``hi`` from :func:`xnnpack_activation_range`.
    ``table_a[a] = a * m_a``, ``table_b[b] = b * m_b + bias`` (|.| < 2^29: no overflow)."""

    shift: int
    zero_point: int
    lo: int
    hi: int
    table_a: np.ndarray  # int64 [256], indexed by the int8's bits (lookup)
    table_b: np.ndarray


def takes(ctx: KernelContext) -> bool:
    """Whether XNNPACK takes the ADD / SUB: int8 per-tensor inputs and output (else the kernels
    below XNNPACK report the contract) whose scale ratios ``float32(s_in / s_out)`` lie in
    [2^-10, 2^8) (the TFLite delegate's check; otherwise LiteRT's own kernel runs)."""
    qps = [t.qparams for t in (*ctx.inputs, *ctx.outputs)]
    if len(ctx.inputs) != 2 or len(ctx.outputs) != 1 or any(
            t is None or t.dtype != np.int8 or t.qparams is None or t.qparams.per_axis for t in (*ctx.inputs, *ctx.outputs)):
        return False
    qa, qb, qy = qps
    s_y = scale_of(qy)
    lo_r, hi_r = XNNPACK_ADD_SCALE_RANGE
    return all(lo_r <= float(np.float32(scale_of(q) / s_y)) < hi_r for q in (qa, qb))


def xnnpack_add(ctx: KernelContext, io: Int8Binary, subtract: bool) -> XnnpackAdd:
    """XNNPACK's parameters of a node it takes (:func:`takes`)."""
    qa, qb, qy = io.qa, io.qb, io.qy
    s_y = scale_of(qy)
    r_a = np.float32(scale_of(qa) / s_y)
    r_b = np.float32(scale_of(qb) / s_y)
    if subtract:
        r_b = -r_b
    biggest = max(abs(r_a), abs(r_b))
    exponent = int((np.array(biggest, np.float32).view(np.uint32) >> 23) & 0xFF) - 127
    shift = 20 - exponent
    m_a = int(np.rint(r_a * np.float32(2.0**shift)))  # exact power-of-two scaling, then ties to even
    m_b = int(np.rint(r_b * np.float32(2.0**shift)))
    za, zb = zero_point_of(qa), zero_point_of(qb)
    bias = (1 << (shift - 1)) - m_a * za - m_b * zb
    lo, hi = xnnpack_bounds(ctx, qy)
    return XnnpackAdd(shift, zero_point_of(qy), lo, hi, int8_table(INT8_BY_BITS * m_a, np.int64),
                      int8_table(INT8_BY_BITS * m_b + bias, np.int64))


def xnnpack_bounds(ctx: KernelContext, qy: QuantParams) -> tuple[int, int]:
    """The output clamp XNNPACK derives from the node's fused activation."""
    try:
        return xnnpack_activation_range(ctx.attr("fused_activation_function", "NONE"), qy)
    except IntqError as e:
        raise ctx.error(str(e)) from None


def run_xnnpack_add(p: XnnpackAdd, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``clamp(((table_a[a] + table_b[b]) >> shift) + Z_y, lo, hi)`` as int8, broadcasting."""
    acc = lookup(p.table_a, a) + lookup(p.table_b, b)
    y = (acc >> p.shift) + p.zero_point
    return np.clip(y, p.lo, p.hi).astype(np.int8)


@variant(OP, family=FAMILY, applies=takes)
def prepare(ctx: KernelContext) -> XnnpackAdd:
    return xnnpack_add(ctx, int8_binary(ctx), subtract=False)


def run(p: XnnpackAdd, a, b):
    return (run_xnnpack_add(p, a, b).reshape(np.broadcast_shapes(a.shape, b.shape)),)
