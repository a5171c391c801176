"""onnxruntime's shared arithmetic for the ``ort`` variants (:mod:`intq.kernels.ort`): QuantizeLinear
and DequantizeLinear in float32, MLAS's rational approximations, per-code tables of unary
operators (``QuantizeLinear(f(DequantizeLinear(q)))``) and of binary ones (65536 code pairs), and
QLinearGlobalAveragePool (MEAN, SUM, and AVERAGE_POOL_2D over a whole image). Not a kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from intq.kernels.base import fused_activation_range
from intq.kernels.requantize import Requant, Requantizer, make_requantizer, requantize
from intq.qmath import QuantParams, Rounding, dequantize, quantize

#: Every int8 code in the order of its bits as uint8: index ``x.view(np.uint8)`` reads code ``x``.
INT8_CODES = np.arange(256, dtype=np.uint8).view(np.int8)

@dataclass(frozen=True, eq=False)
class OrtLut:
    """A unary op as onnxruntime computes it per code: ``y = table[x.view(uint8)]`` (the output's
    8-bit dtype: int8, or uint8 for a QUANTIZE to uint8)."""

    table: np.ndarray  # int8 or uint8 [256]

@dataclass(frozen=True, eq=False)
class OrtBinaryLut:
    """A binary op (QLinearAdd, QLinearMul) per pair of codes: ``y = table[a.view(uint8), b.view(uint8)]``."""

    table: np.ndarray  # int8 [256, 256]

#: ONNX's 4- and 2-bit integer types (opset 21 / 25) and their ranges; intq carries their codes as int8
#: values (QUANTIZE's ``onnx_type`` attribute names the type of an imported QuantizeLinear's output).
NARROW_RANGES = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}

def axis_shape(ctx, role: str, name: str, shape, qp) -> tuple[int, ...]:
    """The shape per-channel parameters of ``qp.axis`` broadcast with on a tensor of ``shape``
    (``-1`` on the axis, 1 elsewhere); a context error naming the tensor when the axis is outside
    the rank or its length is not the number of scales."""
    rank = len(shape)
    if qp.axis >= rank or (shape[qp.axis] not in (None, -1) and shape[qp.axis] != qp.scale.size):
        raise ctx.error(f"{role} {name!r}: {qp.scale.size} scales on axis {qp.axis} of shape {shape}")
    return tuple(-1 if d == qp.axis else 1 for d in range(rank))

def lookup(p: OrtLut, x: np.ndarray) -> np.ndarray:
    """``p.table`` at every int8 code of ``x`` (integer indexing only)."""
    return p.table[np.asarray(x).view(np.uint8)]

def lookup2(p: OrtBinaryLut, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``p.table[a, b]`` with numpy broadcasting of ``a`` and ``b`` (integer indexing only)."""
    return p.table[np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)]


# ------------------------------------------------------------------------ formulas (prepare)

def quantize_linear(v: np.ndarray, qp: QuantParams) -> np.ndarray:
    """onnxruntime's QuantizeLinear: ``clamp(rint(float32(v / s)) + Z)``, float32 division, half to
    even; NaN gives the lowest code (measured, module docstring)."""
    v = np.asarray(v, np.float32)
    return quantize(np.where(np.isnan(v), np.float32(-np.inf), v), qp, Rounding.HALF_TO_EVEN)

