"""onnxruntime's CPU arithmetic, for the ``ort`` targets (:data:`intq.kernels.targets.TARGETS`).

What intq's ONNX export (:func:`intq.export_onnx`) makes onnxruntime compute, per operator —
read in onnxruntime's sources (MLAS ``quantize.cpp``, ``qladd.cpp``, ``logistic.cpp``,
``qlgavgpool.cpp``; ``contrib_ops/cpu/quantization/*``) and measured equal on random single-op
models (tests/kernels/test_ort_target.py) with onnxruntime 1.2x on x86-64 (AVX2, FMA3, AVX-512
VNNI; one thread; ``ORT_DISABLE_ALL`` and ``ORT_ENABLE_ALL``):

* ``QuantizeLinear``: ``clamp(rint(float32(x / s)) + Z)`` — a float32 division, half to even
  (:func:`quantize_linear`, which is :func:`intq.qmath.quantize` with ``Rounding.HALF_TO_EVEN``);
  NaN becomes the lowest code (MLAS's ``max(x, qmin - Z)`` returns its second operand for NaN;
  measured on lengths 1 to 65, vector body and scalar tail alike).
* ``DequantizeLinear``: ``float32(q - Z) * s`` in float32 — one rounding, what
  :func:`intq.qmath.dequantize` computes (the int8 DEQUANTIZE kernel runs unchanged).
* ``QLinearConv`` / ``QGemm``: ``rint(float32(acc + bias) * float32(float32(s_x s_w) / s_y)) + Z``,
  clamped: :data:`~intq.kernels.targets.Requant.FLOAT32_RNE` with the scale of
  :func:`intq.kernels.requantize.xnnpack_conv_scale` (the same float32 expression).
* ``QLinearAdd`` (MLAS's AVX2 kernel, taken on this CPU): ``rint(fma(a, r_a, fma(b, r_b, F)))``
  with ``r_a = float32(s_a / s_y)``, ``r_b = float32(s_b / s_y)``,
  ``F = float32(Z_y - fma(r_a, Z_a, float32(r_b Z_b)))`` on the raw codes ``a``, ``b`` (so uint8
  codes round differently from int8 ones on a few inputs: ``ort-u8``). The wheel's compiler
  contracts the source's ``r_a Z_a + r_b Z_b`` and the broadcast kernel's ``F + b r_b`` into fmas
  (measured); a broadcast input is MLAS's ``B``, so a scalar ``a`` swaps the roles
  (:func:`add_scalar_input`).
* ``QLinearMul``: ``rint(float32(float32((a - Z_a)(b - Z_b)) * r) + float32(Z_y))`` with
  ``r = float32(float32(s_a s_b) / s_y)`` (the zero point is added before rounding).
* ``QLinearSigmoid``, ``QLinearLeakyRelu`` and the float islands intq writes as
  ``DequantizeLinear -> op -> QuantizeLinear`` (HardSwish, Relu, Clip, and a requantizing
  QUANTIZE): onnxruntime builds (or computes) ``QuantizeLinear(f(DequantizeLinear(q)))`` per code,
  with MLAS's logistic (:func:`mlas_logistic`), ``x >= 0 ? x : float32(x alpha)``, and
  ``x * clamp(float32(x / 6... ))`` (:func:`hard_swish`).
* ``QLinearGlobalAveragePool`` (channels last): ``rint(float32(sum - N Z_x) * float32(s_x /
  float32(s_y N))) + Z_y`` — the float32 requantization with that scale (MEAN over any axes).
* ``QLinearConcat``: each input through ``QuantizeLinear(DequantizeLinear(q))`` (a per-code table).
* ``DequantizeLinear -> Sqrt -> Reciprocal -> QuantizeLinear`` (RSQRT): ``float32(1 / sqrt(x))``
  per code (both IEEE operations, correctly rounded in float32; :func:`rsqrt`).

Because every one of these but the convolutions depends only on the input codes, ``prepare``
evaluates the formula on all 256 codes (65536 pairs for ADD and MUL) in float32, and ``run`` is a
table lookup: integer-only, as DESIGN decision 3 asks. Tables are indexed by the int8 code's bits
(``x.view(np.uint8)``); values are intq's int8 codes (onnxruntime's uint8 codes minus 128 on
``ort-u8``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from intq.kernels import _ort_u8s8
from intq.kernels.base import fused_activation_range
from intq.kernels.requantize import Requant, Requantizer, make_requantizer, requantize
from intq.kernels.targets import Runtime
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


@dataclass(frozen=True)
class OrtFloatQuantize:
    """QuantizeLinear on a float input: ``clamp(rint(float32(x / s)) + Z)`` (the float boundary)."""

    output: QuantParams


#: ONNX's 4- and 2-bit integer types (opset 21 / 25) and their ranges; intq carries their codes as int8
#: values (QUANTIZE's ``onnx_type`` attribute names the type of an imported QuantizeLinear's output).
NARROW_RANGES = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}


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


@dataclass(frozen=True, eq=False)
class OrtAxisDequantize:
    """DequantizeLinear per axis of a graph input, at the float boundary: ``float32(q - Z[c]) * s[c]``
    in float32 (one rounding) per element of channel ``c``; ``scale`` (float32) and ``zero_point``
    (int32) shaped to broadcast along the axis."""

    scale: np.ndarray
    zero_point: np.ndarray


def axis_shape(ctx, role: str, name: str, shape, qp) -> tuple[int, ...]:
    """The shape per-channel parameters of ``qp.axis`` broadcast with on a tensor of ``shape``
    (``-1`` on the axis, 1 elsewhere); a context error naming the tensor when the axis is outside
    the rank or its length is not the number of scales."""
    rank = len(shape)
    if qp.axis >= rank or (shape[qp.axis] not in (None, -1) and shape[qp.axis] != qp.scale.size):
        raise ctx.error(f"{role} {name!r}: {qp.scale.size} scales on axis {qp.axis} of shape {shape}")
    return tuple(-1 if d == qp.axis else 1 for d in range(rank))


def run_axis_float_quantize(p: OrtAxisFloatQuantize, x: np.ndarray) -> np.ndarray:
    """:class:`OrtAxisFloatQuantize` on float32 ``x`` (NaN: the lowest code, as per tensor)."""
    x = np.where(np.isnan(x), np.float32(-np.inf), x)
    with np.errstate(over="ignore"):
        r = np.rint(x / p.scale)  # float32 division, half to even
    r = np.clip(r, p.qmin - p.zero_point, p.qmax - p.zero_point)  # saturate before the integer cast
    return (r.astype(np.int64) + p.zero_point).astype(p.dtype)


def run_axis_dequantize(p: OrtAxisDequantize, q: np.ndarray) -> np.ndarray:
    """:class:`OrtAxisDequantize` on integer codes ``q`` (int8 or int16: ``q - Z`` exact in float32)."""
    return (q.astype(np.int32) - p.zero_point).astype(np.float32) * p.scale


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


#: MLAS's logistic (logistic.cpp, Eigen's coefficients): ``p(x) / q(x) + 0.5`` on x clamped to
#: [-18, 18], p odd of degree 9, q even of degree 10, in float32 with FMA3 (x86 AVX2 kernel).
_LOGISTIC_P = tuple(np.float32(c) for c in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                                            8.51377133304701e-03, 2.48287947061529e-01))
_LOGISTIC_Q = tuple(np.float32(c) for c in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                                            1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01))
_LOGISTIC_RANGE = np.float32(18.0)  # MLAS clamps the input to [-18, 18]


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


def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """MLAS's float32 logistic (``MlasComputeLogistic``, FMA3 kernel): Horner steps as fma, the
    products ``x * x`` and ``p * x`` and the quotient rounded separately, result clamped to [0, 1]."""
    r = _mlas_odd_rational(x, _LOGISTIC_RANGE, _LOGISTIC_P, _LOGISTIC_Q)
    return np.clip(r + np.float32(0.5), np.float32(0), np.float32(1)).astype(np.float32)


#: MLAS's tanh (tanh.cpp, Eigen's coefficients): ``p(x) / q(x)`` on x clamped to [-9, 9], p odd of
#: degree 13, q even of degree 6, in float32 with FMA3 Horner steps (x86 AVX2 kernel).
_TANH_P = tuple(np.float32(c) for c in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                        5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                                        4.89352455891786e-03))
_TANH_Q = tuple(np.float32(c) for c in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                        4.89352518554385e-03))
_TANH_RANGE = np.float32(9.0)  # MLAS clamps the input to [-9, 9]


def mlas_tanh(x: np.ndarray) -> np.ndarray:
    """MLAS's float32 tanh (``MlasComputeTanh``): Horner steps as fma, ``x * x``, ``p * x`` and the
    quotient rounded separately (no final clamp)."""
    return _mlas_odd_rational(x, _TANH_RANGE, _TANH_P, _TANH_Q)


def leaky_relu(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """QLinearLeakyRelu's float function: ``x >= 0 ? x : float32(x * alpha)``."""
    a = np.float32(alpha)
    return lambda x: np.where(x >= 0, x, (x * a).astype(np.float32)).astype(np.float32)


