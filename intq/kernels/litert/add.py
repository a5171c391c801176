"""LiteRT's 16x8 ADD on power-of-two scales (``reference_ops::Add`` for int16 with ``pot_scale =
true``), under every LiteRT resolver: LiteRT's ``add.cc`` Prepare takes this path when the node's
``pot_scale_int16`` option is true (the schema's default; TensorFlow's converter writes false) and
all three scales pass ``CheckedLog2`` (``|log2(s) - round(log2(s))| < 1e-3`` in float32). With ``k_i
= round(log2 s_i)
- round(log2 s_y)``, one input must have ``k = 0`` and both ``k <= 0`` (else LiteRT refuses the
model); then ``y = clamp(SaturatingAdd_int16(x_0, RoundingDivideByPOT(x_1, -k_1)))``, ``x_0``
the input with ``k = 0`` (input 0 when both are). It needs equal input shapes: LiteRT aborts on a
broadcasting one (``MatchingElementsSize``; measured), which intq refuses at prepare. TFLM has no
such path: its ``add_common.cc`` always prepares the general one (``left_shift = 15`` for int16)
— the targets differ here.

SUB has the same path (``reference_ops::Sub16`` / ``BroadcastSub16POTSlow``,
``y = clamp(RDBPOT(a, -k_a) - RDBPOT(b, -k_b))``), which broadcasts (:mod:`intq.kernels.litert.sub`).
Other scales take the reference kernel's general path (:mod:`intq.kernels.add`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._int16_common import INT16_MAX, INT16_MIN, checked_log2
from intq.kernels.add import OP, Add16x8Params, general_add_sub, int16_operands
from intq.kernels.add import run_int16 as run_general
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.qmath.raw import rdbp


@dataclass(frozen=True)
class PotAdd16x8Params:
    """``clamp(RDBPOT(a, shift_a) + sign RDBPOT(b, shift_b))`` (one of the right shifts is 0)."""

    shift_a: int
    shift_b: int
    act_min: int
    act_max: int
    out_shape: tuple[int, ...]


def power_of_two(ctx: KernelContext, io, subtract: bool) -> PotAdd16x8Params | None:
    """The power-of-two path's parameters, or None where LiteRT takes the general one (the option
    ``pot_scale_int16`` false, or a scale failing CheckedLog2)."""
    if not bool(ctx.attr("pot_scale_int16", True)):
        return None
    logs = [checked_log2(q.scale[0]) for q in (io.qa, io.qb, io.qy)]
    if not all(ok for ok, _ in logs):
        return None
    ka, kb = logs[0][1] - logs[2][1], logs[1][1] - logs[2][1]
    if not ((ka == 0 or kb == 0) and ka <= 0 and kb <= 0):
        raise ctx.error(f"LiteRT's power-of-two int16 {ctx.op} (pot_scale_int16) needs one input at the "
                        f"output's scale and the other at most as large (log2 ratios {ka}, {kb}); LiteRT "
                        f"refuses this model. Set pot_scale_int16 to false for the general path")
    sa, sb = tuple(ctx.input(0).shape), tuple(ctx.input(1).shape)
    if sa != sb and not subtract:
        raise ctx.error(f"LiteRT's power-of-two int16 ADD (pot_scale_int16) does not broadcast (inputs "
                        f"{list(sa)} and {list(sb)}: LiteRT aborts, measured); set pot_scale_int16 to false")
    return PotAdd16x8Params(-ka, -kb, io.act_min, io.act_max, io.shape)


def pot_combine(p: PotAdd16x8Params, a, b, sign: int) -> np.ndarray:
    """``a + sign * b`` on the power-of-two path (numpy broadcasting): ADD saturates the int16 sum
    (gemmlowp SaturatingAdd), SUB's difference cannot leave int16."""
    total = rdbp(a.astype(np.int64), p.shift_a) + sign * rdbp(b.astype(np.int64), p.shift_b)  # RDBPOT by 0: identity
    return np.clip(np.clip(total, INT16_MIN, INT16_MAX), p.act_min, p.act_max).astype(np.int16)


@variant(OP, family=FAMILY, activations=(INT16,), run={PotAdd16x8Params: "run_pot", Add16x8Params: run_general})
def prepare(ctx: KernelContext) -> PotAdd16x8Params | Add16x8Params:
    io = int16_operands(ctx)
    return power_of_two(ctx, io, subtract=False) or general_add_sub(ctx, io)


def run_pot(p: PotAdd16x8Params, a, b):
    return (np.broadcast_to(pot_combine(p, a, b, 1), p.out_shape),)
