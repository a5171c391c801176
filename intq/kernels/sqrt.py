"""SQRT: ``y = sqrt(x)`` on int8 and int16 (16x8), as LiteRT computes it; TensorFlow Lite Micro has none.

LiteRT (``tflite/kernels/elementwise.cc``, ``SqrtEvalQuantized<T>``, one kernel for every resolver)
computes each element in float32, at run time::

    d = float(s_in) * float(x - Z_in)                 (float32 product)
    if d < 0: the invocation fails ("Sqrt is only defined for non-negative values")
    y = clamp(int(sqrtf(d) / float(s_out)) + Z_out)   (float32 quotient, truncated toward zero)

note the truncation (``static_cast<int>``), not a rounding: the output is biased down by half a step
on average. ``GenericPrepare`` checks the quantization (per tensor) and, for int16, zero points 0.
The 2.3 wheel intq tests against runs it (``tests/kernels/test_sqrt.py``, every code equal); the
quantized kernel is newer than some LiteRT sources (their SQRT takes float32 only).

**TensorFlow Lite Micro has no quantized SQRT** (its ``SqrtEval`` takes float32 only): the ``tflite``
target refuses the node by name; intq's converter writes ``sqrt(x)`` as ``x * RSQRT(x)`` for it.

Run: the output depends on one input code, so prepare evaluates the float32 arithmetic above on every
code (256 for int8, 65536 for int16) and run looks the codes up (integers only); a code whose
``d`` is negative is marked, and run refuses it as LiteRT fails the invocation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import INT8, INT16, KernelContext, KernelError, kernel

OP = "SQRT"
_INT_MAX = 2**31 - 1  # static_cast<int> of a larger float is undefined in C++


@dataclass(frozen=True, eq=False)
class SqrtParams:
    """``table[bits]``: the output for every input code in bit order (uint8 / uint16 view of ``x``);
    ``valid[bits]``: False where LiteRT fails the invocation (a negative dequantized input)."""

    node: str
    table: np.ndarray
    valid: np.ndarray
    zero_point_in: int


def sqrt_codes(codes: np.ndarray, s_in: float, z_in: int, s_out: float, z_out: int, lo: int, hi: int):
    """LiteRT's float32 arithmetic (module docstring) on ``codes``: (outputs, valid, largest quotient)."""
    d = (np.float32(s_in) * (codes - z_in).astype(np.float32)).astype(np.float32)
    valid = d >= 0
    with np.errstate(invalid="ignore"):
        q = (np.sqrt(np.where(valid, d, np.float32(0))).astype(np.float32) / np.float32(s_out)).astype(np.float32)
    y = np.clip(np.trunc(q).astype(np.int64) + z_out, lo, hi)
    return y, valid, float(q.max(initial=0.0))


@kernel(OP, INT8, INT16)
def prepare(ctx: KernelContext) -> SqrtParams:
    x, y = ctx.input(0), ctx.outputs[0]
    if x.dtype != y.dtype or x.dtype not in (np.int8, np.int16):
        raise ctx.error(f"input and output must both be int8 or int16, got {x.dtype.name} and {y.dtype.name}")
    if ctx.target.rules.tables == "tflm":
        raise ctx.error(f"target {ctx.target.name!r}: TensorFlow Lite Micro has no quantized SQRT (float32 only); "
                        "use target 'litert-ref', or write sqrt(x) as x * RSQRT(x) as intq's converter does")
    in_qp = ctx.per_tensor(x, "input", (x.dtype,))
    out_qp = ctx.per_tensor(y, "output", (x.dtype,))
    if x.shape != y.shape:
        raise ctx.error(f"output shape {y.shape} must equal the input's {x.shape}")
    wide = x.dtype == np.int16
    if wide and (in_qp.tensor_zero_point != 0 or out_qp.tensor_zero_point != 0):
        raise ctx.error(f"int16 zero points must be 0 (LiteRT checks it), got {in_qp.tensor_zero_point} and "
                        f"{out_qp.tensor_zero_point}")
    info = np.iinfo(x.dtype)
    unsigned = np.uint16 if wide else np.uint8
    codes = np.arange(1 << info.bits, dtype=np.int64).astype(unsigned).view(x.dtype).astype(np.int64)  # bit order
    table, valid, largest = sqrt_codes(codes, in_qp.tensor_scale, in_qp.tensor_zero_point, out_qp.tensor_scale,
                                       out_qp.tensor_zero_point, info.min, info.max)
    if largest >= _INT_MAX:
        raise ctx.error(f"sqrt(x) / s_out reaches {largest:.6g}, beyond int32 (undefined in LiteRT's cast); the "
                        f"output scale {out_qp.tensor_scale:.6g} is too small for the input's")
    table, valid = table.astype(x.dtype), valid.astype(bool)
    table.setflags(write=False)
    valid.setflags(write=False)
    return SqrtParams(ctx.node.name, table, valid, in_qp.tensor_zero_point)


def run(p: SqrtParams, x):
    bits = np.asarray(x).view(np.uint16 if p.table.dtype == np.int16 else np.uint8)
    if not np.all(p.valid[bits]):
        raise KernelError(f"node {p.node!r} ({OP}): an input below the zero point {p.zero_point_in} (a negative "
                          "value); SQRT is only defined for x >= 0 and LiteRT fails the invocation on it")
    return (p.table[bits],)
