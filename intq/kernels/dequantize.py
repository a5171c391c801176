"""DEQUANTIZE: int8/int16 -> float32 at the graph boundary, ``float32(S * (q - Z))`` with the
product in double (TFLite's reference Dequantize). The output is float by definition; it is the
boundary, not an integer kernel's run path.

Where the runtimes differ (int8 input; measured on LiteRT 2.3 x86_64, explained from
``optimized_ops::Dequantize``): ``litert-opt`` computes the elements ``[0, 8 floor(n/8))`` of the
flattened tensor with float32 vector code, ``float32(q) * S + float32(-Z) * S`` with each
product and the sum rounded to float32 (no fused multiply-add), the tail as the reference.
``xnnpack``: XNNPACK takes the node (``xnn_qs8_f32_vcvt``) and its result equals the reference
(measured on every element). int16 input (16x8 models, zero point 0; XNNPACK takes no int16
tensor): LiteRT's optimized kernel has the same vector head, ``float32(q) * S + float32(-0 * S)``,
which with ``Z = 0`` is the reference's one rounding of the exact product on every element
(measured equal on all 65536 values at 8 scales): both optimized targets run the reference.
Other input dtypes are refused by the optimized targets (not measured).

``tpu-mlir`` target: TPU-MLIR's integer -> float ``tpu.Cast`` (:mod:`intq.kernels.tpu_mlir.cast`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _ort
from intq.kernels.base import KernelContext, kernel
from intq.kernels.tpu_mlir import cast as tpu_mlir_cast
from intq.kernels.targets import Runtime as _Runtime
from intq.qmath import QuantParams, compiled
from intq.qmath import dequantize as dequantize_ints

OP = "DEQUANTIZE"
BLOCK = 8  # optimized Dequantize: two float32x4 registers per step


@dataclass(frozen=True)
class DequantizeParams:
    input: QuantParams
    block: int = 0  # litert-opt: leading elements done by the vector code (a multiple of this)


@kernel(OP)
def prepare(ctx: KernelContext) -> DequantizeParams | _ort.OrtAxisDequantize:
    x = ctx.input(0)
    if x.data is None and x.qparams is not None and x.qparams.per_axis:  # a per-axis activation
        return _prepare_axis(ctx, x)
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_cast.prepare_dequantize(ctx)
    ctx.check_emulated()
    if ctx.outputs[0].dtype != np.float32:
        raise ctx.error("the output must be float32")
    qp = ctx.qparams(x, "input")
    if ctx.target.optimized:
        if x.dtype == np.int16 and not qp.per_axis and qp.tensor_zero_point == 0:
            return DequantizeParams(qp)  # the vector head equals the reference when Z = 0 (module docstring)
        if x.dtype != np.int8 or qp.per_axis:
            raise ctx.error(f"target {ctx.target.name!r}: the optimized DEQUANTIZE is emulated for per-tensor int8 "
                            f"and zero-point-0 int16 input only ({x.dtype.name} not measured)")
        if not ctx.target.xnnpack:  # XNNPACK takes every int8 DEQUANTIZE and equals the reference
            return DequantizeParams(qp, BLOCK)
    return DequantizeParams(qp)


def _prepare_axis(ctx: KernelContext, x) -> _ort.OrtAxisDequantize:
    """DequantizeLinear per axis of an activation (an imported model's graph input that only
    DequantizeLinear nodes read): onnxruntime's ``float32(q - Z[c]) * s[c]``; the other runtimes
    dequantize activations per tensor only."""
    qp = x.qparams
    if not _ort.is_ort(ctx) or x.dtype not in (np.int8, np.int16) or ctx.outputs[0].dtype != np.float32:
        raise ctx.error(f"DEQUANTIZE per axis (input {x.name!r}, axis {qp.axis}) is emulated for target ort only "
                        f"(target {ctx.target.name!r}, {x.dtype.name} -> {ctx.outputs[0].dtype.name}); run it "
                        "with target ort")
    shape = _ort.axis_shape(ctx, "input", x.name, x.shape, qp)
    ctx.check_emulated()
    return _ort.OrtAxisDequantize(qp.scale.astype(np.float32).reshape(shape),
                                  qp.zero_point.astype(np.int32).reshape(shape))


def run(p: DequantizeParams, x):
    if type(p) is _ort.OrtAxisDequantize:
        return (_ort.run_axis_dequantize(p, np.asarray(x)),)
    if type(p) is tpu_mlir_cast.TpuMlirDequantizeParams:
        return tpu_mlir_cast.run_dequantize(p, x)
    if type(p) is tpu_mlir_cast.TpuMlirFromHalfParams:
        return tpu_mlir_cast.run_from_half(p, x)
    if not p.block:
        qp = p.input
        if not qp.per_axis and x.ndim:  # intq.qmath.dequantize in one compiled pass
            out = np.empty(x.shape, np.float32)
            compiled.dequantize_float32(np.ascontiguousarray(x).reshape(-1), qp.tensor_zero_point, float(qp.scale[0]),
                                        out.reshape(-1))
            return (out,)
        return (dequantize_ints(x, qp),)
    flat = x.reshape(-1)
    cut = flat.size - flat.size % p.block
    s = np.float32(p.input.tensor_scale)
    bias = np.float32(-p.input.tensor_zero_point) * s
    head = flat[:cut].astype(np.float32) * s + bias  # float32 throughout
    out = np.concatenate([head, dequantize_ints(flat[cut:], p.input)])
    return (out.reshape(x.shape),)
