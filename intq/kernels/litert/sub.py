"""LiteRT's 16x8 SUB on power-of-two scales (``pot_scale_int16`` true — the schema's default;
TensorFlow's converter writes false — and every scale passing CheckedLog2):
``reference_ops::Sub16`` / ``BroadcastSub16POTSlow``, ``y = clamp(RDBPOT(a, -k_a) - RDBPOT(b,
-k_b))`` with one ``k`` zero and both ``<= 0`` (else LiteRT refuses the model); unlike ADD's, it
broadcasts (:mod:`intq.kernels.litert.add`). TFLM has no such path.
"""

from __future__ import annotations

import numpy as np

from intq.kernels.add import Add16x8Params, general_add_sub, int16_operands
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.litert.add import PotAdd16x8Params, pot_combine, power_of_two
from intq.kernels.sub import OP
from intq.kernels.sub import run_int16 as run_general


@variant(OP, family=FAMILY, activations=(INT16,), run={PotAdd16x8Params: "run_pot", Add16x8Params: run_general})
def prepare(ctx: KernelContext) -> PotAdd16x8Params | Add16x8Params:
    io = int16_operands(ctx)
    return power_of_two(ctx, io, subtract=True) or general_add_sub(ctx, io)


def run_pot(p: PotAdd16x8Params, a, b):
    return (np.broadcast_to(pot_combine(p, a, b, -1), p.out_shape),)
