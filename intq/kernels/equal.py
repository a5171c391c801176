"""EQUAL: ``y = a == b`` on both inputs brought to a common scale, numpy broadcasting; bool output.

True where both rescaled values are equal (on different scales: equal after the rescaling rounds).

Arithmetic and contract: :func:`intq.kernels._elementwise_common.prepare_comparison`.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._elementwise_common import ComparisonParams, compare, prepare_comparison
from intq.kernels.base import KernelContext, kernel

OP = "EQUAL"


@kernel(OP)
def prepare(ctx: KernelContext) -> ComparisonParams:
    return prepare_comparison(ctx)


def run(p: ComparisonParams, a, b):
    return (compare(p, a, b, np.equal),)
