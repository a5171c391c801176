"""LiteRT's 16x8 RESIZE_BILINEAR (``resize_bilinear.cc``: ``reference_ops::ResizeBilinearInteger<int16_t>``
under every resolver — XNNPACK takes no int16 tensor): the int8 kernel's taps and weights, the
four-term sum in int64 (``|acc| <= 2^15 * 1536^2 < 2^37``), ``(acc +- 2^19) / 2^20``
(:func:`intq.kernels.resize_bilinear.int16_params`). TensorFlow Lite Micro, the reference, has none.
"""

from __future__ import annotations

from intq.kernels.base import INT16, KernelContext, variant
from intq.kernels.litert import FAMILY
from intq.kernels.resize_bilinear import OP, ResizeBilinearParams, int16_params, run_int16  # noqa: F401 (run_int16)


@variant(OP, family=FAMILY, activations=(INT16,), run="run_int16")
def prepare(ctx: KernelContext) -> ResizeBilinearParams:
    return int16_params(ctx)
