"""TPU-MLIR's int8 ``tpu.MatMul`` with a constant right operand (``MatMul.cpp``): FULLY_CONNECTED.

``y = clamp(RightShiftRound((sum_k (x_k - input_zp) w_kn + b_n) * m, rshift, HALF_UP) + Z_y)``:
BM1684X stores one multiplier/rshift pair for the whole layer (``multipliers = [m]``), and its
interpreter applies ``applyMultiplierAndRShift`` with its default rounding, HALF_UP (measured: the
op's printed ``round_mode`` is not what it uses); ``do_relu`` clamps at ``Z_y``. The input is uint8 or
int8 (uint8 enters the int8 GEMM as ``x - 128``, ``128 sum(w)`` folded into the offset).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.gemm import PreparedGemm, exact_matmul
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.tpu_mlir.common import activation, as_int8, requantizer
from intq.kernels.tpu_mlir.conv import WEIGHT_DTYPES, gemm_of
from intq.qmath import Rounding

#: The rounding TPU-MLIR's BM1684X MatMul interpreter applies (applyMultiplierAndRShift's default).
MATMUL_ROUNDING = Rounding.HALF_UP


@dataclass(frozen=True, eq=False)
class TpuMlirMatMulParams:
    gemm: PreparedGemm  # weights [N, K]
    offset: np.ndarray  # int64 [N]: b - input_zp sum(w) (+ 128 sum(w) for a uint8 input)
    requant: Requantizer
    out_shape: tuple[int, ...]
    uint8_input: bool


def prepare(ctx: KernelContext) -> TpuMlirMatMulParams:
    activation(ctx, 0, "input")
    activation(ctx, -1, "output")
    x = ctx.input(0)
    in_shape = static_shape(ctx, x, "input")
    w = ctx.constant(1, "weights")
    if w.dtype not in WEIGHT_DTYPES or w.ndim != 2 or w.shape[1] != in_shape[-1]:
        raise ctx.error(f"weights must be int8 or uint8 [N, {in_shape[-1]}], got {w.dtype.name} {list(w.shape)}")
    n, k = w.shape
    bias = np.zeros(n, np.int64)
    if ctx.has_input(2):
        b = ctx.constant(2, "bias")
        if b.dtype != np.int32 or b.shape != (n,):
            raise ctx.error(f"bias must be int32 [{n}], got {b.dtype.name} {list(b.shape)}")
        bias = b.astype(np.int64)
    out_shape = static_shape(ctx, ctx.outputs[0], "output")
    if out_shape != (*in_shape[:-1], n):
        raise ctx.error(f"output shape {list(out_shape)} does not match the computed {[*in_shape[:-1], n]}")
    if int((255 * np.abs(w.astype(np.int64)).sum(axis=1) + np.abs(bias)).max(initial=0)) >= 2**31:
        raise ctx.error("the accumulator can overflow int32")
    gemm = gemm_of(w)
    uint8 = x.dtype == np.uint8
    offset = bias - int(ctx.attr("tpu_input_zp", 0)) * gemm.weight_sums + (128 * gemm.weight_sums if uint8 else 0)
    return TpuMlirMatMulParams(gemm, offset, requantizer(ctx, n, MATMUL_ROUNDING), out_shape, uint8)


def run(p: TpuMlirMatMulParams, x, w=None, b=None):
    rows = x.reshape(-1, p.gemm.k)
    acc = exact_matmul(as_int8(rows) if p.uint8_input else rows, p.gemm)
    return (requantize(p.requant, acc, p.offset).reshape(p.out_shape),)


variant("FULLY_CONNECTED", family=FAMILY)(prepare)