def fma32(a, b, c) -> np.ndarray:
    """float32 ``fma(a, b, c)`` (one rounding): ``a * b`` of two float32 is exact in float64 and the
    sum is rounded once to float64 then to float32; the double rounding can differ from a true
    fma only when the float64 sum lands exactly halfway between two float32 values (probability
    about 2^-29 per operation; none in the measured tables)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)

def _mlas_odd_rational(x: np.ndarray, bound: np.float32, p_coeffs: tuple, q_coeffs: tuple) -> np.ndarray:
    """MLAS's rational approximations (logistic, tanh) in float32: x clamped to [-bound, bound],
    ``p(x) = x * P(x^2)`` and ``q(x) = Q(x^2)`` by Horner steps as fma, highest coefficient first,
    ``x * x``, ``P * x`` and the quotient rounded separately."""
    v = np.clip(np.asarray(x, np.float32), -bound, bound)
    v2 = (v * v).astype(np.float32)
    p = fma32(v2, p_coeffs[0], p_coeffs[1])
    for c in p_coeffs[2:]:
        p = fma32(p, v2, c)
    p = (p * v).astype(np.float32)
    q = fma32(v2, q_coeffs[0], q_coeffs[1])
    for c in q_coeffs[2:]:
        q = fma32(q, v2, c)
    return (p / q).astype(np.float32)

def clip(lo: float | None, hi: float | None) -> Callable[[np.ndarray], np.ndarray]:
    """Relu (``lo = 0``) and Clip in float32."""
    return lambda x: np.clip(x, -np.inf if lo is None else np.float32(lo), np.inf if hi is None else np.float32(hi))


# ------------------------------------------------------------------------------- tables

def unary_table(in_qp: QuantParams, out_qp: QuantParams, f: Callable[[np.ndarray], np.ndarray],
                clamp: tuple[int, int] | None = None) -> OrtLut:
    """``QuantizeLinear(f(DequantizeLinear(q)))`` for every code ``q`` of the input's 8-bit dtype, in
    the order of its bits (clamped to ``clamp``, the integer Clip intq writes after the op for a
    fused activation)."""
    codes = INT8_CODES if in_qp.dtype == np.int8 else np.arange(256, dtype=np.uint8)
    y = quantize_linear(f(dequantize(codes, in_qp)), out_qp)
    if clamp is not None:
        y = np.clip(y, *clamp)
    return OrtLut(y.astype(out_qp.dtype))

def _codes(qp: QuantParams, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """The runtime's codes of every int8 code (int8 + ``offset``) and its zero point, as float32."""
    return (INT8_CODES.astype(np.float32) + np.float32(offset),
            np.float32(qp.tensor_zero_point + offset))

def _finish(v: np.ndarray, offset: int, clamp: tuple[int, int]) -> np.ndarray:
    """Round half to even (``cvtps2dq``), clamp to the runtime's code range, back to int8 codes,
    then the fused activation's clamp."""
    lo_rt, hi_rt = -128 + offset, 127 + offset
    y = np.clip(np.rint(v), lo_rt, hi_rt).astype(np.int64) - offset
    return np.clip(y, *clamp).astype(np.int8)

def prepare_unary(ctx, f: Callable[[np.ndarray], np.ndarray]) -> OrtLut:
    """An int8 per-tensor unary op onnxruntime computes per code: ``QuantizeLinear(f(DequantizeLinear(x)))``."""
    qx = ctx.per_tensor(ctx.input(0), "input")
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    return unary_table(qx, qy, f)

def prepare_binary(ctx, table: Callable[..., OrtBinaryLut]) -> OrtBinaryLut:
    """QLinearAdd / QLinearMul (``table``: :func:`qlinear_add_table` or :func:`qlinear_mul_table`)
    with the node's fused activation as the clamp intq writes after it."""
    qa = ctx.per_tensor(ctx.input(0), "input 0")
    qb = ctx.per_tensor(ctx.input(1), "input 1")
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    return table(qa, qb, qy, fused_activation_range(ctx, qy), ctx.target.activation_offset)


# ------------------------------------------------- QLinearGlobalAveragePool (MEAN, SUM, AVERAGE_POOL_2D)

@dataclass(frozen=True, eq=False)
class OrtGlobalAveragePool:
    """QLinearGlobalAveragePool (channels last) for MEAN: ``requant(sum - N Z_x)`` over the reduced
    axes with the float32 contract and ``s = float32(s_x / float32(s_y N))``. intq writes MEAN over
    H and W of an NHWC tensor as the operator itself, any other axes as a Transpose of the reduced
    axes in front and a Reshape to ``[1, N, 1, kept]`` around it (the same sums)."""

    axes: tuple[int, ...]  # the reduced axes, ascending
    offset: np.ndarray  # int64 [1]: -N Z_x
    requant: Requantizer  # Float32Rne
    out_shape: tuple[int, ...]