_SIXTH = np.float32(1.0 / 6.0)  # HardSwish's alpha, as onnxruntime stores it (float32)


def hard_swish(x: np.ndarray) -> np.ndarray:
    """onnxruntime's HardSwish: ``x * clamp(float32(x * (1/6)) + 0.5, 0, 1)`` in float32 (measured)."""
    x = np.asarray(x, np.float32)
    gate = np.clip((x * _SIXTH).astype(np.float32) + np.float32(0.5), np.float32(0), np.float32(1))
    return (x * gate).astype(np.float32)


def rsqrt(x: np.ndarray) -> np.ndarray:
    """onnxruntime's Sqrt then Reciprocal in float32 (``sqrtps``, ``divps``: both correctly rounded):
    ``float32(1 / float32(sqrt(x)))``; 0 gives +inf, a negative input NaN (measured)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.float32(1) / np.sqrt(np.asarray(x, np.float32))).astype(np.float32)


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


def qlinear_add_table(qa: QuantParams, qb: QuantParams, qy: QuantParams, clamp: tuple[int, int],
                      offset: int = 0, scalar: str | None = None) -> OrtBinaryLut:
    """MLAS's QLinearAdd (AVX2 kernel, ``qladd_avx2.cpp``) on every pair of codes, runtime codes =
    int8 + ``offset``. ``F = float32(Z_C - fma(r_A, Z_A, float32(r_B Z_B)))`` (the source's
    ``r_A Z_A + r_B Z_B`` as the compiler contracts it: measured, the unfused sum misses), then
    ``rint(fma(A, r_A, fma(B, r_B, F)))``: same-shape spans compute ``fma(B, r_B, F)`` per
    element, broadcast spans once for the scalar ``B`` (``F + B r_B``, contracted too): the same
    float32 value. onnxruntime passes a scalar span as MLAS's ``B``: ``scalar="a"`` (input 0
    broadcast, :func:`add_scalar_input`) swaps the roles of ``a`` and ``b``. Measured equal on every code pair (tests/export/test_ort_qlinear_add.py)."""
    if scalar == "a":
        return OrtBinaryLut(qlinear_add_table(qb, qa, qy, clamp, offset).table.T.copy())
    sy = np.float32(qy.tensor_scale)
    ra, rb = np.float32(np.float32(qa.tensor_scale) / sy), np.float32(np.float32(qb.tensor_scale) / sy)
    a, za = _codes(qa, offset)
    b, zb = _codes(qb, offset)
    zy = np.float32(qy.tensor_zero_point + offset)
    f = np.float32(zy - fma32(ra, za, np.float32(rb * zb)))
    inner = fma32(b[None, :], rb, f)  # [1, 256]
    v = fma32(a[:, None], ra, inner)  # [256, 256]
    return OrtBinaryLut(_finish(v, offset, clamp))


def add_scalar_input(shape_a, shape_b) -> str | None:
    """Which input onnxruntime's broadcaster (``element_wise_ops.h``) hands to MLAS as a scalar
    span. It starts at the innermost dimension of the shorter rank (right-aligned) where the two
    are not both 1, or at the outermost of that rank if all are 1 (a rank-0 input: the other's
    innermost); an input whose dimension there is 1 is a scalar, input 0 tested first: ``"a"``,
    ``"b"`` or ``None`` (same-shape spans). So ``(3, 1) + (1,)`` and ``(1,) + (1,)`` run the
    scalar-``a`` kernel (measured, tests/export/test_ort_qlinear_add.py)."""
    sa, sb = tuple(shape_a), tuple(shape_b)
    m = min(len(sa), len(sb))
    if m == 0:  # a rank-0 input: its iterator starts at the other's innermost dimension with 1
        da, db = (1, 1) if not sa else (sa[-1], 1)
    else:
        k = next((i for i in range(1, m + 1) if max(sa[-i], sb[-i]) != 1), m)
        da, db = sa[-k], sb[-k]
    return "a" if da == 1 else "b" if db == 1 else None


def prepare_add(ctx) -> OrtBinaryLut:
    """QLinearAdd: :func:`prepare_binary` with the table of the span kind onnxruntime runs."""
    scalar = add_scalar_input(ctx.static_shape(ctx.input(0), "input 0"), ctx.static_shape(ctx.input(1), "input 1"))
    return prepare_binary(ctx, lambda qa, qb, qy, clamp, offset: qlinear_add_table(qa, qb, qy, clamp, offset, scalar))


def qlinear_mul_table(qa: QuantParams, qb: QuantParams, qy: QuantParams, clamp: tuple[int, int],
                      offset: int = 0) -> OrtBinaryLut:
    """onnxruntime's QLinearMul on every pair of codes (the zero points cancel in the product)."""
    r = np.float32(np.float32(np.float32(qa.tensor_scale) * np.float32(qb.tensor_scale)) / np.float32(qy.tensor_scale))
    da = INT8_CODES.astype(np.int32) - qa.tensor_zero_point
    db = INT8_CODES.astype(np.int32) - qb.tensor_zero_point
    prod = (da[:, None] * db[None, :]).astype(np.float32)  # |prod| <= 255^2: exact
    v = (prod * r).astype(np.float32) + np.float32(qy.tensor_zero_point + offset)
    return OrtBinaryLut(_finish(v.astype(np.float32), offset, clamp))


