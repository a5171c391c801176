"""MEAN as intq writes it for onnxruntime: QLinearGlobalAveragePool (channels last), the float32
requantization of the integer sum (:func:`intq.kernels.ort.common.prepare_global_average_pool`)."""

from __future__ import annotations

from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import OrtGlobalAveragePool, OrtMeanOfOne, prepare_global_average_pool, run_mean

OP = "MEAN"


@variant(OP, family=FAMILY, run=run_mean)
def prepare(ctx: KernelContext) -> OrtGlobalAveragePool | OrtMeanOfOne:
    ctx.check_emulated()
    return prepare_global_average_pool(ctx)
