"""Shared pieces of the conv family (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, BATCH_MATMUL):
contract checks, TFLite's padding arithmetic, the prepared and the blocked requantization, and
the im2col builder. Integer-only at run time (:func:`fill_im2col`).

Padding (TFLite ``ComputePaddingHeightWidth``, kernels/padding.h), per spatial axis with
``eff = (filter - 1) * dilation + 1``::

    out = ceil(size / stride)                           SAME
    out = trunc((size + stride - eff) / stride)         VALID (C division; < 0 is an error)
    pad_before = max((out - 1) * stride + eff - size, 0) // 2     (the odd pixel goes after)

Positions outside the image contribute nothing to a TFLite accumulator (the reference kernels
skip them). Padding with the input zero point ``Z_x`` instead makes those positions contribute
``(Z_x - Z_x) * w = 0`` too, so the zero-point expansion (Jacob et al. 2.3)
``acc = sum(x * w) - Z_x * sum(w) + b`` holds uniformly over every window — which is what lets
the kernels multiply raw int8 values.

The im2col matrix (:class:`Im2col`) is built in a reused int8 buffer with integer copies only;
:func:`intq.kernels.gemm.exact_matmul` converts it to float32 in one contiguous pass. (Writing
the windows straight into a float32 buffer was measured about twice slower on a 1x56x56x64 3x3
layer: numpy's strided casting copies cost more than int8 copies plus one contiguous conversion.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from intq.errors import IntqError
from intq.kernels.base import KernelContext, static_shape  # noqa: F401 (the conv kernels import it from here)
from intq.kernels.requantize import (
    Requantizer,
    activation_range,
    make_requantizer,
    xnnpack_activation_range,
    xnnpack_conv_scale,
)
from intq.kernels.targets import Requant
from intq.qmath import QuantParams, effective_scale

_INT32_MAX = 2**31 - 1
_PADDINGS = ("SAME", "VALID")

#: The conv-family ops the XNNPACK delegate takes and requantizes in float32 (FULLY_CONNECTED has its
#: own module). TRANSPOSE_CONV is not emulated for XNNPACK (see intq.kernels.targets).
XNNPACK_FP32_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})

# ----------------------------------------------------------------------------------- padding

def _c_div(a: int, b: int) -> int:
    """C's integer division (truncation toward zero), ``b > 0``."""
    return a // b if a >= 0 else -((-a) // b)


def _out_size(padding: str, size: int, filt: int, stride: int, dilation: int) -> int | None:
    """TFLite ComputeOutSizeChecked: the output length, or None where TFLite reports an error."""
    if size < 0 or filt <= 0 or stride <= 0 or dilation <= 0:
        return None
    eff = (filt - 1) * dilation + 1
    out = (size + stride - 1) // stride if padding == "SAME" else _c_div(size + stride - eff, stride)
    return None if out < 0 else out


def _pad_before(size: int, filt: int, stride: int, dilation: int, out: int) -> int:
    eff = (filt - 1) * dilation + 1
    return max((out - 1) * stride + eff - size, 0) // 2


@dataclass(frozen=True)
class Padding2D:
    """Output size and leading padding of a 2-D window op (TFLite ComputePaddingHeightWidth)."""

    out_h: int
    out_w: int
    top: int
    left: int


def compute_padding(padding: str, in_hw: tuple[int, int], filter_hw: tuple[int, int],
                    stride_hw: tuple[int, int], dilation_hw: tuple[int, int]) -> Padding2D:
    """TFLite's ComputePaddingHeightWidth, including what it returns when a size is invalid:
    it stops at the first failing axis (width first) and leaves the rest 0."""
    (h, w), (fh, fw), (sh, sw), (dh, dw) = in_hw, filter_hw, stride_hw, dilation_hw
    out_w = _out_size(padding, w, fw, sw, dw)
    if out_w is None:
        return Padding2D(0, 0, 0, 0)
    out_h = _out_size(padding, h, fh, sh, dh)
    if out_h is None:
        return Padding2D(0, out_w, 0, 0)
    return Padding2D(out_h, out_w, _pad_before(h, fh, sh, dh, out_h), _pad_before(w, fw, sw, dw, out_w))


# ---------------------------------------------------------------------------- contract checks

@dataclass(frozen=True)
class WindowOptions:
    """The options a 2-D window op reads from its node attributes."""

    padding: str
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    activation: str


