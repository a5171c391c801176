"""Prepared requantization: int32 accumulators -> output integers, fused with zero point and clamp.

:func:`make_requantizer` (prepare time, floats allowed) derives everything from the real
multiplier ``M = s_in * s_w / s_out`` per output channel and returns the :class:`Requantizer` of
the contract the target names — one subclass per contract, holding only what it needs;
:func:`requantize` (run time) applies it to an accumulator array whose last axis is the channel
axis (NHWC):

* :class:`DoubleRounding` — ``Requant.DOUBLE`` (gemmlowp, TFLM): :func:`intq.qmath.raw.mbqm`,
  SRDHM then RoundingDivideByPOT (half away from zero);
* :class:`SingleRounding` — ``Requant.SINGLE``: ``(x * m + 2^(30 - shift)) >> (31 - shift)``;
* :class:`DoubleRoundingHalfUp` — ``Requant.DOUBLE_HALF_UP`` (LiteRT's optimized kernels: NEON
  ``vqrdmulh`` then ``vrshl``, via NEON_2_SSE on x86): the second rounding half up;
* :class:`DoubleProduct` — ``Requant.DOUBLE_PRODUCT`` (LiteRT 2.3's reference FULLY_CONNECTED):
  ``round_half_away(double(x) * M)``, a float step used by the ``litert-ref`` target alone;
* :class:`MultiplierRShift` — ``Requant.MULTIPLIER_RSHIFT`` (TPU-MLIR, BM168x): the model's own
  integer multiplier and right shift per channel, ``RightShiftRound(x * m, rshift, mode)``;
* :class:`Float32Rne` — ``Requant.FLOAT32_RNE`` (XNNPACK's fp32 requantization): ``rint(float32(x) * S)``
  with the float32 scale ``S`` XNNPACK computes (the caller passes it), half to even.

The fixed-point contracts run as one fused compiled pass (:mod:`intq.qmath.compiled`) and have a
whole-array form (:func:`requantize_reference`, on :mod:`intq.qmath.raw`); tests/kernels require
both to equal :mod:`intq.qmath`'s checked primitives bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from intq.errors import IntqError
from intq.kernels.targets import Requant
from intq.qmath import QuantParams, Rounding, compiled, quantize_multiplier, raw, round_float

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
    scale = np.float32(qp.tensor_scale)
    zp = qp.tensor_zero_point

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


def float32_rne_scale(s_in, s_w, s_out) -> np.ndarray:
    """The ``Requant.FLOAT32_RNE`` contract's scale of a conv / fully connected layer (XNNPACK's and
    MLAS's): ``input_scale * kernel_scale / output_scale`` evaluated in float32 (per output channel)."""
    product = np.float32(s_in) * np.asarray(s_w, dtype=np.float32)
    return (product / np.float32(s_out)).astype(np.float32)


