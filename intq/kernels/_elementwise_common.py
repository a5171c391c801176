"""Shared pieces of the elementwise kernels (ADD, SUB, MUL, MAXIMUM, MINIMUM, the comparisons,
RELU*, LEAKY_RELU, PRELU, HARD_SWISH). Not a kernel: it defines no ``OP``.

* :func:`fp32` — float32 arithmetic on scales, as C++ ``float`` expressions compute it;
  :func:`scale_ratio` — a ratio of scales in the arithmetic (float32 or double) of a runtime's
  Prepare: LiteRT and TensorFlow Lite Micro run the same integer loops for these operators but
  derive some multipliers differently, which the target's row states
  (:attr:`intq.kernels.targets.Target.scales`).
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
    )
from intq.kernels.targets import Arithmetic, Requant
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


def scale_ratio(arithmetic: Arithmetic, numerator: Sequence, denominator) -> float:
    """``numerator[0] * numerator[1] * ... / denominator`` on float32 scales, in the ``arithmetic`` of a
    runtime's Prepare (the target's :attr:`~intq.kernels.targets.Target.scales`): ``FLOAT32`` as C++
    ``float`` expressions compute it (LiteRT: left to right, each step rounded), ``DOUBLE`` on the
    scales converted to double (the tflite-micro package intq tests against converts them with
    cvtss2sd before multiplying and dividing, measured per kernel)."""
    if arithmetic is Arithmetic.FLOAT32:
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


def comparison_io(ctx: KernelContext) -> tuple[QuantParams, QuantParams]:
    """The comparisons' contract: two int8 per-tensor inputs broadcasting to one bool output; their
    QuantParams."""
    check_arity(ctx, 2)
    a, qa = int8_input(ctx, 0, "input 0")
    b, qb = int8_input(ctx, 1, "input 1")
    if len(ctx.outputs) != 1 or ctx.outputs[0].dtype != np.bool_:
        raise ctx.error("expects one bool output")
    broadcast_shape(ctx, a, b, ctx.outputs[0])
    return qa, qb


def prepare_comparison(ctx: KernelContext) -> ComparisonParams:
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
    qa, qb = comparison_io(ctx)
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
    array. ``p`` is any prepared comparison with ``table_a`` / ``table_b`` whose order is the
    runtime's (a variant's prepared comparison too)."""
    return np.asarray(relation(lookup(p.table_a, a), lookup(p.table_b, b)))


# ---------------------------------------------------------------- RELU, RELU6, RELU_N1_TO_1

@dataclass(frozen=True, eq=False)
class ReluParams:
    """``clamp(MultiplyByQuantizedMultiplier(x - Z_in, M) + Z_out, lo, hi)`` (ReluX)."""

    zero_point_in: int
    output: Requantizer
    table: np.ndarray  # int8 [256]: the above for every int8 x (see lookup)


def prepare_relu(ctx: KernelContext, bounds: str, *, clamp_only: bool = False,
                 arithmetic: Arithmetic | None = None) -> ReluParams:
    """Prepare RELU-like ``bounds`` ("RELU", "RELU6", "RELU_N1_TO_1": the clamp's real bounds).

    ReluX (LiteRT activations.cc ReluPrepare + QuantizedReluX, TFLM activations_common.cc
    CalculateReluOpData): ``clamp(MultiplyByQuantizedMultiplier(x - Z_in, M) + Z_out)`` with
    ``M = s_in / s_out`` in ``arithmetic`` (default: the target's Prepare arithmetic,
    :func:`scale_ratio`; LiteRT float32, TFLM double), bounds ``Z_out + roundf(b / s_out)`` within
    int8. ``clamp_only`` (TFLM's RELU6, Relu6Prepare + Relu6Quantized): no rescale at all,
    ``clamp(x, Z_in, FloatToQuantizedType(6, s_in, Z_in))`` — the output's own parameters are
    ignored; expressed here as ``M = 1`` (exact: SRDHM(v << 1, 2^30) = v) with the input's zero
    point. Run looks the result up in a table of :func:`relu_x` on all 256 int8 values.
    """
    io = int8_unary(ctx)
    qx, qy = io.qx, io.qy
    mode = requant_mode(ctx)
    if clamp_only:
        lo, hi = activation_bounds(ctx, bounds, qx)  # quantized with the *input's* parameters
        return _relu_params(zero_point_of(qx), output_requantizer(ctx, 1.0, mode, qx, lo, hi))
    real = scale_ratio(arithmetic or ctx.target.scales, (scale_of(qx),), scale_of(qy))
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
