"""DEQUANTIZE: int8/int16 -> float32 at the graph boundary, ``float32(S * (q - Z))`` with the
product in double (TFLite's reference Dequantize). The output is float by definition; it is the
boundary, not an integer kernel's run path.

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md). This kernel refuses per-axis activations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, kernel
from intq.ir import Tensor
from intq.qmath import QuantParams, compiled
from intq.qmath import dequantize as dequantize_ints

OP = "DEQUANTIZE"


@dataclass(frozen=True)
class DequantizeParams:
    input: QuantParams


@kernel(OP)
def prepare(ctx: KernelContext) -> DequantizeParams:
    return DequantizeParams(operands(ctx)[1])


def operands(ctx: KernelContext) -> tuple[Tensor, QuantParams]:
    """The input and its parameters, once the contract holds: a float32 output, not a per-axis
    activation (:func:`refuse_per_axis`)."""
    x = ctx.input(0)
    if per_axis_activation(ctx):
        raise refuse_per_axis(ctx, x)
    ctx.check_emulated()
    if ctx.outputs[0].dtype != np.float32:
        raise ctx.error("the output must be float32")
    return x, ctx.qparams(x, "input")


def per_axis_activation(ctx: KernelContext) -> bool:
    """Whether the input is an activation quantized per axis (an imported ONNX model's graph input
    that only DequantizeLinear nodes read)."""
    x = ctx.inputs[0] if ctx.inputs else None
    return x is not None and x.data is None and x.qparams is not None and x.qparams.per_axis


def refuse_per_axis(ctx: KernelContext, x) -> Exception:
    """The error for a per-axis activation (the runtimes that dequantize one do it in their variant)."""
    return ctx.error(f"DEQUANTIZE per axis (input {x.name!r}, axis {x.qparams.axis}) is emulated for target ort only "
                     f"(target {ctx.target.name!r}, {x.dtype.name} -> {ctx.outputs[0].dtype.name}); run it "
                     "with target ort")


def run(p: DequantizeParams, x):
    qp = p.input
    if not qp.per_axis and x.ndim:  # intq.qmath.dequantize in one compiled pass
        out = np.empty(x.shape, np.float32)
        compiled.dequantize_float32(np.ascontiguousarray(x).reshape(-1), qp.tensor_zero_point, float(qp.scale[0]),
                                    out.reshape(-1))
        return (out,)
    return (dequantize_ints(x, qp),)