def _finish(v: np.ndarray, offset: int, clamp: tuple[int, int]) -> np.ndarray:
    """Round half to even (``cvtps2dq``), clamp to the runtime's code range, back to int8 codes,
    then the fused activation's clamp."""
    lo_rt, hi_rt = -128 + offset, 127 + offset
    y = np.clip(np.rint(v), lo_rt, hi_rt).astype(np.int64) - offset
    return np.clip(y, *clamp).astype(np.int8)


def run_float_quantize(p: OrtFloatQuantize, x: np.ndarray) -> np.ndarray:
    """The float boundary: QuantizeLinear (float arithmetic, as QUANTIZE's other targets)."""
    return quantize_linear(x, p.output)


def run_narrow_float_quantize(p: OrtNarrowFloatQuantize, x: np.ndarray) -> np.ndarray:
    """The float boundary to a narrow type: int8's QuantizeLinear, then the narrow range (clamping
    to [-128, 127] first changes nothing: the narrow range lies inside it)."""
    return np.clip(quantize_linear(x, p.output), p.qmin, p.qmax).astype(np.int8)


# --------------------------------------------------------------------- kernel-side helpers

def is_ort(ctx) -> bool:
    """Whether the node is prepared for an ``ort`` target (onnxruntime's arithmetic)."""
    return ctx.target.runtime is Runtime.ORT


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


