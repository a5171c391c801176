"""QUANTIZE: float32 -> int8/int16 at the graph boundary, or integer -> integer requantization.

* float input (the boundary): ``q = clamp(round_half_away(x / S) + Z)``, the division in float32
  (TFLite's reference AffineQuantize). This is the one place a float enters; it is not part of an
  integer kernel's run path.
* integer input (rescaling between two scales, e.g. concat inputs): TFLite's Requantize,
  ``clamp(MultiplyByQuantizedMultiplier(q - Z_in, M) + Z_out)`` with ``M = S_in / S_out`` —
  integer-only.

Where the runtimes differ (int8 output; measured on LiteRT 2.3 x86_64, explained from
tflite/kernels/quantize.cc, internal/optimized/optimized_ops.h and XNNPACK's convert kernels):

* ``litert-opt`` (``optimized_ops::AffineQuantize`` / ``optimized_ops::Requantize``): the
  flattened tensor is processed in vector blocks, then a scalar tail, which round differently.
  Float input: elements ``[0, 8 floor(n/8))`` compute ``rint(x * float32(1/S))`` (float32 product
  with the float32 reciprocal, round half to even: an exact tie ``x = 2.5 S`` gives 2 where the
  reference gives 3), the tail ``round_half_away(double(x) / double(S))``; then ``+ Z``
  and the clamp, in int32 (an input beyond the int32 range converts to INT32_MIN, and adding ``Z``
  wraps around, measured: -3e9 S with ``Z = -5`` gives 127). Int8 input: elements
  ``[0, 16 floor(n/16))`` requantize with both rounding
  steps half up (NEON ``vqrdmulh`` + ``vrshl``, :data:`Requant.DOUBLE_HALF_UP`), the tail with
  gemmlowp double rounding; ``M`` as the reference (the double quotient of the scales).
* ``xnnpack``: XNNPACK takes every float -> int8 QUANTIZE (``xnn_f32_qs8_vcvt``:
  ``clamp(rint(x * float32(1/S)) + Z)`` on every element) and the int8 -> int8 ones whose
  ``r = float32(S_in / S_out)`` lies in [2^-8, 2^7] (``xnn_qs8_vcvt``: an 8-bit fixed-point
  multiplier ``m = lrintf(256 r)``, ``clamp(((q - Z_in) m + 128) >> 8 + Z_out)``, integers
  only); other int8 rescales run LiteRT's optimized kernel (as ``litert-opt``).
* int16 output (16x8 models; XNNPACK takes no int16 tensor, so ``xnnpack`` computes what
  ``litert-opt`` does): float input as the int8 one above — ``optimized_ops::AffineQuantize<int16_t>``
  has the same vector head and scalar tail — clamped to int16; int8 input: ``Requantize<int8_t,
  int16_t>`` has no optimized specialization, the reference runs (measured equal). uint8 outputs
  and uint8 inputs are refused by the optimized targets (not measured).

``tpu-mlir`` target: TPU-MLIR's float -> integer ``tpu.Cast`` (:mod:`intq.kernels.tpu_mlir.cast`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel
from intq.kernels.tpu_mlir import cast as tpu_mlir_cast
from intq.kernels.targets import Runtime as _Runtime
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.errors import QuantizationError
from intq.qmath import QuantParams, Rounding, compiled, round_float
from intq.qmath import quantize as quantize_reals

OP = "QUANTIZE"
FLOAT_BLOCK = 8  # optimized AffineQuantize: two float32x4 registers per step
INT8_BLOCK = 16  # optimized Requantize<int8, int8>: one int8x16 register per step
XNN_SHIFT = 8  # xnn_qs8_vcvt: Q8 multiplier


@dataclass(frozen=True, eq=False)
class FloatQuantizeParams:
    """Float input, the reference AffineQuantize: ``clamp(round_half_away(float32(x / S)) + Z)``."""

    output: QuantParams


@dataclass(frozen=True, eq=False)
class OptimizedFloatQuantizeParams(FloatQuantizeParams):
    """Float input, LiteRT's optimized AffineQuantize (``block > 0``: the vector head, then the
    reference tail) or XNNPACK's ``xnn_f32_qs8_vcvt`` (``block == 0``: every element, saturating)."""

    reciprocal: np.float32  # float32(1 / S)
    block: int  # leading elements done by the vector code come in multiples of this; 0: XNNPACK


