"""Helpers shared by the pooling, reduction, resize and arg-min/max kernels, int8 and 16x8.

Almost everything here runs in ``prepare`` (shapes, attributes, window geometry, axis resolution)
and may use Python ints freely. Two run-time pieces serve the int8 and the 16x8 pools alike:
:func:`window_reduce` (the separable window sum or maximum) and :func:`rounded_average`
(AveragePool's rounding); integer-only, checked by tests/kernels/test_integer_only.py, which
follows a kernel's ``run`` into them. Sources mirrored (LiteRT ``tflite/kernels/``, TFLM
``tensorflow/lite/micro/kernels/``):

* window geometry: ``padding.h`` — ``ComputeOutSize`` and ``ComputePaddingWithOffset`` (the
  pooling kernels use only the leading half of the total padding, ``total // 2``);
* the resize kernels' contract (:func:`resize_request`: shapes, ``size``, flags);
* axis resolution: ``reference/reduce.h`` ``ResolveAxis`` (negative axes + rank, duplicates
  dropped) and the output shape of ``reduce.cc`` ``ResizeOutputTensor`` (``keep_dims``);
* MEAN / SUM: ``reference_ops::QuantizedMeanOrSum``'s multiplier (:func:`quantized_sum`, int8 and
  16x8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.kernels.base import KernelContext, fused_activation_range, static_shape  # noqa: F401 (the pooling kernels import them from here)
from intq.qmath import QuantParams, quantize_multiplier

_SCALE_TOLERANCE = 1.0e-6  # TFLM PoolingPrepare: |s_in - s_out| <= 1e-6 (in double)
_INT32_MAX = 2**31 - 1




def check_output_shape(ctx: KernelContext, expected: tuple[int, ...]) -> tuple[int, ...]:
    """The declared output shape must equal the one the runtime computes (TFLite resizes it)."""
    y = ctx.outputs[0]
    got = static_shape(ctx, y, "output")
    if got != tuple(expected):
        raise ctx.error(f"output {y.name!r} has shape {list(got)}, but the operator produces {list(expected)}")
    return got


def require_same_qparams(ctx: KernelContext, x_qp: QuantParams, y_qp: QuantParams, *, exact: bool) -> None:
    """Spec 003: this operator keeps the input's scale and zero point.

    ``exact``: REDUCE_MAX/MIN compare float32 scales for equality (LiteRT ``EvalType`` and TFLM
    ``EvalMaxHelper`` use ``TF_LITE_ENSURE_EQ``); pooling accepts ``|s_in - s_out| <= 1e-6`` as
    TFLM's ``PoolingPrepare`` does, and the resizes (which neither runtime checks) the same.
    The zero points must be equal in both cases.
    """
    s_in, s_out = x_qp.tensor_scale, y_qp.tensor_scale
    same_scale = s_in == s_out if exact else abs(s_in - s_out) <= _SCALE_TOLERANCE
    if not same_scale or x_qp.tensor_zero_point != y_qp.tensor_zero_point:
        raise ctx.error(
            f"input and output must share scale and zero point (spec 003), got "
            f"({s_in!r}, {x_qp.tensor_zero_point}) and ({s_out!r}, {y_qp.tensor_zero_point}); "
            f"requantize with a QUANTIZE node first")




# ---------------------------------------------------------------------------------------------
# Pooling windows (Pool2DOptions)


@dataclass(frozen=True)
class PoolGeometry:
    """Where each output pixel's window lies in the input (NHWC), from padding.h.

    Output pixel (oy, ox) reads input rows ``oy*stride_h - pad_h + [0, filter_h)`` and columns
    ``ox*stride_w - pad_w + [0, filter_w)``, clipped to the image. Padding the input by
    ``pad_h``/``pad_bottom`` rows and ``pad_w``/``pad_right`` columns makes every window whole.
    """

    filter_h: int
    filter_w: int
    stride_h: int
    stride_w: int
    pad_h: int  # rows above the image (TFLite's padding_values.height)
    pad_w: int  # columns left of the image
    pad_bottom: int
    pad_right: int
    in_h: int
    in_w: int
    out_h: int
    out_w: int

    def valid_counts(self) -> np.ndarray:
        """int64 [out_h, out_w, 1]: how many input pixels each window covers (AveragePool's
        ``filter_count``)."""
        rows = _clipped_extent(self.out_h, self.stride_h, self.pad_h, self.filter_h, self.in_h)
        cols = _clipped_extent(self.out_w, self.stride_w, self.pad_w, self.filter_w, self.in_w)
        return (rows[:, None] * cols[None, :])[:, :, None]


def _clipped_extent(out: int, stride: int, pad: int, filt: int, size: int) -> np.ndarray:
    origin = np.arange(out, dtype=np.int64) * stride - pad
    start = np.maximum(0, -origin)
    end = np.minimum(filt, size - origin)
    return np.maximum(end - start, 0)


def _out_size(padding: str, size: int, filt: int, stride: int) -> int:
    # padding.h ComputeOutSizeChecked (dilation 1): C division of non-negative numerators.
    if padding == "SAME":
        return (size + stride - 1) // stride
    num = size + stride - filt
    return -1 if num < 0 else num // stride  # a negative count is an error in TFLite


def pool_geometry(ctx: KernelContext, in_shape: tuple[int, ...]) -> PoolGeometry:
    """Validate Pool2DOptions against an NHWC input and compute the window placement."""
    if len(in_shape) != 4:
        raise ctx.error(f"input must be 4-D NHWC, got shape {list(in_shape)}")
    padding = ctx.attr("padding", "SAME")
    if padding not in ("SAME", "VALID"):
        raise ctx.error(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    fh, fw = int(ctx.attr("filter_height", 0)), int(ctx.attr("filter_width", 0))
    sh, sw = int(ctx.attr("stride_h", 0)), int(ctx.attr("stride_w", 0))
    if min(fh, fw) < 1 or min(sh, sw) < 1:
        raise ctx.error(f"filter ({fh}x{fw}) and strides ({sh}x{sw}) must be at least 1")
    _, h, w, _ = in_shape
    oh, ow = _out_size(padding, h, fh, sh), _out_size(padding, w, fw, sw)
    if oh < 1 or ow < 1:
        raise ctx.error(f"a {fh}x{fw} window with {padding} padding does not fit a {h}x{w} image")
    # padding.h ComputePaddingWithOffset: total = max(0, (out-1)*stride + filter - in); the
    # pooling kernels pad total // 2 before the image (the odd pixel, if any, goes after).
    pad_h = max(0, (oh - 1) * sh + fh - h) // 2
    pad_w = max(0, (ow - 1) * sw + fw - w) // 2
    g = PoolGeometry(fh, fw, sh, sw, pad_h, pad_w,
                     max(0, (oh - 1) * sh + fh - h - pad_h), max(0, (ow - 1) * sw + fw - w - pad_w),
                     h, w, oh, ow)
    if int(g.valid_counts().min()) < 1:  # AveragePool returns false (an error) on an empty window
        raise ctx.error("a pooling window lies entirely in the padding")
    return g


@dataclass(frozen=True)
class PoolWindow:
    """A pooling node's prepared window placement and fused-activation clamp (int8 and 16x8)."""

    geometry: PoolGeometry
    act_min: int
    act_max: int


