"""TPU-MLIR's int8 ``tpu.PReluOp`` (``PRelu.cpp``) and its float32 ``tpu.Relu`` (``Relu.cpp``):
PRELU and RELU under ``tpu-mlir``.

PRELU, symmetric models: per channel ``c`` (axis 1 of TPU-MLIR's NCHW array), ``y = x`` for
``x >= 0``, else ``RightShiftRound(x slope_c, rshift, HALF_UP)`` (``applyMultiplierAndRShift``'s
default rounding) with the model's int8 ``slope`` and one ``rshift`` (spec 002's PReLU: per-channel
alpha multipliers, one shift), saturated to the output type. Input and output share their scale.

PRELU on float16 (TPU-MLIR's asymmetric models keep PReLU in half precision): ``x slope_c`` where
``x``'s sign bit is set, else ``x``, in float32 on the float16 values, then ``F16``. The sign bit,
not ``x < 0``: measured on the PReLU suite's zeros, ``+0 -> +0`` under either slope sign, ``-0 ->
-0 slope_c`` (+0 under a negative slope, -0 under a positive one).

LEAKY_RELU on float16 or float32 (``LeakyRelu.cpp``'s float branch): ``x > 0 ? x : float32(alpha) x``
in float32, then ``F16`` for a float16 output. (The symmetric int8 form is a table, imported as LUT.)

RELU on float32 (TPU-MLIR keeps a ReLU after a cast to float32 in some asymmetric models):
``function_relu``: ``y = x > 0 ? x : 0`` (a positive zero), then ``min(y, relu_limit)`` when the
limit is positive. No rounding: a copy or a zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.tpu_mlir.common import activation, attr
from intq.qmath import Rounding, raw

#: applyMultiplierAndRShift's default rounding (PRelu.cpp passes none).
PRELU_ROUNDING = Rounding.HALF_UP


@dataclass(frozen=True, eq=False)
class TpuMlirPReluParams:
    slope: np.ndarray  # int64 [C]: the model's int8 slopes, channels on the last axis
    rshift: int
    qmin: int
    qmax: int
    out_dtype: np.dtype


@dataclass(frozen=True, eq=False)
class TpuMlirHalfPReluParams:
    slope: np.ndarray  # float32 [C] (the model's float16 slopes), channels on the last axis


def prepare_prelu(ctx: KernelContext) -> TpuMlirPReluParams | TpuMlirHalfPReluParams:
    if ctx.input(0).dtype == np.float16:
        shape = static_shape(ctx, ctx.input(0), "input")
        slope = ctx.constant(1, "slope")
        if ctx.outputs[0].dtype != np.float16 or slope.dtype != np.float16 or slope.size not in (1, shape[-1]):
            raise ctx.error(f"a float16 PReLU takes float16 slopes [1] or [{shape[-1]}] and gives float16")
        return TpuMlirHalfPReluParams(slope.astype(np.float32).reshape(-1))
    qx, qy = activation(ctx, 0, "input"), activation(ctx, -1, "output")
    if qx.tensor_zero_point != 0 or qy.tensor_zero_point != 0:
        raise ctx.error("TPU-MLIR's int8 PReLU is symmetric (zero points 0)")
    shape = static_shape(ctx, ctx.input(0), "input")
    slope = ctx.constant(1, "slope")
    if slope.dtype != np.int8 or slope.ndim != 1 or slope.size not in (1, shape[-1]):
        raise ctx.error(f"the slope must be int8 [1] or [{shape[-1]}] (channels last), got {slope.dtype.name} "
                        f"{list(slope.shape)}")
    if static_shape(ctx, ctx.outputs[0], "output") != shape:
        raise ctx.error("the output shape must be the input's")
    return TpuMlirPReluParams(slope.astype(np.int64), int(attr(ctx, "tpu_rshift")), qy.qmin, qy.qmax,
                              ctx.outputs[0].dtype)


def run_prelu(p: TpuMlirPReluParams, x, alpha=None):
    v = x.astype(np.int64)
    neg = raw.multiply_rshift(v, p.slope, p.rshift, PRELU_ROUNDING)  # |x slope| <= 128 * 128
    return (np.clip(np.where(v >= 0, v, neg), p.qmin, p.qmax).astype(p.out_dtype),)


def run_prelu_half(p: TpuMlirHalfPReluParams, x, alpha=None):
    """TPU-MLIR's float32 PReLU on float16 values, rounded to float16 (it computes this op in float)."""
    v = x.astype(np.float32)
    return (np.where(np.signbit(v), v * p.slope, v).astype(np.float16),)


@dataclass(frozen=True, eq=False)
class TpuMlirFloatReluParams:
    relu_limit: np.float32 | None  # positive: the upper clamp


def prepare_float_relu(ctx: KernelContext) -> TpuMlirFloatReluParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if x.dtype != np.float32 or y.dtype != np.float32:
        raise ctx.error(f"a float ReLU takes and gives float32, got {x.dtype.name} -> {y.dtype.name}")
    limit = float(ctx.attr("tpu_relu_limit", -1.0))
    return TpuMlirFloatReluParams(np.float32(limit) if limit > 0 else None)


def run_float_relu(p: TpuMlirFloatReluParams, x):
    """``function_relu`` on float32 (module docstring): TPU-MLIR computes this step in float."""
    y = np.where(x > 0, x, np.float32(0)).astype(np.float32)
    if p.relu_limit is not None:
        y = np.minimum(y, p.relu_limit)
    return (y,)


@dataclass(frozen=True, eq=False)
class TpuMlirFloatLeakyReluParams:
    alpha: np.float32
    half: bool  # float16 data


def prepare_float_leaky_relu(ctx: KernelContext) -> TpuMlirFloatLeakyReluParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if x.dtype not in (np.float16, np.float32) or y.dtype != x.dtype:
        raise ctx.error(f"the tpu-mlir target runs TPU-MLIR's float LeakyReLU (float16 or float32 in and out), got "
                        f"{x.dtype.name} -> {y.dtype.name}; its int8 LeakyReLU is imported as a table")
    alpha = ctx.attr("alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha):
        raise ctx.error(f"alpha must be a finite number, got {alpha!r}")
    return TpuMlirFloatLeakyReluParams(np.float32(alpha), x.dtype == np.float16)


def run_float_leaky_relu(p: TpuMlirFloatLeakyReluParams, x):
    """``LeakyRelu.cpp``'s float branch (TPU-MLIR computes it in float)."""
    v = x.astype(np.float32)
    y = np.where(v > 0, v, p.alpha * v)
    return (y.astype(np.float16) if p.half else y.astype(np.float32),)


variant("PRELU", family=FAMILY, run={TpuMlirPReluParams: run_prelu, TpuMlirHalfPReluParams: run_prelu_half})(
    prepare_prelu)
variant("RELU", family=FAMILY, run=run_float_relu)(prepare_float_relu)
variant("LEAKY_RELU", family=FAMILY, run=run_float_leaky_relu)(prepare_float_leaky_relu)