@dataclass(frozen=True, eq=False)
class RequantizeParams:
    """Integer input, TFLite's Requantize: ``clamp(MultiplyByQuantizedMultiplier(q - Z_in, M) + Z_out)``."""

    input_zero_point: int
    rescale: Requantizer


@dataclass(frozen=True, eq=False)
class OptimizedRequantizeParams(RequantizeParams):
    """LiteRT's optimized Requantize<int8, int8>: the first ``block * floor(n / block)`` elements with
    ``rescale_vector`` (both roundings half up), the tail with the reference ``rescale``."""

    rescale_vector: Requantizer
    block: int


@dataclass(frozen=True, eq=False)
class XnnpackRequantizeParams:
    """XNNPACK's ``xnn_qs8_vcvt``: ``clamp(((q - Z_in) * m + 128) >> 8 + Z_out)``, integers only."""

    input_zero_point: int
    output_zero_point: int
    multiplier: int  # Q8: lrintf(256 * float32(S_in / S_out))


QuantizeParams = (FloatQuantizeParams | OptimizedFloatQuantizeParams | RequantizeParams | OptimizedRequantizeParams
                  | XnnpackRequantizeParams | _ort.OrtAxisFloatQuantize)


@kernel(OP)
def prepare(ctx: KernelContext) -> QuantizeParams:
    y_qp = ctx.outputs[0].qparams
    if y_qp is not None and y_qp.per_axis:  # an imported per-axis QuantizeLinear at the float boundary
        return _prepare_axis(ctx, y_qp)
    if ctx.attr("onnx_type") is not None:  # an imported QuantizeLinear to ONNX's int4 / uint4 / int2 / uint2
        return _prepare_narrow(ctx)
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_cast.prepare_quantize(ctx)
    x, y = ctx.input(0), ctx.outputs[0]
    out_qp = ctx.per_tensor(y, "output", (np.int8, np.uint8, np.int16))
    ctx.check_emulated()
    if _ort.is_ort(ctx):
        return _prepare_ort(ctx, x, y, out_qp)
    optimized = ctx.target.optimized
    if optimized and (y.dtype == np.uint8 or not (np.issubdtype(x.dtype, np.floating) or x.dtype == np.int8)):
        raise ctx.error(f"target {ctx.target.name!r}: the optimized QUANTIZE is emulated for float32 or int8 input "
                        f"and int8 or int16 output only ({x.dtype.name} -> {y.dtype.name} not measured)")
    xnnpack = ctx.target.xnnpack and y.dtype == np.int8  # XNNPACK takes no int16 tensor
    s_out = out_qp.tensor_scale
    if np.issubdtype(x.dtype, np.floating):
        if not optimized:
            return FloatQuantizeParams(out_qp)
        reciprocal = np.float32(1.0 / float(s_out))  # = float32(1) / s_out for every float32 scale
        return OptimizedFloatQuantizeParams(out_qp, reciprocal, 0 if xnnpack else FLOAT_BLOCK)
    # int16 input runs intq.kernels.int16x8.quantize (the registry's int16 entry)
    in_qp = ctx.per_tensor(x, "input", (np.int8, np.uint8))
    zi, zo = in_qp.tensor_zero_point, out_qp.tensor_zero_point
    ratio = np.float32(in_qp.tensor_scale) / np.float32(s_out)  # XNNPACK: the float32 quotient of the scales
    if xnnpack and 2.0**-8 <= float(ratio) <= 2.0**7:
        return XnnpackRequantizeParams(zi, zo, int(np.rint(np.float32(256.0) * ratio)))  # lrintf: half to even
    # LiteRT and TFLM Prepare: double(S_in) / double(S_out) (a float32 quotient differs, measured)
    real = in_qp.tensor_scale / s_out
    r = make_requantizer(real, Requant.DOUBLE, zo, out_qp.qmin, out_qp.qmax, y.dtype)
    if not optimized or y.dtype != np.int8:  # Requantize<int8_t, int16_t>: the reference, under every resolver
        return RequantizeParams(zi, r)
    rv = make_requantizer(real, Requant.DOUBLE_HALF_UP, zo, out_qp.qmin, out_qp.qmax, y.dtype)
    return OptimizedRequantizeParams(zi, r, rv, INT8_BLOCK)


