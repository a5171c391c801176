"""SUB: ``y = clamp(R_out(R_1((a - Z_a) << 20) - R_2((b - Z_b) << 20)) + Z_y)``, numpy broadcasting.

The integer loop is ADD's with a difference (reference_ops::SubElementwise /
BroadcastQuantSubSlow in LiteRT, TFLM's reference Sub): ``left_shift = 20``, inputs rescaled by
``s_a / T`` and ``s_b / T`` with ``T = 2 * max(s_a, s_b)``, the difference by
``T / (2^20 * s_y)``, MultiplyByQuantizedMultiplierSmallerThanOneExp (double rounding), fused
activation as the clamp.

Prepare computes the three real multipliers in double (LiteRT tflite/kernels/sub.cc
PrepareGeneralSubOp): ``s_a / double(T)`` and ``double(T) / float(2^20 * s_y)`` — ADD's
(:func:`intq.kernels.add.real_multipliers`: ``2^20 * s_y`` is exact in float32). Recent TFLM
sources (sub_common.cc CalculateOpDataSub) write the same in float32, but the tflite-micro
package intq tests against computes the double form: on scale triples where the two differ in
an output element, TFLM equals the double form, and so both targets share it
(:func:`intq.kernels.add.prepare_reference` with ``negate_b``).

Contract (spec 003): both inputs and the output int8, per tensor; every multiplier in (0, 1).
(LiteRT accepts an output multiplier above 1 and then right-shifts by a negative amount, which
C leaves undefined; TFLM aborts. intq refuses it.) Overflow: as ADD, |difference| < 2^28.

Where the targets differ: ``litert-opt`` equals ``litert-ref`` (LiteRT's optimized int8 SUB
runs the same arithmetic; measured equal on every test model). ``xnnpack``: XNNPACK takes an
int8 SUB whose input-to-output scale ratios lie in [2^-10, 2^8) and computes it as its ADD with
the second multiplier negated (:class:`intq.kernels._elementwise_common.XnnpackAdd`); other SUBs
run LiteRT's kernel, as ``litert-opt``.

Run: ADD's tables and loop (:func:`intq.kernels.add.run_reference`), ``table_b`` negated.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import XnnpackAdd, int8_binary, run_xnnpack_add, xnnpack_add
from intq.kernels.add import AddParams, prepare_reference, run_reference
from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel

OP = "SUB"


@kernel(OP)
def prepare(ctx: KernelContext) -> AddParams | XnnpackAdd | _ort.OrtBinaryLut:
    """ADD's parameters with ``table_b`` negated: ``table_a[a] + (-table_b)[b]`` is SUB's difference."""
    if _ort.is_ort(ctx):  # DQ, DQ -> Sub -> Q: onnxruntime subtracts in float32
        return _ort.prepare_binary(ctx, lambda qa, qb, qy, clamp, offset: _ort.float_sub_table(qa, qb, qy, clamp))
    io = int8_binary(ctx)
    xnn = xnnpack_add(ctx, io, subtract=True)
    return xnn if xnn is not None else prepare_reference(ctx, io, negate_b=True)


def run(p: AddParams | XnnpackAdd | _ort.OrtBinaryLut, a, b):
    if isinstance(p, _ort.OrtBinaryLut):
        return (_ort.lookup2(p, a, b),)
    if isinstance(p, XnnpackAdd):
        return (run_xnnpack_add(p, a, b).reshape(np.broadcast_shapes(a.shape, b.shape)),)
    return (run_reference(p, a, b),)
