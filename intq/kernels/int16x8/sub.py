"""SUB, 16x8: int16 inputs and output, numpy broadcasting; ADD's 16x8 algorithms with a difference.

**General scales** (LiteRT ``sub.cc`` PrepareGeneralSubOp + ``reference_ops::SubElementwise`` /
``BroadcastQuantSubSlow``; TFLM ``sub_common.cc`` + the same reference functions): as the 16x8
ADD (:mod:`intq.kernels.int16x8.add`) with ``left_shift = 15``, ``T = 2 * max(s_a, s_b)``, the
inputs rescaled by ``s_a / T`` and ``s_b / T``, the difference by ``T / (2^15 * s_y)``, each with
MultiplyByQuantizedMultiplierSmallerThanOneExp (double rounding), then the clamp. The output
multiplier must be below 1: LiteRT accepts a larger one and then right-shifts by a negative
amount (undefined in C), TFLM aborts; intq refuses it.

**Power-of-two scales** (LiteRT only, ``pot_scale_int16`` true — the schema's default; TensorFlow's
converter writes false — and every scale passing CheckedLog2): ``reference_ops::Sub16`` /
``BroadcastSub16POTSlow``, ``y = clamp(RDBPOT(a, -k_a) - RDBPOT(b, -k_b))`` with one ``k`` zero and
both ``<= 0`` (else LiteRT refuses the model); unlike ADD's, it broadcasts. TFLM has no such path.

Contract: int16 per tensor, zero point 0 everywhere. ``litert-opt`` / ``xnnpack``: LiteRT's
optimized int16 SUB (``optimized_integer_ops::Sub``, ``BroadcastSubFiveFold``) has vector code only
under ``__AVX2__``, which the x86_64 wheel is not built with: its scalar loop is the reference
arithmetic (measured equal on every random model of tests/kernels/test_int16x8.py); XNNPACK takes
no int16 tensor.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8.add import Add16x8Params, combine, prepare_add_sub

OP = "SUB"


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Add16x8Params:
    return prepare_add_sub(ctx, subtract=True)


def run(p: Add16x8Params, a, b):
    return (np.broadcast_to(combine(p, a, b, -1), p.out_shape),)
