"""SOFTMAX, 16x8: int16 in, int16 out with scale 1/32768 and zero point 0, over the last axis.

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
:mod:`intq.kernels.int16x8._lut`.

Where the targets differ — Prepare's floating point:

* ``litert-ref``: the tables from ``LUTPopulate<int16_t>`` in **double** with ``std::exp``
  (input range ``(10 / 65535) * [-65535, 0]``, output range ``(2 / 65535) * [-32768, 32767]``),
  and ``s_in * beta`` multiplied in float32 before the double division;
* ``tflite``: the tables from ``gen_lut<float, int16_t, int16_t>`` in **float32** with ``expf``
  on ``[-10, 0]`` and ``[0, 1]``, output range ``[-1, 1]``, and ``double(s_in) * double(beta)``.

Contract: input int16 per tensor, zero point 0; output int16 with zero point 0 and a scale within
0.1% of 1/32768 (both runtimes' check). LiteRT accepts ranks 1 to 4 only (``litert-ref`` refuses
higher ranks as it does); TFLM any rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT16, KernelContext, kernel
from intq.kernels.int16x8 import _lut
from intq.kernels.int16x8._common import io_int16, runtime_16x8, static_shape
from intq.qmath.raw import mbqm
from intq.kernels.targets import Runtime
from intq.qmath import quantize_multiplier

OP = "SOFTMAX"
_RANGE = 65535  # int16 max - min


@dataclass(frozen=True, eq=False)
class Softmax16x8Params:
    multiplier: int
    shift: int
    exp_lut: np.ndarray  # int16 [513]
    recip_lut: np.ndarray  # int16 [513]


def _litert_tables() -> tuple[np.ndarray, np.ndarray]:
    f64 = np.float64
    exp = _lut.populate(_lut.c_exp, f64(10.0 / _RANGE) * -65535, f64(10.0 / _RANGE) * 0, f64(2.0 / _RANGE) * -32768,
                        f64(2.0 / _RANGE) * 32767, np.float64)
    recip = _lut.populate(lambda v: (f64(1.0) / (f64(1.0) + v)).astype(np.float64), f64(1.0 / _RANGE) * 0,
                          f64(1.0 / _RANGE) * 65535, f64(2.0 / _RANGE) * -32768, f64(2.0 / _RANGE) * 32767, np.float64)
    return exp, recip


def _tflm_tables() -> tuple[np.ndarray, np.ndarray]:
    f32 = np.float32
    exp = _lut.populate(_lut.c_exp, -10.0, 0.0, -1.0, 1.0, np.float32)
    recip = _lut.populate(lambda v: (f32(1.0) / (f32(1.0) + v)).astype(np.float32), 0.0, 1.0, -1.0, 1.0, np.float32)
    return exp, recip


@kernel(OP, INT16)
def prepare(ctx: KernelContext) -> Softmax16x8Params:
    runtime = runtime_16x8(ctx)
    in_qp, out_qp = io_int16(ctx)
    shape = static_shape(ctx, ctx.input(0), "input")
    if not shape or static_shape(ctx, ctx.outputs[0], "output") != shape:
        raise ctx.error(f"input and output must have the same shape of rank >= 1, got {list(shape)}")
    if runtime is Runtime.LITERT and len(shape) > 4:  # SoftmaxQuantized<int16_t, int16_t>: "Only 1D, 2D, 3D and 4D"
        raise ctx.error(f"LiteRT's int16 SOFTMAX takes ranks 1 to 4, got rank {len(shape)}")
    s_out = np.float32(out_qp.tensor_scale)
    if not abs(s_out - np.float32(1.0 / 32768)) <= np.float32(0.001 / 32768):
        raise ctx.error(f"output scale must be 1/32768 (spec 003, 16x8), got {float(s_out)!r}")
    beta = np.float32(ctx.attr("beta", 1.0))
    s_in = np.float32(in_qp.tensor_scale)
    if runtime is Runtime.LITERT:
        real = float(np.float32(s_in * beta)) / (10.0 / 65535.0)
        exp_lut, recip_lut = _litert_tables()
    else:
        real = float(s_in) * float(beta) / (10.0 / 65535.0)
        exp_lut, recip_lut = _tflm_tables()
    if not (np.isfinite(real) and real > 0):
        raise ctx.error(f"s_in * beta must be positive and finite, got {real!r}")
    qm = quantize_multiplier(real)
    if int(qm.shift) > 30:
        raise ctx.error(f"s_in * beta = {float(s_in * beta):.6g} is too large for TFLite's fixed-point multiplier")
    return Softmax16x8Params(int(qm.multiplier), int(qm.shift), exp_lut, recip_lut)


def _clz32(v: np.ndarray) -> np.ndarray:
    """Count leading zeros of positive int32 values (held in int64)."""
    n = np.zeros(v.shape, np.int64)
    for bits in (16, 8, 4, 2, 1):
        small = v < (np.int64(1) << (32 - bits))  # the top `bits` bits are zero
        n = np.where(small, n + bits, n)
        v = np.where(small, v << bits, v)
    return n


def run(p: Softmax16x8Params, x):
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
