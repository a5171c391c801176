"""Shared pieces of the 16x8 kernels (int16 activations, int8 weights), which live in the operators'
own modules beside their int8 kernels (no ``OP``: not a kernel).

* **Contract checks**: int16 activations are symmetric (spec 003, "16x8": zero point 0, per
  tensor); both runtimes refuse a non-zero int16 zero point for most operators.
* The fixed-point primitives themselves live in :mod:`intq.qmath.raw` (``mbqm``, ``rdbp``,
  ``mbqm_int64`` with its 16-bit reduced multiplier...); the kernels import them from there.
* **The int64 requantization** of the conv family (:class:`Int64Requant`), prepared once.
* **The conv family's 16x8 specifics** on top of the int8 helpers of
  :mod:`intq.kernels._conv_common` (operands, bias, windows, im2col): the int16 operand check
  (:func:`conv_operands_16x8`), the int64 bias, the 2^47 accumulator bound, the output stage.

Names follow the C functions so the code reads side by side with the runtimes' sources.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.ir import Tensor
from intq.kernels._conv_common import ConvOperands, check_accumulator, conv_bias, conv_operands, conv_scales
from intq.kernels.base import KernelContext, fused_activation_range, static_shape  # noqa: F401 (the 16x8 kernels import them from here)
from intq.errors import IntqError
from intq.kernels._elementwise_common import make_rescale, same_shape, scale_ratio
from intq.kernels.requantize import activation_range, make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import QuantParams, quantize_multiplier
from intq.qmath.raw import mbqm_int64, reduce_multiplier

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_ACC_LIMIT = 1 << 47  # MultiplyByQuantizedMultiplier(int64): |x| < 2^47 (its contract)


# ------------------------------------------------------------------------------- contract checks

def int16_tensor(ctx: KernelContext, t: Tensor, what: str) -> QuantParams:
    """Per-tensor int16 with zero point 0 (spec 003's 16x8 activations)."""
    qp = ctx.per_tensor(t, what, dtypes=(np.int16,))
    if qp.tensor_zero_point != 0:
        raise ctx.error(f"{what} {t.name!r} is int16 with zero point {qp.tensor_zero_point}; 16x8 activations "
                        f"are symmetric (zero point 0, spec 003)")
    return qp


def io_int16(ctx: KernelContext) -> tuple[QuantParams, QuantParams]:
    """Input 0 and output 0, both int16 symmetric per tensor."""
    return int16_tensor(ctx, ctx.input(0), "input"), int16_tensor(ctx, ctx.outputs[0], "output")






def binary_int16(ctx: KernelContext) -> tuple[QuantParams, QuantParams, QuantParams, tuple[int, ...]]:
    """The int16 parameters of a two-input elementwise op's inputs and output, and the broadcast
    output shape (checked against the output tensor's)."""
    if len(ctx.inputs) != 2:
        raise ctx.error(f"{ctx.op} takes 2 inputs, got {len(ctx.inputs)}")
    qa = int16_tensor(ctx, ctx.input(0), "input 0")
    qb = int16_tensor(ctx, ctx.input(1), "input 1")
    qy = int16_tensor(ctx, ctx.outputs[0], "output")
    sa, sb = static_shape(ctx, ctx.input(0), "input 0"), static_shape(ctx, ctx.input(1), "input 1")
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(sa, sb))
    except ValueError:
        raise ctx.error(f"inputs of shapes {list(sa)} and {list(sb)} do not broadcast") from None
    if static_shape(ctx, ctx.outputs[0], "output") != shape:
        raise ctx.error(f"output shape {list(ctx.outputs[0].shape)} is not the broadcast shape {list(shape)}")
    return qa, qb, qy, shape


def same_quantization_int16(ctx: KernelContext) -> None:
    """MAXIMUM / MINIMUM on int16 (both runtimes compare the stored integers, ``maximum_minimum.cc``):
    two int16 symmetric inputs and an output of their broadcast shape, all with one scale (spec
    003), so that comparing stored integers compares real values."""
    qa, qb, qy, _ = binary_int16(ctx)
    for i, q in ((0, qa), (1, qb)):
        if np.float32(q.tensor_scale) != np.float32(qy.tensor_scale):
            raise ctx.error(f"input {i} {ctx.input(i).name!r} has scale {q.tensor_scale:.6g}, the output "
                            f"{qy.tensor_scale:.6g}: {ctx.op} compares stored integers, so every tensor needs the "
                            "same scale (spec 003); requantize the inputs first")


