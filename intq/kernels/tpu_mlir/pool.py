"""TPU-MLIR's int8 ``tpu.Pool2D`` (``Pool2D.cpp``): MAX_POOL_2D and AVERAGE_POOL_2D under ``tpu-mlir``.

Windows: ``filter_h x filter_w``, strides, explicit ``tpu_pads`` (top, left, bottom, right). The
interpreter pools with oneDNN in float32 on the stored integers, then:

* **max**: the window maximum (padding never wins); ``do_relu`` then clamps the *stored* value at 0
  (and at ``relu_limit`` when positive), as ``function_relu`` does on the raw buffer;
* **average** with ``do_relu``: the mean is clamped at real 0 first, the input's zero point (0 in
  symmetric models; measured on both single-op suites);
* **average, symmetric models** (``multiplier``/``rshift`` given): the window mean
  ``a = float32(sum) / float32(count)`` (``count``: ``KH KW``, or the in-image taps when
  ``count_include_pad`` is false), back to a sum ``v = round_half_away(float32(float32(a KH) KW))``
  (exactly the window sum when ``count = KH KW``), then ``RightShiftRound(v m, rshift, HALF_UP)``
  (the output zero point is 0: symmetric), saturated;
* **average, asymmetric models** (a float ``scale`` and ``offset`` instead): ``r = float32(double(
  float32(float32(a KH) KW)) * scale + offset)``, rounded with the op's ``round_mode``, saturated;
  an input zero point ``Z_x != 0`` is written into the padding beforehand, so every window divides
  by ``KH KW`` whatever ``count_include_pad`` says; with ``Z_x = 0`` the padding is oneDNN's, and
  ``count_include_pad = false`` divides by the in-image taps (measured: the asymmetric single-op
  suite's padded windows); Float steps, as TPU-MLIR computes them;
* **average on float32** (asymmetric models keep some poolings in float32: mixed precision):
  oneDNN's float32 mean, the window summed in float32 tap by tap (rows, then columns) from 0,
  divided by the count as above, ``do_relu`` clamping it at 0 (:func:`run_avg_float32`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from intq.kernels.base import KernelContext, static_shape, variant
from intq.kernels.tpu_mlir import FAMILY
from intq.kernels.tpu_mlir.common import activation, attr, rounding
from intq.qmath import Rounding, round_float, raw

#: The rounding applyMultiplierAndRShift uses by default (TPU-MLIR's average pooling passes none).
AVG_ROUNDING = Rounding.HALF_UP


@dataclass(frozen=True)
class PoolWindow:
    kh: int
    kw: int
    sh: int
    sw: int
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    out_shape: tuple[int, int, int, int]
    counts: np.ndarray  # int64 [OH, OW]: taps inside the image
    fill: int  # what the padding holds


def _window(ctx: KernelContext, fill: int) -> PoolWindow:
    in_shape = static_shape(ctx, ctx.input(0), "input", 4)
    kh, kw = int(attr(ctx, "filter_h")), int(attr(ctx, "filter_w"))
    sh, sw = int(ctx.attr("stride_h", 1)), int(ctx.attr("stride_w", 1))
    t, l, b, r = (int(v) for v in attr(ctx, "tpu_pads"))
    n, h, w, c = in_shape
    oh, ow = (h + t + b - kh) // sh + 1, (w + l + r - kw) // sw + 1
    out = static_shape(ctx, ctx.outputs[0], "output", 4)
    if out != (n, oh, ow, c):
        raise ctx.error(f"output shape {list(out)} does not match the computed {[n, oh, ow, c]}")
    rows = np.clip(np.arange(oh) * sh - t + kh, 0, h) - np.clip(np.arange(oh) * sh - t, 0, h)
    cols = np.clip(np.arange(ow) * sw - l + kw, 0, w) - np.clip(np.arange(ow) * sw - l, 0, w)
    return PoolWindow(kh, kw, sh, sw, (t, l, b, r), out, np.outer(rows, cols).astype(np.int64), fill)


def _windows(p: PoolWindow, x: np.ndarray, dtype) -> np.ndarray:
    """``[N, OH, OW, C, KH, KW]`` views of ``x`` padded with ``p.fill``."""
    t, l, b, r = p.pads
    xp = x.astype(dtype)
    if any(p.pads):
        xp = np.pad(xp, ((0, 0), (t, b), (l, r), (0, 0)), constant_values=p.fill)
    v = sliding_window_view(xp, (p.kh, p.kw), axis=(1, 2))  # [N, H', W', C, KH, KW]
    return v[:, ::p.sh, ::p.sw][:, :p.out_shape[1], :p.out_shape[2]]


@dataclass(frozen=True, eq=False)
class TpuMlirMaxPoolParams:
    window: PoolWindow
    relu: bool
    relu_limit: int | None  # the ReLU's upper limit in output codes (int(tpu_relu_limit)), None: no limit
    out_dtype: np.dtype


def prepare_max(ctx: KernelContext) -> TpuMlirMaxPoolParams:
    in_qp, out_qp = activation(ctx, 0, "input"), activation(ctx, -1, "output")
    if ctx.input(0).dtype != ctx.outputs[0].dtype:
        raise ctx.error("max pooling keeps the input's type")
    lo = np.iinfo(ctx.input(0).dtype).min
    limit = float(ctx.attr("tpu_relu_limit", -1.0))  # prepare reads the float attribute; run sees an integer
    return TpuMlirMaxPoolParams(_window(ctx, lo), bool(ctx.attr("tpu_do_relu", False)),
                                int(limit) if limit > 0 else None, ctx.outputs[0].dtype)


def run_max(p: TpuMlirMaxPoolParams, x):
    y = _windows(p.window, x, x.dtype).max(axis=(4, 5))
    if p.relu:
        y = np.maximum(y, 0)
        if p.relu_limit is not None:
            y = np.minimum(y, p.relu_limit)
    return (y.astype(p.out_dtype, copy=False),)


@dataclass(frozen=True, eq=False)
class TpuMlirAvgPoolParams:
    """Symmetric models, every window divided by ``KH KW`` (``count_include_pad``, or no padding):
    oneDNN's float mean times ``KH KW`` rounds back to the window sum exactly (below), so the
    integer path is ``RightShiftRound(sum * multiplier, rshift, HALF_UP)``, saturated."""

    window: PoolWindow
    multiplier: int
    rshift: int
    qmin: int
    qmax: int
    out_dtype: np.dtype
    relu: bool  # oneDNN's ReLU post-op on the mean: the sum clamped at 0 before the rescale


@dataclass(frozen=True, eq=False)
class TpuMlirFloatAvgPoolParams:
    """The float steps as TPU-MLIR computes them (module docstring): asymmetric models (``scale``,
    ``offset``), or symmetric ones whose padded windows divide by fewer taps than ``KH KW``
    (``multiplier`` set) — there ``round(sum KH KW / count)`` can be an exact tie that only the
    float32 arithmetic decides."""

    window: PoolWindow
    multiplier: int | None  # symmetric: multiplier/rshift after the rounded float sum
    rshift: int | None
    scale: float | None  # asymmetric: double(float sum) * scale + offset
    offset: float
    rounding: Rounding
    qmin: int
    qmax: int
    out_dtype: np.dtype
    relu: bool


#: The window sum ``s <= 255 KH KW`` survives the float round trip ``float32(float32(float32(s) /
#: float32(K)) * KH) * KW`` (three roundings, each within 2^-24 relative) as long as
#: ``3 * 2^-24 * s < 1/2``: windows up to this many taps.
EXACT_TAPS = (1 << 24) // (6 * 255)


@dataclass(frozen=True, eq=False)
class TpuMlirFloat32AvgPoolParams:
    """An average pooling TPU-MLIR left in float32 (module docstring)."""

    window: PoolWindow  # counts: the divisor per output position
    relu: bool


def prepare_avg(ctx: KernelContext):
    if ctx.input(0).dtype == np.float32:
        if ctx.outputs[0].dtype != np.float32:
            raise ctx.error(f"a float32 average pooling gives float32, got {ctx.outputs[0].dtype.name}")
        if float(ctx.attr("tpu_relu_limit", -1.0)) > 0:
            raise ctx.error("average pooling with a ReLU limit is not emulated")
        return TpuMlirFloat32AvgPoolParams(_counted(ctx, _window(ctx, 0)), bool(ctx.attr("tpu_do_relu", False)))
    in_qp, out_qp = activation(ctx, 0, "input"), activation(ctx, -1, "output")
    dtype = ctx.outputs[0].dtype
    relu = bool(ctx.attr("tpu_do_relu", False))
    if relu and float(ctx.attr("tpu_relu_limit", -1.0)) > 0:
        raise ctx.error("average pooling with a ReLU limit is not emulated")
    if "tpu_scale" in ctx.node.attrs:
        zx = in_qp.tensor_zero_point
        w = _counted(ctx, _window(ctx, zx))
        if zx != 0:  # padded with Z_x beforehand: every tap counts, count_include_pad or not (measured)
            w = PoolWindow(w.kh, w.kw, w.sh, w.sw, w.pads, w.out_shape, np.full_like(w.counts, w.kh * w.kw), w.fill)
        return TpuMlirFloatAvgPoolParams(w, None, None, float(ctx.attr("tpu_scale")), float(ctx.attr("tpu_offset", 0.0)),
                                         rounding(ctx), out_qp.qmin, out_qp.qmax, dtype, relu)
    if "tpu_multiplier" not in ctx.node.attrs and "tpu_rshift" not in ctx.node.attrs:
        raise ctx.error("a symmetric int8 average pooling needs its multiplier/rshift (tpu_multiplier, tpu_rshift)")
    m, s = int(ctx.attr("tpu_multiplier", 1)), int(ctx.attr("tpu_rshift", 0))
    w = _counted(ctx, _window(ctx, 0))
    if np.all(w.counts == w.kh * w.kw) and w.kh * w.kw <= EXACT_TAPS:
        return TpuMlirAvgPoolParams(w, m, s, out_qp.qmin, out_qp.qmax, dtype, relu)
    return TpuMlirFloatAvgPoolParams(w, m, s, None, 0.0, Rounding.HALF_AWAY_FROM_ZERO, out_qp.qmin, out_qp.qmax, dtype,
                                     relu)


def _counted(ctx: KernelContext, w: PoolWindow) -> PoolWindow:
    """The divisor per output position: ``KH KW`` with ``count_include_pad``, else the in-image taps."""
    if ctx.attr("tpu_count_include_pad", False):
        return PoolWindow(w.kh, w.kw, w.sh, w.sw, w.pads, w.out_shape, np.full_like(w.counts, w.kh * w.kw), w.fill)
    return w


def run_avg(p: TpuMlirAvgPoolParams, x):
    sums = _windows(p.window, x, np.int64).sum(axis=(4, 5))  # exact; = TPU-MLIR's float round trip
    if p.relu:
        sums = np.maximum(sums, 0)
    y = raw.multiply_rshift(sums, p.multiplier, p.rshift, AVG_ROUNDING)
    return (np.clip(y, p.qmin, p.qmax).astype(p.out_dtype),)


def run_avg_float(p: TpuMlirFloatAvgPoolParams, x):
    """TPU-MLIR's float steps (a float emulation: TPU-MLIR computes these in float itself)."""
    w = p.window
    sums = _windows(w, x, np.int64).sum(axis=(4, 5))
    mean = sums.astype(np.float32) / w.counts[None, :, :, None].astype(np.float32)  # oneDNN's mean
    if p.relu:  # the mean clamped at real 0: the input's zero point (0 in symmetric models; measured)
        mean = np.maximum(mean, np.float32(w.fill))
    back = (mean * np.float32(w.kh)) * np.float32(w.kw)  # float * int64 -> float, twice
    if p.scale is not None:
        r = (back.astype(np.float64) * p.scale + p.offset).astype(np.float32)
        return (np.clip(round_float(r, p.rounding), p.qmin, p.qmax).astype(p.out_dtype),)
    v = round_float(back, Rounding.HALF_AWAY_FROM_ZERO).astype(np.int64)
    y = raw.multiply_rshift(v, p.multiplier, p.rshift, AVG_ROUNDING)
    return (np.clip(y, p.qmin, p.qmax).astype(p.out_dtype),)


def run_avg_float32(p: TpuMlirFloat32AvgPoolParams, x):
    """oneDNN's float32 average pooling (TPU-MLIR computes this op in float32 itself)."""
    w = p.window
    taps = _windows(w, x, np.float32)  # [N, OH, OW, C, KH, KW], padding 0
    acc = np.zeros(taps.shape[:4], np.float32)
    for i in range(w.kh):
        for j in range(w.kw):
            acc += taps[..., i, j]  # float32, tap by tap
    mean = acc / w.counts[None, :, :, None].astype(np.float32)
    if p.relu:
        mean = np.maximum(mean, np.float32(0))
    return (mean.astype(np.float32),)


variant("MAX_POOL_2D", family=FAMILY, run=run_max)(prepare_max)
variant("AVERAGE_POOL_2D", family=FAMILY,
        run={TpuMlirAvgPoolParams: run_avg, TpuMlirFloatAvgPoolParams: run_avg_float,
             TpuMlirFloat32AvgPoolParams: run_avg_float32})(prepare_avg)
