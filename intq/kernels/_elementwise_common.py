"""Shared pieces of the elementwise kernels (ADD, SUB, MUL, MAXIMUM, MINIMUM, the comparisons,
RELU*, LEAKY_RELU, PRELU, HARD_SWISH). Not a kernel: it defines no ``OP``.

* :func:`runtime_of` — which runtime's *Prepare* a target reproduces. LiteRT and TensorFlow Lite
  Micro run the same integer loops for these operators but derive some multipliers differently
  (float32 or double arithmetic on the scales, rescaling or not in RELU6); each kernel branches
  on this in ``prepare`` only.
* :func:`fp32` — float32 arithmetic on scales, as C++ ``float`` expressions compute it;
  :func:`scale_ratio` — a ratio of scales in the arithmetic (float32 or double) of a runtime's Prepare.
* :func:`int8_unary` / :func:`int8_binary` — the int8 input/output contract the kernels open with.
* :class:`Rescale` / :func:`make_rescale` / :func:`rescale` — ``x * M`` with TFLite's
  ``(multiplier, shift)`` pair: ``MultiplyByQuantizedMultiplier`` (and its
  ``SmallerThanOneExp`` form, the same function for ``shift <= 0``), double or single rounding.
* :func:`broadcast_shape` — TFLite's (numpy's) broadcasting of two static shapes, checked.
* :func:`int8_table` / :func:`lookup` — a function of one int8 operand has 256 results; the
  kernels evaluate their integer arithmetic on all of them at prepare and look them up at run.

Every run-time helper here is integer-only (int64 numpy arrays holding int32/int16 values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.errors import IntqError
from intq.ir import Tensor
from intq.kernels.base import KernelContext, fused_activation_range  # noqa: F401 (the elementwise kernels import it from here)
from intq.kernels.requantize import (
    Requantizer,
    activation_range,
    make_requantizer,
    requantize,
    xnnpack_activation_range,
)
from intq.kernels.targets import Requant, Runtime
from intq.qmath import (
    QuantParams,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_single_rounding,
    quantize_multiplier,
)

INT8_MIN, INT8_MAX = -128, 127
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1

#: Every int8 value, ordered by its bit pattern (0..127, then -128..-1): the domain of a table.
INT8_BY_BITS = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.int64)


def int8_table(values: np.ndarray, dtype) -> np.ndarray:
    """``f(INT8_BY_BITS)`` stored as a read-only table that :func:`lookup` indexes."""
    table = np.array(values, dtype=dtype)
    assert table.shape == (256,)
    table.setflags(write=False)
    return table


def lookup(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``f(x)`` elementwise for an int8 array ``x`` of any shape: the table indexed by x's bits.

    A function of one int8 operand has 256 possible results; prepare computes them all with the
    kernel's integer arithmetic, so the lookup is that arithmetic, bit for bit, in one gather.
    """
    x = np.asarray(x, dtype=np.int8)
    if x.ndim == 0:
        return np.asarray(table[x.view(np.uint8)])  # 0-d stays an array
    out = np.empty(x.shape, table.dtype)
    _gather(table, np.ascontiguousarray(x).reshape(-1).view(np.uint8), out.reshape(-1))
    return out


@njit(cache=True, nogil=True)
def _gather(table, index, out):
    """``out[i] = table[index[i]]`` (uint8 indices into a 256-entry table), one compiled pass."""
    for i in range(index.size):
        out[i] = table[index[i]]


def runtime_of(ctx: KernelContext) -> Runtime:
    """The runtime family whose Prepare arithmetic ``ctx.target`` follows."""
    return ctx.target.runtime


def requant_mode(ctx: KernelContext) -> Requant:
    """The target's rounding for ``ctx.op``: double (gemmlowp) or single; others are errors."""
    mode = ctx.target.requant_for(ctx.op)
    if mode not in (Requant.DOUBLE, Requant.SINGLE):
        raise ctx.error(f"target {ctx.target.name!r} requantizes {ctx.op} as {mode.value!r}, "
                        "which intq's kernel does not implement (it has double and single rounding)")
    return mode


