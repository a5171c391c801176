"""Shared pieces of the conv family (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, BATCH_MATMUL), int8
and 16x8: contract checks, TFLite's padding arithmetic, the prepared requantization, the padded
input and the im2col builder. Integer-only at run time (:func:`fill_padded`, :func:`fill_im2col`).

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

The 16x8 kernels use the same windows: their int16 zero points are 0, so padding with ``Z_x = 0``
is exactly what skipping the outside positions gives.

The im2col matrix (:class:`Im2col`) is built in a reused buffer of the input's dtype with integer
copies only; :func:`intq.kernels.gemm.exact_matmul` converts an int8 one to float32 in one
contiguous pass. (Writing the windows straight into a float32 buffer was measured about twice
slower on a 1x56x56x64 3x3 layer: numpy's strided casting copies cost more than int8 copies plus
one contiguous conversion.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.lib.stride_tricks import as_strided

from intq.errors import IntqError
from intq.kernels.base import KernelContext, static_shape  # noqa: F401 (the conv kernels import it from here)
from intq.kernels.requantize import (
    Requantizer,
    activation_range,
    float32_rne_scale,
    make_requantizer,
)
from intq.kernels.targets import Requant
from intq.limits import check_tensor_size
from intq.qmath import QuantParams, effective_scale

_PADDINGS = ("SAME", "VALID")

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


def conv_padding(ctx: KernelContext, ops: ConvOperands, kh: int, kw: int, channels: int) -> Padding2D:
    """:func:`compute_padding` of a ``KH x KW`` convolution window (``ops.opts``) over the input;
    refuses a window that leaves no output and an output whose shape is not ``[N, OH, OW, channels]``."""
    opts = ops.opts
    n, h, w, _ = ops.in_shape
    pad = compute_padding(opts.padding, (h, w), (kh, kw), (opts.stride_h, opts.stride_w),
                          (opts.dilation_h, opts.dilation_w))
    if pad.out_h < 1 or pad.out_w < 1:
        raise ctx.error(f"a {kh}x{kw} kernel (dilation {opts.dilation_h}x{opts.dilation_w}) with {opts.padding} "
                        f"padding leaves no output for a {h}x{w} input")
    out_shape = (n, pad.out_h, pad.out_w, channels)
    y = ctx.outputs[0]
    if static_shape(ctx, y, "output", 4) != out_shape:
        raise ctx.error(f"output shape {list(y.shape)} does not match the computed {list(out_shape)}")
    return pad


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




@dataclass(frozen=True, eq=False)
class ConvOperands:
    """What every convolution's ``prepare`` checks first (int8 and 16x8)."""

    in_qp: QuantParams  # the input's, per tensor
    out_qp: QuantParams  # output 0's, per tensor
    in_shape: tuple[int, int, int, int]  # NHWC, static
    w: np.ndarray  # int8 rank-4 constant weights
    w_qp: QuantParams  # symmetric, per tensor or per channel on the op's channel axis
    out_dtype: np.dtype
    opts: WindowOptions
    channel_axis: int  # the weights' output-channel axis

    def abs_weight_sums(self) -> np.ndarray:
        """int64 ``[C_out]``: ``sum |w|`` over each output channel's weights (the accumulator bound)."""
        axes = tuple(a for a in range(self.w.ndim) if a != self.channel_axis)
        return np.abs(self.w.astype(np.int64)).sum(axis=axes)

    def requantizer(self, ctx: KernelContext, op: str, mode: Requant | None = None,
                    select: slice = slice(None), bounds=activation_range) -> Requantizer:
        """:func:`conv_requantizer` of these operands: every output channel's multiplier, the node's
        fused activation, the output's dtype (``mode``, ``select``, ``bounds``: as there)."""
        return conv_requantizer(ctx, op, self.in_qp, self.w_qp, self.out_qp, self.w.shape[self.channel_axis],
                                self.opts.activation, self.out_dtype, mode=mode, select=select, bounds=bounds)


def conv_operands(ctx: KernelContext, channel_axis: int, activation=KernelContext.per_tensor, input_index: int = 0,
                  dilation: bool = True) -> ConvOperands:
    """Check a convolution's input (``input_index``, NHWC), output 0, weights (input 1,
    :func:`conv_weights` on ``channel_axis``) and options (:func:`window_options`).
    ``activation(ctx, tensor, what)`` checks the input's and the output's dtype and returns their
    QuantParams: int8 per tensor by default (``ctx.per_tensor``); the 16x8 kernels pass their int16
    check."""
    x, y = ctx.input(input_index), ctx.outputs[0]
    in_qp, out_qp = activation(ctx, x, "input"), activation(ctx, y, "output")
    in_shape = static_shape(ctx, x, "input", 4)
    w, w_qp = conv_weights(ctx, 1, channel_axis)
    return ConvOperands(in_qp, out_qp, in_shape, w, w_qp, y.dtype, window_options(ctx, dilation), channel_axis)


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


