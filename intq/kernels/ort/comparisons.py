"""EQUAL ... NOT_EQUAL as intq writes them for onnxruntime (DequantizeLinear of each input, then the
float comparison): onnxruntime compares ``float32(q - Z) * s`` exactly, with no scale limit. Each
code's dequantized value is replaced at prepare by its rank among both inputs' 512 values (equal
floats, equal ranks), so ``run`` compares integers in the same order as the floats (the reference
kernels' :func:`intq.kernels._elementwise_common.compare` on these tables).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import equal, greater, greater_equal, less, less_equal, not_equal
from intq.kernels._elementwise_common import comparison_io
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import INT8_CODES
from intq.qmath import dequantize


@dataclass(frozen=True, eq=False)
class OrtComparison:
    """The rank of each code's dequantized value among both inputs' (module docstring)."""

    table_a: np.ndarray  # int32 [256] by the code's bits: the rank of DequantizeLinear(a)
    table_b: np.ndarray


def prepare_comparison(ctx: KernelContext) -> OrtComparison:
    comparison_io(ctx)  # the reference kernels' contract
    qa, qb = ctx.per_tensor(ctx.input(0), "input 0"), ctx.per_tensor(ctx.input(1), "input 1")
    va, vb = dequantize(INT8_CODES, qa), dequantize(INT8_CODES, qb)  # float32, onnxruntime's DequantizeLinear
    values = np.unique(np.concatenate([va, vb]))  # sorted; -0.0 and 0.0 are one value, as they compare equal
    rank = lambda v: np.searchsorted(values, v).astype(np.int32)  # noqa: E731
    return OrtComparison(rank(va), rank(vb))


for _kernel in (equal, not_equal, greater, greater_equal, less, less_equal):
    variant(_kernel.OP, family=FAMILY, run=_kernel.run)(prepare_comparison)