def _prepare_narrow(ctx: KernelContext) -> _ort.OrtNarrowFloatQuantize:
    """QuantizeLinear to a 4- or 2-bit ONNX type (attribute ``onnx_type``): onnxruntime's float
    boundary clamped to that type's range; the other runtimes have no such type."""
    x, y, narrow = ctx.input(0), ctx.outputs[0], ctx.attr("onnx_type")
    if not _ort.is_ort(ctx) or not np.issubdtype(x.dtype, np.floating) or y.dtype != np.int8 \
            or narrow not in _ort.NARROW_RANGES:
        raise ctx.error(f"QUANTIZE to ONNX's {narrow} is emulated for target ort on a float input only (target "
                        f"{ctx.target.name!r}, {x.dtype.name} -> {y.dtype.name}); run it with target ort")
    ctx.check_emulated()
    return _ort.OrtNarrowFloatQuantize(ctx.per_tensor(y, "output", (np.int8,)), *_ort.NARROW_RANGES[narrow])


def _prepare_axis(ctx: KernelContext, qp: QuantParams) -> _ort.OrtAxisFloatQuantize:
    """QuantizeLinear per axis on a float input (an imported model's graph output no node reads):
    onnxruntime's float boundary with each channel's float32 scale and zero point; clamped to an
    ONNX 4- / 2-bit type's range when attribute ``onnx_type`` names one. The other runtimes quantize
    activations per tensor only."""
    x, y, narrow = ctx.input(0), ctx.outputs[0], ctx.attr("onnx_type")
    if not _ort.is_ort(ctx) or not np.issubdtype(x.dtype, np.floating) or y.dtype not in (np.int8, np.int16) \
            or (narrow is not None and (narrow not in _ort.NARROW_RANGES or y.dtype != np.int8)):
        raise ctx.error(f"QUANTIZE per axis (output {y.name!r}, axis {qp.axis}) is emulated for target ort on a "
                        f"float input only (target {ctx.target.name!r}, {x.dtype.name} -> {y.dtype.name}); run "
                        "it with target ort")
    shape = _ort.axis_shape(ctx, "output", y.name, x.shape, qp)
    ctx.check_emulated()
    qmin, qmax = _ort.NARROW_RANGES[narrow] if narrow is not None else (qp.qmin, qp.qmax)
    return _ort.OrtAxisFloatQuantize(qp.scale.astype(np.float32).reshape(shape), qp.zero_point.reshape(shape),
                                     qmin, qmax, qp.dtype)


def _prepare_ort(ctx: KernelContext, x, y, out_qp) -> _ort.OrtFloatQuantize | _ort.OrtLut:
    """onnxruntime: QuantizeLinear on a float input (to int8, uint8 or int16: the same float32
    division, half to even, measured equal for int16 and uint16 — a uint16 model's codes are intq's
    int16 ones plus 32768); DequantizeLinear -> QuantizeLinear (as intq writes a requantizing
    QUANTIZE) on an int8 one (:mod:`intq.kernels._ort`), to int8 or uint8 (a uint8 output tensor
    stays uint8 in the ONNX model whatever its ``activations``)."""
    if np.issubdtype(x.dtype, np.floating):  # QuantizeLinear to int8, uint8 or int16 (imported 16-bit QDQ)
        return _ort.OrtFloatQuantize(out_qp)
    if y.dtype not in (np.int8, np.uint8):
        raise ctx.error(f"target {ctx.target.name!r}: QUANTIZE of an integer tensor to {y.dtype.name} is not emulated "
                        "(int8 or uint8 output only)")
    return _ort.unary_table(ctx.per_tensor(x, "input", (np.int8, np.uint8)), out_qp, lambda v: v)


