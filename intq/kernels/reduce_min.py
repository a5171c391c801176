"""REDUCE_MIN: the smallest int8 value over constant axes (scale and zero point unchanged).

Formula (LiteRT ``reduce.cc`` ``EvalType`` -> ``reference_ops::ReduceGeneric`` / ``ReduceAllDims``
with ``(in < current) ? in : current`` from ``max()``; TFLM ``EvalMinHelper``, the same
reducer): ``y = min over the reduced axes of q_in``; an empty axis list copies the input.

Contract: as REDUCE_MAX — int8 per-tensor input and output with equal scale and zero point,
constant int32 axes, ``keep_dims``. ``litert-ref`` and ``tflite`` agree.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import ReduceExtremumParams, prepare_reduce_extremum
from intq.kernels.base import KernelContext, kernel

OP = "REDUCE_MIN"


@kernel(OP)
def prepare(ctx: KernelContext) -> ReduceExtremumParams:
    return prepare_reduce_extremum(ctx)


def run(p: ReduceExtremumParams, x, axis=None):
    return (np.asarray(np.min(x, axis=p.axes, keepdims=p.keep_dims)).reshape(p.out_shape),)
