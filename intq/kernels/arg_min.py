"""ARG_MIN: the index of the smallest int8 value along one axis (the first one on ties).

Formula (LiteRT ``arg_min_max.cc`` ``optimized_ops::ArgMinMax`` for every resolver, TFLM
``reference_ops::ArgMinMax``): a scan from index 0 that replaces the current best only when
``std::less`` says the candidate is strictly smaller — ties keep the first index, as
``numpy.argmin``. Contract and targets as ARG_MAX (TFLM, hence ``tflite``, takes only an int32
axis and an int32 output; ``litert-ref`` also int64).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._pool_common import ArgExtremumParams, prepare_arg_extremum
from intq.kernels.base import KernelContext, kernel

OP = "ARG_MIN"


@kernel(OP)
def prepare(ctx: KernelContext) -> ArgExtremumParams:
    return prepare_arg_extremum(ctx)


def run(p: ArgExtremumParams, x, axis=None):
    return (np.asarray(np.argmin(x, axis=p.axis)).astype(p.out_dtype),)
