"""REDUCE_MAX: the largest int8 value over constant axes (scale and zero point unchanged).

Formula (LiteRT ``reduce.cc`` ``EvalType`` -> ``reference_ops::ReduceGeneric`` / ``ReduceAllDims``
with ``(in > current) ? in : current`` from ``lowest()``; TFLM ``EvalMaxHelper``, the same
reducer): ``y = max over the reduced axes of q_in``. No arithmetic on the values, so no
requantization; an empty axis list copies the input.

Contract: int8 per-tensor input (rank >= 1) and output with *equal* scale and zero point (both
runtimes ``TF_LITE_ENSURE_EQ`` them); input 1 a constant int32 axis tensor (negative axes count
from the end, duplicates ignored); ``keep_dims``. ``litert-ref`` and ``tflite`` agree.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import ReduceExtremumParams, prepare_reduce_extremum
from intq.kernels.base import KernelContext, kernel

OP = "REDUCE_MAX"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReduceExtremumParams:
    return prepare_reduce_extremum(ctx)


def run(p: ReduceExtremumParams, x, axis=None):
    return (np.asarray(np.max(x, axis=p.axes, keepdims=p.keep_dims)).reshape(p.out_shape),)
