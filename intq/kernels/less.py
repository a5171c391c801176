"""LESS: ``y = a < b`` on both inputs brought to a common scale, numpy broadcasting; bool output.

True where the first input's real value is below the second's.

Arithmetic and contract: :func:`intq.kernels._elementwise_common.prepare_comparison`.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import ComparisonParams, compare, prepare_comparison
from intq.kernels.base import KernelContext, kernel

OP = "LESS"


@kernel(OP)
def prepare(ctx: KernelContext) -> ComparisonParams:
    return prepare_comparison(ctx)


def run(p: ComparisonParams, a, b):
    return (compare(p, a, b, np.less),)
