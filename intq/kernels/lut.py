"""LUT: ``y[i] = table[x[i] mod 256]`` — a 256-entry table indexed by an 8-bit input.

TFLite has no such builtin (its LOGISTIC, TANH, HARD_SWISH... build tables internally); TPU-MLIR
lowers every int8 activation function (SiLU, HardSwish, HardSigmoid, Sigmoid, ...) to one
(``tpu.Lut``: the input's int8 or uint8 value, a negative one plus 256, picks the entry), with the
table computed when it lowered the model and stored in the model, so the operator is plain data
movement: no arithmetic, same result on every target.

Contract: input int8 or uint8 (any shape); input 1 a constant 256-entry int8 or uint8 table whose
dtype is the output's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, kernel

OP = "LUT"


@dataclass(frozen=True, eq=False)
class LutParams:
    table: np.ndarray  # [256] in the output dtype, entry k for the input byte k


@kernel(OP)
def prepare(ctx: KernelContext) -> LutParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if x.dtype not in (np.int8, np.uint8):
        raise ctx.error(f"input {x.name!r} must be int8 or uint8, got {x.dtype.name}")
    table = ctx.constant(1, "table")
    if table.shape != (256,) or table.dtype != y.dtype or y.dtype not in (np.int8, np.uint8):
        raise ctx.error(f"the table must be 256 {y.dtype.name} entries (the output's dtype), got "
                        f"{table.dtype.name} {list(table.shape)}")
    if y.shape != x.shape:
        raise ctx.error(f"output shape {y.shape} must equal the input's {x.shape}")
    return LutParams(np.ascontiguousarray(table))


def run(p: LutParams, x, table=None):
    return (p.table[x.view(np.uint8)],)  # int8 -1 is byte 255: TPU-MLIR's "offset < 0: += 256"
