"""SOFTMAX: ``y_i = exp(beta * s_in * (x_i - max x)) / sum_j exp(...)`` over the last axis, int8.

Contract (spec 003): input int8 per tensor, any rank >= 1 (the softmax runs along the last axis,
as TFLite's); output int8 per tensor with ``(1/256, -128)`` exactly, same shape; option ``beta``
(float32; absent means SoftmaxOptions' default 0, which the .tflite exporter writes) with
``beta * s_in * 2^26 > 1`` (otherwise both runtimes abort in prepare; intq refuses).
Runtimes: TensorFlow Lite Micro requires exactly these output parameters; LiteRT's reference
kernel requires zero point -128 and a scale within 0.1% of 1/256 (and computes as if it were
1/256). intq refuses anything but the spec's.

Both targets (``tflite``: TFLM ``softmax_common.cc`` CalculateSoftmaxParams + ``softmax.cc``;
``litert-ref``: LiteRT ``activations.cc`` SoftmaxPrepare<kReference>) run the same reference
kernel, ``reference_ops::Softmax`` (reference/softmax.h), so intq has one algorithm:

* prepare (PreprocessSoftmaxScaling, kScaledDiffIntegerBits = 5): ``beta * s_in * 2^26`` (capped
  at 2^31 - 1) as a Q0.31 ``(multiplier, left_shift)``; ``diff_min = -CalculateInputRadius(5,
  left_shift)``.
* per row: ``d = x - max`` in [-255, 0]; for ``d >= diff_min`` the scaled difference
  ``SRDHM(d << left_shift, multiplier)`` (Q5.26), ``exp_on_negative_values`` (Q0.31), summed
  after ``Rescale<12>`` (Q12.19, int32, wrapping as C's); ``GetReciprocal(sum, 12)`` gives
  ``1/sum`` in Q0.31 and ``num_bits_over_unit``; each output is
  ``clamp(RoundingDivideByPOT(SRDHM(1/sum, exp), num_bits_over_unit + 23) - 128)``, and -128 for
  ``d < diff_min``.

The per-difference values (scaled difference, exp, its Q12 form) depend on ``d`` alone, so
``prepare`` tabulates them for d = 0..255 in integers; ``run`` looks them up, sums, and does the
reciprocal and the per-element multiply in fixed point. Integer-only.

Both runtimes stop (TFLITE_CHECK) when a row's sum of exps reaches 2^28 / 2^19 = 512 (the shift
``num_bits_over_unit + 23`` would exceed 31): long, nearly flat rows. intq raises a KernelError.

Runtimes that compute otherwise replace this kernel with a variant in their family's folder
(docs/engine.md).

**16x8** (int16 activations, int8 weights): int16 in, int16 out with scale 1/32768 and zero point 0, over the last axis.

Both runtimes run ``reference_ops::SoftmaxInt16`` (LiteRT 2.3 ``activations.cc`` SoftmaxPrepare /
SoftmaxEval, TFLM ``softmax_common.cc`` + ``softmax.cc``); per row, integer-only::

    d_c   = x_c - max(x)                                        in [-65535, 0]
    e_c   = LUT_exp(clamp(MBQM(d_c, m_in, shift_in) + 32767))   (Q0.15; [-10, 0] -> [-32768, 32767])
    sum   = sum_c e_c                                           (int32)
    h     = clz32(sum);  r = ((sum << (h - 1)) + 2^13) >> 14     (sum normalised to [2^16, 2^17))
    inv   = LUT_recip(clamp(r - 98304))                          (1 / (1 + x) on [0, 1], Q0.15)
    y_c   = clamp((e_c * inv + 2^(30 - h)) >> (31 - h), 0, 32767)

with MBQM gemmlowp's double rounding and ``(m_in, shift_in) = QuantizeMultiplier(s_in * beta /
(10 / 65535))``; the 513-entry tables and their interpolated lookup are
:mod:`intq.kernels._int16_lut`.

Prepare (TFLM): the tables from ``gen_lut<float, int16_t, int16_t>`` in **float32** with ``expf``
on ``[-10, 0]`` and ``[0, 1]``, output range ``[-1, 1]``, and ``double(s_in) * double(beta)``.


Contract: input int16 per tensor, zero point 0; output int16 with zero point 0 and a scale within
0.1% of 1/32768 (both runtimes' check). TFLM takes any rank (LiteRT ranks 1 to 4: its variant).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp, _int16_lut as _lut
from intq.qmath import quantize_multiplier, raw
from intq.kernels.base import INT16, KernelContext, KernelError, kernel
from intq.kernels._int16_common import io_int16, check_16x8, static_shape
from intq.qmath.raw import mbqm

OP = "SOFTMAX"

_ACCUMULATION_INTEGER_BITS = 12  # kAccumulationIntegerBits: the sum of exps is Q12.19
_OUTPUT_BITS = 8  # sizeof(int8) * 8
DEFAULT_BETA = 0.0  # SoftmaxOptions' default: a node without ``beta`` is exported with 0 (and refused)


@dataclass(frozen=True)
class SoftmaxParams:
    node: str  # for run-time errors
    depth: int  # length of the last axis
    radius: int  # -diff_min: differences below -radius are skipped (output -128)
    exp_q0: np.ndarray  # int64 [256]: exp of the scaled difference -d, Q0.31, for d = max - x
    exp_q12: np.ndarray  # int64 [256]: Rescale<12>(exp_q0), 0 where d > radius
    scaling: fp.SoftmaxScaling


def check_io(ctx: KernelContext):
    """One int8 input and output of the same static shape, the output ``(1/256, -128)`` (spec 003)."""
    in_qp, out_qp = fp.check_int8_io(ctx)
    fp.check_output_params(ctx, out_qp, 1.0 / 256.0, -128, "1/256")
    return in_qp, out_qp


@kernel(OP)
def prepare(ctx: KernelContext) -> SoftmaxParams:
    in_qp, out_qp = check_io(ctx)
    beta = ctx.attr("beta", DEFAULT_BETA)
    scaling = fp.softmax_scaling(ctx, beta, in_qp.tensor_scale)
    exp_q0, exp_q12 = exp_tables(scaling)
    return SoftmaxParams(ctx.node.name, int(ctx.outputs[0].shape[-1]), -scaling.diff_min, exp_q0, exp_q12, scaling)


def exp_tables(scaling: fp.SoftmaxScaling) -> tuple[np.ndarray, np.ndarray]:
    """exp of each difference d = max - x in 0..255 (Q0.31), and its Q12.19 summand (0 if skipped)."""
    d = np.arange(256, dtype=np.int64)
    used = d <= -scaling.diff_min
    diff = np.where(used, -d, 0)  # |diff| <= radius keeps diff << left_shift inside int32
    scaled = raw.srdhm(diff << scaling.left_shift, scaling.multiplier)  # MultiplyByQuantizedMultiplierGreaterThanOne
    exp_q0 = fp.exp_on_negative_values(scaled, fp.SCALED_DIFF_INTEGER_BITS)
    exp_q12 = np.where(used, fp.rescale(exp_q0, 0, _ACCUMULATION_INTEGER_BITS), 0)
    for t in (exp_q0, exp_q12):
        t.setflags(write=False)
    return exp_q0, exp_q12


def run(p: SoftmaxParams, x, table=None):
    rows = x.reshape(-1, p.depth)
    d = rows.max(axis=1, keepdims=True).astype(np.int16) - rows  # max - x in [0, 255]
    sums = raw.wrap32(p.exp_q12[d].sum(axis=1))  # int32 accumulation, as C
    inverse, bits_over_unit = fp.get_reciprocal(sums, _ACCUMULATION_INTEGER_BITS)
    exponent = bits_over_unit + 31 - _OUTPUT_BITS
    if np.any((exponent < 0) | (exponent > 31)):
        raise KernelError(
            f"node {p.node!r} ({OP}): a row's sum of exponentials is >= 512 (a long, nearly flat row), which "
            f"TFLite's int8 softmax cannot represent (its kernels abort); increase beta or the input scale, "
            f"or shorten the rows")
    y = raw.rdbp(raw.srdhm(inverse[:, None], p.exp_q0[d]), exponent[:, None]) - 128
    y = np.where(d <= p.radius, np.clip(y, -128, 127), -128)
    return (y.astype(np.int8).reshape(x.shape),)


# -------------------------------------------------------------------------------- 16x8

_RANGE = 65535  # int16 max - min


@dataclass(frozen=True, eq=False)
class Softmax16x8Params:
    multiplier: int
    shift: int
    exp_lut: np.ndarray  # int16 [513]
    recip_lut: np.ndarray  # int16 [513]


def _tflm_tables() -> tuple[np.ndarray, np.ndarray]:
    f32 = np.float32
    exp = _lut.populate(_lut.c_exp, -10.0, 0.0, -1.0, 1.0, np.float32)
    recip = _lut.populate(lambda v: (f32(1.0) / (f32(1.0) + v)).astype(np.float32), 0.0, 1.0, -1.0, 1.0, np.float32)
    return exp, recip


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Softmax16x8Params:
    in_qp, out_qp, shape = int16_io(ctx)
    check_int16_output(ctx, out_qp)
    beta = np.float32(ctx.attr("beta", 1.0))
    s_in = np.float32(in_qp.tensor_scale)
    real = float(s_in) * float(beta) / (10.0 / 65535.0)
    return int16_params(ctx, real, s_in * beta, *_tflm_tables())


def int16_io(ctx: KernelContext):
    """int16 input and output of one shape of rank >= 1, the output scale within 0.1% of 1/32768."""
    check_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    shape = static_shape(ctx, ctx.input(0), "input")
    if not shape or static_shape(ctx, ctx.outputs[0], "output") != shape:
        raise ctx.error(f"input and output must have the same shape of rank >= 1, got {list(shape)}")
    return in_qp, out_qp, shape


def check_int16_output(ctx: KernelContext, out_qp) -> None:
    s_out = np.float32(out_qp.tensor_scale)
    if not abs(s_out - np.float32(1.0 / 32768)) <= np.float32(0.001 / 32768):
        raise ctx.error(f"output scale must be 1/32768 (spec 003, 16x8), got {float(s_out)!r}")


def int16_params(ctx: KernelContext, real: float, s_in_beta, exp_lut: np.ndarray, recip_lut: np.ndarray
                 ) -> Softmax16x8Params:
    """The parameters of ``real = s_in * beta / (10 / 65535)`` (its runtime's arithmetic) and tables."""
    if not (np.isfinite(real) and real > 0):
        raise ctx.error(f"s_in * beta must be positive and finite, got {real!r}")
    qm = quantize_multiplier(real)
    if int(qm.shift) > 30:
        raise ctx.error(f"s_in * beta = {float(s_in_beta):.6g} is too large for TFLite's fixed-point multiplier")
    return Softmax16x8Params(int(qm.multiplier), int(qm.shift), exp_lut, recip_lut)


def _clz32(v: np.ndarray) -> np.ndarray:
    """Count leading zeros of positive int32 values (held in int64)."""
    n = np.zeros(v.shape, np.int64)
    for bits in (16, 8, 4, 2, 1):
        small = v < (np.int64(1) << (32 - bits))  # the top `bits` bits are zero
        n = np.where(small, n + bits, n)
        v = np.where(small, v << bits, v)
    return n


def run_int16(p: Softmax16x8Params, x):
    v = x.astype(np.int64)
    diff = v - v.max(axis=-1, keepdims=True)  # [-65535, 0]
    scaled = np.clip(mbqm(diff, p.multiplier, p.shift) + 32767, -32768, 32767)
    e = _lut.lookup(scaled, p.exp_lut)  # Q0.15
    total = e.sum(axis=-1, keepdims=True)  # > 0: the row's maximum maps to the table's top
    h = _clz32(total)
    shifted = ((total << (h - 1)) + (1 << 13)) >> 14
    inv = _lut.lookup(np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767), p.recip_lut)
    right = 31 - h
    y = (e * inv + (np.int64(1) << (right - 1))) >> right
    return (np.clip(y, 0, 32767).astype(np.int16),)
