"""onnxruntime's QLinearConcat (int8): every input through its ``QuantizeLinear(DequantizeLinear(q))``
table, after the reference kernel's contract checks (LiteRT's acceptance tables: the target's
rules). Other dtypes are moved by the reference kernel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import concatenation as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtLut, lookup, unary_table


@dataclass(frozen=True, eq=False)
class OrtConcat:
    """QLinearConcat: every input through its ``QuantizeLinear(DequantizeLinear(q))`` table."""

    axis: int
    tables: tuple[OrtLut, ...]


def _int8(ctx: KernelContext) -> bool:
    return bool(ctx.outputs) and ctx.outputs[0].dtype == np.int8


@variant(reference.OP, family=FAMILY, applies=_int8)
def prepare(ctx: KernelContext) -> OrtConcat:
    axis = reference.check_contract(ctx).axis
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    tables = tuple(unary_table(ctx.per_tensor(ctx.input(i), f"input {i}"), qy, lambda v: v)
                   for i in range(len(ctx.inputs)))
    return OrtConcat(axis, tables)


def run(p: OrtConcat, *xs):
    return (np.concatenate([lookup(t, x) for t, x in zip(p.tables, xs)], axis=p.axis),)
