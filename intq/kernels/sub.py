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

LiteRT's optimized int8 SUB runs the same arithmetic (measured equal on every test model).

Run: ADD's tables and loop (:func:`intq.kernels.add.run_reference`), ``table_b`` negated.

**16x8** (int16 activations, int8 weights): int16 inputs and output, numpy broadcasting; ADD's 16x8
algorithms with a difference.

**General scales** (LiteRT ``sub.cc`` PrepareGeneralSubOp + ``reference_ops::SubElementwise`` /
``BroadcastQuantSubSlow``; TFLM ``sub_common.cc`` + the same reference functions): as the 16x8
ADD (:mod:`intq.kernels.add`) with ``left_shift = 15``, ``T = 2 * max(s_a, s_b)``, the
inputs rescaled by ``s_a / T`` and ``s_b / T``, the difference by ``T / (2^15 * s_y)``, each with
MultiplyByQuantizedMultiplierSmallerThanOneExp (double rounding), then the clamp. The output
multiplier must be below 1: LiteRT accepts a larger one and then right-shifts by a negative
amount (undefined in C), TFLM aborts; intq refuses it.

Contract: int16 per tensor, zero point 0 everywhere. ``litert-opt`` / ``xnnpack``: LiteRT's
optimized int16 SUB (``optimized_integer_ops::Sub``, ``BroadcastSubFiveFold``) has vector code only
under ``__AVX2__``, which the x86_64 wheel is not built with: its scalar loop is the reference
arithmetic (measured equal on every random model of tests/kernels/test_int16x8.py); XNNPACK takes
no int16 tensor.
"""

from __future__ import annotations


from intq.kernels._elementwise_common import int8_binary
from intq.kernels.add import (
    Add16x8Params,
    AddParams,
    combine,
    general_add_sub,
    int16_operands,
    prepare_reference,
    run_reference,
)
from intq.kernels.base import INT16, KernelContext, kernel
import numpy as np

OP = "SUB"


@kernel(OP)
def prepare(ctx: KernelContext) -> AddParams:
    """ADD's parameters with ``table_b`` negated: ``table_a[a] + (-table_b)[b]`` is SUB's difference."""
    return prepare_reference(ctx, int8_binary(ctx), negate_b=True)


def run(p: AddParams, a, b):
    return (run_reference(p, a, b),)


# -------------------------------------------------------------------------------- 16x8

@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Add16x8Params:
    return general_add_sub(ctx, int16_operands(ctx))


def run_int16(p: Add16x8Params, a, b):
    return (np.broadcast_to(combine(p, a, b, -1), p.out_shape),)
