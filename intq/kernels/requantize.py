"""Prepared requantization: int32 accumulators -> output integers, fused with zero point and clamp.

:func:`make_requantizer` (prepare time, floats allowed) derives everything from the real
multiplier ``M = s_in * s_w / s_out`` per output channel; :func:`requantize` (run time) applies
it to an accumulator array whose last axis is the channel axis (NHWC), in one vectorised pass
per step:

* ``Requant.DOUBLE`` (gemmlowp, TFLM): ``h = (x * 2^l * m + 2^30) >> 31`` (SRDHM: its nudge and
  truncation equal this floor form), then ``(h + 2^(r-1) - [h < 0 and r > 0]) >> r``
  (RoundingDivideByPOT, half away from zero), with ``l = max(shift, 0)``, ``r = max(-shift, 0)``;
* ``Requant.SINGLE``: ``(x * m + 2^(30 - shift)) >> (31 - shift)``;
* ``Requant.DOUBLE_HALF_UP`` (LiteRT's optimized kernels: NEON ``vqrdmulh`` then ``vrshl``, via
  NEON_2_SSE on x86): ``h`` as for ``DOUBLE``, then ``(h + 2^(r-1)) >> r`` — the second rounding
  half up instead of half away from zero;
* ``Requant.DOUBLE_PRODUCT`` (LiteRT 2.3's reference FULLY_CONNECTED): ``round_half_away(double(x)
  * M)``, a float step used by the ``litert-ref`` target alone;
* ``Requant.FLOAT32_RNE`` (XNNPACK's fp32 requantization): ``rint(float32(x) * S)`` with the
  float32 scale ``S`` XNNPACK computes (the caller passes it), half to even; used by the
  ``xnnpack`` target alone.

Each is checked bit for bit against :mod:`intq.qmath`'s primitives (tests/kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from intq.errors import IntqError
from intq.kernels.targets import Requant
from intq.qmath import QuantParams, Rounding, quantize_multiplier, round_float

#: TFLite's fused activation functions as real bounds (None: unbounded above). The float
#: interpreter clamps with them too, so float and integer graphs share one definition.
ACTIVATION_BOUNDS: dict[str, tuple[float, float | None]] = {
    "RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def activation_range(fused_activation: str, qp: QuantParams) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized: the clamp a fused activation becomes.

    The bounds 0, 6, ±1 are quantized with the output's parameters (``Z + round(b / s)``, float32
    division, half away from zero, as TFLite) and intersected with the dtype range. As TFLite
    (kernel_util.cc, ``no_integer_overflow_from_quantization``), a bound whose ``round(b / s)``
    does not fit int32 is refused.
    """
    lo, hi = qp.qmin, qp.qmax
    if fused_activation in (None, "NONE"):
        return lo, hi
    if fused_activation not in ACTIVATION_BOUNDS:
        raise IntqError(f"unsupported fused activation {fused_activation!r}; intq fuses RELU, RELU6, RELU_N1_TO_1")
    scale = np.float32(qp.scale[0])
    zp = int(qp.zero_point[0])

    def as_int(bound: float) -> int:
        steps = round_float(np.float32(bound) / scale, Rounding.HALF_AWAY_FROM_ZERO)
        if not -(2.0**31) <= steps <= 2.0**31 - 1:
            raise IntqError(f"{fused_activation}: the bound {bound} is {float(steps):.3g} steps of the scale "
                            f"{float(scale):.3g}, beyond int32 (TFLite refuses it); use a larger scale")
        return zp + int(steps)

    a, b = ACTIVATION_BOUNDS[fused_activation]
    lo = max(lo, as_int(a))
    if b is not None:
        hi = min(hi, as_int(b))
    return lo, hi