def prepare_pool(ctx: KernelContext, in_qp: QuantParams, out_qp: QuantParams) -> PoolWindow:
    """Contract of AVERAGE_POOL_2D / MAX_POOL_2D once the caller has checked the dtypes of input 0
    and output 0 (``in_qp``, ``out_qp``): the same scale (within TFLM's 1e-6) and zero point, an NHWC
    input, Pool2DOptions that place every window (:func:`pool_geometry`), the output shape."""
    require_same_qparams(ctx, in_qp, out_qp, exact=False)
    shape = static_shape(ctx, ctx.input(0), "input")
    g = pool_geometry(ctx, shape)
    check_output_shape(ctx, (shape[0], g.out_h, g.out_w, shape[3]))
    lo, hi = fused_activation_range(ctx, out_qp)
    return PoolWindow(g, lo, hi)


def window_reduce(g: PoolGeometry, x: np.ndarray, fill: int, combine) -> np.ndarray:
    """``combine`` (``np.add`` or ``np.maximum``) over each window of ``x`` (NHWC integers, of a dtype
    that holds the result) padded with ``fill`` to whole windows: ``[N, out_h, out_w, C]``.

    The reduction is separable: one shifted strided ``combine`` per filter column gives each
    window column's partial result, then one per filter row (no loop over pixels or channels)."""
    xp = x
    if g.pad_h or g.pad_bottom or g.pad_w or g.pad_right:  # np.pad's result, without its per-call Python work
        n, h, w, c = x.shape
        xp = np.full((n, h + g.pad_h + g.pad_bottom, w + g.pad_w + g.pad_right, c), fill, dtype=x.dtype)
        xp[:, g.pad_h:g.pad_h + h, g.pad_w:g.pad_w + w] = x
    span_h, span_w = (g.out_h - 1) * g.stride_h + 1, (g.out_w - 1) * g.stride_w + 1
    cols = xp[:, :, 0:span_w:g.stride_w]  # [N, Hp, out_w, C]: window columns, tap by tap
    for fx in range(1, g.filter_w):
        cols = combine(cols, xp[:, :, fx:fx + span_w:g.stride_w])
    acc = cols[:, 0:span_h:g.stride_h]  # [N, out_h, out_w, C]
    for fy in range(1, g.filter_h):
        acc = combine(acc, cols[:, fy:fy + span_h:g.stride_h])
    return acc


