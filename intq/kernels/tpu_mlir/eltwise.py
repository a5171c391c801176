"""TPU-MLIR's int8 ``tpu.Add`` and ``tpu.Mul`` (``Add.cpp``, ``Mul.cpp``): ADD and MUL under ``tpu-mlir``.

ADD: each input is rescaled on its own, ``a' = RightShiftRound((a - Z_a) m_a, rshift_a, HALF_UP)``,
``b'`` likewise, then ``a' + b'`` (broadcast), ``do_relu`` (``max(., 0)``, and ``min(.,
relu_limit)`` when positive, on that integer sum), ``+ Z_y``, saturated. Symmetric models have zero
points 0; for asymmetric ones this is what 1.30.2 computes (measured on the fixtures: its source's
float32 path for asymmetric adds, ``(a - Z_a) S_a + ...``, disagrees on a quarter of the elements).

MUL: the raw product ``(a - Z_a)(b - Z_b)`` (zero points 0 in symmetric models), ``do_relu`` on it,
``RightShiftRound(p m, rshift, HALF_UP) + Z_y``, saturated — integer-only in both schemes.

ADD of a constant on float16 / float32 (``tpu.AddConst``'s float branch: TPU-MLIR's asymmetric
models keep some in float16): ``y = float32(double(x) + const_val)`` (the C++ ``float + double``
stored to float), ``do_relu`` (``function_relu``: ``y > 0 ? y : 0``, then ``min(y, relu_limit)``
when the limit is positive), then ``F16`` for a float16 output. Float steps, as TPU-MLIR computes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.tpu_mlir.common import activation, attr
from intq.qmath import Rounding, raw

#: applyMultiplierAndRShift's default rounding (Add's and Mul's interpreters pass none).
ELTWISE_ROUNDING = Rounding.HALF_UP


def _relu(ctx: KernelContext) -> tuple[bool, int | None]:
    limit = float(ctx.attr("tpu_relu_limit", -1.0))
    return bool(ctx.attr("tpu_do_relu", False)), (int(limit) if limit > 0 else None)


def _apply_relu(v, relu: bool, limit: int | None):
    if relu:
        v = np.maximum(v, 0)
        if limit is not None:
            v = np.minimum(v, limit)
    return v


def _shapes(ctx: KernelContext) -> tuple[int, ...]:
    a, b = (static_shape(ctx, ctx.input(i), f"input {i}") for i in (0, 1))
    try:
        out = np.broadcast_shapes(a, b)
    except ValueError:
        raise ctx.error(f"inputs {list(a)} and {list(b)} do not broadcast") from None
    if static_shape(ctx, ctx.outputs[0], "output") != out:
        raise ctx.error(f"output shape {list(ctx.outputs[0].shape)} is not the broadcast {list(out)}")
    return out


@dataclass(frozen=True, eq=False)
class TpuMlirAddParams:
    zero_points: tuple[int, int]
    multipliers: tuple[int, int]
    rshifts: tuple[int, int]
    out_zero_point: int
    relu: bool
    relu_limit: int | None
    qmin: int
    qmax: int
    out_dtype: np.dtype


def prepare_add(ctx: KernelContext) -> TpuMlirAddParams | TpuMlirFloatAddConstParams:
    if ctx.input(0).dtype in (np.float16, np.float32):
        return prepare_float_add_const(ctx)
    qa, qb, qy = activation(ctx, 0, "input 0"), activation(ctx, 1, "input 1"), activation(ctx, -1, "output")
    _shapes(ctx)
    relu, limit = _relu(ctx)
    m, s = attr(ctx, "tpu_multiplier"), attr(ctx, "tpu_rshift")
    if len(m) != 2 or len(s) != 2:
        raise ctx.error(f"an add needs two multipliers and two rshifts, got {list(m)} and {list(s)}")
    return TpuMlirAddParams((qa.tensor_zero_point, qb.tensor_zero_point), (int(m[0]), int(m[1])),
                            (int(s[0]), int(s[1])), qy.tensor_zero_point, relu, limit, qy.qmin, qy.qmax,
                            ctx.outputs[0].dtype)


def run_add(p: TpuMlirAddParams, a, b):
    a2 = raw.multiply_rshift(a.astype(np.int64) - p.zero_points[0], p.multipliers[0], p.rshifts[0], ELTWISE_ROUNDING)
    b2 = raw.multiply_rshift(b.astype(np.int64) - p.zero_points[1], p.multipliers[1], p.rshifts[1], ELTWISE_ROUNDING)
    y = _apply_relu(a2 + b2, p.relu, p.relu_limit) + p.out_zero_point
    return (np.clip(y, p.qmin, p.qmax).astype(p.out_dtype),)


@dataclass(frozen=True, eq=False)
class TpuMlirMulParams:
    zero_points: tuple[int, int]
    multiplier: int
    rshift: int
    out_zero_point: int
    relu: bool
    relu_limit: int | None
    qmin: int
    qmax: int
    out_dtype: np.dtype


def prepare_mul(ctx: KernelContext) -> TpuMlirMulParams:
    qa, qb, qy = activation(ctx, 0, "input 0"), activation(ctx, 1, "input 1"), activation(ctx, -1, "output")
    _shapes(ctx)
    relu, limit = _relu(ctx)
    return TpuMlirMulParams((qa.tensor_zero_point, qb.tensor_zero_point), int(attr(ctx, "tpu_multiplier")),
                            int(attr(ctx, "tpu_rshift")), qy.tensor_zero_point, relu, limit, qy.qmin, qy.qmax,
                            ctx.outputs[0].dtype)


def run_mul(p: TpuMlirMulParams, a, b):
    prod = (a.astype(np.int64) - p.zero_points[0]) * (b.astype(np.int64) - p.zero_points[1])  # |.| <= 65025
    prod = _apply_relu(prod, p.relu, p.relu_limit)
    y = raw.multiply_rshift(prod, p.multiplier, p.rshift, ELTWISE_ROUNDING) + p.out_zero_point
    return (np.clip(y, p.qmin, p.qmax).astype(p.out_dtype),)


@dataclass(frozen=True)
class TpuMlirFloatAddConstParams:
    """``tpu.AddConst`` on float (module docstring)."""

    const: float  # the op's double const_val
    relu: bool
    relu_limit: float | None  # positive: the upper clamp after the ReLU
    half: bool  # float16 data


def prepare_float_add_const(ctx: KernelContext) -> TpuMlirFloatAddConstParams:
    """Inputs ``(x float16/float32, const float64 [1])``; the output x's dtype and shape."""
    x, y = ctx.input(0), ctx.outputs[0]
    c = ctx.constant(1, "constant")
    if y.dtype != x.dtype or c.dtype != np.float64 or c.size != 1:
        raise ctx.error(f"a float add of a constant takes {x.dtype.name} and one float64 constant and gives "
                        f"{x.dtype.name}, got constant {c.dtype.name} {list(c.shape)} -> {y.dtype.name}")
    if static_shape(ctx, y, "output") != static_shape(ctx, x, "input"):
        raise ctx.error("the output shape must be the input's")
    limit = float(ctx.attr("tpu_relu_limit", -1.0))
    return TpuMlirFloatAddConstParams(float(c.reshape(-1)[0]), bool(ctx.attr("tpu_do_relu", False)),
                                      limit if limit > 0 else None, x.dtype == np.float16)


def run_float_add_const(p: TpuMlirFloatAddConstParams, x, c=None):
    """TPU-MLIR's float AddConst (module docstring; TPU-MLIR computes it in float)."""
    y = (x.astype(np.float64) + p.const).astype(np.float32)
    if p.relu:
        y = np.where(y > 0, y, np.float32(0)).astype(np.float32)
        if p.relu_limit is not None:
            y = np.minimum(y, np.float32(p.relu_limit))
    return (y.astype(np.float16) if p.half else y,)


variant("ADD", family=FAMILY, run={TpuMlirAddParams: run_add, TpuMlirFloatAddConstParams: run_float_add_const})(
    prepare_add)
variant("MUL", family=FAMILY, run=run_mul)(prepare_mul)
