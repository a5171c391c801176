"""TPU-MLIR's ``tpu.Cast`` between float and a quantized type (``Cast.cpp``): QUANTIZE and DEQUANTIZE.

* float -> int8/uint8: ``q = clamp(round(float32(x * float32(1 / S))) + Z)``, the product in float32
  with the float32 reciprocal of the scale, rounded with the op's ``round_mode``
  (HalfAwayFromZero in the models TPU-MLIR writes); a float step at the graph boundary.
* int8/uint8 -> float: ``float32(S) * float32(q - Z)`` in float32.
* Half precision (TPU-MLIR keeps some ops of its int8 models in float16: PReLU, LeakyReLU and
  softmax islands; ``F16`` is round-to-nearest-even to binary16, :func:`~intq.kernels.tpu_mlir.common.f16`):
  float32 -> float16 ``F16(x)`` (QUANTIZE); float16 -> float32 a copy (DEQUANTIZE);
  int8/uint8 -> float16 ``F16(F16(S) * F16(q - Z))`` (DEQUANTIZE: ``dequant()``'s f16 form, whatever
  the quantized type's expressed type; ``q - Z`` is exact in float16; measured); float ->
  int8/uint8 whose quantized type is expressed in f16: ``clamp(round(F16(x * F16(float32(1 / S))))
  + Z)`` (QUANTIZE, ``tpu_expressed = "f16"``).
* ``tpu.MulShift`` (integer -> integer, e.g. before a concat): ``RightShiftRound((x - Z_x) m, rshift,
  HALF_UP) + Z_y``, saturated — integers only; ``tpu.RequantInt`` (asymmetric models) the same with
  its ``round_mode``.
* ``tpu.RequantIntAxis`` (after a ``tpu.Deconv``'s raw int32 output): the same per channel,
  ``clamp(Z_c + RightShiftRound((x - Z_x) m_c, rshift_c, round_mode))`` with the op's rounding
  (``RequantIntAxis.cpp``: ``applyMultiplierAndRShift(x - zp_x, multi, -shift, MultiplierShift,
  round_mode)``; its constant operand holds ``(m_c, -rshift_c, Z_c)`` per channel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.requantize import MultiplierRShift, requantize
from intq.kernels.tpu_mlir.common import activation, f16, rounding
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
class TpuMlirHalfQuantizeParams:
    """Float -> integer whose quantized type is expressed in f16: ``round(F16(x * F16(1 / S))) + Z``."""

    reciprocal: np.float32  # F16(float32(1 / S)), held in float32
    zero_point: int
    qmin: int
    qmax: int
    rounding: Rounding
    out_dtype: np.dtype


@dataclass(frozen=True)
class TpuMlirToHalfParams:
    """float32 -> float16: ``F16(x)``."""


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


@dataclass(frozen=True, eq=False)
class TpuMlirAxisRescaleParams:
    """``tpu.RequantIntAxis``: ``clamp(Z_y + RightShiftRound((x - Z_x) m_c, rshift_c, round_mode))``
    per channel ``c`` of ``axis``, integers only."""

    input_zero_point: int
    axis: int  # the channel axis in intq's layout
    requant: MultiplierRShift


def prepare_quantize(ctx: KernelContext) -> (TpuMlirQuantizeParams | TpuMlirHalfQuantizeParams | TpuMlirToHalfParams
                                              | TpuMlirRescaleParams | TpuMlirAxisRescaleParams):
    x, y = ctx.input(0), ctx.outputs[0]
    if "tpu_axis" in ctx.node.attrs:
        return _prepare_axis_rescale(ctx)
    if y.dtype == np.float16:
        if x.dtype != np.float32:
            raise ctx.error(f"a cast to float16 takes float32, got {x.dtype.name}")
        return TpuMlirToHalfParams()
    if x.dtype in (np.float32, np.float16) and ctx.attr("tpu_expressed", "f32") == "f16":
        qp = activation(ctx, -1, "output")
        return TpuMlirHalfQuantizeParams(f16(np.float32(1.0 / float(qp.scale[0]))), qp.tensor_zero_point, qp.qmin,
                                         qp.qmax, rounding(ctx), y.dtype)
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


def run_quantize_half(p: TpuMlirHalfQuantizeParams, x):
    v = round_float(f16(np.asarray(x, np.float32) * p.reciprocal), p.rounding)
    return (np.clip(v + np.float32(p.zero_point), p.qmin, p.qmax).astype(p.out_dtype),)


def run_to_half(p: TpuMlirToHalfParams, x):
    return (np.asarray(x, np.float32).astype(np.float16),)  # F16: IEEE round to nearest even


def run_rescale(p: TpuMlirRescaleParams, x):
    y = raw.multiply_rshift(x.astype(np.int64) - p.input_zero_point, p.multiplier, p.rshift, p.rounding)
    return (np.clip(y + p.zero_point, p.qmin, p.qmax).astype(p.out_dtype),)


def _prepare_axis_rescale(ctx: KernelContext) -> TpuMlirAxisRescaleParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if x.dtype not in (np.int32, np.int8, np.uint8):
        raise ctx.error(f"input must be int32 (or 8-bit), got {x.dtype.name}")
    zx = activation(ctx, 0, "input").tensor_zero_point if x.qparams is not None else 0
    qy = activation(ctx, -1, "output")
    shape = ctx.static_shape(y, "output")
    axis = int(ctx.attr("tpu_axis"))
    if not -len(shape) <= axis < len(shape):
        raise ctx.error(f"axis {axis} is outside the rank-{len(shape)} output")
    axis %= len(shape)
    channels = shape[axis]
    m, s = np.asarray(ctx.attr("tpu_multiplier")), np.asarray(ctx.attr("tpu_rshift"))
    if m.size not in (1, channels) or s.size not in (1, channels):
        raise ctx.error(f"{m.size} multipliers / {s.size} rshifts for {channels} channels")
    try:
        requant = MultiplierRShift.from_model(np.broadcast_to(m, (channels,)), np.broadcast_to(s, (channels,)),
                                              rounding(ctx), qy.tensor_zero_point, qy.qmin, qy.qmax, y.dtype)
    except Exception as e:  # an IntqError from the requantizer: name the node
        raise ctx.error(str(e)) from None
    return TpuMlirAxisRescaleParams(zx, axis, requant)


def run_axis_rescale(p: TpuMlirAxisRescaleParams, x):
    moved = np.moveaxis(x.astype(np.int64) - p.input_zero_point, p.axis, -1)  # channels last
    return (np.ascontiguousarray(np.moveaxis(requantize(p.requant, moved), -1, p.axis)),)


@dataclass(frozen=True, eq=False)
class TpuMlirDequantizeParams:
    scale: np.float32  # float16 output: F16(S)
    zero_point: np.float32
    half: bool  # a float16 output: F16 of the float32 product


@dataclass(frozen=True)
class TpuMlirFromHalfParams:
    """float16 -> float32: a copy."""


def prepare_dequantize(ctx: KernelContext) -> TpuMlirDequantizeParams | TpuMlirFromHalfParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if y.dtype not in (np.float32, np.float16):
        raise ctx.error(f"output must be float32 or float16, got {y.dtype.name}")
    if x.dtype == np.float16:
        if y.dtype != np.float32:
            raise ctx.error("a float16 input casts to float32")
        return TpuMlirFromHalfParams()
    qp = activation(ctx, 0, "input")
    half = y.dtype == np.float16
    scale = f16(np.float32(qp.scale[0])) if half else np.float32(qp.scale[0])
    return TpuMlirDequantizeParams(scale, np.float32(qp.tensor_zero_point), half)


def run_dequantize(p: TpuMlirDequantizeParams, x):
    y = p.scale * (x.astype(np.float32) - p.zero_point)
    return (y.astype(np.float16) if p.half else y,)


def run_from_half(p: TpuMlirFromHalfParams, x):
    return (x.astype(np.float32),)


def quantizes_per_tensor(ctx: KernelContext) -> bool:
    """TPU-MLIR's casts take every QUANTIZE but an imported ONNX per-axis or narrow-type one (the
    reference kernel refuses those: onnxruntime's forms)."""
    y_qp = ctx.outputs[0].qparams
    return not (y_qp is not None and y_qp.per_axis) and ctx.attr("onnx_type") is None


def dequantizes_per_tensor(ctx: KernelContext) -> bool:
    """Every DEQUANTIZE but an imported ONNX per-axis one of an activation (onnxruntime's form)."""
    x = ctx.inputs[0] if ctx.inputs else None
    return not (x is not None and x.data is None and x.qparams is not None and x.qparams.per_axis)


variant("QUANTIZE", family=FAMILY, applies=quantizes_per_tensor,
        run={TpuMlirQuantizeParams: run_quantize, TpuMlirRescaleParams: run_rescale,
             TpuMlirAxisRescaleParams: run_axis_rescale, TpuMlirHalfQuantizeParams: run_quantize_half,
             TpuMlirToHalfParams: run_to_half})(prepare_quantize)
variant("DEQUANTIZE", family=FAMILY, applies=dequantizes_per_tensor,
        run={TpuMlirDequantizeParams: run_dequantize, TpuMlirFromHalfParams: run_from_half})(prepare_dequantize)