@dataclass(frozen=True, eq=False)
class WindowCounts:
    """AveragePool's divisors: in-image pixels per window, and half of each (for the rounding)."""

    count: np.ndarray  # int32 [out_h, out_w, 1]
    half_count: np.ndarray  # int32, count // 2


def window_counts(ctx: KernelContext, g: PoolGeometry, max_abs: int) -> WindowCounts:
    """The divisors of AVERAGE_POOL_2D for inputs with ``|q| <= max_abs``, after checking that a
    window sum ``|acc| <= max_abs * filter_h * filter_w`` fits TFLite Micro's int32 accumulator
    (LiteRT's int64 one then holds the same value)."""
    if max_abs * g.filter_h * g.filter_w > _INT32_MAX:
        raise ctx.error(f"a {g.filter_h}x{g.filter_w} window can overflow TFLite Micro's int32 window sum")
    count = g.valid_counts().astype(np.int32)
    return WindowCounts(count, count // 2)


def rounded_average(acc: np.ndarray, d: WindowCounts) -> np.ndarray:
    """AveragePool's quotient rounded half away from zero: ``(acc + count/2) / count`` if ``acc > 0``
    else ``(acc - count/2) / count`` in C division, as ``sign(acc) * ((|acc| + count//2) // count)``."""
    q = (np.abs(acc) + d.half_count) // d.count
    return np.where(acc < 0, -q, q)


# ---------------------------------------------------------------------------------------------
# Reductions (ReducerOptions) and axis inputs


def constant_axes(ctx: KernelContext, index: int, rank: int, *, dtypes=(np.int32,)) -> tuple[int, ...]:
    """The constant axis input ``index`` resolved against ``rank`` (reduce.h ResolveAxis).

    Negative axes count from the end; duplicates are dropped; the result keeps first-seen order.
    """
    t = ctx.input(index)
    axis = ctx.constant(index, "axis")
    if axis.dtype not in [np.dtype(d) for d in dtypes]:
        raise ctx.error(f"axis {t.name!r} is {axis.dtype.name}; expected {', '.join(np.dtype(d).name for d in dtypes)}")
    resolved: list[int] = []
    for a in axis.reshape(-1).tolist():
        r = a + rank if a < 0 else a
        if not 0 <= r < rank:
            raise ctx.error(f"axis {a} is out of range for an input of rank {rank}")
        if r not in resolved:
            resolved.append(r)
    return tuple(resolved)


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep_dims: bool) -> tuple[int, ...]:
    """reduce.cc GetOutputShape: reduced dimensions become 1 (``keep_dims``) or disappear."""
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def nonempty_input_shape(ctx: KernelContext) -> tuple[int, ...]:
    """Input 0's static shape, which a reduction needs of rank >= 1 with no empty dimension."""
    shape = static_shape(ctx, ctx.input(0), "input")
    if not shape or min(shape) < 1:
        raise ctx.error(f"input must have rank >= 1 and no empty dimension, got shape {list(shape)}")
    return shape


