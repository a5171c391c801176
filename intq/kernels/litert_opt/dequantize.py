"""LiteRT's optimized DEQUANTIZE (int8 input; measured on LiteRT 2.3 x86_64, explained from
``optimized_ops::Dequantize``): the elements ``[0, 8 floor(n/8))`` of the flattened tensor are
computed with float32 vector code, ``float32(q) * S + float32(-Z) * S`` with each product and the
sum rounded to float32 (no fused multiply-add), the tail as the reference. int16 input (16x8
models, zero point 0): the same vector head, ``float32(q) * S + float32(-0 * S)``, which with
``Z = 0`` is the reference's one rounding of the exact product on every element (measured equal
on all 65536 values at 8 scales): the reference runs. Other input dtypes are refused (not
measured).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import dequantize as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.dequantize import DequantizeParams
from intq.kernels.litert_opt import FAMILY
from intq.qmath import QuantParams
from intq.qmath import dequantize as dequantize_ints

BLOCK = 8  # optimized Dequantize: two float32x4 registers per step


@dataclass(frozen=True)
class OptimizedDequantizeParams:
    input: QuantParams
    block: int  # leading elements done by the vector code come in multiples of this


def measured(ctx: KernelContext, x, qp: QuantParams) -> bool:
    """Whether the input is one LiteRT's optimized DEQUANTIZE computes otherwise than the reference
    (int8 per tensor; a zero-point-0 int16 one equals it: False); any other is refused."""
    if x.dtype == np.int16 and not qp.per_axis and qp.tensor_zero_point == 0:
        return False  # the vector head equals the reference when Z = 0 (module docstring)
    if x.dtype != np.int8 or qp.per_axis:
        raise ctx.error(f"target {ctx.target.name!r}: the optimized DEQUANTIZE is emulated for per-tensor int8 "
                        f"and zero-point-0 int16 input only ({x.dtype.name} not measured)")
    return True


@variant(reference.OP, family=FAMILY,
         run={DequantizeParams: reference.run, OptimizedDequantizeParams: "run"})
def prepare(ctx: KernelContext) -> DequantizeParams | OptimizedDequantizeParams:
    x, qp = reference.operands(ctx)
    return OptimizedDequantizeParams(qp, BLOCK) if measured(ctx, x, qp) else DequantizeParams(qp)


def run(p: OptimizedDequantizeParams, x):
    flat = x.reshape(-1)
    cut = flat.size - flat.size % p.block
    s = np.float32(p.input.tensor_scale)
    bias = np.float32(-p.input.tensor_zero_point) * s
    head = flat[:cut].astype(np.float32) * s + bias  # float32 throughout
    out = np.concatenate([head, dequantize_ints(flat[cut:], p.input)])
    return (out.reshape(x.shape),)