@dataclass(frozen=True, eq=False)
class OrtComparison:
    """EQUAL ... NOT_EQUAL as intq writes them (DequantizeLinear of each input, then the float
    comparison): onnxruntime compares ``float32(q - Z) * s`` exactly. Each code's dequantized value
    is replaced at prepare by its rank among both inputs' 512 values (equal floats, equal ranks), so
    ``run`` compares integers in the same order as the floats."""

    table_a: np.ndarray  # int32 [256] by the code's bits: the rank of DequantizeLinear(a)
    table_b: np.ndarray


def prepare_comparison(ctx) -> OrtComparison:
    qa, qb = ctx.per_tensor(ctx.input(0), "input 0"), ctx.per_tensor(ctx.input(1), "input 1")
    va, vb = dequantize(INT8_CODES, qa), dequantize(INT8_CODES, qb)  # float32, onnxruntime's DequantizeLinear
    values = np.unique(np.concatenate([va, vb]))  # sorted; -0.0 and 0.0 are one value, as they compare equal
    rank = lambda v: np.searchsorted(values, v).astype(np.int32)  # noqa: E731
    return OrtComparison(rank(va), rank(vb))


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


@dataclass(frozen=True, eq=False)
class OrtConcat:
    """QLinearConcat: every input through its ``QuantizeLinear(DequantizeLinear(q))`` table."""

    axis: int
    tables: tuple[OrtLut, ...]