@dataclass(frozen=True)
class Reduction:
    """Where a reduction with ReducerOptions runs: input 0's shape, the constant axes (input 1,
    resolved), ``keep_dims`` and the output shape (checked against the output tensor's)."""

    in_shape: tuple[int, ...]
    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]


def reduction(ctx: KernelContext) -> Reduction:
    """The :class:`Reduction` of a MEAN, SUM, REDUCE_MAX or REDUCE_MIN node (reduce.cc Prepare)."""
    shape = nonempty_input_shape(ctx)
    axes = constant_axes(ctx, 1, len(shape))
    keep = bool(ctx.attr("keep_dims", False))
    return Reduction(shape, axes, keep, check_output_shape(ctx, reduced_shape(shape, axes, keep)))


# ---------------------------------------------------------------------------------------------
# MEAN and SUM: reference_ops::QuantizedMeanOrSum

_MAX_Q_DIFF = 255  # |q - Z| <= 255 for int8 q and zero point
_MAX_Q_DIFF_UINT8_BYTES = 383  # |b - Z| <= 255 + 128 for a byte b read as uint8 and an int8 Z


@dataclass(frozen=True)
class QuantizedSumParams:
    """``y = clamp(MBQM(sum(q_in) - Z_in * count, multiplier, shift) + Z_out)`` per output.

    ``multiplier``/``shift`` (shift positive = left) is TFLite's Q0.31 pair of
    ``s_in / s_out``, for MEAN with the division by ``count`` folded in as QuantizedMeanOrSum
    does it (see :func:`prepare_quantized_sum`). ``bytes_as_uint8`` selects the LiteRT 2.3
    ``BUILTIN_REF`` SUM defect (see :mod:`intq.kernels.sum`): the int8 bytes are summed as
    uint8 and the result is clamped to [0, 255] and stored as a uint8 byte.
    """

    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]
    count: int  # input elements per output element
    input_offset: int  # Z_in * count
    multiplier: int
    shift: int
    zero_point: int
    bytes_as_uint8: bool = False


def prepare_quantized_sum(ctx: KernelContext, *, mean: bool, bytes_as_uint8: bool = False) -> QuantizedSumParams:
    """Prepare MEAN (``mean=True``) or SUM of an int8 tensor over a constant axis input
    (:func:`quantized_sum`, ``|q - Z| <= 255``; 383 with ``bytes_as_uint8``, LiteRT 2.3's
    ``BUILTIN_REF`` SUM, which reads the bytes as uint8: :mod:`intq.kernels.sum`)."""
    in_qp = ctx.per_tensor(ctx.input(0), "input")
    out_qp = ctx.per_tensor(ctx.outputs[0], "output")
    max_diff = _MAX_Q_DIFF_UINT8_BYTES if bytes_as_uint8 else _MAX_Q_DIFF
    return quantized_sum(ctx, in_qp, out_qp, mean=mean, max_diff=max_diff, bytes_as_uint8=bytes_as_uint8)


