"""RSQRT: ``y = 1 / sqrt(x)``, int8 in, int8 out (TFLite's quantized Rsqrt).

Both runtimes compute, per element with ``v = x - Z_in`` (elementwise.cc, RsqrtEvalQuantized):

* ``v < 0`` (an input below the zero point): the invocation fails ("Rsqrt is only defined for
  positive values"); intq's ``run`` raises :class:`~intq.kernels.KernelError` naming the node;
* ``v == 0``: ``127`` ("any value close to 0 represents the max output value");
* otherwise ``(m, e) = GetInvSqrtQuantizedMultiplierExp(v, kReverseShift = -1)``
  (``1/sqrt(v) ~= m 2^(e - 31)``, five Newton-Raphson steps in Q3.28:
  :func:`intq.kernels._fixedpoint_lut.inv_sqrt_multiplier`), then, with ``kShift = 20`` bits of
  headroom, two gemmlowp double-rounding multiplies (``MultiplyByQuantizedMultiplier``)::

      data = MBQM(1, m, e + 20)                      # 2^20 / sqrt(v), rounded
      y    = clamp(MBQM(data, M, shift_M - 20) + Z_out, -128, 127)

  with ``(M, shift_M) = QuantizeMultiplier(1 / (sqrt(s_in) s_out))`` computed at Prepare.

The runtimes differ only in that real (measured; their sources say the same):

* ``litert-ref`` (LiteRT ``SetRsqrtOutputMultiplier``): ``std::sqrt`` of the float32 scale is a
  float32 ``sqrtf``, its product with ``s_out`` a float32, then ``1. / (that)`` in double;
* ``tflite`` (TFLM ``SetRsqrtOutputMultiplier``): all in double,
  ``1.0 / (sqrt(double(s_in)) * double(s_out))``.

LiteRT's optimized resolver and XNNPACK (which takes float RSQRT only) run the same kernel, so
``litert-opt`` and ``xnnpack`` equal ``litert-ref``.

Contract: int8 per-tensor input and output of the same shape, any rank. ``data <= 2^20``, so the
second multiply may shift left by at most 10 bits without leaving int32 and right by at most 31
(``shift_M`` in [-11, 30]); prepare refuses scales outside it (the C code would overflow).

Run: the output depends on one int8, so prepare evaluates the integer arithmetic above on all
256 codes (with :mod:`intq.qmath.raw`'s MBQM) and run is a table lookup, bit for bit the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp
from intq.kernels._elementwise_common import INT8_BY_BITS, INT8_MAX, INT8_MIN, fp32, int8_table, int8_unary, lookup
from intq.kernels.base import KernelContext, KernelError, kernel
from intq.kernels.targets import Arithmetic
from intq.qmath import quantize_multiplier
from intq.qmath.raw import mbqm

OP = "RSQRT"
K_SHIFT = 20  # the kernels' kShift: 2^20 / sqrt(v) keeps 20 fraction bits in int32
_MAX_DATA_BITS = 20  # data = MBQM(1, m, e + 20) <= 2^20 (1/sqrt(v) <= 1 for v >= 1)
_SHIFT_RANGE = (-31 + K_SHIFT, 31 - 1 - _MAX_DATA_BITS + K_SHIFT)  # shift_M keeping shift_M - 20 in [-31, 10]


@dataclass(frozen=True)
class RsqrtParams:
    node: str
    zero_point_in: int
    multiplier: int  # QuantizeMultiplier(1 / (sqrt(s_in) s_out))
    shift: int
    table: np.ndarray  # int8 [256]: the output for every int8 input, indexed by its bits


def output_real(arithmetic: Arithmetic, s_in: float, s_out: float) -> float:
    """``1 / (sqrt(s_in) s_out)`` in the ``arithmetic`` of a runtime's Prepare (module docstring)."""
    if arithmetic is Arithmetic.FLOAT32:
        return 1.0 / float(fp32(np.sqrt(fp32(s_in)) * fp32(s_out)))
    return 1.0 / (math.sqrt(float(s_in)) * float(s_out))


@kernel(OP)
def prepare(ctx: KernelContext) -> RsqrtParams:
    io = int8_unary(ctx)
    real = output_real(ctx.target.scales, io.qx.tensor_scale, io.qy.tensor_scale)
    if not (np.isfinite(real) and real > 0):
        raise ctx.error(f"the output multiplier 1/(sqrt(s_in) s_out) = {real} is not a positive number; check the scales")
    qm = quantize_multiplier(real)
    m, shift = int(qm.multiplier), int(qm.shift)
    if not _SHIFT_RANGE[0] <= shift <= _SHIFT_RANGE[1]:
        raise ctx.error(f"the output multiplier {real:.6g} needs a shift of {shift} (RSQRT's kernels need "
                        f"{_SHIFT_RANGE[0]}..{_SHIFT_RANGE[1]} so that int32 neither overflows nor shifts out); "
                        f"the output scale {io.qy.tensor_scale:.6g} does not fit the input scale {io.qx.tensor_scale:.6g}")
    z_in, z_out = io.qx.tensor_zero_point, io.qy.tensor_zero_point
    table = int8_table(_rsqrt_codes(INT8_BY_BITS - z_in, m, shift, z_out), np.int8)
    return RsqrtParams(ctx.node.name, z_in, m, shift, table)


def _rsqrt_codes(v: np.ndarray, multiplier: int, shift: int, z_out: int) -> np.ndarray:
    """The module docstring's integer arithmetic for offsets ``v = x - Z_in`` (negative ones give
    127 here; ``run`` refuses them before the lookup)."""
    positive = np.maximum(v, 1)
    m, e = fp.inv_sqrt_multiplier(positive)
    data = mbqm(np.ones_like(positive), m, e + K_SHIFT)
    y = mbqm(data, multiplier, shift - K_SHIFT) + z_out
    return np.where(v <= 0, INT8_MAX, np.clip(y, INT8_MIN, INT8_MAX))


def run(p: RsqrtParams, x):
    if x.size and int(np.min(x)) < p.zero_point_in:
        raise KernelError(f"node {p.node!r} ({OP}): an input below the zero point {p.zero_point_in} "
                          f"(a negative value, min {int(np.min(x))}); RSQRT is only defined for x >= 0 and both "
                          f"runtimes fail the invocation on it")
    return (lookup(p.table, x),)
