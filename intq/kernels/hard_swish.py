"""HARD_SWISH: ``y ~= x * relu6(x + 3) / 6`` in TFLite's 16-bit fixed point, int8 in and out.

TFLite's int8 HardSwish (reference_ops::HardSwish in hard_swish.h, the same loop in LiteRT
and TFLM). Prepare: ``hires = s_in / 128`` (a float32 product, exact); the output multiplier
``hires / s_out`` and the "reluish" multiplier ``hires / (3 / 32768)`` are quantized with
QuantizeMultiplier and cut to int16 mantissas (DownScaleInt32ToInt16Multiplier:
``(m + 2^15) >> 16``, 32767 at the top). The output exponent must be <= 0 (both runtimes refuse
the model otherwise). The targets differ in the two divisions:

* ``litert-ref`` (activations.cc HardSwishPrepare): float32 divisions;
* ``tflite``: double divisions. Recent TFLM sources (hard_swish_common.cc) cast a float32
  quotient, but the tflite-micro package intq tests against divides in double (cvtss2sd, divsd
  in its HardSwishPrepare; measured: where the forms differ, TFLM equals the double one).

Per element, all in int16 (``SRDHM16`` = gemmlowp's SaturatingRoundingDoublingHighMul on int16,
``SDHM16`` its truncating variant, ``RDBPOT`` = RoundingDivideByPOT)::

    h      = (x - Z_in) * 2^7                          # "hires" input, |h| <= 32640
    pre    = SRDHM16(h, m_out)                         # the input on the pre-shift output scale
    r      = h; if e_relu > 0: r = sat16(r << (e_relu - 1))
    r      = SRDHM16(r, m_relu); if e_relu > 0: r = sat16(r << 1)
    if e_relu < 0: r = RDBPOT(r, -e_relu)              # r: x on the scale where 3.0 is 2^15
    r      = (r + 2^15) >> 1                           # relu6(x + 3) / 6 as a Q0.15 in [0, 1]
    y      = clamp(RDBPOT(SDHM16(r, pre), -e_out) + Z_out)

No int16 overflow: ``|pre| <= 32640`` and ``r`` in [0, 32767], so ``|SDHM16(r, pre)| < 32640`` and
adding ``Z_out`` stays within int16. gemmlowp's int16 RDBPOT with an exponent >= 16 (output or
input scales 2^9 apart and beyond) returns +-1; intq reproduces it.

Run: the output depends on one int8, so prepare evaluates :func:`hard_swish` (the integer
arithmetic above) on all 256 values and run is a table lookup, bit for bit the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from intq.kernels._elementwise_common import (
    INT8_BY_BITS,
    INT8_MAX,
    INT8_MIN,
    fp32,
    int8_table,
    int8_unary,
    lookup,
    scale_of,
    scale_ratio,
    zero_point_of,
)
from intq.qmath.raw import rdbp16, saturating_left_shift16, sdhm16, srdhm16
from intq.kernels.base import KernelContext, kernel
from intq.qmath import quantize_multiplier

OP = "HARD_SWISH"
_HIRES_SHIFT = 7  # |x - Z| <= 255: 255 << 7 = 32640 still fits int16
_RELUISH_SCALE = fp32(3.0) / fp32(32768.0)  # the reluish value's scale: 3.0 <-> 2^15
_INT16_ROUNDING = 1 << 15  # DownScaleInt32ToInt16Multiplier's rounding offset


@dataclass(frozen=True, eq=False)
class HardSwishParams:
    zero_point_in: int
    zero_point_out: int
    output_multiplier: int  # int16 mantissa (Q0.15)
    output_right_shift: int  # -e_out >= 0
    reluish_multiplier: int  # int16 mantissa (Q0.15)
    reluish_pre_left_shift: int  # max(e_relu - 1, 0)
    reluish_post_left_shift: int  # 1 if e_relu > 0 else 0
    reluish_right_shift: int  # max(-e_relu, 0)
    table: np.ndarray | None = None  # int8 [256]: hard_swish(self, x) for every int8 x (see lookup)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier(double(real)) then DownScaleInt32ToInt16Multiplier: (int16 mantissa, exponent)."""
    m32, exponent = quantize_multiplier(float(real))
    m16 = 2**15 - 1 if m32 >= 2**31 - 1 - _INT16_ROUNDING else (m32 + _INT16_ROUNDING) >> 16
    return int(m16), int(exponent)


@kernel(OP)
def prepare(ctx: KernelContext) -> HardSwishParams:
    io = int8_unary(ctx)
    qx, qy = io.qx, io.qy
    hires = (fp32(1.0) / fp32(128.0)) * scale_of(qx)  # exact: a power-of-two factor
    real_out = scale_ratio(ctx.target.scales, (hires,), scale_of(qy))
    real_relu = scale_ratio(ctx.target.scales, (hires,), _RELUISH_SCALE)
    m_out, e_out = _int16_multiplier(real_out)
    if e_out > 0:
        raise ctx.error(f"the output multiplier s_in / (128 s_out) = {real_out:.6g} must be "
                        "below 1 (TFLite's HardSwishPrepare); the output scale is too small for the input's")
    m_relu, e_relu = _int16_multiplier(real_relu)
    if not -31 <= e_relu <= 31:
        raise ctx.error(f"input scale {float(scale_of(qx)):.6g} is out of HARD_SWISH's fixed-point range")
    p = HardSwishParams(
        zero_point_in=zero_point_of(qx),
        zero_point_out=zero_point_of(qy),
        output_multiplier=m_out,
        output_right_shift=-e_out,
        reluish_multiplier=m_relu,
        reluish_pre_left_shift=max(e_relu - 1, 0),
        reluish_post_left_shift=1 if e_relu > 0 else 0,
        reluish_right_shift=max(-e_relu, 0),
    )
    return replace(p, table=int8_table(hard_swish(p, INT8_BY_BITS), np.int8))


def hard_swish(p: HardSwishParams, x: np.ndarray) -> np.ndarray:
    """reference_ops::HardSwish on int8 values ``x`` (int64 in, int8-range int64 out)."""
    hires = (np.asarray(x, dtype=np.int64) - p.zero_point_in) << _HIRES_SHIFT
    pre_out = srdhm16(hires, p.output_multiplier)
    r = saturating_left_shift16(hires, p.reluish_pre_left_shift)
    r = saturating_left_shift16(srdhm16(r, p.reluish_multiplier), p.reluish_post_left_shift)
    r = rdbp16(r, p.reluish_right_shift)
    r = (r + (1 << 15)) >> 1  # [-1, 1] -> [0, 1] in Q0.15
    out = rdbp16(sdhm16(r, pre_out), p.output_right_shift) + p.zero_point_out
    return np.clip(out, INT8_MIN, INT8_MAX)


def run(p: HardSwishParams, x):
    return (lookup(p.table, x),)
