"""MATMUL_INTEGER: ONNX's MatMulInteger with a constant right operand, ``y[..., m, n] = sum_k
(a[..., m, k] - Z_a) * (b[k, n] - Z_b[n])``, an int32 output with no requantization.

TFLite has no such builtin; ONNX's MatMulInteger (opset 10) is what onnxruntime's dynamic
quantization writes for MatMul / Gemm, and ONNX's node tests exercise it. Imported models keep it
as this operator (:mod:`intq.onnx_format.reader`), written back as MatMulInteger.

Contract: ``a`` int8 of rank >= 2 per tensor (only its zero point is read: the op has no scales);
``b`` a constant int8 ``[K, N]`` in ONNX's layout, with one zero point or one per column (axis 1,
as MatMulInteger's ``b_zero_point`` of shape ``[N]``); output int32 ``[..., M, N]``.

Arithmetic: exact. ``|acc| <= 255 * max_n sum_k |b[k, n] - Z_b[n]| < 2^31`` is checked at prepare,
so onnxruntime's int32 accumulator cannot wrap and the int64 product below is its value. A runtime
that sums otherwise (with int16 saturation of adjacent products) has its variant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import check_accumulator
from intq.kernels.base import KernelContext, kernel

OP = "MATMUL_INTEGER"


@dataclass(frozen=True, eq=False)
class MatMulIntegerParams:
    b: np.ndarray  # int64 [K, N]: b - Z_b
    a_zero_point: int
    out_shape: tuple[int, ...]


@kernel(OP)
def prepare(ctx: KernelContext) -> MatMulIntegerParams:
    a, y = ctx.input(0), ctx.outputs[0]
    a_qp = ctx.per_tensor(a, "input")
    if y.dtype != np.int32:
        raise ctx.error(f"output {y.name!r} must be int32 (the accumulator), got {y.dtype.name}")
    a_shape = ctx.static_shape(a, "input")
    b = ctx.constant(1, "right operand")
    b_qp = ctx.qparams(ctx.input(1), "right operand")
    if len(a_shape) < 2 or b.dtype != np.int8 or b.ndim != 2 or b.shape[0] != a_shape[-1]:
        raise ctx.error(f"operands {list(a_shape)} and {b.dtype.name} {list(b.shape)}: expected a of rank >= 2 and a "
                        f"constant int8 b of shape [{a_shape[-1] if a_shape else 'K'}, N]")
    zb = np.asarray(b_qp.zero_point, np.int64).reshape(-1)
    if b_qp.per_axis and (b_qp.axis != 1 or zb.size != b.shape[1]):
        raise ctx.error(f"the right operand's zero points must be one per tensor or one per column (axis 1, "
                        f"{b.shape[1]} values)")
    centred = b.astype(np.int64) - zb[None, :]
    check_accumulator(ctx, np.abs(centred).sum(axis=0), np.zeros(b.shape[1], np.int64))
    out_shape = (*a_shape[:-1], b.shape[1])
    if ctx.static_shape(y, "output") != out_shape:
        raise ctx.error(f"output shape {list(y.shape)} does not match the computed {list(out_shape)}")
    return MatMulIntegerParams(centred, a_qp.tensor_zero_point, out_shape)


def exact_sums(p: MatMulIntegerParams, rows: np.ndarray) -> np.ndarray:
    """``sum_k (a - Z_a) (b - Z_b)`` of the rows ``[M, K]`` of ``a``: int64, exact (|.| < 2^31, prepare)."""
    return (rows.astype(np.int64) - p.a_zero_point) @ p.b


def run(p: MatMulIntegerParams, a, b=None):
    rows = a.reshape(-1, p.b.shape[0])
    return (exact_sums(p, rows).astype(np.int32).reshape(p.out_shape),)