def quantized_sum(ctx: KernelContext, in_qp: QuantParams, out_qp: QuantParams, *, mean: bool, max_diff: int,
                  bytes_as_uint8: bool = False) -> QuantizedSumParams:
    """The parameters of QuantizedMeanOrSum over the constant axis input 1, for input 0 and output 0
    with the (already checked) ``in_qp`` and ``out_qp`` and input values with ``|q - Z_in| <=
    max_diff`` (int8 and 16x8 MEAN, SUM).

    Multiplier (reduce.cc PrepareMeanOrSum, TFLM PrepareMeanOrSumHelper): ``QuantizeMultiplier(
    double(s_in) / double(s_out))``. For MEAN, QuantizedMeanOrSum then folds ``1/count`` in with
    integers: ``k = min(floor(log2(count)), 32, 31 + shift)``, ``multiplier = (multiplier << k)
    // count`` (truncating), ``shift -= k``. Both runtimes run this path for every int8 MEAN and
    SUM, whatever the axes, ``keep_dims`` or scales (measured by tests/kernels/test_pool_reduce.py),
    and for the 16x8 MEAN (tests/kernels/test_int16x8.py). The int32 sum and its left shift by a
    positive ``shift`` must not overflow (checked).
    """
    r = reduction(ctx)
    count = int(np.prod([r.in_shape[a] for a in r.axes], dtype=np.int64))
    if count * max_diff > _INT32_MAX:
        raise ctx.shape_error(f"reducing {count} elements can overflow the runtime's int32 accumulator; split the reduction")
    real = in_qp.tensor_scale / out_qp.tensor_scale  # double / double
    multiplier, shift = (int(v) for v in quantize_multiplier(real))
    if shift > 30:
        raise ctx.error(f"s_in / s_out = {real:.6g} is too large for TFLite's fixed-point multiplier")
    if mean:
        k = min(count.bit_length() - 1, 32, 31 + shift)  # 63 - CountLeadingZeros(count), clamped
        multiplier = (multiplier << k) // count
        shift -= k
    if (count * max_diff) << max(shift, 0) > _INT32_MAX:
        raise ctx.error(f"s_in / s_out = {real:.6g} scales a sum of {count} elements beyond int32 "
                        "(MultiplyByQuantizedMultiplier's left shift would overflow)")
    zx = in_qp.tensor_zero_point
    return QuantizedSumParams(r.axes, r.keep_dims, r.out_shape, count, zx * count, multiplier, shift,
                              out_qp.tensor_zero_point, bytes_as_uint8)


@dataclass(frozen=True)
class ReduceExtremumParams:
    """REDUCE_MAX / REDUCE_MIN: which axes, and the output shape."""

    axes: tuple[int, ...]
    keep_dims: bool
    out_shape: tuple[int, ...]


def prepare_reduce_extremum(ctx: KernelContext) -> ReduceExtremumParams:
    """Contract of REDUCE_MAX/MIN: int8, equal scale and zero point in and out, constant axes."""
    in_qp, out_qp = ctx.per_tensor(ctx.input(0), "input"), ctx.per_tensor(ctx.outputs[0], "output")
    require_same_qparams(ctx, in_qp, out_qp, exact=True)
    r = reduction(ctx)
    return ReduceExtremumParams(r.axes, r.keep_dims, r.out_shape)


# ---------------------------------------------------------------------------------------------
# ARG_MAX / ARG_MIN