def window_options(ctx: KernelContext, dilation: bool = True) -> WindowOptions:
    """Read and check padding, strides, dilations and the fused activation."""
    padding = ctx.attr("padding", "SAME")
    if padding not in _PADDINGS:
        raise ctx.error(f"padding {padding!r} is not supported; expected SAME or VALID")
    values = {"stride_h": ctx.attr("stride_h", 0), "stride_w": ctx.attr("stride_w", 0)}
    if dilation:
        values["dilation_h_factor"] = ctx.attr("dilation_h_factor", 1)
        values["dilation_w_factor"] = ctx.attr("dilation_w_factor", 1)
    for name, v in values.items():
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ctx.error(f"{name} must be an integer >= 1, got {v!r}")
    activation = ctx.attr("fused_activation_function", "NONE") or "NONE"
    return WindowOptions(padding, int(values["stride_h"]), int(values["stride_w"]),
                         int(values.get("dilation_h_factor", 1)), int(values.get("dilation_w_factor", 1)),
                         activation)




def conv_weights(ctx: KernelContext, index: int, channel_axis: int) -> tuple[np.ndarray, QuantParams]:
    """Constant int8 4-D weights, symmetric, per tensor or per channel on ``channel_axis``."""
    wt = ctx.input(index)
    w = ctx.constant(index, "weights")
    qp = ctx.qparams(wt, "weights")
    if w.dtype != np.int8 or w.ndim != 4:
        raise ctx.error(f"weights {wt.name!r} must be int8 of rank 4, got {w.dtype.name} {list(w.shape)}")
    if np.any(qp.zero_point != 0):
        raise ctx.error(f"weights {wt.name!r} must be symmetric (zero point 0), got zero points "
                        f"{qp.zero_point.tolist()}")
    if qp.per_axis:
        if qp.axis != channel_axis:
            raise ctx.error(f"weights {wt.name!r} are quantized per axis {qp.axis}; this operator needs "
                            f"per-tensor or per-channel parameters on axis {channel_axis}")
        if qp.scale.size != w.shape[channel_axis]:
            raise ctx.error(f"weights {wt.name!r} have {qp.scale.size} scales for {w.shape[channel_axis]} "
                            f"channels on axis {channel_axis}")
    return w, qp


def conv_bias(ctx: KernelContext, index: int, channels: int) -> np.ndarray:
    """The optional constant int32 bias ``[channels]`` as int64 (zeros when omitted)."""
    if not ctx.has_input(index):
        return np.zeros(channels, np.int64)
    b = ctx.constant(index, "bias")
    if b.dtype != np.int32 or b.shape != (channels,):
        raise ctx.error(f"bias must be int32 [{channels}], got {b.dtype.name} {list(b.shape)}")
    qp = ctx.input(index).qparams
    if qp is not None and np.any(qp.zero_point != 0):
        raise ctx.error("bias must have zero point 0")
    return b.astype(np.int64)


def check_accumulator(ctx: KernelContext, abs_weight_sums: np.ndarray, bias: np.ndarray) -> None:
    """The int32 accumulator cannot overflow: per output channel,
    ``|acc| <= 255 * sum|w| + |b|`` (each ``x - Z_x`` lies in [-255, 255])."""
    bound = int((255 * abs_weight_sums.astype(np.int64) + np.abs(bias)).max(initial=0))
    if bound > _INT32_MAX:
        raise ctx.error(f"the int32 accumulator can overflow (|acc| up to {bound} > 2^31 - 1); split the layer")


def conv_requantizer(ctx: KernelContext, op: str, in_qp: QuantParams, w_qp: QuantParams, out_qp: QuantParams,
                     channels: int, activation: str, out_dtype, mode: Requant | None = None,
                     select: slice = slice(None)) -> Requantizer:
    """TFLite's PopulateConvolutionQuantizationParams: ``M_c = double(s_in) * double(s_w[c]) /
    double(s_out)`` per output channel (a per-tensor weight scale is broadcast), quantized for the
    target's requantization of ``op``; the fused activation becomes the clamp.

    ``xnnpack`` target, for the ops XNNPACK takes (CONV_2D, DEPTHWISE_CONV_2D): XNNPACK's fp32
    requantization instead — the float32 scale ``float(float(s_in * s_w[c]) / s_out)``
    (:func:`xnnpack_conv_scale`), ``rint`` half to even, and the clamp of
    :func:`xnnpack_activation_range`. ``mode`` overrides the target's contract for ``op``;
    ``select`` keeps a range of the output channels (a kernel that rounds channel groups differently)."""
    s_w = (np.broadcast_to(w_qp.scale, (channels,)) if not w_qp.per_axis else w_qp.scale)[select]
    try:
        if ctx.target.xnnpack and op in XNNPACK_FP32_OPS:
            lo, hi = xnnpack_activation_range(activation, out_qp)
            scale = xnnpack_conv_scale(in_qp.scale[0], s_w, out_qp.scale[0])
            return make_requantizer(scale, Requant.FLOAT32_RNE, out_qp.tensor_zero_point, lo, hi, out_dtype)
        real = effective_scale(in_qp.scale[0], s_w, out_qp.scale[0], product_dtype=np.float64)
        lo, hi = activation_range(activation, out_qp)
        mode = ctx.target.requant_for(op) if mode is None else mode
        return make_requantizer(real, mode, out_qp.tensor_zero_point, lo, hi, out_dtype)
    except IntqError as e:
        raise ctx.error(str(e)) from None