@dataclass(frozen=True, eq=False)
class Requantizer:
    """The output side every requantization contract shares: ``clamp(R(acc) + zero_point, act_min,
    act_max)`` as ``out_dtype``. Each contract (:class:`~intq.kernels.targets.Requant`) is a subclass
    holding only its own prepared values and implementing ``R``; :func:`make_requantizer` picks it.
    A new contract adds a subclass registered with :func:`_contract`; it edits none of these."""

    zero_point: int
    act_min: int
    act_max: int
    out_dtype: np.dtype

    mode: ClassVar[Requant]

    def apply(self, acc: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
        """``clamp(R(acc + offset) + zero_point, act_min, act_max)``; channels on the last axis."""
        return self._finish(self.rescaled(_with_offset(acc, offset)))

    def reference(self, acc: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
        """:meth:`apply` as whole-array numpy steps (the tests require both to be equal)."""
        return self.apply(acc, offset)

    def rescaled(self, x: np.ndarray) -> np.ndarray:
        """``R(x)`` on int64 values (channels on the last axis), before the zero point and the clamp."""
        raise NotImplementedError

    @property
    def channels(self) -> int:
        """How many output channels the prepared values cover (1: per tensor)."""
        raise NotImplementedError

    def _finish(self, y: np.ndarray) -> np.ndarray:
        y = y + self.zero_point
        np.clip(y, self.act_min, self.act_max, out=y)
        return y.astype(self.out_dtype)


def _rows(r: "FixedPointRequantizer", acc: np.ndarray, offset: np.ndarray | None, per_channel: tuple):
    """What a fused pass takes: ``acc`` as rows x channels (one column when every prepared value is
    per tensor), the offset and ``per_channel`` values as contiguous int64 columns, and the output."""
    cols = acc.shape[-1] if r.multiplier.size > 1 or (offset is not None and np.size(offset) > 1) else 1
    flat = acc.reshape(-1, cols)
    if offset is None:
        off = np.zeros(cols, np.int64)
    elif type(offset) is np.ndarray and offset.dtype == np.int64 and offset.shape == (cols,) and offset.flags.c_contiguous:
        off = offset  # a kernel's prepared per-channel offset, as it is
    else:
        off = np.ascontiguousarray(np.broadcast_to(offset, (cols,)), np.int64)
    # the prepared values as contiguous columns, built once per width (a requantizer serves one node)
    cache = r.__dict__.get("_columns")
    if cache is None or cache[0] != cols or cache[1] is not per_channel[0]:
        cache = (cols, per_channel[0], tuple(np.ascontiguousarray(np.broadcast_to(v, (cols,))) for v in per_channel))
        object.__setattr__(r, "_columns", cache)
    return flat, off, np.empty(flat.shape, r.out_dtype), cache[2]


def _with_offset(acc: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    return acc.astype(np.int64) if offset is None else acc.astype(np.int64) + offset


_CONTRACTS: dict[Requant, type[Requantizer]] = {}


def _contract(cls):
    """Register a :class:`Requantizer` subclass as the implementation of ``cls.mode``."""
    assert cls.mode not in _CONTRACTS, cls.mode
    _CONTRACTS[cls.mode] = cls
    return cls


@dataclass(frozen=True, eq=False)
class FixedPointRequantizer(Requantizer):
    """A contract on TFLite's Q0.31 pair: ``M = multiplier * 2^(shift - 31)`` per channel
    (``shift`` positive = left), from :func:`intq.qmath.quantize_multiplier`."""

    multiplier: np.ndarray  # int64 [C] (or [1])
    shift: np.ndarray  # int64, in [-31, 30]

    for_single_rounding: ClassVar[bool] = False

    @classmethod
    def prepare(cls, real: np.ndarray, **output) -> "FixedPointRequantizer":
        qm = quantize_multiplier(real, for_single_rounding=cls.for_single_rounding)
        m = np.atleast_1d(np.asarray(qm.multiplier, dtype=np.int64))
        s = np.atleast_1d(np.asarray(qm.shift, dtype=np.int64))
        if np.any(s > 30):
            raise IntqError(f"requantization multiplier {real.max():.6g} is too large (>= 2^30) for TFLite's fixed point")
        return cls(multiplier=m, shift=s, **output)

    @property
    def channels(self) -> int:
        return self.multiplier.size


@_contract
@dataclass(frozen=True, eq=False)
class DoubleRounding(FixedPointRequantizer):
    """``Requant.DOUBLE`` (gemmlowp, TFLM, the reference kernels): :func:`intq.qmath.raw.mbqm`,
    SRDHM then RoundingDivideByPOT (half away from zero). ``left``/``right``/``round_nudge``/
    ``right_pos`` are derived from ``shift`` once, for the fused loop."""

    left: np.ndarray = field(init=False)  # max(shift, 0)
    right: np.ndarray = field(init=False)  # max(-shift, 0)
    round_nudge: np.ndarray = field(init=False)  # 2^(right-1), 0 when right == 0
    right_pos: np.ndarray = field(init=False)  # 1 where right > 0
    any_left: bool = field(init=False)

    mode: ClassVar[Requant] = Requant.DOUBLE
    away: ClassVar[int] = 1  # the second rounding's ties go away from zero

    def __post_init__(self):
        right = np.maximum(-self.shift, 0)
        object.__setattr__(self, "left", np.maximum(self.shift, 0))
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "round_nudge", (np.int64(1) << right) >> 1)
        object.__setattr__(self, "right_pos", (right > 0).astype(np.int64))
        object.__setattr__(self, "any_left", bool(np.any(self.shift > 0)))

    def apply(self, acc, offset=None):
        """One fused compiled pass (:func:`intq.qmath.compiled.requantize_rows_double`)."""
        flat, off, out, (m, left, right) = _rows(self, acc, offset, (self.multiplier, self.left, self.right))
        if not self.any_left:  # no left shift, nothing can overflow: the branch-free loop
            compiled.requantize_rows_double_right(flat, off, m, right, self.zero_point, self.act_min, self.act_max,
                                                  out, self.away)
            return out.reshape(acc.shape)
        if compiled.requantize_rows_double(flat, off, m, left, right, self.zero_point, self.act_min, self.act_max,
                                           out, self.away):
            raise IntqError("requantization: accumulator << shift overflows int32 (multiplier >= 1 on a large sum)")
        return out.reshape(acc.shape)

    def reference(self, acc, offset=None):
        x = _with_offset(acc, offset)
        if self.any_left:
            shifted = x << self.left
            if int(shifted.max(initial=0)) > 2**31 - 1 or int(shifted.min(initial=0)) < -(2**31):
                raise IntqError("requantization: accumulator << shift overflows int32 (multiplier >= 1 on a large sum)")
        return self._finish(self.rescaled(x))

    def rescaled(self, x):
        return raw.mbqm(x, self.multiplier, self.shift)


@_contract
@dataclass(frozen=True, eq=False)
class DoubleRoundingHalfUp(DoubleRounding):
    """``Requant.DOUBLE_HALF_UP`` (LiteRT's optimized kernels: NEON ``vqrdmulh`` then ``vrshl``):
    :func:`intq.qmath.raw.mbqm_half_up`, the second rounding half up."""

    mode: ClassVar[Requant] = Requant.DOUBLE_HALF_UP
    away: ClassVar[int] = 0

    def rescaled(self, x):
        return raw.mbqm_half_up(x, self.multiplier, self.shift)


@_contract
@dataclass(frozen=True, eq=False)
class SingleRounding(FixedPointRequantizer):
    """``Requant.SINGLE`` (TFLITE_SINGLE_ROUNDING, CMSIS-NN, ruy): :func:`intq.qmath.raw.mbqm_single`,
    ``(x * m + 2^(30 - shift)) >> (31 - shift)``."""

    mode: ClassVar[Requant] = Requant.SINGLE
    for_single_rounding: ClassVar[bool] = True

    def apply(self, acc, offset=None):
        """One fused compiled pass (:func:`intq.qmath.compiled.requantize_rows_single`)."""
        flat, off, out, (m, s) = _rows(self, acc, offset, (self.multiplier, self.shift))
        compiled.requantize_rows_single(flat, off, m, s, self.zero_point, self.act_min, self.act_max, out)
        return out.reshape(acc.shape)

    def reference(self, acc, offset=None):
        return self._finish(self.rescaled(_with_offset(acc, offset)))

    def rescaled(self, x):
        return raw.mbqm_single(x, self.multiplier, self.shift)


@_contract
@dataclass(frozen=True, eq=False)
class DoubleProduct(Requantizer):
    """``Requant.DOUBLE_PRODUCT`` (LiteRT 2.3's reference FULLY_CONNECTED): ``std::round(double(acc) * M)``,
    half away from zero — a float emulation, used by the ``litert-ref`` target alone."""

    real: np.ndarray  # float64 M per channel

    mode: ClassVar[Requant] = Requant.DOUBLE_PRODUCT

    @classmethod
    def prepare(cls, real: np.ndarray, **output) -> "DoubleProduct":
        return cls(real=real, **output)

    @property
    def channels(self) -> int:
        return self.real.size

    def rescaled(self, x):
        prod = round_float(x.astype(np.float64) * self.real, Rounding.HALF_AWAY_FROM_ZERO)
        return np.clip(prod, -(2.0**62), 2.0**62).astype(np.int64)  # clamped later; avoids an undefined cast


@_contract
@dataclass(frozen=True, eq=False)
class Float32Rne(Requantizer):
    """``Requant.FLOAT32_RNE`` (XNNPACK's fp32 requantization): ``rint(float32(acc) * S)`` in float32,
    ties to even (``cvtepi32_ps``, ``mul_ps``, ``cvtps_epi32``; a float emulation, ``xnnpack``
    target only). The clamp to the output range, which XNNPACK applies in float before rounding,
    commutes with the rounding because the bounds are integers."""

    scale32: np.ndarray  # float32 S per channel, exactly as XNNPACK computes it

    mode: ClassVar[Requant] = Requant.FLOAT32_RNE

    @classmethod
    def prepare(cls, real: np.ndarray, **output) -> "Float32Rne":
        scale32 = real.astype(np.float32)
        if not np.array_equal(scale32.astype(np.float64), real):
            raise IntqError("FLOAT32_RNE requantization needs float32 scales (compute them as the runtime does)")
        return cls(scale32=scale32, **output)

    @property
    def channels(self) -> int:
        return self.scale32.size

    def rescaled(self, x):
        prod = x.astype(np.float32) * self.scale32  # int32 -> float32 rounds to nearest even above 2^24
        return np.clip(np.rint(prod), -(2.0**40), 2.0**40).astype(np.int64)  # clamped later


@_contract
@dataclass(frozen=True, eq=False)
class MultiplierRShift(Requantizer):
    """``Requant.MULTIPLIER_RSHIFT`` (TPU-MLIR, BM168x chips): ``RightShiftRound(acc * multiplier,
    rshift, rounding)`` (:func:`intq.qmath.raw.multiply_rshift`) with the integer ``multiplier`` and
    ``rshift`` per output channel that the TPU-MLIR model states (``tpu.Conv2D``'s ``multiplier`` /
    ``rshift``, ``tpu.MatMul``'s ``multipliers`` / ``rshifts``). One rounding, on the exact int64
    product; TPU-MLIR's int8 convolutions round ``HALF_UP``, its matrix products as their
    ``round_mode`` says. Built with :meth:`from_model`: TPU-MLIR picks the pairs when it lowers the
    model, and intq takes them as they are (:meth:`prepare` derives pairs from real multipliers)."""

    multiplier: np.ndarray  # int64 [C] (or [1])
    rshift: np.ndarray  # int64 [C] (or [1]); positive = right shift (TPU-MLIR's convention)
    rounding: Rounding = Rounding.HALF_UP

    mode: ClassVar[Requant] = Requant.MULTIPLIER_RSHIFT

    @classmethod
    def prepare(cls, real: np.ndarray, **output) -> "MultiplierRShift":
        """From real multipliers (a graph that does not state its pairs): TFLite's Q0.31 mantissa as
        the multiplier and ``rshift = 31 - shift``, rounded HALF_UP — one rounding of the exact
        product, the single-rounding contract in TPU-MLIR's form. TPU-MLIR's own models state their
        pairs (:meth:`from_model`)."""
        qm = quantize_multiplier(real, for_single_rounding=True)
        m = np.atleast_1d(np.asarray(qm.multiplier, dtype=np.int64))
        s = 31 - np.atleast_1d(np.asarray(qm.shift, dtype=np.int64))
        return cls(multiplier=m, rshift=s, rounding=Rounding.HALF_UP, **output)

    @classmethod
    def from_model(cls, multiplier, rshift, rounding: Rounding | str, zero_point: int, act_min: int, act_max: int,
                   out_dtype) -> "MultiplierRShift":
        """The requantizer of a TPU-MLIR op: its ``multiplier``/``rshift`` lists (one entry, or one per
        output channel), its rounding mode, the output's zero point and clamp."""
        m = np.atleast_1d(np.asarray(multiplier, dtype=np.int64))
        s = np.atleast_1d(np.asarray(rshift, dtype=np.int64))
        if m.size != s.size and 1 not in (m.size, s.size):
            raise IntqError(f"{m.size} multipliers and {s.size} rshifts do not pair up")
        if np.any(np.abs(m) >= 2**32) or np.any(s < -31) or np.any(s > 63):
            raise IntqError("TPU-MLIR multipliers must be 32-bit integers and rshifts in [-31, 63]")
        info = np.iinfo(out_dtype)
        if not (info.min <= act_min <= act_max <= info.max):
            raise IntqError(f"activation range [{act_min}, {act_max}] does not fit {np.dtype(out_dtype).name}")
        m, s = np.broadcast_arrays(m, s)
        return cls(zero_point=int(zero_point), act_min=int(act_min), act_max=int(act_max),
                   out_dtype=np.dtype(out_dtype), multiplier=m.copy(), rshift=s.copy(),
                   rounding=Rounding.parse(rounding))

    @property
    def channels(self) -> int:
        return self.multiplier.size

    def rescaled(self, x):
        return raw.multiply_rshift(x, self.multiplier, self.rshift, self.rounding)


def make_requantizer(real_multiplier, mode: Requant, zero_point: int, act_min: int, act_max: int,
                     out_dtype=np.int8) -> Requantizer:
    """Prepare the requantization of ``acc * M + zero_point`` clamped to [act_min, act_max] under
    ``mode``'s contract: an instance of the :class:`Requantizer` subclass registered for it.

    ``real_multiplier``: M per output channel (or a scalar), from
    :func:`intq.qmath.effective_scale`; for ``FLOAT32_RNE`` the float32 scale exactly as the
    emulated runtime computes it. Raises for a multiplier intq cannot represent.
    """
    real = np.atleast_1d(np.asarray(real_multiplier, dtype=np.float64))
    if not np.all(np.isfinite(real)) or np.any(real < 0):
        raise IntqError(f"requantization multipliers must be finite and non-negative, got {real.tolist()}")
    info = np.iinfo(out_dtype)
    if not (info.min <= act_min <= act_max <= info.max):
        raise IntqError(f"activation range [{act_min}, {act_max}] does not fit {np.dtype(out_dtype).name}")
    return _CONTRACTS[mode].prepare(real, zero_point=int(zero_point), act_min=int(act_min), act_max=int(act_max),
                                    out_dtype=np.dtype(out_dtype))


def requantize(r: Requantizer, acc: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """``clamp(R(acc + offset) + zero_point, act_min, act_max)`` as ``r.out_dtype``; channels on the
    last axis; ``offset`` (int64 per channel, optional) is a folded bias.

    Contract: ``acc + offset`` holds int32 values. Integer-only for the fixed-point contracts
    (one fused compiled pass each); ``DOUBLE_PRODUCT`` and ``FLOAT32_RNE`` emulate runtimes that
    multiply in double / float32.
    """
    return r.apply(acc, offset)


def requantize_reference(r: Requantizer, acc: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """:func:`requantize` as whole-array numpy steps on :mod:`intq.qmath.raw` (the tests require equality)."""
    return r.reference(acc, offset)
