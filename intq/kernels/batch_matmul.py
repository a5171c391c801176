"""BATCH_MATMUL: ``y[..., i, j] = requant(sum_k (a[..., i, k] - Z_a) * (b[..., k, j] - Z_b)) + Z_y``,
clamped to the output dtype, with ``a = adj_x ? swap(x) : x``, ``b = adj_y ? swap(w) : w`` (the last
two axes swapped) and the leading (batch) axes broadcast as numpy does.

Contract (TFLite ``batch_matmul.cc`` Prepare): both inputs int8 per tensor (either may be an
activation or a constant; zero points anywhere in [-128, 127]), rank 2 to 5; the batch axes must
broadcast; the contracted lengths must agree; output int8 per tensor of the broadcast shape.
Options: adj_x, adj_y (asymmetric_quantize_inputs only concerns the float-input hybrid kernel and
is ignored). There is no fused activation: the clamp is the int8 range. int32 outputs (LiteRT's
raw-accumulator variant, which TFLite Micro lacks) and int16 x int8 operands are refused.

Semantics verified in the sources and measured: LiteRT ``batch_matmul.cc`` (BUILTIN_REF and BUILTIN
both register the reference kernel) computes the multiplier with ``GetQuantizedConvolutionMultipler``
from the **float32** product ``M = double(float(s_a * s_b)) / double(s_y)``; the tflite-micro build
intq tests against computes it from the **double** product ``double(s_a) * double(s_b) / double(s_y)``
(measured on scale triples where the two give different multipliers, :func:`real_multiplier`);
both then ``QuantizeMultiplier``; the kernel
``reference_ops::BatchMatMul<int8_t, int32_t>`` (kernels/internal/reference/batch_matmul.h)
accumulates ``(a + a_offset) * (b + b_offset)`` in int32 and applies ``MultiplyByQuantizedMultiplier``
(double rounding), the output offset and the int8 clamp. Both runtimes' batch flattening and
operand transposes are layout changes that do not alter the sums. The requantization is
``ctx.target.requant_for("BATCH_MATMUL")``.

**16x8** (int16 activations): both inputs and the output int16 per tensor with zero point 0 (LiteRT
``batch_matmul.cc`` EvalInt16 and TFLM ``batch_matmul.cc`` EvalInt16, both
``reference_ops::BatchMatMul<int16_t, int64_t>``)::

    acc = sum_k a[..., i, k] * b[..., k, j]                       (int64, exact: |acc| <= K 2^30 < 2^47)
    y   = clamp(MBQM64(acc, M), -32768, 32767)

with the same ``M`` as the int8 kernel (:func:`real_multiplier`: the float32 product in LiteRT,
the double product in TFLM) and TFLite's int64 MultiplyByQuantizedMultiplier (the 16-bit reduced multiplier,
one rounding half up, the result narrowed to int32 before the clamp:
:func:`intq.qmath.raw.mbqm_int64`). Contract: ``K < 2^17`` (the int64 function's ``|x| < 2^47``)
and ``M`` with a shift in [-31, 7] (checked at prepare).

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
from intq.kernels._int16_common import Int64Requant, check_16x8, int16_tensor, make_int64_requant, requantize_int64
from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.requantize import Requantizer, float32_rne_scale, make_requantizer, requantize
from intq.kernels.targets import Arithmetic, Requant
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
    out_shape, adj_x, adj_y, depth = _shapes(ctx)
    if depth > _MAX_DEPTH:
        raise ctx.error(f"contracted length {depth} can overflow the int32 accumulator (at most {_MAX_DEPTH})")
    mode = ctx.target.requant_for(OP)
    real = real_multiplier(ctx, lhs_qp, rhs_qp, out_qp)
    if mode is Requant.FLOAT32_RNE:  # its own scale: float32(float32(s_a s_b) / s_y) (MLAS's QLinearMatMul)
        real = float32_rne_scale(lhs_qp.scale[0], rhs_qp.scale[0], out_qp.scale[0])
    try:
        r = make_requantizer(real, mode, out_qp.tensor_zero_point, out_qp.qmin, out_qp.qmax, y.dtype)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    return BatchMatMulParams(lhs_qp.tensor_zero_point, rhs_qp.tensor_zero_point, adj_x, adj_y, r, out_shape)


def real_multiplier(ctx: KernelContext, lhs_qp, rhs_qp, out_qp) -> float:
    """``s_a * s_b / s_y`` as the target's Prepare computes it (GetQuantizedConvolutionMultipler):
    the float32 product in LiteRT (:attr:`~intq.kernels.targets.Arithmetic.FLOAT32`), the double
    product in TFLite Micro (measured: on scale triples where the two products give different
    multipliers, TFLM's outputs equal the double one's, int8 and int16)."""
    product = np.float32 if ctx.target.scales is Arithmetic.FLOAT32 else np.float64
    return effective_scale(lhs_qp.scale[0], rhs_qp.scale[0], out_qp.scale[0], product_dtype=product)


def _shapes(ctx: KernelContext) -> tuple[tuple[int, ...], bool, bool, int]:
    """The checked output shape, ``adj_x``, ``adj_y`` and the contracted length (int8 and 16x8)."""
    lhs, rhs, y = ctx.input(0), ctx.input(1), ctx.outputs[0]
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
    return out_shape, adj_x, adj_y, depth


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


# -------------------------------------------------------------------------------- 16x8

_MAX_DEPTH_16 = (1 << 47) // (1 << 30) - 1  # 131071: K * 2^15 * 2^15 < 2^47 (the int64 MBQM's contract)


@dataclass(frozen=True)
class BatchMatMul16x8Params:
    adj_x: bool
    adj_y: bool
    requant: Int64Requant
    out_shape: tuple[int, ...]


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> BatchMatMul16x8Params:
    check_16x8(ctx)
    if len(ctx.inputs) != 2:
        raise ctx.error(f"BATCH_MATMUL takes 2 inputs, got {len(ctx.inputs)}")
    lhs_qp = int16_tensor(ctx, ctx.input(0), "lhs")
    rhs_qp = int16_tensor(ctx, ctx.input(1), "rhs")
    out_qp = int16_tensor(ctx, ctx.outputs[0], "output")
    out_shape, adj_x, adj_y, depth = _shapes(ctx)
    if depth > _MAX_DEPTH_16:
        raise ctx.error(f"contracted length {depth} can exceed the int64 requantization's 2^47 (at most {_MAX_DEPTH_16})")
    real = real_multiplier(ctx, lhs_qp, rhs_qp, out_qp)
    return BatchMatMul16x8Params(adj_x, adj_y, make_int64_requant(ctx, real, -32768, 32767), out_shape)


def run_int16(p: BatchMatMul16x8Params, x, w):
    a, b = x.astype(np.int64), w.astype(np.int64)
    if p.adj_x:
        a = np.swapaxes(a, -1, -2)
    if p.adj_y:
        b = np.swapaxes(b, -1, -2)
    acc = np.matmul(a, b)  # int64, exact: |acc| <= K 2^30 < 2^47 (prepare)
    return (requantize_int64(p.requant, acc).reshape(p.out_shape),)
