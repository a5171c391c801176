"""LiteRT's optimized int8 SUM (measured on 200 random and tie-heavy models, explained from
``optimized_ops::QuantizedMeanOrSum`` with ``compute_sum``): float32 throughout, on the raw sum::

    r = float32(s_in / s_out);   b = float32(float32(-Z_in * r) * float32(N))
    y = clamp(round_half_away(float32(float32(sum q_in) * r) + b) + Z_out)

(:func:`float32_sum`, a float emulation: LiteRT computes it so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._pool_common import prepare_quantized_sum
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.sum import OP


@dataclass(frozen=True)
class OptimizedSumParams:
    """LiteRT's optimized float32 SUM (module docstring)."""

    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]
    ratio: np.float32  # float32(s_in / s_out)
    bias: np.float32  # float32(float32(-Z_in * ratio) * float32(N))
    zero_point: int


def float32_sum(acc: np.ndarray, ratio: np.float32, bias: np.float32, zero_point: int) -> np.ndarray:
    """LiteRT's optimized SUM (a float emulation): ``clamp(round_half_away(
    float32(float32(acc) * ratio) + bias) + Z_out)``, each step rounded to float32; ``acc`` is exact."""
    v = (acc.astype(np.float32) * ratio + bias).astype(np.float64)
    r = np.trunc(v + np.copysign(0.5, v))  # roundf; exact in double for a float32 v
    return np.clip(np.clip(r, -(2.0**31), 2.0**31 - 1).astype(np.int64) + zero_point, -128, 127).astype(np.int8)


@variant(OP, family=FAMILY)
def prepare(ctx: KernelContext) -> OptimizedSumParams:
    ctx.check_emulated()
    p = prepare_quantized_sum(ctx, mean=False)
    if p.count * 255 >= 2**24:
        raise ctx.error(f"target {ctx.target.name!r}: a sum of {p.count} elements may not be exact in float32")
    in_qp, out_qp = ctx.input(0).qparams, ctx.outputs[0].qparams
    ratio = np.float32(np.float32(in_qp.tensor_scale) / np.float32(out_qp.tensor_scale))
    zi, zo = in_qp.tensor_zero_point, out_qp.tensor_zero_point
    bias = np.float32(np.float32(np.float32(-zi) * ratio) * np.float32(p.count))
    return OptimizedSumParams(p.axes, p.keep_dims, p.out_shape, ratio, bias, zo)


def run(p: OptimizedSumParams, x, axis=None):
    acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # raw sum, |.| < 2^24 (prepare)
    return (float32_sum(acc, p.ratio, p.bias, p.zero_point).reshape(p.out_shape),)
