"""SUM as intq writes it for onnxruntime: QLinearGlobalAveragePool with the output scale ``s_y / N``
(:func:`intq.kernels.ort.common.sum_as_mean_scale`: a sum is ``N`` means)."""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtGlobalAveragePool, OrtMeanOfOne, prepare_global_average_pool, run_mean

OP = "SUM"


@variant(OP, family=FAMILY, run=run_mean)
def prepare(ctx: KernelContext) -> OrtGlobalAveragePool | OrtMeanOfOne:
    ctx.check_emulated()
    return prepare_global_average_pool(ctx, total=True)
