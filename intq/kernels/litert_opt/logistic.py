"""LiteRT's optimized 16x8 LOGISTIC on a power-of-two input scale (``12 + log2(s_in)`` in
:data:`intq.kernels.logistic.POT_SHIFTS`, which the reference kernel special-cases): the optimized
resolver runs gemmlowp's int16 fixed-point logistic there (``optimized_ops::Logistic`` on int16:
the input read as ``FixedPoint<int16, 3>``, :mod:`intq.kernels.litert_opt.gemmlowp16`), tabulated at
prepare; on other scales the reference function (measured; XNNPACK takes no int16 tensor).
"""

from __future__ import annotations

from intq.kernels._int16_common import ALL_INT16
from intq.kernels._int16_sigmoid import check_sigmoid_io, pot_left_shift
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.logistic import OP, POT_SHIFTS
from intq.kernels.litert_opt import FAMILY
from intq.kernels.litert_opt.gemmlowp16 import GemmlowpSigmoid16x8Params, logistic_table, run_table  # noqa: F401 (run_table)


def power_of_two(ctx: KernelContext) -> bool:
    """An int16 input whose scale is one the reference kernel takes as a power of two."""
    x = ctx.inputs[0] if ctx.inputs else None
    if x is None or x.qparams is None or x.qparams.per_axis:
        return False
    return pot_left_shift(x.qparams.scale[0]) in POT_SHIFTS


@variant(OP, family=FAMILY, activations=(INT16,), applies=power_of_two, run="run_table")
def prepare(ctx: KernelContext) -> GemmlowpSigmoid16x8Params:
    check_sigmoid_io(ctx)
    table = logistic_table(ALL_INT16)
    table.setflags(write=False)
    return GemmlowpSigmoid16x8Params(table)