def prepare_concat(ctx, axis: int) -> OrtConcat:
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    tables = tuple(unary_table(ctx.per_tensor(ctx.input(i), f"input {i}"), qy, lambda v: v)
                   for i in range(len(ctx.inputs)))
    return OrtConcat(axis, tables)


def run_concat(p: OrtConcat, xs) -> np.ndarray:
    return np.concatenate([lookup(t, x) for t, x in zip(p.tables, xs)], axis=p.axis)


@dataclass(frozen=True, eq=False)
class OrtSoftmax:
    """QLinearSoftmax (opset-13 form, last axis), onnxruntime's algorithm:
    ``e = table[x - max(row) + 255]`` (``table[i] = float32(exp((i - 255 + b) s_x))`` in double,
    ``b = max(0, float32(log(float32(FLT_MAX / D))) - 5) / s_x``: C++'s ``log`` of a float is
    ``logf``), ``sum`` accumulated left to right in float32, ``y = clamp(rint(double(e) Y /
    double(sum)) + Z_y)`` with ``Y = floor(float32(1 / s_y))`` (onnxruntime 1.32 passes ``Y`` as a
    double, so the quotient is a double: measured by tools/probe_ort_softmax.py, 0 of 39,008,198
    elements differ; the float32 quotient differed in 23 near a half)."""

    table: np.ndarray  # float32 [256]
    y_scale: np.float32  # floor(float32(1) / s_y), an integer
    zero_point: int
    depth: int


_FLT_MAX = float(np.finfo(np.float32).max)
_SOFTMAX_RESERVE = 5.0  # "reserve_bit" for a float32 table (qlinear_softmax.cc)


def prepare_softmax(ctx) -> OrtSoftmax:
    """SOFTMAX on an ``ort`` target: ONNX Softmax has no beta, so only beta = 1 has a form."""
    qx = ctx.per_tensor(ctx.input(0), "input")
    qy = ctx.per_tensor(ctx.outputs[0], "output")
    beta = float(ctx.attr("beta", 1.0))
    if beta != 1.0:
        raise ctx.error(f"target {ctx.target.name!r}: onnxruntime's (Q)Softmax has no beta; only beta = 1 is "
                        f"emulated, got {beta}")
    depth = int(ctx.static_shape(ctx.input(0), "input")[-1])
    sx = float(np.float32(qx.tensor_scale))
    log_f = float(np.float32(math.log(float(np.float32(np.float32(_FLT_MAX) / np.float32(depth))))))  # logf
    shift = max(0.0, log_f - _SOFTMAX_RESERVE) / sx
    table = np.exp((np.arange(256, dtype=np.float64) - 255 + shift) * sx).astype(np.float32)
    y_scale = np.float32(np.floor(np.float32(1) / np.float32(qy.tensor_scale)))
    return OrtSoftmax(table, y_scale, qy.tensor_zero_point, depth)


def run_softmax(p: OrtSoftmax, x: np.ndarray) -> np.ndarray:
    rows = x.reshape(-1, p.depth).astype(np.int16)
    return _float32_softmax(p, rows - rows.max(axis=1, keepdims=True) + 255).reshape(x.shape)


