"""DEQUANTIZE: int8/int16 -> float32 at the graph boundary, ``float32(S * (q - Z))`` with the
product in double (TFLite's reference Dequantize). The output is float by definition; it is the
boundary, not an integer kernel's run path."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext
from intq.qmath import QuantParams
from intq.qmath import dequantize as dequantize_ints

OP = "DEQUANTIZE"


@dataclass(frozen=True)
class DequantizeParams:
    input: QuantParams


def prepare(ctx: KernelContext) -> DequantizeParams:
    ctx.check_emulated()  # litert-opt / xnnpack: measured to differ, not emulated (intq.kernels.targets)
    if ctx.outputs[0].dtype != np.float32:
        raise ctx.error("the output must be float32")
    return DequantizeParams(ctx.qparams(ctx.input(0), "input"))


def run(p: DequantizeParams, x):
    return (dequantize_ints(x, p.input),)