def conv_bias(ctx: KernelContext, index: int, channels: int, dtype=np.int32, refused_without: str | None = None,
              note: str = "") -> np.ndarray:
    """The optional constant bias ``[channels]`` of ``dtype`` (int32; int64 for 16x8), zero point 0,
    as int64 (zeros when omitted). ``refused_without`` says why ``ctx.target`` refuses the node
    without one (e.g. ``"refuses"``); ``note`` is added to a dtype error."""
    if not ctx.has_input(index):
        if refused_without is not None:
            raise ctx.error(f"target {ctx.target.name!r} ({ctx.target.matches}) {refused_without} a {ctx.op} "
                            f"without bias; give it a zero {np.dtype(dtype).name} bias")
        return np.zeros(channels, np.int64)
    b = ctx.constant(index, "bias")
    if b.dtype != dtype or b.shape != (channels,):
        raise ctx.error(f"bias must be {np.dtype(dtype).name} [{channels}], got {b.dtype.name} {list(b.shape)}{note}")
    qp = ctx.input(index).qparams
    if qp is not None and np.any(qp.zero_point != 0):
        raise ctx.error("bias must have zero point 0")
    return b.astype(np.int64)


def check_accumulator(ctx: KernelContext, abs_weight_sums: np.ndarray, bias: np.ndarray, max_abs_x: int = 255,
                      limit_bits: int = 31) -> None:
    """The accumulator cannot overflow: per output channel ``|acc| <= max_abs_x * sum|w| + |b| <
    2^limit_bits``. int8: each ``x - Z_x`` lies in [-255, 255] and the accumulator is int32; 16x8:
    ``|x| <= 2^15`` and TFLite's int64 MultiplyByQuantizedMultiplier takes ``|acc| < 2^47``."""
    bound = int((max_abs_x * abs_weight_sums.astype(np.int64) + np.abs(bias)).max(initial=0))
    if bound >= 1 << limit_bits:
        raise ctx.error(f"the accumulator can overflow (|acc| up to {bound} >= 2^{limit_bits}); split the layer")


def _weight_scales(w_qp: QuantParams, channels: int, select: slice) -> np.ndarray:
    """``s_w[c]`` of the ``select``-ed output channels (a per-tensor scale broadcast to ``channels``)."""
    return (np.broadcast_to(w_qp.scale, (channels,)) if not w_qp.per_axis else w_qp.scale)[select]


def conv_scales(in_qp: QuantParams, w_qp: QuantParams, out_qp: QuantParams, channels: int,
                select: slice = slice(None)) -> np.ndarray:
    """PopulateConvolutionQuantizationParams' real multipliers ``double(s_in) * double(s_w[c]) /
    double(s_out)`` per output channel (a per-tensor weight scale broadcast), float64."""
    s_w = _weight_scales(w_qp, channels, select)
    return effective_scale(in_qp.scale[0], s_w, out_qp.scale[0], product_dtype=np.float64)


def conv_requantizer(ctx: KernelContext, op: str, in_qp: QuantParams, w_qp: QuantParams, out_qp: QuantParams,
                     channels: int, activation: str, out_dtype, mode: Requant | None = None,
                     select: slice = slice(None), bounds=activation_range) -> Requantizer:
    """TFLite's PopulateConvolutionQuantizationParams: ``M_c = double(s_in) * double(s_w[c]) /
    double(s_out)`` per output channel (a per-tensor weight scale is broadcast), quantized for the
    target's requantization of ``op`` (``mode`` overrides it); the fused activation becomes the clamp
    ``bounds(activation, out_qp)`` (TFLite's CalculateActivationRangeQuantized by default).

    The float32 requantization (:data:`Requant.FLOAT32_RNE`: XNNPACK's fp32 requantization, and
    MLAS's QLinearConv) starts from the float32 scale ``float(float(s_in * s_w[c]) / s_out)``
    (:func:`float32_rne_scale`) instead: the contract's own scale. ``select`` keeps a range of the
    output channels (a kernel that rounds channel groups differently)."""
    try:
        mode = ctx.target.requant_for(op) if mode is None else mode
        if mode is Requant.FLOAT32_RNE:
            lo, hi = bounds(activation, out_qp)
            scale = float32_rne_scale(in_qp.scale[0], _weight_scales(w_qp, channels, select), out_qp.scale[0])
            return make_requantizer(scale, mode, out_qp.tensor_zero_point, lo, hi, out_dtype)
        real = conv_scales(in_qp, w_qp, out_qp, channels, select)
        lo, hi = bounds(activation, out_qp)
        return make_requantizer(real, mode, out_qp.tensor_zero_point, lo, hi, out_dtype)
    except IntqError as e:
        raise ctx.error(str(e)) from None