def fp32(x) -> np.float32:
    """``x`` as a C ``float`` (scales are stored as float32)."""
    return np.float32(x)


def scale_ratio(runtime: Runtime, numerator: Sequence, denominator) -> float:
    """``numerator[0] * numerator[1] * ... / denominator`` on float32 scales, as ``runtime``'s Prepare
    computes it: LiteRT in float32 (its C++ ``float`` expressions, left to right, each step rounded),
    TFLM in double (the tflite-micro package intq tests against converts the scales with cvtss2sd
    before multiplying and dividing, measured per kernel)."""
    if runtime is Runtime.LITERT:
        product = fp32(numerator[0])
        for factor in numerator[1:]:
            product = fp32(product * fp32(factor))
        return float(fp32(product / fp32(denominator)))
    product = float(numerator[0])
    for factor in numerator[1:]:
        product *= float(factor)
    return product / float(denominator)


def scale_of(qp: QuantParams) -> np.float32:
    """The per-tensor scale as the runtimes read it: a float32."""
    return np.float32(qp.tensor_scale)


def zero_point_of(qp: QuantParams) -> int:
    return qp.tensor_zero_point


@dataclass(frozen=True)
class Rescale:
    """``x * M`` as TFLite's pair: ``M = multiplier * 2**(shift - 31)`` (``shift`` positive = left)."""

    multiplier: int  # 0 or in [2^30, 2^31) (negative for a negative M)
    shift: int
    single_rounding: bool  # False: gemmlowp double rounding (TFLM, LiteRT's default build)


def make_rescale(ctx: KernelContext, real: float, what: str, mode: Requant, *,
                 smaller_than_one: bool = False, max_left_shift: int = 30,
                 hint: str = "the scales are too far apart") -> Rescale:
    """Prepare ``x * real`` (QuantizeMultiplier; ``smaller_than_one``: QuantizeMultiplierSmallerThanOneExp).

    ``smaller_than_one`` mirrors the runtimes' TFLITE_CHECKs (``0 < real < 1`` and ``shift <= 0``
    after rounding), which abort the process there; here they raise naming the node.
    ``max_left_shift`` bounds the left shift for the caller's input range (the C code would
    overflow int32).
    """
    real = float(real)
    if not np.isfinite(real):
        raise ctx.error(f"the {what} multiplier is {real}; check the tensors' scales")
    qm = quantize_multiplier(real, for_single_rounding=(mode is Requant.SINGLE))
    if smaller_than_one and not (0.0 < real < 1.0 and qm.shift <= 0):
        raise ctx.error(f"the {what} multiplier {real:.6g} must be in (0, 1) as TFLite requires "
                        f"(QuantizeMultiplierSmallerThanOneExp); {hint}")
    if qm.shift > max_left_shift:
        raise ctx.error(f"the {what} multiplier {real:.6g} needs a left shift of {qm.shift} "
                        f"(at most {max_left_shift} keeps int32 from overflowing); {hint}")
    return Rescale(int(qm.multiplier), int(qm.shift), mode is Requant.SINGLE)


