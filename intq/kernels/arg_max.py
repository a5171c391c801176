"""ARG_MAX: the index of the largest int8 value along one axis (the first one on ties).

Formula (LiteRT ``arg_min_max.cc`` — one registration, ``optimized_ops::ArgMinMax``, for every
resolver — and TFLM ``reference_ops::ArgMinMax``): scan the axis from index 0 keeping the
current best, replacing it only when ``std::greater`` says the candidate is strictly larger;
so ties keep the first index, as ``numpy.argmax`` does. The zero point and scale do not matter.

Contract: :func:`intq.kernels._pool_common.prepare_arg_extremum` — int8 input, a constant int32
or int64 one-element axis, int32 or int64 output (``output_type``). The targets compute the same
indices; they differ in what they accept: TFLM (``tflite``) runs only an int32 axis with an int32
output and fails at invoke on int64, so intq refuses int64 on ``tflite`` at prepare, while
``litert-ref`` takes every combination.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import ArgExtremumParams, prepare_arg_extremum
from intq.kernels.base import KernelContext, kernel

OP = "ARG_MAX"


@kernel(OP)
def prepare(ctx: KernelContext) -> ArgExtremumParams:
    return prepare_arg_extremum(ctx)


def run(p: ArgExtremumParams, x, axis=None):
    return (np.asarray(np.argmax(x, axis=p.axis)).astype(p.out_dtype),)
