"""TRANSPOSE: ``y[i_perm[0], ..., i_perm[n-1]] = x[i_0, ..., i_{n-1}]``, i.e. ``y.shape[k] = x.shape[perm[k]]``.

Contract: input 0 data, input 1 ``perm`` (int32 [rank], a constant permutation). The runtimes
copy integers and do not compare quantization parameters, so intq copies them too.

* LiteRT (``transpose.cc``): any 8/16/32/64-bit dtype, rank <= 8 (checked up to 8),
  ``perm`` entries in [-rank, rank) (negative ones count from the end), no repeats.
* TFLM (``transpose.cc``, ``transpose_common.cc``): int8 and int16 only, rank <= 5, a
  *constant* ``perm`` with entries in [0, rank) — negative entries are rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _movement_common as mc
from intq.kernels.base import KernelContext, kernel

OP = "TRANSPOSE"
DTYPES = {mc.LITERT: mc.ALL_INTS, mc.TFLM: (mc.I8, mc.I16)}
MAX_RANK = {mc.LITERT: 8, mc.TFLM: 5}


@dataclass(frozen=True)
class TransposeParams:
    perm: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> TransposeParams:
    shape = mc.data_io(ctx, DTYPES, MAX_RANK).shape
    rank = len(shape)
    perm = [int(v) for v in mc.constant_ints(ctx, 1, "perm", (mc.I32,), (rank,))]
    lowest = -rank if mc.runtime(ctx) == mc.LITERT else 0
    if any(not lowest <= v < rank for v in perm):
        raise mc.unsupported(ctx, f"perm {perm} (entries must lie in [{lowest}, {rank}))")
    perm = [v + rank if v < 0 else v for v in perm]
    if sorted(perm) != list(range(rank)):
        raise ctx.error(f"perm {perm} is not a permutation of 0..{rank - 1}")
    mc.check_output_shape(ctx, [shape[v] for v in perm])
    return TransposeParams(tuple(perm))


def run(p: TransposeParams, x, perm=None):
    return (np.ascontiguousarray(np.transpose(x, p.perm)),)