def rescale(r: Rescale, x: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier(x, multiplier, shift)`` on int32 values; int64 result."""
    if r.single_rounding:
        y = multiply_by_quantized_multiplier_single_rounding(x, r.multiplier, r.shift)
    else:
        y = multiply_by_quantized_multiplier(x, r.multiplier, r.shift)
    return np.asarray(y, dtype=np.int64)


def output_requantizer(ctx: KernelContext, real: float, mode: Requant, out_qp: QuantParams,
                       act_min: int, act_max: int, what: str = "output") -> Requantizer:
    """``clamp(MultiplyByQuantizedMultiplier(acc, M) + Z_out, act_min, act_max)`` as int8."""
    try:
        return make_requantizer(float(real), mode, zero_point_of(out_qp), act_min, act_max, np.int8)
    except IntqError as e:
        raise ctx.error(f"{what} requantization: {e}") from None


def activation_bounds(ctx: KernelContext, activation: str, qp: QuantParams) -> tuple[int, int]:
    """The int8 clamp of a RELU-like ``activation`` on the scale of ``qp``
    (:func:`intq.kernels.requantize.activation_range`, TFLite's CalculateActivationRangeQuantized
    and QuantizedReluX), errors naming the node."""
    try:
        return activation_range(activation, qp)
    except IntqError as e:
        raise ctx.error(str(e)) from None




def int8_input(ctx: KernelContext, i: int, what: str) -> tuple[Tensor, QuantParams]:
    t = ctx.input(i)
    return t, ctx.per_tensor(t, what)


def int8_output(ctx: KernelContext) -> tuple[Tensor, QuantParams]:
    if len(ctx.outputs) != 1:
        raise ctx.error(f"expected 1 output, got {len(ctx.outputs)}")
    t = ctx.outputs[0]
    return t, ctx.per_tensor(t, "output")


def check_arity(ctx: KernelContext, n: int) -> None:
    if len(ctx.inputs) != n or any(t is None for t in ctx.inputs):
        raise ctx.error(f"expects {n} inputs, got {sum(t is not None for t in ctx.inputs)}")


@dataclass(frozen=True)
class Int8Unary:
    """A one-input int8 node's tensors (:func:`int8_unary`)."""

    x: Tensor
    y: Tensor
    qx: QuantParams
    qy: QuantParams


def int8_unary(ctx: KernelContext) -> Int8Unary:
    """One int8 per-tensor input and one int8 per-tensor output of the same shape."""
    check_arity(ctx, 1)
    x, qx = int8_input(ctx, 0, "input")
    y, qy = int8_output(ctx)
    same_shape(ctx, x, y)
    return Int8Unary(x, y, qx, qy)


@dataclass(frozen=True)
class Int8Binary:
    """A two-input int8 elementwise node's tensors (:func:`int8_binary`)."""

    a: Tensor
    b: Tensor
    y: Tensor
    qa: QuantParams
    qb: QuantParams
    qy: QuantParams
    shape: tuple[int, ...] | None  # the inputs' broadcast shape; None while a shape is unknown


def int8_binary(ctx: KernelContext, what_a: str = "input 0", what_b: str = "input 1") -> Int8Binary:
    """Two int8 per-tensor inputs and one int8 per-tensor output of their broadcast shape
    (:func:`broadcast_shape`); ``what_a`` / ``what_b`` name the inputs in errors."""
    check_arity(ctx, 2)
    a, qa = int8_input(ctx, 0, what_a)
    b, qb = int8_input(ctx, 1, what_b)
    y, qy = int8_output(ctx)
    return Int8Binary(a, b, y, qa, qb, qy, broadcast_shape(ctx, a, b, y))


def broadcast_shape(ctx: KernelContext, a: Tensor, b: Tensor, y: Tensor | None) -> tuple[int, ...] | None:
    """The broadcast shape of ``a`` and ``b`` (numpy rules, which TFLite's broadcasting follows).

    Checked when the shapes are known: incompatible dims, or an output tensor whose static shape
    is not the broadcast shape, raise naming the node. None when a shape is unknown.
    """
    if a.shape is None or b.shape is None or not (a.is_static and b.is_static):
        return None
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise ctx.error(f"inputs {a.name!r} {list(a.shape)} and {b.name!r} {list(b.shape)} do not broadcast") from None
    if y is not None and y.is_static and tuple(y.shape) != shape:
        raise ctx.error(f"output {y.name!r} has shape {list(y.shape)}; the inputs broadcast to {list(shape)}")
    return shape


@dataclass(frozen=True)
class StoredValueParams:
    """MAXIMUM / MINIMUM: nothing to prepare; the contract is checked, the values compared as stored."""


def same_quantization(ctx: KernelContext) -> StoredValueParams:
    """MAXIMUM / MINIMUM's prepare (TFLite's maximum_minimum.cc compares the stored integers and never
    rescales): two int8 inputs and an int8 output of their broadcast shape, all with one scale and
    zero point (spec 003), so that comparing stored integers compares real values."""
    io = int8_binary(ctx)
    ref = (scale_of(io.qy), zero_point_of(io.qy))
    for t, q in ((io.a, io.qa), (io.b, io.qb)):
        if (scale_of(q), zero_point_of(q)) != ref:
            raise ctx.error(
                f"{t.name!r} has scale {float(scale_of(q)):.6g} and zero point {zero_point_of(q)}, the output "
                f"{float(ref[0]):.6g} and {ref[1]}: {ctx.op} compares stored integers, so every tensor needs the "
                "same scale and zero point (spec 003); requantize the inputs first")
    return StoredValueParams()


def same_shape(ctx: KernelContext, x: Tensor, y: Tensor) -> None:
    if x.is_static and y.is_static and tuple(x.shape) != tuple(y.shape):
        raise ctx.error(f"output {y.name!r} has shape {list(y.shape)}; the input's is {list(x.shape)}")


# ---------------------------------------------------------------- comparisons (LESS ... NOT_EQUAL)

COMPARISON_LEFT_SHIFT = 8  # TFLite's kLeftShift for 8-bit comparisons


@dataclass(frozen=True, eq=False)
class ComparisonParams:
    """Both inputs rescaled to a common (implicit) scale: ``R_i((x_i - Z_i) << 8)``."""

    zero_point_a: int
    zero_point_b: int
    rescale_a: Rescale  # s_a, as QuantizeMultiplierSmallerThanOneExp(s_a)
    rescale_b: Rescale
    table_a: np.ndarray  # int32 [256]: R_a((a - Z_a) << 8) for every int8 a (see lookup)
    table_b: np.ndarray


def prepare_comparison(ctx: KernelContext) -> ComparisonParams:  # or _ort.OrtComparison on the ort targets
    """The comparisons' Prepare (identical in LiteRT and TFLM): one multiplier per input scale.

    Shared arithmetic of TFLite's quantized comparisons (reference_ops::ComparisonWithScaling /
    BroadcastComparison4DSlowWithScaling; Prepare in tflite/kernels/comparisons.cc
    ComparisonQuantized and TFLM comparisons.cc ComparisonsPrepare, which agree): each input is
    offset, shifted left by 8 and rescaled by its own scale,
    ``v_i = MultiplyByQuantizedMultiplierSmallerThanOneExp((x_i - Z_i) << 8, QuantizeMultiplier(s_i))``,
    and the int32 results are compared. Inputs on different scales compare by real value, up to
    that rounding.

    Contract (spec 003): two int8 per-tensor inputs, a bool output. Each input scale must be below
    1: TFLM aborts otherwise, and LiteRT's rescale would shift right by a negative amount
    (undefined in C). |(x - Z) << 8| < 2^16: no overflow. Run looks both rescaled operands up in
    tables computed here on all 256 int8 values (the same integers, one gather each).
    """
    check_arity(ctx, 2)
    a, qa = int8_input(ctx, 0, "input 0")
    b, qb = int8_input(ctx, 1, "input 1")
    if len(ctx.outputs) != 1 or ctx.outputs[0].dtype != np.bool_:
        raise ctx.error("expects one bool output")
    broadcast_shape(ctx, a, b, ctx.outputs[0])
    from intq.kernels import _ort

    if _ort.is_ort(ctx):  # DequantizeLinear of both inputs, then the float comparison: no scale limit
        return _ort.prepare_comparison(ctx)
    mode = requant_mode(ctx)
    hint = "requantize the input to a scale below 1 first"
    za, zb = zero_point_of(qa), zero_point_of(qb)
    ra = make_rescale(ctx, float(scale_of(qa)), "input 0 scale", mode, smaller_than_one=True, hint=hint)
    rb = make_rescale(ctx, float(scale_of(qb)), "input 1 scale", mode, smaller_than_one=True, hint=hint)
    return ComparisonParams(za, zb, ra, rb, int8_table(comparison_operand(ra, za, INT8_BY_BITS), np.int32),
                            int8_table(comparison_operand(rb, zb, INT8_BY_BITS), np.int32))


def comparison_operand(r: Rescale, zero_point: int, x: np.ndarray) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp((x - Z) << 8, m, shift)``: what TFLite compares.

    |(x - Z) << 8| <= 255 * 256 < 2^16: no overflow.
    """
    return rescale(r, (np.asarray(x, dtype=np.int64) - zero_point) << COMPARISON_LEFT_SHIFT)


def compare(p: ComparisonParams, a: np.ndarray, b: np.ndarray, relation) -> np.ndarray:
    """``relation(v_a, v_b)`` (a numpy comparison ufunc, broadcasting) on the int32 values TFLite
    compares, looked up by table (:func:`comparison_operand` on every int8); a 0-d result stays an
    array. (``ort`` targets: ``p`` is an :class:`intq.kernels._ort.OrtComparison`, whose tables hold
    the ranks of the dequantized values.)"""
    return np.asarray(relation(lookup(p.table_a, a), lookup(p.table_b, b)))


# ---------------------------------------------------------------- RELU, RELU6, RELU_N1_TO_1

@dataclass(frozen=True, eq=False)
class ReluParams:
    """``clamp(MultiplyByQuantizedMultiplier(x - Z_in, M) + Z_out, lo, hi)`` (ReluX)."""

    zero_point_in: int
    output: Requantizer
    table: np.ndarray  # int8 [256]: the above for every int8 x (see lookup)


def prepare_relu(ctx: KernelContext, bounds: str, *, tflm_clamp_only: bool = False,
                 tflm_has_kernel: bool = True) -> ReluParams:
    """Prepare RELU-like ``bounds`` ("RELU", "RELU6", "RELU_N1_TO_1": the clamp's real bounds).

    LiteRT (activations.cc ReluPrepare + QuantizedReluX): ``M = float(s_in / s_out)``, bounds
    ``Z_out + roundf(b / s_out)`` within int8. TFLM (activations_common.cc CalculateReluOpData):
    ``M = double(s_in) / double(s_out)``, same bounds. ``tflm_clamp_only`` (TFLM's RELU6,
    Relu6Prepare + Relu6Quantized): no rescale at all, ``clamp(x, Z_in, FloatToQuantizedType(6,
    s_in, Z_in))`` — the output's own parameters are ignored; expressed here as ``M = 1``
    (exact: SRDHM(v << 1, 2^30) = v) with the input's zero point. ``tflm_has_kernel=False``
    (RELU_N1_TO_1, which TFLM lacks): every target computes LiteRT's function. Run looks the
    result up in a table of :func:`relu_x` on all 256 int8 values.
    """
    io = int8_unary(ctx)
    qx, qy = io.qx, io.qy
    mode = requant_mode(ctx)
    runtime = runtime_of(ctx) if tflm_has_kernel else Runtime.LITERT
    if tflm_clamp_only and runtime is Runtime.TFLM:
        lo, hi = activation_bounds(ctx, bounds, qx)  # quantized with the *input's* parameters
        return _relu_params(zero_point_of(qx), output_requantizer(ctx, 1.0, mode, qx, lo, hi))
    real = scale_ratio(runtime, (scale_of(qx),), scale_of(qy))
    make_rescale(ctx, real, "output", mode, max_left_shift=22)  # |x - Z| <= 255 < 2^8: 2^8 << 22 < 2^31
    lo, hi = activation_bounds(ctx, bounds, qy)
    return _relu_params(zero_point_of(qx), output_requantizer(ctx, real, mode, qy, lo, hi))


def _relu_params(zero_point_in: int, output: Requantizer) -> ReluParams:
    return ReluParams(zero_point_in, output, int8_table(relu_x(zero_point_in, output, INT8_BY_BITS), np.int8))


def relu_x(zero_point_in: int, output: Requantizer, x: np.ndarray) -> np.ndarray:
    """ReluX: ``clamp(MultiplyByQuantizedMultiplier(x - Z_in, M) + Z_out, lo, hi)``, |x - Z_in| <= 255."""
    return requantize(output, np.asarray(x, dtype=np.int64) - zero_point_in)


def run_relu(p: ReluParams, x: np.ndarray) -> np.ndarray:
    return lookup(p.table, x)


# ---------------------------------------------------------------- XNNPACK ADD / SUB

XNNPACK_ADD_SCALE_RANGE = (2.0**-10, 2.0**8)  # the TFLite delegate's check on s_in / s_out (else not delegated)


@dataclass(frozen=True, eq=False)
class XnnpackAdd:
    """XNNPACK's qs8 add (``xnn_init_qs8_add_minmax_scalar_params`` and the vadd kernels):
    ``y = clamp(((bias + a * m_a + b * m_b) >> shift) + Z_y, lo, hi)`` on raw int8 ``a``, ``b``.

    ``r_a = float(s_a / s_y)``, ``r_b = float(s_b / s_y)`` (negated for SUB); ``shift = 20 - e`` with
    ``e`` the float32 exponent of ``max(|r_a|, |r_b|)``; ``m = lrintf(r * 2^shift)`` (ties to
    even; the largest ``|m|`` in [2^20, 2^21)); ``bias = 2^(shift-1) - m_a Z_a - m_b Z_b`` — one
    rounding, half up, of the exact sum. ``lo``/``hi`` from :func:`xnnpack_activation_range`.
    ``table_a[a] = a * m_a``, ``table_b[b] = b * m_b + bias`` (|.| < 2^29: no overflow)."""

    shift: int
    zero_point: int
    lo: int
    hi: int
    table_a: np.ndarray  # int64 [256], indexed by the int8's bits (lookup)
    table_b: np.ndarray


def xnnpack_add(ctx: KernelContext, io: Int8Binary, subtract: bool) -> XnnpackAdd | None:
    """XNNPACK's parameters for the ``xnnpack`` target, or None: another target, or the delegate
    declines the node (an input-to-output scale ratio outside [2^-10, 2^8)) and LiteRT's own kernel
    runs it."""
    if not ctx.target.xnnpack:
        return None
    qa, qb, qy = io.qa, io.qb, io.qy
    s_y = scale_of(qy)
    r_a = np.float32(scale_of(qa) / s_y)
    r_b = np.float32(scale_of(qb) / s_y)
    lo_r, hi_r = XNNPACK_ADD_SCALE_RANGE
    if not all(lo_r <= float(r) < hi_r for r in (r_a, r_b)):
        return None
    if subtract:
        r_b = -r_b
    biggest = max(abs(r_a), abs(r_b))
    exponent = int((np.array(biggest, np.float32).view(np.uint32) >> 23) & 0xFF) - 127
    shift = 20 - exponent
    m_a = int(np.rint(r_a * np.float32(2.0**shift)))  # exact power-of-two scaling, then ties to even
    m_b = int(np.rint(r_b * np.float32(2.0**shift)))
    za, zb = zero_point_of(qa), zero_point_of(qb)
    bias = (1 << (shift - 1)) - m_a * za - m_b * zb
    lo, hi = xnnpack_bounds(ctx, qy)
    return XnnpackAdd(shift, zero_point_of(qy), lo, hi, int8_table(INT8_BY_BITS * m_a, np.int64),
                      int8_table(INT8_BY_BITS * m_b + bias, np.int64))


def xnnpack_bounds(ctx: KernelContext, qy: QuantParams) -> tuple[int, int]:
    """The output clamp XNNPACK derives from the node's fused activation."""
    try:
        return xnnpack_activation_range(ctx.attr("fused_activation_function", "NONE"), qy)
    except IntqError as e:
        raise ctx.error(str(e)) from None


def run_xnnpack_add(p: XnnpackAdd, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``clamp(((table_a[a] + table_b[b]) >> shift) + Z_y, lo, hi)`` as int8, broadcasting."""
    acc = lookup(p.table_a, a) + lookup(p.table_b, b)
    y = (acc >> p.shift) + p.zero_point
    return np.clip(y, p.lo, p.hi).astype(np.int8)


# ---------------------------------------------------------------- LiteRT's optimized binary kernels

#: what :func:`optimized_vector_lanes` says of an output element
LANE_REFERENCE, LANE_ELEMENTWISE, LANE_SCALAR_BROADCAST = 0, 1, 2


def optimized_vector_lanes(a: Tensor, b: Tensor, elementwise_block: int, scalar_block: int) -> np.ndarray:
    """Which code computes each output element of LiteRT's optimized int8 ADD / MUL.

    tflite/kernels (ProcessBroadcastShapes, optimized_ops::BinaryBroadcastFiveFold): equal
    (rank-extended) shapes run the elementwise kernel once over the flat tensor; otherwise the
    shapes are folded into ``y0..y4`` and the output is written in consecutive runs of ``y4``
    elements (the elementwise kernel; ``y4 > 1``) or of ``y3`` elements (the scalar-broadcast
    kernel; ``y4 == 1``); shapes that do not fold run the reference kernel. Each kernel call does
    ``block`` elements at a time with vector code and finishes with a scalar loop (the reference
    arithmetic), so the element ``k`` of a run of length ``L`` is vector-computed iff
    ``k mod L < block floor(L / block)``. Returns an int8 array over the flat output:
    :data:`LANE_ELEMENTWISE` / :data:`LANE_SCALAR_BROADCAST` for the two kernels' vector code,
    :data:`LANE_REFERENCE` elsewhere. Static shapes only.
    """
    sa, sb = tuple(a.shape), tuple(b.shape)
    rank = max(len(sa), len(sb))
    ea, eb = (1,) * (rank - len(sa)) + sa, (1,) * (rank - len(sb)) + sb
    out = tuple(max(x, y) for x, y in zip(ea, eb))
    size = int(np.prod(out, dtype=np.int64))
    lanes = np.zeros(size, np.int8)
    if ea == eb:
        run, kind, block = size, LANE_ELEMENTWISE, elementwise_block
    else:
        category = "generic"
        for i in range(rank - 1, -1, -1):
            if ea[i] == eb[i]:
                continue
            category = "first" if ea[i] == 1 else ("second" if eb[i] == 1 else "generic")
            break
        if category == "generic":
            return lanes
        sha, shb = (ea, eb) if category == "first" else (eb, ea)
        y = [1] * 5
        i = rank - 1
        for slot, cond in ((4, lambda j: sha[j] == shb[j]), (3, lambda j: sha[j] == 1), (2, lambda j: sha[j] == shb[j]),
                           (1, lambda j: shb[j] == 1), (0, lambda j: sha[j] == shb[j])):
            while i >= 0 and cond(i):
                y[slot] *= shb[i] if slot in (4, 3, 0) else sha[i]
                i -= 1
        if i >= 0:
            return lanes
        if y[4] > 1:
            run, kind, block = y[4], LANE_ELEMENTWISE, elementwise_block
        else:
            run, kind, block = y[3], LANE_SCALAR_BROADCAST, scalar_block
    k = np.arange(size) % max(run, 1)
    lanes[k < block * (run // block)] = kind
    return lanes
