"""LiteRT's optimized TRANSPOSE_CONV (measured with single-op models, tests/kernels/test_conv.py and
tests/kernels/test_optimized_targets.py; explained from transpose_conv.cc and
optimized/integer_ops/transpose_conv.h): (``optimized_integer_ops::TransposeConvV2``): a ruy GEMM of
the raw input (its zero point as the GEMM's) against the weights as ``[KH*KW*C_out, C_in]``,
``Col2im`` into the int32 scratch buffer, ``BiasAdd`` (skipped without bias) — the reference
accumulators — then ``optimized_ops::Quantize``, the output stage of the optimized
DEPTHWISE_CONV_2D: output channels ``[0, 8 floor(C_out/8))`` through NEON ``vqrdmulh`` + ``vrshl``
(``Requant.DOUBLE_HALF_UP``), the last ``C_out mod 8`` through the scalar gemmlowp
``MultiplyByQuantizedMultiplier`` (``Requant.DOUBLE``): :class:`OptimizedTransposeConvParams` when
both groups exist. LiteRT's Prepare checks the input size
(:mod:`intq.kernels.litert.transpose_conv`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.requantize import Requantizer, requantize
from intq.kernels.targets import Requant
from intq.kernels.transpose_conv import OP, TransposeConvParams, accumulators, transpose_parts
from intq.kernels.transpose_conv import run as run_reference


VECTOR_CHANNELS = 8  # optimized_ops::Quantize: output channels in groups of 8 through NEON, the rest scalar


@dataclass(frozen=True, eq=False)
class OptimizedTransposeConvParams:
    """``litert-opt`` (and nodes XNNPACK declines): the reference accumulators, two output stages —
    NEON half-up double rounding on channels ``[0, split)``, gemmlowp's on ``[split, C_out)``."""

    sums: TransposeConvParams  # the scatter; its ``requant`` and ``bias`` cover channels [0, split)
    split: int  # 8 floor(C_out / 8), in (0, C_out)
    tail: Requantizer  # channels [split, C_out): Requant.DOUBLE
    tail_bias: np.ndarray  # int64 [C_out - split]


@variant(OP, family=FAMILY, run={TransposeConvParams: run_reference, OptimizedTransposeConvParams: "run"})
def prepare(ctx: KernelContext) -> TransposeConvParams | OptimizedTransposeConvParams:
    parts = transpose_parts(ctx, size_checked=True)
    ops, c_out = parts.ops, parts.ops.w.shape[0]
    split = c_out - c_out % VECTOR_CHANNELS  # two channel groups
    vector, scalar = ctx.target.requant_for(OP), Requant.DOUBLE
    if split in (0, c_out):
        return parts.params(ops.requantizer(ctx, OP, mode=vector if split else scalar))
    head = parts.params(ops.requantizer(ctx, OP, mode=vector, select=slice(0, split)), slice(0, split))
    tail = ops.requantizer(ctx, OP, mode=scalar, select=slice(split, None))
    return OptimizedTransposeConvParams(head, split, tail, parts.bias[split:])


def run(p: OptimizedTransposeConvParams, output_shape, w, x, b=None):
    acc = accumulators(p.sums, x)
    out = np.empty(acc.shape, p.tail.out_dtype)
    out[:, :p.split] = requantize(p.sums.requant, acc[:, :p.split], p.sums.bias)
    out[:, p.split:] = requantize(p.tail, acc[:, p.split:], p.tail_bias)
    return (out.reshape(p.sums.out_shape),)
