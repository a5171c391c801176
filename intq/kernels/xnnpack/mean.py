"""XNNPACK's int8 MEAN (measured, explained from XNNPACK's ``reduce-nd.c``: the raw int8 values summed in
int32 by its ``rsum`` (innermost axis reduced) or ``rdsum`` (otherwise) microkernels, then the
reference int32 -> qint8 conversion with the input zero point folded into the output's, in float32):
XNNPACK takes every int8 MEAN::

    S_m = float32(float32(s_in / s_out) * float32(1 / N))
    Y_z = float32(float32(Z_out) - float32(float32(N Z_in) * S_m))
    y   = clamp(nearbyint(float32(float32(sum q_in) * S_m) + Y_z))        (half to even)

a float32 emulation (:func:`float32_mean`). Folding ``N Z_in`` in float, not
into the integer sum, matters: ``rint(float32(sum - N Z_in) * S_m + Z_out)`` differs on about 1
random model in 130,000 (measured on 20 such models per path, rsum and rdsum: LiteRT's XNNPACK
follows this formula on all 40).

SUM is the same without ``1/N`` (:mod:`intq.kernels.xnnpack.sum`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels import mean as reference
from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext, variant
from intq.kernels.xnnpack import FAMILY


@dataclass(frozen=True, eq=False)
class XnnpackMeanParams:
    """XNNPACK's int8 MEAN over axes that leave the innermost one (module docstring)."""

    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]
    scale: np.float32  # S_m (SUM: float32(s_in / s_out))
    zero_point: np.float32  # Y_z = float32(Z_out) - float32(N Z_in) * S, in float32


def xnnpack_reduce(ctx: KernelContext, p: QuantizedSumParams, mean: bool) -> XnnpackMeanParams:
    """XNNPACK's int8 MEAN (``mean``) or SUM (module docstring): ``S`` and ``Y_z`` in float32. The raw
    sum (``|sum| <= 128 N``) must be exact in float32, as XNNPACK's conversion of it is."""
    if p.count * 128 >= 2**24:
        raise ctx.error(f"target {ctx.target.name!r}: a sum of {p.count} elements may not be exact in float32")
    in_qp, out_qp = ctx.input(0).qparams, ctx.outputs[0].qparams
    scale = np.float32(np.float32(in_qp.tensor_scale) / np.float32(out_qp.tensor_scale))
    if mean:
        scale = np.float32(scale * (np.float32(1) / np.float32(p.count)))
    folded = np.float32(np.float32(p.count) * np.float32(in_qp.tensor_zero_point)) * scale
    zero_point = np.float32(np.float32(out_qp.tensor_zero_point) - np.float32(folded))
    return XnnpackMeanParams(p.axes, p.keep_dims, p.out_shape, scale, zero_point)


def float32_mean(acc: np.ndarray, scale: np.float32, zero_point: np.float32) -> np.ndarray:
    """XNNPACK's float32 conversion of a MEAN's or SUM's raw sums (a float emulation):
    ``clamp(nearbyint(float32(acc) * S + Y_z))``, each step rounded to float32, ties to
    even. ``acc`` is below 2^24 in magnitude, exact in float32."""
    v = acc.astype(np.float32) * scale + zero_point
    return np.clip(np.rint(v), -128, 127).astype(np.int8)


@variant(reference.OP, family=FAMILY)
def prepare(ctx: KernelContext) -> XnnpackMeanParams:
    ctx.check_emulated()
    return xnnpack_reduce(ctx, prepare_quantized_sum(ctx, mean=True), mean=True)


def run(p: XnnpackMeanParams, x, axis=None):
    acc = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keep_dims)  # raw sum, |.| < 2^24 (prepare)
    return (float32_mean(acc, p.scale, p.zero_point).reshape(p.out_shape),)
