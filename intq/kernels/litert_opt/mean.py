"""LiteRT's optimized MEAN (measured on LiteRT 2.3 x86_64, explained from reduce.cc and
``optimized_integer_ops::Mean``/``MeanImpl``): a rank-4 MEAN over axes {1, 2} with ``keep_dims``
runs the optimized 4-D kernel, every other int8 MEAN the reference one (:mod:`intq.kernels.mean`). The 4-D kernel
sums the raw int8 values (no zero point), folds the input zero point into a rounded bias and
``1/N`` into the multiplier, both in float32::

    t    = float32(float32(Z_in * s_in) / s_out)
    bias = Z_out - trunc(t + 0.5 sign(t))                   (float32 add, then truncation)
    M    = float32(s_in / float32(float32(N) * s_out))      -> QuantizeMultiplier
    y    = clamp(R(sum q_in, M) + bias)

where ``R`` rounds both steps half up (NEON ``vqrdmulh`` + ``vrshl``,
:data:`Requant.DOUBLE_HALF_UP`) on the channels ``[0, 16 floor(C/16))`` (16 int8 lanes per step)
and is gemmlowp's double rounding on the last ``C mod 16`` channels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.kernels import mean as reference
from intq.kernels._pool_common import QuantizedSumParams, prepare_quantized_sum
from intq.kernels.base import KernelContext, variant
from intq.kernels.litert_opt import FAMILY
from intq.kernels.requantize import Requantizer, make_requantizer, requantize
from intq.kernels.targets import Requant


VECTOR_CHANNELS = 16  # optimized MeanImpl: one int8x16 register of channels per step


@dataclass(frozen=True, eq=False)
class OptimizedMean4DParams:
    """LiteRT's optimized 4-D MEAN over axes {1, 2} (module docstring)."""

    out_shape: tuple[int, ...]
    vector_channels: int  # channels [0, vector_channels) round half up
    vector: Requantizer  # DOUBLE_HALF_UP, zero point = the folded bias
    tail: Requantizer  # DOUBLE, same


@variant(reference.OP, family=FAMILY, run={QuantizedSumParams: reference.run, OptimizedMean4DParams: "run_4d"})
def prepare(ctx: KernelContext) -> QuantizedSumParams | OptimizedMean4DParams:
    ctx.check_emulated()
    p = prepare_quantized_sum(ctx, mean=True)
    if len(p.out_shape) != 4 or set(p.axes) != {1, 2} or not p.keep_dims:
        return p  # every other int8 MEAN: the reference kernel
    s_in = np.float32(ctx.input(0).qparams.tensor_scale)
    out_qp = ctx.outputs[0].qparams
    s_out, z_in, z_out = np.float32(out_qp.tensor_scale), ctx.input(0).qparams.tensor_zero_point, out_qp.tensor_zero_point
    t = np.float32(np.float32(np.float32(z_in) * s_in) / s_out)
    t = t + np.float32(0.5) if t > 0 else t - np.float32(0.5)
    bias = z_out - int(np.trunc(t))
    real = float(np.float32(s_in / np.float32(np.float32(p.count) * s_out)))
    channels = p.out_shape[-1]
    try:
        vector = make_requantizer(real, Requant.DOUBLE_HALF_UP, bias, -128, 127)
        tail = make_requantizer(real, Requant.DOUBLE, bias, -128, 127)
    except IntqError as e:
        raise ctx.error(str(e)) from None
    if (p.count * 128) << max(int(vector.shift[0]), 0) > 2**31 - 1:
        raise ctx.error("the optimized 4-D MEAN's multiplier shifts the sum beyond int32")
    return OptimizedMean4DParams(p.out_shape, VECTOR_CHANNELS * (channels // VECTOR_CHANNELS), vector, tail)




def run_4d(p: OptimizedMean4DParams, x, axis=None):
    acc = x.astype(np.int64).sum(axis=(1, 2), keepdims=True)  # raw int8 sum: |.| <= 128 N < 2^31
    head = requantize(p.vector, acc[..., :p.vector_channels])
    rest = requantize(p.tail, acc[..., p.vector_channels:])
    return (np.concatenate([head, rest], axis=-1).reshape(p.out_shape),)
