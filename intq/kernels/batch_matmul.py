"""BATCH_MATMUL: ``y[..., i, j] = requant(sum_k (a[..., i, k] - Z_a) * (b[..., k, j] - Z_b)) + Z_y``,
clamped to the output dtype, with ``a = adj_x ? swap(x) : x``, ``b = adj_y ? swap(w) : w`` (the last
two axes swapped) and the leading (batch) axes broadcast as numpy does.

Contract (TFLite ``batch_matmul.cc`` Prepare): both inputs int8 per tensor (either may be an
activation or a constant; zero points anywhere in [-128, 127]), rank 2 to 5; the batch axes must
broadcast; the contracted lengths must agree; output int8 per tensor of the broadcast shape.
Options: adj_x, adj_y (asymmetric_quantize_inputs only concerns the float-input hybrid kernel and
is ignored). There is no fused activation: the clamp is the int8 range. int32 outputs (LiteRT's
raw-accumulator variant, which TFLite Micro lacks) and int16 inputs are refused.

Semantics verified in the sources: LiteRT ``batch_matmul.cc`` (BUILTIN_REF and BUILTIN both register
the reference kernel) and TFLite Micro ``batch_matmul.cc`` compute the multiplier with
``GetQuantizedConvolutionMultipler``, i.e. from the **float32** product:
``M = double(float(s_a * s_b)) / double(s_y)``, ``QuantizeMultiplier``; the kernel
``reference_ops::BatchMatMul<int8_t, int32_t>`` (kernels/internal/reference/batch_matmul.h)
accumulates ``(a + a_offset) * (b + b_offset)`` in int32 and applies ``MultiplyByQuantizedMultiplier``
(double rounding), the output offset and the int8 clamp. Both runtimes' batch flattening and
operand transposes are layout changes that do not alter the sums. The requantization is
``ctx.target.requant_for("BATCH_MATMUL")``.

The ``ort`` targets (intq writes QLinearMatMul with both operands activations, after a Transpose
for ``adj_x`` / ``adj_y``; onnxruntime's ``quantize_linear_matmul.cc`` + MLAS QGEMM): the same exact
int32 sums, requantized in float32 (the ``FLOAT32_RNE`` contract) with the scale
``float32(float32(s_a s_b) / s_y)`` of ``output_scales[i] = a_scale * b_scale / y_scale``.

Arithmetic: ``(a - Z_a)`` and ``(b - Z_b)`` as int32 and one broadcasting integer ``np.matmul``
(integer-only; numpy's integer matmul does not use BLAS). It is exact because
``|acc| <= K * 255 * 255 < 2^31``, checked at prepare (K <= 33025).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.kernels._conv_common import static_shape
from intq.kernels.base import KernelContext, kernel
from intq.kernels.requantize import Requantizer, float32_rne_scale, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import effective_scale

OP = "BATCH_MATMUL"

_MAX_DEPTH = (2**31 - 1) // (255 * 255)  # 33025: the longest sum that cannot overflow int32


@dataclass(frozen=True)
class BatchMatMulParams:
    lhs_zero_point: int
    rhs_zero_point: int
    adj_x: bool
    adj_y: bool
    requant: Requantizer
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> BatchMatMulParams:
    lhs, rhs, y = ctx.input(0), ctx.input(1), ctx.outputs[0]
    if len(ctx.inputs) != 2:
        raise ctx.error(f"BATCH_MATMUL takes 2 inputs, got {len(ctx.inputs)}")
    lhs_qp = ctx.per_tensor(lhs, "lhs")
    rhs_qp = ctx.per_tensor(rhs, "rhs")
    out_qp = ctx.per_tensor(y, "output")
    a_shape = static_shape(ctx, lhs, "lhs")
    b_shape = static_shape(ctx, rhs, "rhs")
    for what, shape in (("lhs", a_shape), ("rhs", b_shape)):
        if not 2 <= len(shape) <= 5:
            raise ctx.error(f"{what} must have rank 2 to 5, got shape {list(shape)}")
    adj_x, adj_y = bool(ctx.attr("adj_x", False)), bool(ctx.attr("adj_y", False))
    rows, depth = (a_shape[-1], a_shape[-2]) if adj_x else (a_shape[-2], a_shape[-1])
    depth_b, cols = (b_shape[-1], b_shape[-2]) if adj_y else (b_shape[-2], b_shape[-1])
    if depth != depth_b:
        raise ctx.error(f"cannot multiply lhs {list(a_shape)} (adj_x={adj_x}) by rhs {list(b_shape)} (adj_y={adj_y}): "
                        f"contracted lengths {depth} and {depth_b} differ")
    try:
        batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ValueError:
        raise ctx.error(f"batch dimensions of {list(a_shape)} and {list(b_shape)} do not broadcast") from None
    out_shape = (*batch, rows, cols)
    if static_shape(ctx, y, "output") != out_shape:
        raise ctx.error(f"output shape {list(y.shape)} does not match the computed {list(out_shape)}")
    if depth > _MAX_DEPTH:
        raise ctx.error(f"contracted length {depth} can overflow the int32 accumulator (at most {_MAX_DEPTH})")
    mode = ctx.target.requant_for(OP)
    real = effective_scale(lhs_qp.scale[0], rhs_qp.scale[0], out_qp.scale[0], product_dtype=np.float32)
    if mode is Requant.FLOAT32_RNE:  # its own scale: float32(float32(s_a s_b) / s_y) (MLAS's QLinearMatMul)
        real = float32_rne_scale(lhs_qp.scale[0], rhs_qp.scale[0], out_qp.scale[0])
    try:
        r = make_requantizer(real, mode, out_qp.tensor_zero_point, out_qp.qmin, out_qp.qmax, y.dtype)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    return BatchMatMulParams(lhs_qp.tensor_zero_point, rhs_qp.tensor_zero_point, adj_x, adj_y, r, out_shape)


def run(p: BatchMatMulParams, x, w):
    a = np.subtract(x, p.lhs_zero_point, dtype=np.int32)  # in [-255, 255]
    b = np.subtract(w, p.rhs_zero_point, dtype=np.int32)
    if p.adj_x:
        a = np.swapaxes(a, -1, -2)
    if p.adj_y:
        b = np.swapaxes(b, -1, -2)
    acc = np.matmul(a, b)  # int32, exact: |acc| <= K * 255 * 255 < 2^31 (prepare)
    acc = acc.reshape(-1, p.out_shape[-1])
    return (requantize(p.requant, acc).reshape(p.out_shape),)
