"""GELU: ``y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))`` (or its tanh approximation) on int8 and int16.

TFLite's builtin ``GELU`` (``GeluOptions.approximate``) as LiteRT computes it (``activations.cc``,
``GeluPrepare`` / ``GeluEval``: one kernel for every resolver, so ``BUILTIN_REF`` and the optimized
resolver agree). Both forms are a table built once from the float32 function and looked up per
element; the runtime never evaluates erf at run time:

* the float function, every operation in float32 as the C++ source writes it (the C library's
  ``erfcf`` / ``tanhf``; ``reference_ops::GeluTransform`` in ``internal/reference/gelu.h``)::

      exact:        f(x) = (0.5f * x) * erfcf(x * float(-M_SQRT1_2))     (= 0.5 x (1 + erf(x / sqrt 2)),
                                                                          written with erfc: no cancellation
                                                                          for large negative x)
      approximate:  f(x) = (0.5f * x) * (1.f + tanhf(float(M_2_SQRTPI * M_SQRT1_2)
                                                     * (x + 0.044715f * x * x * x)))

* **int8** — ``LUTPopulate<int8_t>``: for every code ``v`` in [-128, 127],
  ``d = float32(s_in * (v - Z_in))``, ``q = int(roundf(f(d) * (1 / s_out)) + Z_out)`` (round half
  away from zero), clamped to [-128, 127]; a run is ``table[uint8(x)]``
  (:func:`intq.kernels._fixedpoint_lut.lut_populate_int8`).
* **int16** — ``LUTPopulate<int16_t>``: the 513-entry interpolated table of TFLite's ``gen_lut`` in
  float32 over ``[s_in (-32768 - Z_in), s_in (32767 - Z_in)]`` with the output range
  ``[s_out (-32768 - Z_out), s_out (32767 - Z_out)]``, looked up with ``LUTLookup``'s linear
  interpolation (:mod:`intq.kernels._int16_lut`); zero points 0 as spec 003 fixes for int16.

Contract: input and output of one dtype (int8, or int16 with zero points 0), per tensor, same shape;
any scales. LiteRT 2.3's ``BUILTIN_REF`` runs both (``tests/kernels/test_gelu.py``: every code
equal). **TensorFlow Lite Micro has no GELU kernel** (``tflite-micro`` 0.dev20261023 refuses the
model: "Didn't find op for builtin opcode 'GELU'"), so a ``.tflite`` with GELU runs in LiteRT only;
the ``tflite`` target computes the same table (LiteRT's is the one runtime that defines the op).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from intq.kernels._fixedpoint_lut import c_float32_function, lut_populate_int8
from intq.kernels.base import INT8, INT16, KernelContext, kernel
from intq.kernels._int16_lut import lookup, populate

OP = "GELU"

_HALF, _ONE = np.float32(0.5), np.float32(1.0)
_MINUS_SQRT1_2 = np.float32(-math.sqrt(0.5))  # static_cast<float>(-M_SQRT1_2)
_TANH_SCALE = np.float32((2.0 / math.sqrt(math.pi)) * math.sqrt(0.5))  # kSqrt2dPi = M_2_SQRTPI * M_SQRT1_2 (double, then float)
_CUBIC = np.float32(0.044715)


def gelu_float32(x: np.ndarray, approximate: bool = False) -> np.ndarray:
    """LiteRT's ``GeluTransform`` / ``GeluTransformApproximate`` on float32 ``x``, one float32 rounding
    per operation in the C++ source's order (the module docstring)."""
    x = np.asarray(x, dtype=np.float32)
    if approximate:
        inner = (x + ((_CUBIC * x).astype(np.float32) * x).astype(np.float32) * x).astype(np.float32)
        gate = (_ONE + c_float32_function("tanhf", (_TANH_SCALE * inner).astype(np.float32))).astype(np.float32)
    else:
        gate = c_float32_function("erfcf", (x * _MINUS_SQRT1_2).astype(np.float32))
    return ((_HALF * x).astype(np.float32) * gate).astype(np.float32)


def int8_table(in_qp, out_qp, approximate: bool = False) -> np.ndarray:
    """The int8 table (``LUTPopulate<int8_t>`` of :func:`gelu_float32`): entry ``uint8(v)`` for input code
    ``v``. What the kernel looks up, and what intq's ONNX export writes (a Gather of the codes)."""
    return lut_populate_int8(in_qp, out_qp, lambda v: gelu_float32(v, approximate))


@dataclass(frozen=True, eq=False)
class GeluParams:
    """int8: ``table`` [256] int8, entry ``uint8(v)`` for input code ``v``; int16: ``lut`` [513] int16."""

    table: np.ndarray | None = None
    lut: np.ndarray | None = None


@kernel(OP, INT8, INT16)
def prepare(ctx: KernelContext) -> GeluParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if x.dtype != y.dtype or x.dtype not in (np.int8, np.int16):
        raise ctx.error(f"input and output must both be int8 or int16, got {x.dtype.name} and {y.dtype.name}")
    in_qp = ctx.per_tensor(x, "input", (x.dtype,))
    out_qp = ctx.per_tensor(y, "output", (x.dtype,))
    if x.shape != y.shape:
        raise ctx.error(f"output shape {y.shape} must equal the input's {x.shape}")
    approximate = bool(ctx.attr("approximate", False))

    def transform(v):
        return gelu_float32(v, approximate)

    if x.dtype == np.int8:
        return GeluParams(table=int8_table(in_qp, out_qp, approximate))
    if in_qp.tensor_zero_point != 0 or out_qp.tensor_zero_point != 0:
        raise ctx.error(f"int16 zero points must be 0 (spec 003), got {in_qp.tensor_zero_point} and "
                        f"{out_qp.tensor_zero_point}")
    s_in, s_out = np.float32(in_qp.tensor_scale), np.float32(out_qp.tensor_scale)
    lut = populate(transform, s_in * np.float32(-32768), s_in * np.float32(32767),
                   s_out * np.float32(-32768), s_out * np.float32(32767), np.float32)
    lut.setflags(write=False)
    return GeluParams(lut=lut)


def run(p: GeluParams, x):
    if p.table is not None:
        return (p.table[x.view(np.uint8)],)
    return (lookup(x.astype(np.int64), p.lut).astype(np.int16),)
