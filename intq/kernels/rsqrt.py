"""RSQRT: ``y = 1 / sqrt(x)``, int8 in, int8 out, and 16x8 (int16 in and out) (TFLite's quantized Rsqrt).

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

**16x8** (int16 input and output, zero points 0, spec 003). The two runtimes compute it differently:

* ``tflite`` (TFLM ``RsqrtEvalQuantized<int16_t>``, this module): the int8 arithmetic above with
  ``T = int16_t`` — ``v == 0`` gives ``32767``, the clamp is to [-32768, 32767], the multiplier in
  double; prepare evaluates it on the 32768 non-negative codes and run looks them up;
* ``litert-ref`` (LiteRT ``RsqrtEvalQuantizedInt16``: the ``litert`` family's ``rsqrt.py``): a
  513-entry interpolated table (``LUTPopulate<int16_t>`` in float32 of ``1.0f / sqrtf(x)``, and
  ``32767 * s_out`` for ``x <= 0``), looked up with ``LUTLookup``: the linear interpolation is
  far from TFLM's where 1/sqrt is steep (small codes: thousands of steps; at ``x = 0`` 25860 on
  ``s_out = 1 / sqrt(s_in) / 32767``, not 32767) and within a step of it at large codes.

Both fail the invocation on a negative input, as the int8 kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from intq.kernels import _fixedpoint_lut as fp, _int16_lut as _lut
from intq.kernels._elementwise_common import INT8_BY_BITS, INT8_MAX, INT8_MIN, fp32, int8_table, int8_unary, lookup
from intq.kernels._int16_common import INT16_MAX, INT16_MIN, io_int16
from intq.kernels.base import INT16, KernelContext, KernelError, kernel
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


def _output_multiplier(ctx: KernelContext, s_in: float, s_out: float) -> tuple[int, int]:
    """``QuantizeMultiplier(1 / (sqrt(s_in) s_out))`` in the target's arithmetic, refused where the
    kernels' int32 arithmetic would overflow or shift out (module docstring)."""
    real = output_real(ctx.target.scales, s_in, s_out)
    if not (np.isfinite(real) and real > 0):
        raise ctx.error(f"the output multiplier 1/(sqrt(s_in) s_out) = {real} is not a positive number; check the scales")
    qm = quantize_multiplier(real)
    m, shift = int(qm.multiplier), int(qm.shift)
    if not _SHIFT_RANGE[0] <= shift <= _SHIFT_RANGE[1]:
        raise ctx.error(f"the output multiplier {real:.6g} needs a shift of {shift} (RSQRT's kernels need "
                        f"{_SHIFT_RANGE[0]}..{_SHIFT_RANGE[1]} so that int32 neither overflows nor shifts out); "
                        f"the output scale {s_out:.6g} does not fit the input scale {s_in:.6g}")
    return m, shift


@kernel(OP)
def prepare(ctx: KernelContext) -> RsqrtParams:
    io = int8_unary(ctx)
    m, shift = _output_multiplier(ctx, io.qx.tensor_scale, io.qy.tensor_scale)
    z_in, z_out = io.qx.tensor_zero_point, io.qy.tensor_zero_point
    table = int8_table(_rsqrt_codes(INT8_BY_BITS - z_in, m, shift, z_out), np.int8)
    return RsqrtParams(ctx.node.name, z_in, m, shift, table)


def _rsqrt_codes(v: np.ndarray, multiplier: int, shift: int, z_out: int,
                 lo: int = INT8_MIN, hi: int = INT8_MAX) -> np.ndarray:
    """The module docstring's integer arithmetic for offsets ``v = x - Z_in``, clamped to
    ``[lo, hi]`` (``T``'s range; negative offsets give ``hi`` here; ``run`` refuses them before the
    lookup)."""
    positive = np.maximum(v, 1)
    m, e = fp.inv_sqrt_multiplier(positive)
    data = mbqm(np.ones_like(positive), m, e + K_SHIFT)
    y = mbqm(data, multiplier, shift - K_SHIFT) + z_out
    return np.where(v <= 0, hi, np.clip(y, lo, hi))


def _refuse_negative(node: str, x, zero_point: int) -> None:
    if x.size and int(np.min(x)) < zero_point:
        raise KernelError(f"node {node!r} ({OP}): an input below the zero point {zero_point} "
                          f"(a negative value, min {int(np.min(x))}); RSQRT is only defined for x >= 0 and both "
                          f"runtimes fail the invocation on it")


def run(p: RsqrtParams, x):
    _refuse_negative(p.node, x, p.zero_point_in)
    return (lookup(p.table, x),)


# ------------------------------------------------------------------------------------------ 16x8

@dataclass(frozen=True, eq=False)
class Rsqrt16x8Params:
    """``table``: int16 [32768], the output for each non-negative int16 input code (``tflite``), or
    ``lut``: int16 [513], LiteRT's interpolated table (its ``litert`` variant)."""

    node: str
    table: np.ndarray | None = None
    lut: np.ndarray | None = None
    zero_point_in: int = 0  # int16 activations are symmetric (spec 003); the native paths read it


def int16_io(ctx: KernelContext):
    """The 16x8 contract: int16 per-tensor input and output, zero points 0, the same shape."""
    in_qp, out_qp = io_int16(ctx)
    if ctx.input(0).shape != ctx.outputs[0].shape:
        raise ctx.error(f"output shape {ctx.outputs[0].shape} must equal the input's {ctx.input(0).shape}")
    return in_qp, out_qp


@kernel(OP, INT16, run="run_int16")
def prepare_int16(ctx: KernelContext) -> Rsqrt16x8Params:
    in_qp, out_qp = int16_io(ctx)
    m, shift = _output_multiplier(ctx, in_qp.tensor_scale, out_qp.tensor_scale)
    table = np.asarray(_rsqrt_codes(np.arange(INT16_MAX + 1, dtype=np.int64), m, shift, 0, INT16_MIN, INT16_MAX),
                       np.int16)
    table.setflags(write=False)
    return Rsqrt16x8Params(ctx.node.name, table=table)


def run_int16(p: Rsqrt16x8Params, x):
    _refuse_negative(p.node, x, 0)
    if p.lut is not None:
        return (_lut.lookup(np.asarray(x, np.int64), p.lut).astype(np.int16),)
    return (np.asarray(p.table[np.asarray(x, np.int64)]),)