def conv_matrix(ctx: KernelContext, w: np.ndarray, c_in: int) -> tuple[np.ndarray, int]:
    """CONV_2D weights ``[C_out, KH, KW, C_g]`` as the ``[C_out, KH*KW*C_in]`` matrix the im2col
    columns multiply (int8 and 16x8), and the number of groups ``G = C_in / C_g``: block-diagonal
    when grouped (output channel ``o`` sees only its group ``o // (C_out / G)``'s input channels,
    as the runtimes' ConvPerChannel reads them). ``C_g`` must divide ``C_in`` and ``G`` divide
    ``C_out`` (TFLite does not check the latter and would read out of bounds)."""
    c_out, kh, kw, c_g = w.shape
    if c_g < 1 or c_in % c_g:
        raise ctx.error(f"input channels ({c_in}) must be a multiple of the weights' channels ({c_g})")
    groups = c_in // c_g
    if c_out % groups:
        raise ctx.error(f"grouped convolution: {c_out} output channels do not split into {groups} groups")
    taps = kh * kw
    if groups == 1:
        return w.reshape(c_out, taps * c_g), 1
    full = np.zeros((c_out, taps, groups, c_g), w.dtype)
    full[np.arange(c_out), :, np.arange(c_out) // (c_out // groups), :] = w.reshape(c_out, taps, c_g)
    return full.reshape(c_out, taps * c_in), groups


# ------------------------------------------------------------------------- padded input, im2col

@dataclass(frozen=True, eq=False)
class PaddedInput:
    """Where a window op reads its NHWC input ``[N, H, W, C]``: a reused buffer ``[N, Hp, Wp, C]``
    whose border holds the fill value (``Z_x``, written once at prepare) and whose interior
    ``[top:top + H, left:left + W]`` is rewritten each run, or ``None`` when every window stays
    inside the image and the input is read as it is. Not re-entrant (one run at a time)."""

    top: int
    left: int
    h: int
    w: int
    buffer: np.ndarray | None


def make_padded(in_shape: tuple[int, int, int, int], kh: int, kw: int, opts: WindowOptions, pad: Padding2D,
                fill: int, dtype, always: bool = False) -> PaddedInput:
    """Allocate (prepare time) the padded copy of an input of ``in_shape`` that the ``KH x KW``
    windows of ``opts`` and ``pad`` read; ``always`` allocates it even when no window leaves the
    image (a caller that needs the input converted to ``dtype``)."""
    n, h, w, c = in_shape
    need_h = (pad.out_h - 1) * opts.stride_h + (kh - 1) * opts.dilation_h + 1  # rows the windows read
    need_w = (pad.out_w - 1) * opts.stride_w + (kw - 1) * opts.dilation_w + 1
    buffer = None
    if always or pad.top > 0 or pad.left > 0 or need_h > h or need_w > w:
        shape = (n, max(pad.top + h, need_h), max(pad.left + w, need_w), c)
        check_tensor_size(shape, dtype, f"the padded input a {kh}x{kw} window (dilation {opts.dilation_h}x"
                                        f"{opts.dilation_w}) reads")  # a huge dilation asks for terabytes
        buffer = np.full(shape, fill, dtype=dtype)
    return PaddedInput(pad.top, pad.left, h, w, buffer)


def fill_padded(p: PaddedInput, x: np.ndarray) -> np.ndarray:
    """The input as the windows read it: ``x`` copied into the padded buffer, or ``x`` itself."""
    if p.buffer is None:
        return x
    p.buffer[:, p.top:p.top + p.h, p.left:p.left + p.w, :] = x
    return p.buffer


@dataclass(frozen=True, eq=False)
class Im2col:
    """Geometry and reused buffers of an im2col expansion ``[N*OH*OW, KH*KW*C]`` (tap-major, then
    channel: column ``(i*KW + j)*C + c``, the order of an OHWI weight row).

    ``padded`` is the input padded with ``Z_x`` (:class:`PaddedInput`); ``buffer`` is the matrix, of
    the input's dtype, or ``None`` for a 1x1 kernel, whose (strided) input already is the matrix.
    The buffers are reused across runs: one prepared node must not run concurrently with itself.
    """

    n: int
    c: int
    kh: int
    kw: int
    stride_h: int
    stride_w: int
    dilation_h: int
    dilation_w: int
    out_h: int
    out_w: int
    padded: PaddedInput
    buffer: np.ndarray | None  # [N*OH*OW, KH*KW*C]


def make_im2col(in_shape: tuple[int, int, int, int], kh: int, kw: int, opts: WindowOptions, pad: Padding2D,
                zero_point: int, dtype=np.int8) -> Im2col:
    """Allocate the buffers (prepare time) for an NHWC input of ``in_shape`` and ``dtype``."""
    n, _, _, c = in_shape
    padded = make_padded(in_shape, kh, kw, opts, pad, zero_point, dtype)
    rows = (n * pad.out_h * pad.out_w, kh * kw * c)
    check_tensor_size(rows, dtype, f"the im2col matrix of a {kh}x{kw} convolution")
    buffer = None if kh == kw == 1 else np.empty(rows, dtype=dtype)
    return Im2col(n, c, kh, kw, opts.stride_h, opts.stride_w, opts.dilation_h, opts.dilation_w,
                  pad.out_h, pad.out_w, padded, buffer)


#: im2col matrices up to this many elements are filled by the compiled loop :func:`_fill_windows`
#: (measured: 2-6 us where numpy's strided copies take 13-15 us on 8x8 inputs; numpy's copies of
#: whole rows win from about 10^5 elements, e.g. 5-8x on a 56x56x64 3x3 layer).
_SMALL_IM2COL = 32768


@njit(cache=True, nogil=True)
def _fill_windows(src, kh, kw, stride_h, stride_w, dilation_h, dilation_w, out_h, out_w, dst):
    """:func:`fill_im2col`'s matrix element by element: ``dst[(n, oy, ox), (i*KW + j)*C + c] =
    src[n, oy*s_h + i*d_h, ox*s_w + j*d_w, c]`` (``src`` already padded)."""
    batch, _, _, channels = src.shape
    row = 0
    for n in range(batch):
        for oy in range(out_h):
            for ox in range(out_w):
                col = 0
                for i in range(kh):
                    y = oy * stride_h + i * dilation_h
                    for j in range(kw):
                        x = ox * stride_w + j * dilation_w
                        for c in range(channels):
                            dst[row, col + c] = src[n, y, x, c]
                        col += channels
                row += 1


def fill_im2col(g: Im2col, x: np.ndarray) -> np.ndarray:
    """The im2col matrix of ``x`` (NHWC, the dtype of :func:`make_im2col`): row ``(n, oy, ox)``,
    columns tap-major then channel, in ``g.buffer`` (a 1x1 kernel: the strided input itself).

    With a column dilation of 1 the ``KW`` taps of one kernel row are ``KW * C`` contiguous values
    of the input, so each kernel row is one strided copy of whole ``KW * C`` runs (``KH`` copies);
    otherwise one strided copy per tap (``KH * KW`` copies of ``C`` values)."""
    src = fill_padded(g.padded, x)
    span_h = (g.out_h - 1) * g.stride_h + 1
    span_w = (g.out_w - 1) * g.stride_w + 1
    if g.buffer is None:  # 1x1: no padding, one tap
        return src[:, :span_h:g.stride_h, :span_w:g.stride_w, :].reshape(-1, g.c)
    if g.buffer.size <= _SMALL_IM2COL:  # small layers: one compiled pass beats KH numpy calls
        _fill_windows(src, g.kh, g.kw, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.out_h, g.out_w,
                      g.buffer)
        return g.buffer
    s0, s1, s2, s3 = src.strides
    if g.dilation_w == 1:
        dst = g.buffer.reshape(g.n, g.out_h, g.out_w, g.kh, g.kw * g.c)
        for i in range(g.kh):
            rows = as_strided(src[:, i * g.dilation_h:], shape=(g.n, g.out_h, g.out_w, g.kw * g.c),
                              strides=(s0, s1 * g.stride_h, s2 * g.stride_w, s3), writeable=False)
            np.copyto(dst[:, :, :, i, :], rows)
        return g.buffer
    dst = g.buffer.reshape(g.n, g.out_h, g.out_w, g.kh * g.kw, g.c)
    for i in range(g.kh):
        y0 = i * g.dilation_h
        for j in range(g.kw):
            x0 = j * g.dilation_w
            np.copyto(dst[:, :, :, i * g.kw + j, :], src[:, y0:y0 + span_h:g.stride_h, x0:x0 + span_w:g.stride_w, :])
    return g.buffer