#: XNNPACK's output range of each fused activation (the TFLite delegate's
#: ConvertActivationToOutputRange), in real units.
XNNPACK_ACTIVATION_BOUNDS: dict[str, tuple[float, float]] = {
    "NONE": (-np.inf, np.inf), "RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


def xnnpack_quantize(value: float, scale, zero_point: int) -> int:
    """XNNPACK's ``xnn_qs8_quantize``: ``lrintf(fminf(fmaxf(v / s + (float) Z, -128), 127))`` —
    float32 division and addition, clamped, rounded half to even."""
    with np.errstate(over="ignore"):
        v = np.float32(np.float32(value) / np.float32(scale)) + np.float32(zero_point)
    return int(np.rint(np.clip(v, np.float32(-128), np.float32(127))))


def xnnpack_activation_range(fused_activation: str, qp: QuantParams) -> tuple[int, int]:
    """The int8 clamp XNNPACK derives from a fused activation: both real bounds through
    :func:`xnnpack_quantize` (ties to even, where TFLite's :func:`activation_range` rounds half
    away from zero; they differ when ``6 / s`` or ``1 / s`` is exactly ``k + 1/2``)."""
    key = fused_activation or "NONE"
    if key not in XNNPACK_ACTIVATION_BOUNDS:
        raise IntqError(f"unsupported fused activation {fused_activation!r}; intq fuses RELU, RELU6, RELU_N1_TO_1")
    a, b = XNNPACK_ACTIVATION_BOUNDS[key]
    zp = int(qp.zero_point[0])
    return xnnpack_quantize(a, qp.scale[0], zp), xnnpack_quantize(b, qp.scale[0], zp)


def xnnpack_conv_scale(s_in, s_w, s_out) -> np.ndarray:
    """XNNPACK's requantization scale of a conv / fully connected layer:
    ``input_scale * kernel_scale / output_scale`` evaluated in float32 (per output channel)."""
    product = np.float32(s_in) * np.asarray(s_w, dtype=np.float32)
    return (product / np.float32(s_out)).astype(np.float32)


@dataclass(frozen=True, eq=False)
class Requantizer:
    """Integers (and, for ``DOUBLE_PRODUCT`` only, the double multiplier) prepared once.

    ``multiplier``/``shift`` are TFLite's Q0.31 pair per channel (``shift`` positive = left);
    ``left``/``right``/``round_nudge``/``right_pos`` are derived from them for the double-rounding pass.
    """

    mode: Requant
    multiplier: np.ndarray  # int64 [C] (or [1])
    shift: np.ndarray  # int64
    zero_point: int
    act_min: int
    act_max: int
    out_dtype: np.dtype
    left: np.ndarray
    right: np.ndarray
    round_nudge: np.ndarray  # 2^(right-1), 0 when right == 0
    right_pos: np.ndarray  # 1 where right > 0
    single_round: np.ndarray  # 2^(30 - shift), for SINGLE
    single_shift: np.ndarray  # 31 - shift
    real: np.ndarray | None  # float64 M, for DOUBLE_PRODUCT only
    any_left: bool
    scale32: np.ndarray | None = None  # float32 S per channel, for FLOAT32_RNE only


def make_requantizer(real_multiplier, mode: Requant, zero_point: int, act_min: int, act_max: int,
                     out_dtype=np.int8) -> Requantizer:
    """Prepare the requantization of ``acc * M + zero_point`` clamped to [act_min, act_max].

    ``real_multiplier``: M per output channel (or a scalar), from
    :func:`intq.qmath.effective_scale`; for ``FLOAT32_RNE`` the float32 scale exactly as the
    emulated runtime computes it. Raises for a multiplier intq cannot represent.
    """
    real = np.atleast_1d(np.asarray(real_multiplier, dtype=np.float64))
    if not np.all(np.isfinite(real)) or np.any(real < 0):
        raise IntqError(f"requantization multipliers must be finite and non-negative, got {real.tolist()}")
    if mode is Requant.FLOAT32_RNE:
        scale32 = real.astype(np.float32)
        if not np.array_equal(scale32.astype(np.float64), real):
            raise IntqError("FLOAT32_RNE requantization needs float32 scales (compute them as the runtime does)")
        info = np.iinfo(out_dtype)
        if not (info.min <= act_min <= act_max <= info.max):
            raise IntqError(f"activation range [{act_min}, {act_max}] does not fit {np.dtype(out_dtype).name}")
        zeros = np.zeros(real.shape, np.int64)
        return Requantizer(mode=mode, multiplier=zeros, shift=zeros, zero_point=int(zero_point), act_min=int(act_min),
                           act_max=int(act_max), out_dtype=np.dtype(out_dtype), left=zeros, right=zeros,
                           round_nudge=zeros, right_pos=zeros, single_round=zeros, single_shift=zeros, real=None,
                           any_left=False, scale32=scale32)
    qm = quantize_multiplier(real, for_single_rounding=(mode is Requant.SINGLE))
    m = np.atleast_1d(np.asarray(qm.multiplier, dtype=np.int64))
    s = np.atleast_1d(np.asarray(qm.shift, dtype=np.int64))
    if np.any(s > 30):
        raise IntqError(f"requantization multiplier {real.max():.6g} is too large (>= 2^30) for TFLite's fixed point")
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    info = np.iinfo(out_dtype)
    if not (info.min <= act_min <= act_max <= info.max):
        raise IntqError(f"activation range [{act_min}, {act_max}] does not fit {np.dtype(out_dtype).name}")
    return Requantizer(
        mode=mode, multiplier=m, shift=s, zero_point=int(zero_point), act_min=int(act_min), act_max=int(act_max),
        out_dtype=np.dtype(out_dtype), left=left, right=right, round_nudge=(np.int64(1) << right) >> 1,
        right_pos=(right > 0).astype(np.int64), single_round=np.int64(1) << np.clip(30 - s, 0, 62),
        single_shift=31 - s, real=real if mode is Requant.DOUBLE_PRODUCT else None, any_left=bool(np.any(left > 0)),
    )


def requantize(r: Requantizer, acc: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """``clamp(R(acc + offset) + zero_point, act_min, act_max)`` as ``r.out_dtype``; channels on the
    last axis; ``offset`` (int64 per channel, optional) is a folded bias.

    Contract: ``acc + offset`` holds int32 values. Integer-only except in ``DOUBLE_PRODUCT`` and
    ``FLOAT32_RNE`` modes, which emulate runtimes that multiply in double / float32. The integer
    modes run as one fused pass (:func:`_fused_double`, :func:`_fused_single`, compiled with
    numba); :func:`requantize_reference` is the same arithmetic as whole-array numpy steps, and
    the tests require both to be equal.
    """
    if r.mode is Requant.DOUBLE_PRODUCT:
        x = acc.astype(np.int64) if offset is None else acc.astype(np.int64) + offset
        y = _double_product(x, r.real) + r.zero_point
        return np.clip(y, r.act_min, r.act_max).astype(r.out_dtype)
    if r.mode is Requant.FLOAT32_RNE:
        x = acc.astype(np.int64) if offset is None else acc.astype(np.int64) + offset
        y = _float32_rne(x, r.scale32) + r.zero_point
        return np.clip(y, r.act_min, r.act_max).astype(r.out_dtype)
    per_channel = r.multiplier.size > 1
    cols = acc.shape[-1] if per_channel or (offset is not None and np.size(offset) > 1) else 1
    flat = acc.reshape(-1, cols)
    out = np.empty(flat.shape, r.out_dtype)
    off = np.zeros(cols, np.int64) if offset is None else np.ascontiguousarray(np.broadcast_to(offset, (cols,)), np.int64)
    m, left, right, nudge = (np.ascontiguousarray(np.broadcast_to(v, (cols,))) for v in (r.multiplier, r.left, r.right, r.round_nudge))
    if r.mode is Requant.DOUBLE or r.mode is Requant.DOUBLE_HALF_UP:
        away = 1 if r.mode is Requant.DOUBLE else 0
        overflow = _fused_double(flat, off, m, left, right, nudge, r.zero_point, r.act_min, r.act_max, out, away)
        if overflow:
            raise IntqError("requantization: accumulator << shift overflows int32 (multiplier >= 1 on a large sum)")
    else:
        rnd, sh = (np.ascontiguousarray(np.broadcast_to(v, (cols,))) for v in (r.single_round, r.single_shift))
        _fused_single(flat, off, m, rnd, sh, r.zero_point, r.act_min, r.act_max, out)
    return out.reshape(acc.shape)


@njit(cache=True, nogil=True)
def _fused_double(acc, offset, mult, left, right, nudge, zp, lo, hi, out, away):
    """Double rounding, one element at a time: ``x = (acc + offset) << left``;
    ``h = (x * m + 2^30) >> 31`` (SRDHM); ``y = (h + nudge - [away and h < 0 and right > 0]) >> right``
    (``away`` = 1: RoundingDivideByPOT, ties away from zero; 0: a rounding shift, ties up);
    ``clamp(y + zp, lo, hi)``. Returns True if ``x`` left int32."""
    rows, cols = acc.shape
    overflow = False
    for i in range(rows):
        for c in range(cols):
            x = np.int64(acc[i, c]) + offset[c]
            if left[c] > 0:
                x = x << left[c]
                if x > 2147483647 or x < -2147483648:
                    overflow = True
            h = (x * mult[c] + 1073741824) >> 31
            if away and h < 0 and right[c] > 0:
                h -= 1
            y = ((h + nudge[c]) >> right[c]) + zp
            out[i, c] = lo if y < lo else (hi if y > hi else y)
    return overflow


@njit(cache=True, nogil=True)
def _fused_single(acc, offset, mult, rnd, shift, zp, lo, hi, out):
    """Single rounding: ``clamp(((acc + offset) * m + 2^(30 - s)) >> (31 - s) + zp, lo, hi)``."""
    rows, cols = acc.shape
    for i in range(rows):
        for c in range(cols):
            x = np.int64(acc[i, c]) + offset[c]
            y = ((x * mult[c] + rnd[c]) >> shift[c]) + zp
            out[i, c] = lo if y < lo else (hi if y > hi else y)


def requantize_reference(r: Requantizer, acc: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """:func:`requantize` as whole-array numpy steps (the formulation the module docstring gives)."""
    x = acc.astype(np.int64) if offset is None else acc.astype(np.int64) + offset
    if r.mode in (Requant.DOUBLE, Requant.DOUBLE_HALF_UP):
        if r.any_left:
            x = x << r.left
            if int(x.max(initial=0)) > 2**31 - 1 or int(x.min(initial=0)) < -(2**31):
                raise IntqError("requantization: accumulator << shift overflows int32 (multiplier >= 1 on a large sum)")
        h = (x * r.multiplier + (1 << 30)) >> 31
        away = (h < 0) * r.right_pos if r.mode is Requant.DOUBLE else 0
        y = (h + r.round_nudge - away) >> r.right
    elif r.mode is Requant.SINGLE:
        y = (x * r.multiplier + r.single_round) >> r.single_shift
    elif r.mode is Requant.FLOAT32_RNE:
        y = _float32_rne(x, r.scale32)
    else:
        y = _double_product(x, r.real)
    y += r.zero_point
    np.clip(y, r.act_min, r.act_max, out=y)
    return y.astype(r.out_dtype)


def _double_product(x: np.ndarray, real: np.ndarray) -> np.ndarray:
    """``std::round(double(acc) * M)`` — LiteRT 2.3's reference FULLY_CONNECTED (a float emulation)."""
    prod = round_float(x.astype(np.float64) * real, Rounding.HALF_AWAY_FROM_ZERO)
    return np.clip(prod, -(2.0**62), 2.0**62).astype(np.int64)  # clamped later; avoids an undefined cast


def _float32_rne(x: np.ndarray, scale32: np.ndarray) -> np.ndarray:
    """``rint(float32(acc) * S)`` in float32, ties to even — XNNPACK's fp32 requantization
    (``cvtepi32_ps``, ``mul_ps``, ``cvtps_epi32``; a float emulation, ``xnnpack`` target only).
    The clamp to the output range, which XNNPACK applies in float before rounding, commutes with
    the rounding because the bounds are integers; the caller clamps after adding the zero point."""
    prod = x.astype(np.float32) * scale32  # int32 -> float32 rounds to nearest even above 2^24
    return np.clip(np.rint(prod), -(2.0**40), 2.0**40).astype(np.int64)  # clamped later