# --------------------------------------------------------------------------------- im2col

@dataclass(frozen=True, eq=False)
class Im2col:
    """Geometry and reused buffers of an im2col expansion ``[N*OH*OW, KH*KW*C]`` (tap-major, then
    channel: column ``(i*KW + j)*C + c``, the order of an OHWI weight row).

    ``padded`` (int8 ``[N, Hp, Wp, C]``, border filled with ``Z_x`` once, interior rewritten each
    run) exists only when the windows reach outside the image. ``buffer`` is the int8 matrix.
    The buffers are reused across runs: one prepared node must not run concurrently with itself.
    """

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    top: int
    left: int
    out_h: int
    out_w: int
    padded: np.ndarray | None
    buffer: np.ndarray  # int8 [N*OH*OW, KH*KW*C]


def make_im2col(in_shape: tuple[int, int, int, int], kh: int, kw: int, opts: WindowOptions, pad: Padding2D,
                zero_point: int) -> Im2col:
    """Allocate the buffers (prepare time) for an NHWC input of ``in_shape``."""
    n, h, w, c = in_shape
    need_h = (pad.out_h - 1) * opts.stride_h + (kh - 1) * opts.dilation_h + 1  # rows the windows read
    need_w = (pad.out_w - 1) * opts.stride_w + (kw - 1) * opts.dilation_w + 1
    padded = None
    if pad.top > 0 or pad.left > 0 or need_h > h or need_w > w:
        hp, wp = max(pad.top + h, need_h), max(pad.left + w, need_w)
        padded = np.full((n, hp, wp, c), zero_point, dtype=np.int8)
    buffer = np.empty((n * pad.out_h * pad.out_w, kh * kw * c), dtype=np.int8)
    return Im2col(n, h, w, c, kh, kw, opts.stride_h, opts.stride_w, opts.dilation_h, opts.dilation_w,
                  pad.top, pad.left, pad.out_h, pad.out_w, padded, buffer)


def fill_im2col(g: Im2col, x: np.ndarray) -> np.ndarray:
    """Write the windows of ``x`` (int8 NHWC) into ``g.buffer`` (row ``(n, oy, ox)``, columns
    tap-major then channel) and return it.

    With a column dilation of 1 the ``KW`` taps of one kernel row are ``KW * C`` contiguous bytes
    of the input, so each kernel row is one strided copy of whole ``KW * C`` runs (``KH`` copies);
    otherwise one strided copy per tap (``KH * KW`` copies of ``C`` bytes)."""
    src = x
    if g.padded is not None:
        g.padded[:, g.top:g.top + g.h, g.left:g.left + g.w, :] = x
        src = g.padded
    s0, s1, s2, s3 = src.strides
    if g.dilation_w == 1:
        dst = g.buffer.reshape(g.n, g.out_h, g.out_w, g.kh, g.kw * g.c)
        for i in range(g.kh):
            rows = as_strided(src[:, i * g.dilation_h:], shape=(g.n, g.out_h, g.out_w, g.kw * g.c),
                              strides=(s0, s1 * g.stride_h, s2 * g.stride_w, s3), writeable=False)
            np.copyto(dst[:, :, :, i, :], rows)
        return g.buffer
    dst = g.buffer.reshape(g.n, g.out_h, g.out_w, g.kh * g.kw, g.c)
    span_h = (g.out_h - 1) * g.stride_h + 1
    span_w = (g.out_w - 1) * g.stride_w + 1
    for i in range(g.kh):
        y0 = i * g.dilation_h
        for j in range(g.kw):
            x0 = j * g.dilation_w
            np.copyto(dst[:, :, :, i * g.kw + j, :], src[:, y0:y0 + span_h:g.stride_h, x0:x0 + span_w:g.stride_w, :])
    return g.buffer
