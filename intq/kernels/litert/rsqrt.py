"""LiteRT's 16x8 RSQRT (``elementwise.cc``: ``GenericPrepare`` for ``kRsqrtName`` on int16,
``RsqrtEvalQuantizedInt16``): unlike TFLM's fixed point (the reference, :mod:`intq.kernels.rsqrt`),
Prepare fills a 513-entry table with ``LUTPopulate<int16_t>`` (float32, over
``s_in * [-32768, 32767]`` to ``s_out * [-32768, 32767]``, zero points 0) of::

    f(x) = 1.0f / sqrtf(x)        for x > 0
    f(x) = 32767 * s_out          for x <= 0     (float32 product)

and Eval refuses a negative input ("Rsqrt is only defined for positive values"), then looks every
element up with ``LUTLookup``'s linear interpolation (:mod:`intq.kernels._int16_lut`).
"""

from __future__ import annotations

import numpy as np

from intq.kernels._int16_lut import populate
from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.rsqrt import OP, Rsqrt16x8Params, int16_io, run_int16  # noqa: F401 (run_int16: the shared lookup)


def litert_rsqrt_lut(s_in: np.float32, s_out: np.float32) -> np.ndarray:
    """The int16 [513] table of LiteRT's Prepare (module docstring), read-only."""
    at_zero = np.float32(np.float32(32767) * s_out)

    def transform(v: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (np.float32(1.0) / np.sqrt(v.astype(np.float32))).astype(np.float32)
        return np.where(v <= 0, at_zero, r).astype(np.float32)

    lut = populate(transform, s_in * np.float32(-32768), s_in * np.float32(32767),
                   s_out * np.float32(-32768), s_out * np.float32(32767), np.float32)
    lut.setflags(write=False)
    return lut


@variant(OP, family=FAMILY, activations=(INT16,), run="run_int16")
def prepare_int16(ctx: KernelContext) -> Rsqrt16x8Params:
    in_qp, out_qp = int16_io(ctx)
    lut = litert_rsqrt_lut(np.float32(in_qp.tensor_scale), np.float32(out_qp.tensor_scale))
    return Rsqrt16x8Params(ctx.node.name, lut=lut)