def _float32_softmax(p: OrtSoftmax, index: np.ndarray) -> np.ndarray:
    """The float steps of onnxruntime's QLinearSoftmax (``ort`` targets only, a float emulation):
    ``e = table[index]`` (``index = x - max(row) + 255``, integers), the left-to-right float32 sum
    (``np.add.accumulate`` is sequential), ``double(e) Y / double(sum)`` (no overflow: ``e Y < 2^128 *
    2^10``), rounded half to even, ``+ Z_y``, clamped."""
    e = p.table[index]  # float32 [rows, D]
    total = np.add.accumulate(e, axis=1, dtype=np.float32)[:, -1:]
    v = np.rint(e.astype(np.float64) * np.float64(p.y_scale) / total.astype(np.float64)).astype(np.int64) + p.zero_point
    return np.clip(v, -128, 127).astype(np.int8)


@dataclass(frozen=True, eq=False)
class OrtAsymmetricGemm:
    """QLinearConv / QGemm / QLinearMatMul with weights whose zero point is not 0 (what
    ``quantize_static`` writes for uint8 weights, and ONNX's own node tests): ``acc = sum((x - Z_x)
    (w - Z_w)) + b`` exactly in int64 (``|acc| < 2^31`` checked at prepare, as onnxruntime's int32
    accumulator), then the float32 requantization of :data:`Requant.FLOAT32_RNE`. Only the ``ort``
    targets build it: intq's own kernels take symmetric weights."""

    weights: np.ndarray  # int64 [C_out, K]: w - Z_w, K in im2col order (taps, then channels)
    input_zero_point: int
    bias: np.ndarray  # int64 [C_out]
    requant: Requantizer
    im2col: object | None  # intq.kernels._conv_common.Im2col for CONV_2D, None for FULLY_CONNECTED
    out_shape: tuple[int, ...]
    pairs: object = None  # ort-u8s8-avx2: intq.kernels._ort_u8s8.PairSaturation of the raw weight codes


def asymmetric_weights(ctx) -> bool:
    """Whether the node's weights (input 1) have a non-zero zero point."""
    w = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    return w is not None and w.qparams is not None and bool(np.any(np.asarray(w.qparams.zero_point) != 0))


def prepare_asymmetric_gemm(ctx) -> OrtAsymmetricGemm:
    """CONV_2D (no groups) or FULLY_CONNECTED with asymmetric int8 weights, per tensor or per output
    channel (zero points per channel too)."""
    from intq.kernels._conv_common import (
        ConvOperands, conv_bias, conv_padding, conv_requantizer, make_im2col, window_options)

    x, y = ctx.input(0), ctx.outputs[0]
    in_qp, out_qp = ctx.per_tensor(x, "input"), ctx.per_tensor(y, "output")
    w = ctx.constant(1, "weights")
    w_qp = ctx.qparams(ctx.input(1), "weights")
    conv = ctx.op == "CONV_2D"
    if w.dtype != np.int8 or w.ndim != (4 if conv else 2) or (w_qp.per_axis and w_qp.axis != 0):
        raise ctx.error(f"weights must be int8 of rank {4 if conv else 2}, per tensor or per output channel")
    channels = w.shape[0]
    zw = np.broadcast_to(np.asarray(w_qp.zero_point, np.int64).reshape(-1), (channels,))
    centred = w.reshape(channels, -1).astype(np.int64) - zw[:, None]
    bias = conv_bias(ctx, 2, channels)
    bound = int((255 * np.abs(centred).sum(axis=1) + np.abs(bias)).max(initial=0))
    if bound >= 1 << 31:
        raise ctx.error(f"the int32 accumulator can overflow (|acc| up to {bound})")
    activation = ctx.attr("fused_activation_function", "NONE")
    requant = conv_requantizer(ctx, ctx.op, in_qp, w_qp, out_qp, channels, activation, y.dtype)
    out_shape = tuple(int(d) for d in ctx.static_shape(y, "output"))
    im2col = None
    if conv:
        in_shape = ctx.static_shape(x, "input", 4)
        if in_shape[3] != w.shape[3]:
            raise ctx.error("grouped convolutions with asymmetric weights are not emulated")
        opts = window_options(ctx)
        ops = ConvOperands(in_qp, out_qp, in_shape, w, w_qp, y.dtype, opts, 0)
        pad = conv_padding(ctx, ops, w.shape[1], w.shape[2], channels)
        im2col = make_im2col(in_shape, w.shape[1], w.shape[2], opts, pad, in_qp.tensor_zero_point)
    pairs = None
    if _ort_u8s8.saturates(ctx) and not (conv and w.shape[3] == 1 and channels == 1):
        # MLAS multiplies the raw codes (uint8 x, int8 w as stored) with int16-saturating pairs and applies the
        # zero points to the exact row and column sums afterwards (measured under QEMU -cpu Haswell on 200 random
        # QGemm and 200 QLinearConv models, tests/export/test_ort_u8s8.py); one input and one output channel
        # runs onnxruntime's depthwise kernel, exact
        pairs = _ort_u8s8.pair_saturation(w.reshape(channels, -1))
    return OrtAsymmetricGemm(centred, in_qp.tensor_zero_point, bias, requant, im2col, out_shape, pairs)


