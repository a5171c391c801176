"""TPU-MLIR's quantized ``tpu.Softmax`` (``Softmax.cpp``): SOFTMAX under ``tpu-mlir``.

Per row along ``axis``: ``d_c = max - x_c`` (in [0, 255]), a float32 table ``e[d]`` (the model's,
``exp(-d S_in)``), ``sum = e[d_0] + e[d_1] + ...`` accumulated in float32 in channel order, then
``p_c = e[d_c] / float32(sum * S_y)`` in float32; int8 output: ``round_half_away(p_c) + Z_y``,
uint8: ``trunc(double(p_c) + 0.5) + Z_y``; saturated. Float steps, as TPU-MLIR computes them.

Float softmax (TPU-MLIR keeps some softmaxes of its int8 models in float16 or float32), per row:
``m = max x``, ``e_c = expf(x_c - m)`` (float32, correctly rounded: computed here in double and
rounded once), ``sum = e_0 + e_1 + ...`` in float32 in channel order, ``y_c = e_c / sum``, then
``F16`` for a float16 output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.tpu_mlir.common import activation
from intq.qmath import Rounding, round_float


@dataclass(frozen=True, eq=False)
class TpuMlirSoftmaxParams:
    table: np.ndarray  # float32 [256]
    axis: int
    out_scale: np.float32
    zero_point: int
    qmin: int
    qmax: int
    out_dtype: np.dtype


@dataclass(frozen=True)
class TpuMlirFloatSoftmaxParams:
    axis: int
    half: bool  # float16 data (float32 arithmetic, F16 at the end)


def prepare(ctx: KernelContext) -> TpuMlirSoftmaxParams | TpuMlirFloatSoftmaxParams:
    x = ctx.input(0)
    if x.dtype in (np.float16, np.float32):
        if ctx.outputs[0].dtype != x.dtype:
            raise ctx.error(f"a float softmax keeps its dtype, got {x.dtype.name} -> {ctx.outputs[0].dtype.name}")
        rank = len(static_shape(ctx, x, "input"))
        axis = int(ctx.attr("tpu_axis", rank - 1))
        if not 0 <= axis < rank:
            raise ctx.error(f"axis {axis} out of range for rank {rank}")
        return TpuMlirFloatSoftmaxParams(axis, x.dtype == np.float16)
    activation(ctx, 0, "input")
    qy = activation(ctx, -1, "output")
    shape = static_shape(ctx, ctx.input(0), "input")
    table = ctx.constant(1, "exp table")
    if table.dtype != np.float32 or table.size != 256:
        raise ctx.error(f"the exp table must be 256 float32 entries, got {table.dtype.name} {table.size}")
    axis = int(ctx.attr("tpu_axis", len(shape) - 1))
    if not 0 <= axis < len(shape):
        raise ctx.error(f"axis {axis} out of range for rank {len(shape)}")
    return TpuMlirSoftmaxParams(table.reshape(-1), axis, np.float32(qy.scale[0]), qy.tensor_zero_point, qy.qmin,
                                qy.qmax, ctx.outputs[0].dtype)


def run_float(p: TpuMlirSoftmaxParams, x, table=None):
    """TPU-MLIR's float32 softmax on the table (a float emulation)."""
    xi = np.moveaxis(x.astype(np.int32), p.axis, 0)  # [C, ...]
    d = xi.max(axis=0, keepdims=True) - xi  # in [0, 255]
    e = p.table[d]  # float32
    total = np.zeros(e.shape[1:], np.float32)
    for c in range(e.shape[0]):  # sequential float32 accumulation, channel order
        total = total + e[c]
    prob = e / (total * p.out_scale)
    if p.out_dtype == np.int8:
        q = round_float(prob, Rounding.HALF_AWAY_FROM_ZERO)
    else:
        q = np.trunc(prob.astype(np.float64) + 0.5)
    y = np.clip(q + p.zero_point, p.qmin, p.qmax).astype(p.out_dtype)
    return (np.ascontiguousarray(np.moveaxis(y, 0, p.axis)),)


def run_float_softmax(p: TpuMlirFloatSoftmaxParams, x, table=None):
    """TPU-MLIR's float softmax (module docstring; TPU-MLIR computes it in float)."""
    v = np.moveaxis(x.astype(np.float32), p.axis, 0)  # [C, ...]
    d = v - v.max(axis=0, keepdims=True)  # float32
    e = np.exp(d.astype(np.float64)).astype(np.float32)  # expf, correctly rounded
    total = np.zeros(e.shape[1:], np.float32)
    for c in range(e.shape[0]):  # sequential float32 accumulation, channel order
        total = total + e[c]
    y = np.ascontiguousarray(np.moveaxis(e / total, 0, p.axis))
    return (y.astype(np.float16) if p.half else y,)


variant("SOFTMAX", family=FAMILY, run={TpuMlirSoftmaxParams: run_float, TpuMlirFloatSoftmaxParams: run_float_softmax})(
    prepare)