def run(p: QuantizeParams, x):
    if isinstance(p, _ort.OrtLut):
        return (_ort.lookup(p, x),)
    if isinstance(p, _ort.OrtFloatQuantize):
        return (_ort.run_float_quantize(p, np.asarray(x, np.float32)),)
    if isinstance(p, _ort.OrtAxisFloatQuantize):
        return (_ort.run_axis_float_quantize(p, np.asarray(x, np.float32)),)
    if isinstance(p, _ort.OrtNarrowFloatQuantize):
        return (_ort.run_narrow_float_quantize(p, np.asarray(x, np.float32)),)
    if type(p) is tpu_mlir_cast.TpuMlirQuantizeParams:
        return tpu_mlir_cast.run_quantize(p, x)
    if type(p) is tpu_mlir_cast.TpuMlirRescaleParams:
        return tpu_mlir_cast.run_rescale(p, x)
    if type(p) is tpu_mlir_cast.TpuMlirAxisRescaleParams:
        return tpu_mlir_cast.run_axis_rescale(p, x)
    if type(p) is tpu_mlir_cast.TpuMlirHalfQuantizeParams:
        return tpu_mlir_cast.run_quantize_half(p, x)
    if type(p) is tpu_mlir_cast.TpuMlirToHalfParams:
        return tpu_mlir_cast.run_to_half(p, x)
    if isinstance(p, XnnpackRequantizeParams):
        acc = (x.astype(np.int64) - p.input_zero_point) * p.multiplier + (1 << (XNN_SHIFT - 1))
        y = (acc >> XNN_SHIFT) + p.output_zero_point
        return (np.clip(y, -128, 127).astype(np.int8),)
    if isinstance(p, OptimizedRequantizeParams):
        flat = x.astype(np.int64).reshape(-1) - p.input_zero_point
        cut = flat.size - flat.size % p.block
        out = np.concatenate([requantize(p.rescale_vector, flat[:cut]), requantize(p.rescale, flat[cut:])])
        return (out.reshape(x.shape),)
    if isinstance(p, RequantizeParams):
        return (requantize(p.rescale, x.astype(np.int64) - p.input_zero_point),)
    if isinstance(p, OptimizedFloatQuantizeParams):
        return (_quantize_optimized(p, np.asarray(x, np.float32)),)
    qp = p.output
    if x.dtype == np.float32 and not qp.per_axis:  # intq.qmath.quantize in one compiled pass
        out = np.empty(x.shape, qp.dtype)
        args = p.__dict__.get("_compiled_args")  # (float32 S, Z, qmin, qmax), read from qp once
        if args is None:
            args = (qp.scale.astype(np.float32)[0], qp.tensor_zero_point, qp.qmin, qp.qmax)
            object.__setattr__(p, "_compiled_args", args)
        if compiled.quantize_float32_half_away(np.ascontiguousarray(x).reshape(-1), *args, out.reshape(-1)):
            raise QuantizationError("quantize: the input contains NaN, which has no quantized value")
        return (out,)
    return (quantize_reals(x, qp),)


def _quantize_optimized(p: OptimizedFloatQuantizeParams, x: np.ndarray) -> np.ndarray:
    """The float boundary of the optimized targets (see the module docstring)."""
    if np.any(np.isnan(x)):
        raise ValueError("QUANTIZE: the input contains NaN, which has no quantized value")
    zp = p.output.tensor_zero_point
    xnnpack = p.block == 0
    flat = x.reshape(-1)
    cut = flat.size if xnnpack else flat.size - flat.size % p.block
    with np.errstate(over="ignore"):
        head = np.rint(flat[:cut] * p.reciprocal)  # float32 product, ties to even
        tail_q = flat[cut:].astype(np.float64) / p.output.tensor_scale
        tail = round_float(tail_q, Rounding.HALF_AWAY_FROM_ZERO)  # std::round
    q = np.concatenate([head.astype(np.float64), tail])
    lo, hi = p.output.qmin, p.output.qmax
    if xnnpack:  # clamps in float before converting: saturates
        q = np.clip(q, lo - 1 - zp, hi + 1 - zp).astype(np.int64) + zp
    else:  # LiteRT: float -> int32 gives INT32_MIN out of range (x86 cvtps2dq / cvttsd2si), + Z wraps
        big = (q >= 2.0**31) | (q < -(2.0**31))
        q = np.where(big, -(2**31), np.where(big, 0, q).astype(np.int64)) + zp
        q = ((q + 2**31) & 0xFFFFFFFF) - 2**31
    return np.clip(q, lo, hi).astype(p.output.dtype).reshape(x.shape)