_INDEX_TYPES = {"INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64)}
_INT32_ONLY = "tflm"  # TFLM's acceptance table: "Only int32_t are supported currently"


@dataclass(frozen=True)
class ArgExtremumParams:
    """ARG_MAX / ARG_MIN: the resolved axis and the index dtype."""

    axis: int
    out_dtype: np.dtype


def prepare_arg_extremum(ctx: KernelContext) -> ArgExtremumParams:
    """Contract (LiteRT arg_min_max.cc Prepare / ReadAndNormalizeAxis): int8 input of rank >= 1;
    input 1 a constant int32 or int64 tensor holding one axis (negative counts from the end); the
    output drops that axis and holds int32 or int64 indices as ``output_type`` says.

    TFLM's arg_min_max.cc accepts only an int32 axis and an int32 output and fails at invoke
    otherwise (measured), so on the ``tflite`` target int64 is an error that says so; LiteRT
    (``litert-ref``) takes all four combinations.
    """
    y = ctx.outputs[0]
    ctx.per_tensor(ctx.input(0), "input")  # scale and zero point are irrelevant: the order of q is the order of reals
    shape = nonempty_input_shape(ctx)
    axis_t = ctx.input(1)
    if ctx.constant(1, "axis").size != 1:
        raise ctx.error(f"axis {axis_t.name!r} must hold exactly one value")
    (axis,) = constant_axes(ctx, 1, len(shape), dtypes=(np.int32, np.int64))
    if y.dtype not in _INDEX_TYPES.values():
        raise ctx.error(f"output {y.name!r} is {y.dtype.name}; indices are int32 or int64")
    declared = ctx.attr("output_type", None)
    if declared is not None and _INDEX_TYPES.get(declared) != y.dtype:
        raise ctx.error(f"output_type={declared!r} but the output tensor is {y.dtype.name}")
    check_output_shape(ctx, reduced_shape(shape, (axis,), keep_dims=False))
    if ctx.target.rules.tables == _INT32_ONLY and (ctx.constant(1, "axis").dtype != np.int32 or y.dtype != np.int32):
        raise ctx.error(f"TensorFlow Lite Micro (target {ctx.target.name!r}) supports only an int32 axis and int32 "
                        f"output; convert with output_type=INT32 and an int32 axis, or use target 'litert-ref'")
    return ArgExtremumParams(axis, y.dtype)


@dataclass(frozen=True)
class ResizeRequest:
    """RESIZE_BILINEAR's and RESIZE_NEAREST_NEIGHBOR's checked inputs (:func:`resize_request`)."""

    in_shape: tuple[int, int, int, int]  # NHWC
    out_h: int
    out_w: int
    align_corners: bool
    half_pixel_centers: bool
    out_shape: tuple[int, ...]  # [N, out_h, out_w, C], the output's declared shape


def resize_request(ctx: KernelContext, dtypes=(np.int8,)) -> ResizeRequest:
    """The resize kernels' shared contract: per-tensor input [N, H, W, C] of ``dtypes`` (int8; int16
    for the 16x8 kernels) and output with the input's parameters (spec 003, pooling's tolerance:
    :func:`require_same_qparams`), input 1 a constant int32 ``size`` = [out_h, out_w] of positive
    sizes, the output [N, out_h, out_w, C]."""
    x, y = ctx.input(0), ctx.outputs[0]
    require_same_qparams(ctx, ctx.per_tensor(x, "input", dtypes), ctx.per_tensor(y, "output", dtypes), exact=False)
    shape = static_shape(ctx, x, "input")
    if len(shape) != 4:
        raise ctx.error(f"input must be 4-D NHWC, got shape {list(shape)}")
    size = ctx.constant(1, "size")
    if size.dtype != np.int32 or size.shape != (2,):
        raise ctx.error(f"size must be a constant int32 [2] (out_h, out_w), got {size.dtype.name} {list(size.shape)}")
    out_h, out_w = (int(v) for v in size)
    if out_h < 1 or out_w < 1:
        raise ctx.error(f"size must be positive, got {[out_h, out_w]}")
    out_shape = check_output_shape(ctx, (shape[0], out_h, out_w, shape[3]))
    n, h, w, c = shape
    return ResizeRequest((n, h, w, c), out_h, out_w, bool(ctx.attr("align_corners", False)),
                         bool(ctx.attr("half_pixel_centers", False)), out_shape)