#: MLAS's QLinearGlobalAveragePool refuses (throws) a scale outside [2^-32, 256) or an image of
#: 2^24 pixels or more (qlgavgpool.cpp, CheckQLinearGlobalAveragePoolScaleAndSize).
GAP_SCALE_RANGE = (2.0**-32, 256.0)

GAP_MAX_PIXELS = 2**24

def global_average_pool_scale(qx: QuantParams, qy: QuantParams, n: int) -> np.float32:
    """QLinearGlobalAveragePool's scale ``float32(s_x / float32(s_y * float32(N)))``; raises
    ValueError where onnxruntime refuses the node at run time."""
    s = np.float32(np.float32(qx.tensor_scale) / np.float32(np.float32(qy.tensor_scale) * np.float32(n)))
    if n >= GAP_MAX_PIXELS or not GAP_SCALE_RANGE[0] <= float(s) < GAP_SCALE_RANGE[1]:
        raise ValueError(f"onnxruntime's QLinearGlobalAveragePool refuses s_in / (s_out * {n}) = {float(s):.3g} "
                         f"(it needs [2^-32, 256) and fewer than 2^24 pixels): give the output a scale nearer "
                         f"the input's / {n}")
    return s

@dataclass(frozen=True, eq=False)
class OrtMeanOfOne:
    """MEAN whose reduced axes all have size 1: a requantization, which intq writes as
    DequantizeLinear -> QuantizeLinear then a Reshape (onnxruntime's QLinearGlobalAveragePool would
    refuse output scales below ``s_x / 256``): the per-code table of QUANTIZE, then the new shape."""

    table: OrtLut
    out_shape: tuple[int, ...]

def sum_as_mean_scale(s_y: float, n: int) -> np.float32:
    """The output scale intq gives QLinearGlobalAveragePool for a SUM of ``n`` elements:
    ``float32(s_y / n)`` (a sum is ``n`` means), which onnxruntime then multiplies back by ``n``."""
    return np.float32(np.float32(s_y) / np.float32(n))

def prepare_global_average_pool(ctx, total: bool = False) -> OrtGlobalAveragePool | OrtMeanOfOne:
    """MEAN (SUM when ``total``) on an ``ort`` target: the average over any axes, as
    QLinearGlobalAveragePool computes it (SUM with the output scale :func:`sum_as_mean_scale`); over
    axes of size 1 only: :class:`OrtMeanOfOne`."""
    x, y = ctx.input(0), ctx.outputs[0]
    qx, qy = ctx.per_tensor(x, "input"), ctx.per_tensor(y, "output")
    shape = ctx.static_shape(x, "input")
    axes = tuple(sorted({int(a) % len(shape) for a in np.atleast_1d(ctx.constant(1, "axes"))}))
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if n == 1:
        return OrtMeanOfOne(unary_table(qx, qy, lambda v: v), tuple(int(d) for d in ctx.static_shape(y, "output")))
    if total:
        qy = QuantParams(sum_as_mean_scale(qy.tensor_scale, n), qy.tensor_zero_point, qy.dtype)
    try:
        s = global_average_pool_scale(qx, qy, n)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    r = make_requantizer(s, Requant.FLOAT32_RNE, qy.tensor_zero_point, qy.qmin, qy.qmax, np.int8)
    return OrtGlobalAveragePool(axes, np.array([-n * qx.tensor_zero_point], np.int64), r,
                                tuple(int(d) for d in ctx.static_shape(y, "output")))

def run_global_average_pool(p: OrtGlobalAveragePool | OrtMeanOfOne, x: np.ndarray) -> np.ndarray:
    if isinstance(p, OrtMeanOfOne):
        return lookup(p.table, x).reshape(p.out_shape)
    acc = x.astype(np.int64).sum(axis=p.axes).reshape(-1, 1)  # |sum| <= 255 N < 2^32 (N < 2^24)
    return requantize(p.requant, acc, p.offset).reshape(p.out_shape)


def run_mean(p: OrtGlobalAveragePool | OrtMeanOfOne, x, axis=None):
    """MEAN's and SUM's run (the axes are prepared): :func:`run_global_average_pool`."""
    return (run_global_average_pool(p, x),)
