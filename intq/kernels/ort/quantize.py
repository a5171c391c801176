"""onnxruntime's QUANTIZE: QuantizeLinear on a float input (to int8, uint8 or int16: the same
float32 division, half to even, measured equal for int16 and uint16 — a uint16 model's codes are
intq's int16 ones plus 32768), and DequantizeLinear -> QuantizeLinear (as intq writes a
requantizing QUANTIZE) on an int8 one, as a per-code table (to int8 or uint8: a uint8 output
tensor stays uint8 in the ONNX model whatever its ``activations``). An imported model's per-axis
QuantizeLinear (at the float boundary) and its QuantizeLinear to ONNX's 4- and 2-bit types are
onnxruntime's too; the reference kernel refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import quantize as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.ort import FAMILY
from intq.kernels.ort.common import NARROW_RANGES, OrtLut, axis_shape, lookup, quantize_linear, unary_table
from intq.qmath import QuantParams


@dataclass(frozen=True)
class OrtFloatQuantize:
    """QuantizeLinear on a float input: ``clamp(rint(float32(x / s)) + Z)`` (the float boundary)."""

    output: QuantParams

@dataclass(frozen=True, eq=False)
class OrtNarrowFloatQuantize:
    """QuantizeLinear on a float input to a 4- or 2-bit type: ``clamp(rint(float32(x / s)) + Z, qmin,
    qmax)`` with the narrow type's range (ONNX's reference and onnxruntime: the same rounding and
    saturation as int8), codes as int8 values. ``output`` holds int8 parameters."""

    output: QuantParams
    qmin: int
    qmax: int

@dataclass(frozen=True, eq=False)
class OrtAxisFloatQuantize:
    """QuantizeLinear per axis on a float input, at the float boundary (a graph output no node
    reads): ``clamp(rint(float32(x / s[c])) + Z[c], qmin, qmax)`` per element of channel ``c`` —
    the per-tensor formula with each channel's parameters (ONNX's reference; onnxruntime's kernel
    runs MLAS's per-tensor quantization on each channel's block). ``scale`` (float32) and
    ``zero_point`` (int64) are shaped to broadcast along the axis; ``qmin`` / ``qmax``: the
    output type's range as intq's codes (int8, uint8 minus 128, int16, uint16 minus 32768, or a
    4- / 2-bit type's range on int8 codes)."""

    scale: np.ndarray
    zero_point: np.ndarray
    qmin: int
    qmax: int
    dtype: np.dtype  # int8 or int16


@variant(reference.OP, family=FAMILY,
         run={OrtLut: "run_table", OrtFloatQuantize: "run_float", OrtAxisFloatQuantize: "run_axis",
              OrtNarrowFloatQuantize: "run_narrow"})
def prepare(ctx: KernelContext) -> OrtFloatQuantize | OrtLut | OrtAxisFloatQuantize | OrtNarrowFloatQuantize:
    y_qp = ctx.outputs[0].qparams
    if y_qp is not None and y_qp.per_axis:  # an imported per-axis QuantizeLinear at the float boundary
        return _prepare_axis(ctx, y_qp)
    if ctx.attr("onnx_type") is not None:  # an imported QuantizeLinear to ONNX's int4 / uint4 / int2 / uint2
        return _prepare_narrow(ctx)
    x, y = ctx.input(0), ctx.outputs[0]
    out_qp = ctx.per_tensor(y, "output", (np.int8, np.uint8, np.int16))
    ctx.check_emulated()
    if np.issubdtype(x.dtype, np.floating):  # QuantizeLinear to int8, uint8 or int16 (imported 16-bit QDQ)
        return OrtFloatQuantize(out_qp)
    if y.dtype not in (np.int8, np.uint8):
        raise ctx.error(f"target {ctx.target.name!r}: QUANTIZE of an integer tensor to {y.dtype.name} is not emulated "
                        "(int8 or uint8 output only)")
    return unary_table(ctx.per_tensor(x, "input", (np.int8, np.uint8)), out_qp, lambda v: v)


def _prepare_narrow(ctx: KernelContext) -> OrtNarrowFloatQuantize:
    """QuantizeLinear to a 4- or 2-bit ONNX type (attribute ``onnx_type``): the float boundary clamped
    to that type's range."""
    x, y, narrow = ctx.input(0), ctx.outputs[0], ctx.attr("onnx_type")
    if not np.issubdtype(x.dtype, np.floating) or y.dtype != np.int8 or narrow not in NARROW_RANGES:
        raise reference.refuse_narrow(ctx)
    ctx.check_emulated()
    return OrtNarrowFloatQuantize(ctx.per_tensor(y, "output", (np.int8,)), *NARROW_RANGES[narrow])


def _prepare_axis(ctx: KernelContext, qp: QuantParams) -> OrtAxisFloatQuantize:
    """QuantizeLinear per axis on a float input (an imported model's graph output no node reads):
    each channel's float32 scale and zero point; clamped to an ONNX 4- / 2-bit type's range when
    attribute ``onnx_type`` names one."""
    x, y, narrow = ctx.input(0), ctx.outputs[0], ctx.attr("onnx_type")
    if not np.issubdtype(x.dtype, np.floating) or y.dtype not in (np.int8, np.int16) \
            or (narrow is not None and (narrow not in NARROW_RANGES or y.dtype != np.int8)):
        raise reference.refuse_per_axis(ctx, qp)
    shape = axis_shape(ctx, "output", y.name, x.shape, qp)
    ctx.check_emulated()
    qmin, qmax = NARROW_RANGES[narrow] if narrow is not None else (qp.qmin, qp.qmax)
    return OrtAxisFloatQuantize(qp.scale.astype(np.float32).reshape(shape), qp.zero_point.reshape(shape),
                                qmin, qmax, qp.dtype)


def run_float_quantize(p: OrtFloatQuantize, x: np.ndarray) -> np.ndarray:
    """The float boundary: QuantizeLinear (float arithmetic, as QUANTIZE's other targets)."""
    return quantize_linear(x, p.output)

def run_narrow_float_quantize(p: OrtNarrowFloatQuantize, x: np.ndarray) -> np.ndarray:
    """The float boundary to a narrow type: int8's QuantizeLinear, then the narrow range (clamping
    to [-128, 127] first changes nothing: the narrow range lies inside it)."""
    return np.clip(quantize_linear(x, p.output), p.qmin, p.qmax).astype(np.int8)

def run_axis_float_quantize(p: OrtAxisFloatQuantize, x: np.ndarray) -> np.ndarray:
    """:class:`OrtAxisFloatQuantize` on float32 ``x`` (NaN: the lowest code, as per tensor)."""
    x = np.where(np.isnan(x), np.float32(-np.inf), x)
    with np.errstate(over="ignore"):
        r = np.rint(x / p.scale)  # float32 division, half to even
    r = np.clip(r, p.qmin - p.zero_point, p.qmax - p.zero_point)  # saturate before the integer cast
    return (r.astype(np.int64) + p.zero_point).astype(p.dtype)


def run_table(p: OrtLut, x):
    return (lookup(p, x),)


def run_float(p: OrtFloatQuantize, x):
    return (run_float_quantize(p, np.asarray(x, np.float32)),)


def run_axis(p: OrtAxisFloatQuantize, x):
    return (run_axis_float_quantize(p, np.asarray(x, np.float32)),)


def run_narrow(p: OrtNarrowFloatQuantize, x):
    return (run_narrow_float_quantize(p, np.asarray(x, np.float32)),)
