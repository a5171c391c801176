"""TPU-MLIR's ``tpu.Cast`` between float32 and a quantized type (``Cast.cpp``): QUANTIZE and DEQUANTIZE.

* float -> int8/uint8: ``q = clamp(round(float32(x * float32(1 / S))) + Z)``, the product in float32
  with the float32 reciprocal of the scale, rounded with the op's ``round_mode``
  (HalfAwayFromZero in the models TPU-MLIR writes); a float step at the graph boundary.
* int8/uint8 -> float: ``float32(S) * float32(q - Z)`` in float32.
* ``tpu.MulShift`` (integer -> integer, e.g. before a concat): ``RightShiftRound((x - Z_x) m, rshift,
  HALF_UP) + Z_y``, saturated — integers only; ``tpu.RequantInt`` (asymmetric models) the same with
  its ``round_mode``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext
from intq.kernels.tpu_mlir.common import activation, rounding
from intq.qmath import Rounding, raw, round_float


@dataclass(frozen=True, eq=False)
class TpuMlirQuantizeParams:
    reciprocal: np.float32  # float32(1 / S) of the double scale the model states (not float32(S))
    zero_point: int
    qmin: int
    qmax: int
    rounding: Rounding
    out_dtype: np.dtype


@dataclass(frozen=True, eq=False)
class TpuMlirRescaleParams:
    """``tpu.MulShift``: ``clamp(RightShiftRound((x - Z_x) m, rshift, HALF_UP) + Z_y)``, integers only."""

    input_zero_point: int
    multiplier: int
    rshift: int
    zero_point: int
    qmin: int
    qmax: int
    out_dtype: np.dtype
    rounding: Rounding  # MulShift: HALF_UP; RequantInt: its round_mode


def prepare_quantize(ctx: KernelContext) -> TpuMlirQuantizeParams | TpuMlirRescaleParams:
    x = ctx.input(0)
    if not np.issubdtype(x.dtype, np.floating):
        if "tpu_multiplier" not in ctx.node.attrs:
            raise ctx.error("an integer -> integer cast needs TPU-MLIR's multiplier/rshift (tpu.MulShift); "
                            "other integer casts are not emulated")
        qi, qy = activation(ctx, 0, "input"), activation(ctx, -1, "output")
        return TpuMlirRescaleParams(qi.tensor_zero_point, int(ctx.attr("tpu_multiplier")), int(ctx.attr("tpu_rshift")),
                                    qy.tensor_zero_point, qy.qmin, qy.qmax, ctx.outputs[0].dtype,
                                    rounding(ctx) if "tpu_round_mode" in ctx.node.attrs else Rounding.HALF_UP)
    qp = activation(ctx, -1, "output")
    return TpuMlirQuantizeParams(np.float32(1.0 / float(qp.scale[0])), qp.tensor_zero_point, qp.qmin, qp.qmax,
                                 rounding(ctx), ctx.outputs[0].dtype)


def run_quantize(p: TpuMlirQuantizeParams, x):
    v = round_float(np.asarray(x, np.float32) * p.reciprocal, p.rounding)
    v = np.clip(v + np.float32(p.zero_point), p.qmin, p.qmax)
    return (v.astype(p.out_dtype),)


def run_rescale(p: TpuMlirRescaleParams, x):
    y = raw.multiply_rshift(x.astype(np.int64) - p.input_zero_point, p.multiplier, p.rshift, p.rounding)
    return (np.clip(y + p.zero_point, p.qmin, p.qmax).astype(p.out_dtype),)


@dataclass(frozen=True, eq=False)
class TpuMlirDequantizeParams:
    scale: np.float32
    zero_point: np.float32


def prepare_dequantize(ctx: KernelContext) -> TpuMlirDequantizeParams:
    qp = activation(ctx, 0, "input")
    if ctx.outputs[0].dtype != np.float32:
        raise ctx.error(f"output must be float32, got {ctx.outputs[0].dtype.name}")
    return TpuMlirDequantizeParams(np.float32(qp.scale[0]), np.float32(qp.tensor_zero_point))


def run_dequantize(p: TpuMlirDequantizeParams, x):
    return (p.scale * (x.astype(np.float32) - p.zero_point),)
