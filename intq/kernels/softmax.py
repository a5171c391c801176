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

``litert-opt`` and ``xnnpack`` (XNNPACK takes float SOFTMAX only, so LiteRT's optimized kernel runs
under both): ``activations.cc`` SoftmaxPrepare<kGenericOptimized> builds a float32 table
(``PopulateSoftmaxLookupTable``; the uint16 table of ``TFLITE_SOFTMAX_USE_UINT16_LUT`` is an
aarch64-only build) and ``optimized_ops::Softmax`` computes, per row, in float32::

    t[d]  = expf(float32(-s_in * beta) * d)                 d = max - x in 0..255
    sum   = t[d_0] + t[d_1] + ...                           (in order, one rounding per addition)
    inv   = 1 / (sum * s_out)
    y     = clamp(roundf(t[d] * inv) + Z_out)                (roundf: half away from zero)

(:class:`OptimizedSoftmaxParams`, the float emulation :func:`_float32_softmax`). It agrees with the
fixed-point kernel on all but about 1 random model in 4,000 (measured: 30 of 133,089 random models
differ, and LiteRT's optimized kernel equals this formula on all 30; e.g. input scale
0.2359921932220459, zero point 6, logits [-91, 7, 11, 26, 13, -59, -3, 46, 9, -56] give 126 at
index 7 where the reference gives 125). Neither the ``beta * s_in * 2^26 > 1`` check nor the
512 limit exists on this path.

``tpu-mlir`` target: TPU-MLIR's quantized ``tpu.Softmax`` on its float exp table, input 1 (:mod:`intq.kernels.tpu_mlir.softmax`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels import _ort
from intq.qmath import Rounding, raw, round_float
from intq.kernels.base import KernelContext, KernelError, kernel
from intq.kernels.tpu_mlir import softmax as tpu_mlir_softmax
from intq.kernels.targets import Runtime as _Runtime

OP = "SOFTMAX"

_ACCUMULATION_INTEGER_BITS = 12  # kAccumulationIntegerBits: the sum of exps is Q12.19
_OUTPUT_BITS = 8  # sizeof(int8) * 8
_DEFAULT_BETA = 0.0  # SoftmaxOptions' default: a node without ``beta`` is exported with 0 (and refused)


@dataclass(frozen=True)
class SoftmaxParams:
    node: str  # for run-time errors
    depth: int  # length of the last axis
    radius: int  # -diff_min: differences below -radius are skipped (output -128)
    exp_q0: np.ndarray  # int64 [256]: exp of the scaled difference -d, Q0.31, for d = max - x
    exp_q12: np.ndarray  # int64 [256]: Rescale<12>(exp_q0), 0 where d > radius
    scaling: fp.SoftmaxScaling


@dataclass(frozen=True, eq=False)
class OptimizedSoftmaxParams:
    """LiteRT's optimized int8 SOFTMAX (``litert-opt``, ``xnnpack``; module docstring)."""

    depth: int  # length of the last axis
    table: np.ndarray  # float32 [256]: expf(float32(-s_in * beta) * d), d = max - x
    output_scale: np.float32
    zero_point: int


@kernel(OP)
def prepare(ctx: KernelContext) -> SoftmaxParams | OptimizedSoftmaxParams | _ort.OrtSoftmax | tpu_mlir_softmax.TpuMlirSoftmaxParams:
    if ctx.target.runtime is _Runtime.TPU_MLIR:
        return tpu_mlir_softmax.prepare(ctx)
    in_qp, out_qp = fp.check_int8_io(ctx)
    fp.check_output_params(ctx, out_qp, 1.0 / 256.0, -128, "1/256")
    if _ort.is_ort(ctx):  # QLinearSoftmax: onnxruntime's float32 algorithm
        return _ort.prepare_softmax(ctx)
    beta = ctx.attr("beta", _DEFAULT_BETA)
    if ctx.target.optimized:  # XNNPACK takes float SOFTMAX only: LiteRT's optimized kernel under both
        return OptimizedSoftmaxParams(int(ctx.outputs[0].shape[-1]), fp.optimized_softmax_table(in_qp.tensor_scale, beta),
                                      np.float32(out_qp.tensor_scale), out_qp.tensor_zero_point)
    fp.runtime_for(ctx)  # TFLM and LiteRT BUILTIN_REF share reference_ops::Softmax
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


def run(p: SoftmaxParams | OptimizedSoftmaxParams | _ort.OrtSoftmax | tpu_mlir_softmax.TpuMlirSoftmaxParams, x, table=None):
    if isinstance(p, _ort.OrtSoftmax):
        return (_ort.run_softmax(p, x),)
    if type(p) is tpu_mlir_softmax.TpuMlirSoftmaxParams:
        return tpu_mlir_softmax.run_float(p, x)
    if type(p) is tpu_mlir_softmax.TpuMlirFloatSoftmaxParams:
        return tpu_mlir_softmax.run_float_softmax(p, x)
    if isinstance(p, OptimizedSoftmaxParams):
        return (_float32_softmax(p, x),)
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


def _float32_softmax(p: OptimizedSoftmaxParams, x: np.ndarray) -> np.ndarray:
    """LiteRT's ``optimized_ops::Softmax`` on int8 (``litert-opt``, ``xnnpack``; a float emulation:
    LiteRT computes it in float32): ``clamp(roundf(t[d] * (1 / (sum_row t[d] * s_out))) + Z_out)``."""
    rows = x.reshape(-1, p.depth)
    values = p.table[rows.max(axis=1, keepdims=True).astype(np.int16) - rows]  # float32 [rows, depth]
    inverse = np.float32(1) / (fp.float32_row_sums(values) * p.output_scale)
    scaled = values * inverse[:, None]  # float32
    y = round_float(scaled, Rounding.HALF_AWAY_FROM_ZERO).astype(np.int32) + p.zero_point
    return np.clip(y, -128, 127).astype(np.int8).reshape(x.shape)
