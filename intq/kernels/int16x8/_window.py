"""Window geometry of the 16x8 convolutions (no ``OP``): the padded input and its patches.

TFLite's padding arithmetic (``ComputePaddingHeightWidth``) comes from
:func:`intq.kernels._conv_common.compute_padding`. Positions outside the image contribute nothing
to a TFLite accumulator (the reference kernels skip them); with every int16 zero point 0, padding
with zeros gives the same sums. Integer-only at run time (:func:`patches`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels._conv_common import WindowOptions, compute_padding
from intq.kernels.base import KernelContext


@dataclass(frozen=True)
class Window:
    """Where the ``KH x KW`` taps of each output pixel read an NHWC input ``[N, H, W, C]``."""

    kh: int
    kw: int
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    top: int
    left: int
    bottom: int  # zero rows after the image (so every tap's slice is whole)
    right: int
    out_h: int
    out_w: int


def make_window(ctx: KernelContext, in_hw: tuple[int, int], kh: int, kw: int, opts: WindowOptions) -> Window:
    h, w = in_hw
    pad = compute_padding(opts.padding, (h, w), (kh, kw), (opts.stride_h, opts.stride_w),
                          (opts.dilation_h, opts.dilation_w))
    if pad.out_h < 1 or pad.out_w < 1:
        raise ctx.error(f"a {kh}x{kw} kernel (dilation {opts.dilation_h}x{opts.dilation_w}) with {opts.padding} "
                        f"padding leaves no output for a {h}x{w} input")
    need_h = (pad.out_h - 1) * opts.stride_h + (kh - 1) * opts.dilation_h + 1
    need_w = (pad.out_w - 1) * opts.stride_w + (kw - 1) * opts.dilation_w + 1
    return Window(kh, kw, opts.stride_h, opts.stride_w, opts.dilation_h, opts.dilation_w, pad.top, pad.left,
                  max(need_h - pad.top - h, 0), max(need_w - pad.left - w, 0), pad.out_h, pad.out_w)


def patches(g: Window, x: np.ndarray) -> np.ndarray:
    """int64 ``[N, OH, OW, KH*KW, C]``: tap ``i*KW + j`` of output pixel ``(oy, ox)`` is input pixel
    ``(oy*stride_h - top + i*dilation_h, ox*stride_w - left + j*dilation_w)``, 0 outside the image."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (g.top, g.bottom), (g.left, g.right), (0, 0)))
    span_h = (g.out_h - 1) * g.stride_h + 1
    span_w = (g.out_w - 1) * g.stride_w + 1
    taps = []
    for i in range(g.kh):
        y0 = i * g.dilation_h
        for j in range(g.kw):
            x0 = j * g.dilation_w
            taps.append(xp[:, y0:y0 + span_h:g.stride_h, x0:x0 + span_w:g.stride_w, :])
    return np.stack(taps, axis=3)