def run_asymmetric_gemm(p: OrtAsymmetricGemm, x: np.ndarray) -> np.ndarray:
    from intq.kernels._conv_common import fill_im2col

    rows = fill_im2col(p.im2col, x) if p.im2col is not None else x.reshape(-1, p.weights.shape[1])
    acc = (rows.astype(np.int64) - p.input_zero_point) @ p.weights.T  # exact: |acc| < 2^31 (prepare)
    if p.pairs is not None:  # ort-u8s8-avx2: MLAS's int16-saturated pair sums (saturation shrinks |acc|)
        corr = _ort_u8s8.saturation_correction(p.pairs, rows, 128)
        if corr is not None:
            acc = acc + corr
    return requantize(p.requant, acc, p.bias).reshape(p.out_shape)


@dataclass(frozen=True, eq=False)
class OrtAveragePool:
    """QLinearAveragePool (``count_include_pad = 0``): every code dequantized in float32
    (``float32(s_x (q - Z_x))``), each window's in-image values summed in float32 row by row,
    divided by their count, then ``rint(float32(float32(y / s_y) + Z_y))`` (the zero point added
    before rounding), clamped (the fused activation's clamp: the Clip intq writes after it)."""

    dequantized: np.ndarray  # float32 [256] by the code's bits
    geometry: object  # intq.kernels._pool_common.PoolGeometry
    count: np.ndarray  # float32 [out_h, out_w, 1]: in-image pixels per window
    y_scale: np.float32
    zero_point: np.float32  # the runtime's: Z_y (+ 128 on ort-u8)
    offset: int  # the runtime's codes minus intq's (ort-u8: 128)
    act_min: int
    act_max: int


def is_global_window(g) -> bool:
    """Whether onnxruntime's QLinearAveragePool falls back to its global average pool
    (``qlinear_pool.cc``: the kernel equals the image and every pad is 0), whose arithmetic is
    QLinearGlobalAveragePool's integer sum and float32 requantization, not the float32 window sum."""
    return (g.filter_h, g.filter_w) == (g.in_h, g.in_w) and not (g.pad_h or g.pad_w or g.pad_bottom or g.pad_right)


def prepare_average_pool(ctx) -> OrtAveragePool | OrtGlobalAveragePool:
    """AVERAGE_POOL_2D on an ``ort`` target: :class:`OrtAveragePool`, or, for a window covering the
    whole unpadded image (:func:`is_global_window`; measured on MediaPipe's selfie segmenter, 16x16),
    :class:`OrtGlobalAveragePool` over H and W clamped to the fused activation's range."""
    from intq.kernels._pool_common import prepare_pool, window_counts

    qx, qy = ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output")
    pool = prepare_pool(ctx, qx, qy)
    g = pool.geometry
    if is_global_window(g):
        n = g.in_h * g.in_w
        try:
            s = global_average_pool_scale(qx, qy, n)
        except ValueError as e:
            raise ctx.error(str(e)) from None
        r = make_requantizer(s, Requant.FLOAT32_RNE, qy.tensor_zero_point, pool.act_min, pool.act_max, np.int8)
        return OrtGlobalAveragePool((1, 2), np.array([-n * qx.tensor_zero_point], np.int64), r,
                                    tuple(int(d) for d in ctx.static_shape(ctx.outputs[0], "output")))
    counts = window_counts(ctx, pool.geometry, 128)
    dq = (np.float32(qx.tensor_scale) * (INT8_CODES.astype(np.int32) - qx.tensor_zero_point).astype(np.float32))
    offset = ctx.target.activation_offset
    return OrtAveragePool(dq.astype(np.float32), pool.geometry, counts.count.astype(np.float32),
                          np.float32(qy.tensor_scale), np.float32(qy.tensor_zero_point + offset), offset,
                          pool.act_min, pool.act_max)


