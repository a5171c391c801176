"""QUANTIZE: float32 -> int8/int16 at the graph boundary, or integer -> integer requantization.

* float input (the boundary): ``q = clamp(round_half_away(x / S) + Z)``, the division in float32
  (TFLite's reference AffineQuantize). This is the one place a float enters; it is not part of an
  integer kernel's run path.
* integer input (rescaling between two scales, e.g. concat inputs): TFLite's Requantize,
  ``clamp(MultiplyByQuantizedMultiplier(q - Z_in, M) + Z_out)`` with ``M = S_in / S_out`` —
  integer-only.

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md). This kernel refuses per-axis and ONNX 4- / 2-bit
QuantizeLinear.

**16x8** (int16 activations, int8 weights), an int16 input: requantization to int16 (or int8), e.g.
the converter's rescale of a CONCATENATION input in a 16x8 model.

Both runtimes (LiteRT 2.3 ``quantize.cc`` → ``reference_ops::Requantize``, TFLM ``quantize_common.cc``
→ the same function) compute ``clamp(MultiplyByQuantizedMultiplier(x - Z_in, m, shift) + Z_out)``
(gemmlowp double rounding) with ``(m, shift) = QuantizeMultiplier(double(s_in) / double(s_out))``
— the scales divided in **double**, as intq's int8 QUANTIZE does too: measured on 60 random
int16 → int16 models, a float32 quotient disagrees with both runtimes on 11 of them, the double
one on none. The targets agree. A float input is the graph boundary and stays with
:mod:`intq.kernels.quantize`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.errors import QuantizationError
from intq.ir import Tensor
from intq.qmath import QuantParams, compiled, quantize as quantize_reals, quantize_multiplier
from intq.kernels._int16_common import check_16x8, scale64
from intq.qmath.raw import mbqm

OP = "QUANTIZE"


@dataclass(frozen=True, eq=False)
class FloatQuantizeParams:
    """Float input, the reference AffineQuantize: ``clamp(round_half_away(float32(x / S)) + Z)``."""

    output: QuantParams


@dataclass(frozen=True, eq=False)
class RequantizeParams:
    """Integer input, TFLite's Requantize: ``clamp(MultiplyByQuantizedMultiplier(q - Z_in, M) + Z_out)``."""

    input_zero_point: int
    rescale: Requantizer


QuantizeParams = FloatQuantizeParams | RequantizeParams


@kernel(OP)
def prepare(ctx: KernelContext) -> QuantizeParams:
    x, y, out_qp = operands(ctx)
    if np.issubdtype(x.dtype, np.floating):
        return FloatQuantizeParams(out_qp)
    # int16 input runs the 16x8 kernel (the registry's int16 entry)
    return requantize_params(ctx, x, y, out_qp)


def operands(ctx: KernelContext) -> tuple[Tensor, Tensor, QuantParams]:
    """The input, the output and its per-tensor int8, uint8 or int16 parameters; an imported per-axis
    or narrow-type QuantizeLinear is refused (:func:`refuse_per_axis`, :func:`refuse_narrow`)."""
    y_qp = ctx.outputs[0].qparams
    if y_qp is not None and y_qp.per_axis:  # an imported per-axis QuantizeLinear at the float boundary
        raise refuse_per_axis(ctx, y_qp)
    if ctx.attr("onnx_type") is not None:  # an imported QuantizeLinear to ONNX's int4 / uint4 / int2 / uint2
        raise refuse_narrow(ctx)
    x, y = ctx.input(0), ctx.outputs[0]
    out_qp = ctx.per_tensor(y, "output", (np.int8, np.uint8, np.int16))
    ctx.check_emulated()
    return x, y, out_qp


def requantize_real(ctx: KernelContext, x: Tensor, out_qp: QuantParams) -> tuple[QuantParams, float]:
    """The int8 / uint8 input's parameters and ``M = S_in / S_out``: LiteRT's and TFLM's Prepare,
    ``double(S_in) / double(S_out)`` (a float32 quotient differs, measured)."""
    in_qp = ctx.per_tensor(x, "input", (np.int8, np.uint8))
    return in_qp, in_qp.tensor_scale / out_qp.tensor_scale


def requantize_params(ctx: KernelContext, x: Tensor, y: Tensor, out_qp: QuantParams) -> RequantizeParams:
    """TFLite's Requantize of an int8 / uint8 input (:func:`requantize_real`), gemmlowp double rounding."""
    in_qp, real = requantize_real(ctx, x, out_qp)
    r = make_requantizer(real, Requant.DOUBLE, out_qp.tensor_zero_point, out_qp.qmin, out_qp.qmax, y.dtype)
    return RequantizeParams(in_qp.tensor_zero_point, r)


def refuse_narrow(ctx: KernelContext) -> Exception:
    """The error for an imported QuantizeLinear to an ONNX 4- or 2-bit type (attribute ``onnx_type``):
    the runtimes that have such a type emulate it in their family's variant."""
    x, y, narrow = ctx.input(0), ctx.outputs[0], ctx.attr("onnx_type")
    return ctx.error(f"QUANTIZE to ONNX's {narrow} is emulated for target ort on a float input only (target "
                     f"{ctx.target.name!r}, {x.dtype.name} -> {y.dtype.name}); run it with target ort")


def refuse_per_axis(ctx: KernelContext, qp: QuantParams) -> Exception:
    """The error for a per-axis QuantizeLinear on a float input (an imported model's graph output no
    node reads): the runtimes that quantize activations per axis do it in their family's variant."""
    x, y = ctx.input(0), ctx.outputs[0]
    return ctx.error(f"QUANTIZE per axis (output {y.name!r}, axis {qp.axis}) is emulated for target ort on a "
                     f"float input only (target {ctx.target.name!r}, {x.dtype.name} -> {y.dtype.name}); run "
                     "it with target ort")


def run(p: QuantizeParams, x):
    if isinstance(p, RequantizeParams):
        return (requantize(p.rescale, x.astype(np.int64) - p.input_zero_point),)
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


# -------------------------------------------------------------------------------- 16x8

@dataclass(frozen=True)
class Requantize16Params:
    input_zero_point: int
    multiplier: int
    shift: int
    zero_point: int
    qmin: int
    qmax: int
    out_dtype: np.dtype


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Requantize16Params:
    check_16x8(ctx)
    in_qp = ctx.per_tensor(ctx.input(0), "input", (np.int16,))
    y = ctx.outputs[0]
    out_qp = ctx.per_tensor(y, "output", (np.int16, np.int8))
    if ctx.input(0).shape != y.shape:
        raise ctx.error("input and output must have the same shape")
    real = scale64(in_qp) / scale64(out_qp)
    qm = quantize_multiplier(real)
    if int(qm.shift) > 30:
        raise ctx.error(f"s_in / s_out = {real:.6g} is too large for TFLite's fixed-point multiplier")
    return Requantize16Params(in_qp.tensor_zero_point, int(qm.multiplier), int(qm.shift), out_qp.tensor_zero_point,
                              out_qp.qmin, out_qp.qmax, y.dtype)


def run_int16(p: Requantize16Params, x):
    y = mbqm(x.astype(np.int64) - p.input_zero_point, p.multiplier, p.shift) + p.zero_point  # x * 2^left wraps as in C
    return (np.clip(y, p.qmin, p.qmax).astype(p.out_dtype),)
