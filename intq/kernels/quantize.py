"""QUANTIZE: float32 -> int8/int16 at the graph boundary, or integer -> integer requantization.

* float input (the boundary): ``q = clamp(round_half_away(x / S) + Z)``, the division in float32
  (TFLite's AffineQuantize). This is the one place a float enters; it is not part of an integer
  kernel's run path.
* integer input (rescaling between two scales, e.g. concat inputs): TFLite's Requantize,
  ``clamp(MultiplyByQuantizedMultiplier(q - Z_in, M) + Z_out)`` with ``M = S_in / S_out`` —
  integer-only.

Where the runtimes differ: LiteRT's optimized float QUANTIZE multiplies by the float32 reciprocal
of the scale (measured: an input of exactly 3.5 s gives 3, the reference 4), its int8 rescale
differs too, and XNNPACK converts with its own float32 rounding; none is emulated, so
``litert-opt`` and ``xnnpack`` refuse QUANTIZE (:data:`intq.kernels.targets.TARGETS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import QuantParams
from intq.qmath import quantize as quantize_reals

OP = "QUANTIZE"


@dataclass(frozen=True)
class QuantizeParams:
    output: QuantParams  # float input: the output's parameters
    input_zero_point: int  # integer input: subtracted before rescaling
    rescale: Requantizer | None  # integer input only


def prepare(ctx: KernelContext) -> QuantizeParams:
    x, y = ctx.input(0), ctx.outputs[0]
    out_qp = ctx.per_tensor(y, "output", (np.int8, np.uint8, np.int16))
    ctx.check_emulated()  # litert-opt, xnnpack: measured to differ, not emulated
    if np.issubdtype(x.dtype, np.floating):
        return QuantizeParams(out_qp, 0, None)
    in_qp = ctx.per_tensor(x, "input", (np.int8, np.uint8, np.int16))
    real = float(np.float32(in_qp.scale[0]) / np.float32(out_qp.scale[0]))  # TFLite: float division of scales
    r = make_requantizer(real, Requant.DOUBLE, int(out_qp.zero_point[0]), out_qp.qmin, out_qp.qmax, y.dtype)
    return QuantizeParams(out_qp, int(in_qp.zero_point[0]), r)


def run(p: QuantizeParams, x):
    if p.rescale is None:
        return (quantize_reals(x, p.output),)
    return (requantize(p.rescale, x.astype(np.int64) - p.input_zero_point),)