def run_average_pool(p: OrtAveragePool, x: np.ndarray) -> np.ndarray:
    return _float32_average_pool(p, np.asarray(x).view(np.uint8))


def _float32_average_pool(p: OrtAveragePool, codes: np.ndarray) -> np.ndarray:
    """The float32 steps of onnxruntime's QLinearAveragePool (``ort`` targets only, a float
    emulation): each code dequantized (``codes``: the int8 input's bits as uint8), the window's values
    added in onnxruntime's order (kernel rows, then columns; the out-of-image taps of the zero-padded
    input add an exact 0), ``/ count``, ``/ s_y``, ``+ Z_y``, rint."""
    v = p.dequantized[codes]  # float32
    g = p.geometry
    vp = np.pad(v, ((0, 0), (g.pad_h, g.pad_bottom), (g.pad_w, g.pad_right), (0, 0)))
    span_h, span_w = (g.out_h - 1) * g.stride_h + 1, (g.out_w - 1) * g.stride_w + 1
    acc = np.zeros((v.shape[0], g.out_h, g.out_w, v.shape[3]), np.float32)
    for fy in range(g.filter_h):
        for fx in range(g.filter_w):
            acc += vp[:, fy:fy + span_h:g.stride_h, fx:fx + span_w:g.stride_w]
    y = ((acc / p.count).astype(np.float32) / p.y_scale).astype(np.float32) + p.zero_point
    return np.clip(np.rint(y).astype(np.int64) - p.offset, p.act_min, p.act_max).astype(np.int8)


@dataclass(frozen=True, eq=False)
class OrtPrelu:
    """DequantizeLinear -> PRelu -> QuantizeLinear with a constant slope: per slope element ``a``,
    the code table ``QuantizeLinear(x >= 0 ? x : float32(x a))`` (float32 throughout)."""

    tables: np.ndarray  # int8 [A, 256]: one row per element of the slope tensor
    rows: np.ndarray  # intp, the slope element each output element uses (the output's shape)


def prepare_prelu(ctx) -> OrtPrelu:
    qx, qy = ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output")
    alpha_t = ctx.input(1)
    qa = ctx.per_tensor(alpha_t, "alpha")
    alpha = ctx.constant(1, "alpha (a constant slope: onnxruntime's PRelu is written as a float island)")
    slopes = dequantize(alpha.reshape(-1), qa)
    x = dequantize(INT8_CODES, qx)
    products = (x[None, :] * slopes[:, None]).astype(np.float32)
    y = np.where(x[None, :] >= 0, x[None, :], products).astype(np.float32)
    tables = quantize_linear(y, qy).astype(np.int8)
    shape = ctx.static_shape(ctx.outputs[0], "output")
    rows = np.broadcast_to(np.arange(alpha.size).reshape(alpha.shape), shape)
    return OrtPrelu(tables, np.ascontiguousarray(rows))


def run_prelu(p: OrtPrelu, x: np.ndarray) -> np.ndarray:
    return p.tables[p.rows, np.asarray(x).view(np.uint8)]


def float_sub_table(qa: QuantParams, qb: QuantParams, qy: QuantParams, clamp: tuple[int, int]) -> OrtBinaryLut:
    """DequantizeLinear, DequantizeLinear -> Sub -> QuantizeLinear (onnxruntime has no integer Sub and
    does not fuse it): ``QuantizeLinear(float32(DQ(a) - DQ(b)))`` on every pair of codes."""
    da, db = dequantize(INT8_CODES, qa), dequantize(INT8_CODES, qb)
    y = quantize_linear((da[:, None] - db[None, :]).astype(np.float32), qy)
    return OrtBinaryLut(np.clip(y, *clamp).astype(np.int8))
