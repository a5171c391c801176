"""SUB: ``y = clamp(R_out(R_1((a - Z_a) << 20) - R_2((b - Z_b) << 20)) + Z_y)``, numpy broadcasting.

The integer loop is ADD's with a difference (reference_ops::SubElementwise /
BroadcastQuantSubSlow in LiteRT, TFLM's reference Sub): ``left_shift = 20``, inputs rescaled by
``s_a / T`` and ``s_b / T`` with ``T = 2 * max(s_a, s_b)``, the difference by
``T / (2^20 * s_y)``, MultiplyByQuantizedMultiplierSmallerThanOneExp (double rounding), fused
activation as the clamp.

Prepare computes the three real multipliers in double (LiteRT tflite/kernels/sub.cc
PrepareGeneralSubOp): ``s_a / double(T)`` and ``double(T) / float(2^20 * s_y)``. Recent TFLM
sources (sub_common.cc CalculateOpDataSub) write the same in float32, but the tflite-micro
package intq tests against computes the double form: on scale triples where the two differ in
an output element, TFLM equals the double form, and so both targets share it.

Contract (spec 003): both inputs and the output int8, per tensor; every multiplier in (0, 1).
(LiteRT accepts an output multiplier above 1 and then right-shifts by a negative amount, which
C leaves undefined; TFLM aborts. intq refuses it.) Overflow: as ADD, |difference| < 2^28.

Where the targets differ: ``litert-opt`` equals ``litert-ref`` (LiteRT's optimized int8 SUB
runs the same arithmetic; measured equal on every test model). ``xnnpack``: XNNPACK takes an
int8 SUB whose input-to-output scale ratios lie in [2^-10, 2^8) and computes it as its ADD with
the second multiplier negated (:class:`intq.kernels._elementwise_common.XnnpackAdd`); other SUBs
run LiteRT's kernel, as ``litert-opt``.

Run: an input's rescaled value depends on that int8 alone, so prepare evaluates
:func:`scaled_input` on all 256 values and run looks both operands up (one gather each, the same
integers) before requantizing the difference.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_BY_BITS,
    Rescale,
    XnnpackAdd,
    broadcast_shape,
    check_arity,
    fp32,
    fused_activation_range,
    int8_input,
    int8_output,
    int8_table,
    make_rescale,
    output_requantizer,
    requant_mode,
    rescale,
    run_xnnpack_add,
    scale_of,
    xnnpack_add,
    zero_point_of,
)
from intq.kernels.base import KernelContext, kernel
from intq.kernels.add import AddParams, run_reference

OP = "SUB"
LEFT_SHIFT = 20  # as ADD: 255 << 20 < 2^28


@kernel(OP)
def prepare(ctx: KernelContext) -> AddParams | XnnpackAdd:
    """ADD's parameters with ``table_b`` negated: ``table_a[a] + (-table_b)[b]`` is SUB's difference."""
    check_arity(ctx, 2)
    a, qa = int8_input(ctx, 0, "input 0")
    b, qb = int8_input(ctx, 1, "input 1")
    y, qy = int8_output(ctx)
    broadcast_shape(ctx, a, b, y)
    if ctx.target.xnnpack:
        xnn = xnnpack_add(ctx, qa, qb, qy, subtract=True)
        if xnn is not None:
            return xnn
    mode = requant_mode(ctx)
    s_a, s_b, s_y = scale_of(qa), scale_of(qb), scale_of(qy)
    twice_max = fp32(2) * max(s_a, s_b)  # exact in float32
    real_a = float(s_a) / float(twice_max)
    real_b = float(s_b) / float(twice_max)
    real_out = float(twice_max) / float(fp32(1 << LEFT_SHIFT) * s_y)  # int * float is a float product
    make_rescale(ctx, real_out, "output", mode, smaller_than_one=True)
    lo, hi = fused_activation_range(ctx, qy)
    za, zb = zero_point_of(qa), zero_point_of(qb)
    ra = make_rescale(ctx, real_a, "input 0", mode, smaller_than_one=True)
    rb = make_rescale(ctx, real_b, "input 1", mode, smaller_than_one=True)
    return AddParams(
        zero_point_a=za,
        zero_point_b=zb,
        rescale_a=ra,
        rescale_b=rb,
        output=output_requantizer(ctx, real_out, mode, qy, lo, hi),
        table_a=int8_table(scaled_input(ra, za, INT8_BY_BITS), np.int32),
        table_b=int8_table(-scaled_input(rb, zb, INT8_BY_BITS), np.int32),  # negated: SUB adds it
    )


def scaled_input(r: Rescale, zero_point: int, x: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp((x - Z) << 20, m, shift)``: |result| < 2^27."""
    return rescale(r, (np.asarray(x, dtype=np.int64) - zero_point) << LEFT_SHIFT)


def run(p: AddParams | XnnpackAdd, a, b):
    if isinstance(p, XnnpackAdd):
        return (run_xnnpack_add(p, a, b).reshape(np.broadcast_shapes(a.shape, b.shape)),)
    return (run_reference(p, a, b),)