def scale64(qp: QuantParams) -> float:
    """A tensor's float32 scale read as a double (``static_cast<double>(params.scale)``)."""
    return qp.tensor_scale


def int64_bias(ctx: KernelContext, index: int, channels: int, refused_without: str | None = None) -> np.ndarray:
    """The optional constant int64 bias ``[channels]`` (zeros when omitted):
    :func:`intq.kernels._conv_common.conv_bias` for int64.

    Both runtimes also run 16x8 layers with an int32 bias, through an int32 accumulator and the
    int32 multiplier instead; intq does not emulate that variant yet and says so. (Measured on a
    CONV_2D: LiteRT reads an int32 bias correctly only when the option ``quantized_bias_type`` is
    INT32 — without it every resolver reads the buffer as int64 and computes other values — while
    TFLM reads it either way.) The option (CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED) must be unset
    (FLOAT32) or INT64, as the converter writes it."""
    declared = ctx.attr("quantized_bias_type")
    if declared not in (None, "FLOAT32", "INT64"):
        raise ctx.error(f"quantized_bias_type {declared} with int16 activations (an int32-bias 16x8 layer) is not "
                        f"supported by intq yet; use INT64")
    return conv_bias(ctx, index, channels, np.int64, refused_without,
                     note=" (an int32 bias with int16 activations is not supported by intq yet)")


def check_int64_accumulator(ctx: KernelContext, abs_weight_sums: np.ndarray, bias: np.ndarray) -> None:
    """``|acc| <= 2^15 * sum|w| + |b| < 2^47`` per output channel (:data:`INT64_ACC_LIMIT`, the
    contract of TFLite's int64 MultiplyByQuantizedMultiplier), via
    :func:`intq.kernels._conv_common.check_accumulator`."""
    check_accumulator(ctx, abs_weight_sums, bias, max_abs_x=1 << 15, limit_bits=INT64_ACC_LIMIT.bit_length() - 1)


# --------------------------------------------------------------- int64 accumulator requantization

@dataclass(frozen=True, eq=False)
class Int64Requant:
    """``clamp(MBQM64(acc, m_c, shift_c), lo, hi)`` per output channel (last axis); zero point 0."""

    m16: np.ndarray  # int64 [C]
    total_shift: np.ndarray  # int64 [C], 15 - shift, in [8, 46]
    act_min: int
    act_max: int


def make_int64_requant(ctx: KernelContext, real: np.ndarray, lo: int, hi: int) -> Int64Requant:
    """QuantizeMultiplier of each real multiplier, then :func:`reduce_multiplier`. TFLite DCHECKs
    ``shift`` in [-31, 7]: a multiplier >= 2^7 or below 2^-32 is refused here."""
    qm = quantize_multiplier(np.atleast_1d(np.asarray(real, np.float64)))
    m = np.atleast_1d(np.asarray(qm.multiplier, np.int64))
    s = np.atleast_1d(np.asarray(qm.shift, np.int64))
    if np.any(s > 7) or np.any(s < -31) or np.any(m == 0):
        raise ctx.error(f"requantization multipliers {np.asarray(real).tolist()} are outside what TFLite's "
                        f"int64 MultiplyByQuantizedMultiplier accepts (shift in [-31, 7]); check the scales")
    m16, t = reduce_multiplier(m, s)
    return Int64Requant(m16, t, int(lo), int(hi))


def conv_operands_16x8(ctx: KernelContext, channel_axis: int, input_index: int = 0,
                       dilation: bool = True) -> ConvOperands:
    """:func:`intq.kernels._conv_common.conv_operands` of a 16x8 convolution: int16 symmetric input
    and output (:func:`int16_tensor`)."""
    check_16x8(ctx)
    return conv_operands(ctx, channel_axis, activation=int16_tensor, input_index=input_index, dilation=dilation)


def conv_int64_requant(ctx: KernelContext, ops: ConvOperands, bias: np.ndarray) -> Int64Requant:
    """The 16x8 conv family's output stage (both runtimes), once the accumulator bound holds
    (:func:`check_int64_accumulator` with ``ops``' weights and the int64 ``bias``): the real
    multipliers ``double(s_in) * double(s_w[o]) / double(s_out)``
    (:func:`intq.kernels._conv_common.conv_scales`) through :func:`make_int64_requant`, clamped to
    the node's fused activation range."""
    check_int64_accumulator(ctx, ops.abs_weight_sums(), bias)
    real = conv_scales(ops.in_qp, ops.w_qp, ops.out_qp, len(bias))
    return make_int64_requant(ctx, real, *fused_activation_range(ctx, ops.out_qp))


