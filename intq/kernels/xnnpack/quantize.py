"""XNNPACK's QUANTIZE: XNNPACK takes every float -> int8 QUANTIZE (``xnn_f32_qs8_vcvt``:
``clamp(rint(x * float32(1/S)) + Z)`` on every element) and the int8 -> int8 ones whose
``r = float32(S_in / S_out)`` lies in [2^-8, 2^7] (``xnn_qs8_vcvt``: an 8-bit fixed-point
multiplier ``m = lrintf(256 r)``, ``clamp(((q - Z_in) m + 128) >> 8 + Z_out)``, integers
only); other int8 rescales run LiteRT's optimized kernel (as ``litert-opt``).
XNNPACK takes no int16 tensor: a QUANTIZE to int16 is LiteRT's optimized kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import quantize as reference
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt.quantize import OptimizedFloatQuantizeParams, reciprocal, run_float
from intq.kernels.xnnpack import FAMILY


XNN_SHIFT = 8  # xnn_qs8_vcvt: Q8 multiplier


@dataclass(frozen=True, eq=False)
class XnnpackRequantizeParams:
    """XNNPACK's ``xnn_qs8_vcvt``: ``clamp(((q - Z_in) * m + 128) >> 8 + Z_out)``, integers only."""

    input_zero_point: int
    output_zero_point: int
    multiplier: int  # Q8: lrintf(256 * float32(S_in / S_out))

RATIO_RANGE = (2.0**-8, 2.0**7)  # xnn_qs8_vcvt's acceptance of float32(S_in / S_out)


def _ratio(in_qp, out_qp) -> float:
    return float(np.float32(in_qp.tensor_scale) / np.float32(out_qp.tensor_scale))  # the float32 quotient


def takes(ctx: KernelContext) -> bool:
    """A per-tensor int8 output (no imported per-axis or narrow form) of a float input, or of a
    per-tensor int8 input whose scale ratio lies in :data:`RATIO_RANGE`."""
    x = ctx.inputs[0] if ctx.inputs else None
    y = ctx.outputs[0]
    if x is None or y.dtype != np.int8 or y.qparams is None or y.qparams.per_axis or ctx.attr("onnx_type") is not None:
        return False
    if np.issubdtype(x.dtype, np.floating):
        return True
    if x.dtype != np.int8 or x.qparams is None or x.qparams.per_axis:
        return False
    return RATIO_RANGE[0] <= _ratio(x.qparams, y.qparams) <= RATIO_RANGE[1]


@variant(reference.OP, family=FAMILY, applies=takes,
         run={OptimizedFloatQuantizeParams: run_float, XnnpackRequantizeParams: "run_requantize"})
def prepare(ctx: KernelContext) -> OptimizedFloatQuantizeParams | XnnpackRequantizeParams:
    x, y, out_qp = reference.operands(ctx)
    if np.issubdtype(x.dtype, np.floating):  # xnn_f32_qs8_vcvt on every element
        return OptimizedFloatQuantizeParams(out_qp, reciprocal(out_qp), 0)
    in_qp, _ = reference.requantize_real(ctx, x, out_qp)
    m = int(np.rint(np.float32(256.0) * np.float32(_ratio(in_qp, out_qp))))  # lrintf: half to even
    return XnnpackRequantizeParams(in_qp.tensor_zero_point, out_qp.tensor_zero_point, m)


def run_requantize(p: XnnpackRequantizeParams, x):
    acc = (x.astype(np.int64) - p.input_zero_point) * p.multiplier + (1 << (XNN_SHIFT - 1))
    y = (acc >> XNN_SHIFT) + p.output_zero_point
    return (np.clip(y, -128, 127).astype(np.int8),)