def requantize_int64(r: Int64Requant, acc: np.ndarray) -> np.ndarray:
    """Apply :class:`Int64Requant` to an int64 accumulator array (channels last); int16 result."""
    return np.clip(mbqm_int64(acc, r.m16, r.total_shift), r.act_min, r.act_max).astype(np.int16)


def check_16x8(ctx: KernelContext) -> None:
    """Refuse the node if ``ctx.target`` does not emulate 16x8 kernels, saying why
    (:attr:`intq.kernels.targets.Target.no_16x8`)."""
    if ctx.target.no_16x8:
        raise ctx.error(f"target {ctx.target.name!r}: {ctx.target.no_16x8}")


def checked_log2(scale) -> tuple[bool, int]:
    """TFLite's CheckedLog2 in float32: ``(|frac| < 1e-3, round(log2(s)))``."""
    log2 = np.float32(np.log(np.float32(scale))) * np.float32(np.float32(1.0) / np.float32(np.log(np.float32(2.0))))
    rounded = np.float32(np.round(log2))  # std::round: halves away from zero (np.round: to even; |frac| = .5 never POT)
    return bool(abs(np.float32(log2 - rounded)) < np.float32(1e-3)), int(rounded)


# ----------------------------------------------------------------------------- RELU, RELU6

#: Every int16 value ordered by its bits (int64): ``ALL_INT16[u]`` is the int16 whose bits are ``u``,
#: so a table of ``f(ALL_INT16)`` is indexed by ``x.view(np.uint16)``.
ALL_INT16 = np.arange(1 << 16, dtype=np.int64).astype(np.uint16).view(np.int16).astype(np.int64)


@dataclass(frozen=True, eq=False)
class Relu16x8Params:
    """An int16 RELU-like function as a table: ``y = table[x.view(uint16)]``."""

    table: np.ndarray  # int16 [65536]


def prepare_relu_16x8(ctx: KernelContext, bounds: str, *, clamp_only: bool = False) -> Relu16x8Params:
    """RELU / RELU6 on int16 (``bounds``: the clamp's real bounds, as a fused activation's name).

    ReluX (LiteRT activations.cc ReluPrepare + QuantizedReluX<int16_t>, every resolver; TFLM
    activations_common.cc): ``clamp(MultiplyByQuantizedMultiplier(x, M), lo, hi)`` with ``M = s_in
    / s_out`` in the target's Prepare arithmetic (:func:`intq.kernels._elementwise_common.scale_ratio`:
    LiteRT float32, TFLM double) and the bounds ``roundf(b / s_out)`` within int16. ``clamp_only``
    (TFLM's RELU6): no rescale at all, ``clamp(x, 0, round(6 / s_in))`` — the output's own
    parameters ignored, as for int8. The result of all 65536 inputs is tabulated at prepare."""
    check_16x8(ctx)
    if len(ctx.inputs) != 1:
        raise ctx.error(f"takes 1 input, got {len(ctx.inputs)}")
    qx, qy = io_int16(ctx)
    same_shape(ctx, ctx.input(0), ctx.outputs[0])
    try:
        if clamp_only:
            lo, hi = activation_range(bounds, qx)  # quantized with the *input's* parameters
            requant = make_requantizer(1.0, Requant.DOUBLE, 0, lo, hi, np.int16)
        else:
            real = scale_ratio(ctx.target.scales, (qx.tensor_scale,), qy.tensor_scale)
            make_rescale(ctx, real, "output", Requant.DOUBLE, max_left_shift=15)  # |x| <= 2^15: x << 15 fits int32
            lo, hi = activation_range(bounds, qy)
            requant = make_requantizer(real, Requant.DOUBLE, 0, lo, hi, np.int16)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    table = requantize(requant, ALL_INT16)
    table.setflags(write=False)
    return Relu16x8Params(table)


def run_relu_16x8(p: Relu16x8Params, x: np.ndarray) -> np.ndarray:
    return p.table[x.view(np.uint16)]
