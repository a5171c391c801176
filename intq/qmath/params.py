"""Quantization parameters: ``real = (q - zero_point) * scale``, and how to choose them.

:class:`QuantParams` is the one description of a quantized tensor used everywhere in intq;
:func:`choose_qparams` derives it from a real range (asymmetric, symmetric, TPU-MLIR threshold
forms, per-tensor or per-axis).

Scales are float32 values (held in float64 arrays): a ``.tflite`` file stores float32 scales,
and every runtime derives its multipliers from those, so intq computes with exactly the scale
it exports. :func:`choose_qparams` rounds the scale to float32 before deriving the zero point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from intq.errors import QuantizationError
from intq.qmath.rounding import Rounding, round_float

#: Integer dtypes a quantized tensor may have.
SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64))


def _dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in SUPPORTED_DTYPES:
        names = ", ".join(d.name for d in SUPPORTED_DTYPES)
        raise QuantizationError(f"unsupported quantized dtype {dtype!r}; use one of: {names}")
    return dt


def dtype_range(dtype, narrow_range: bool = False) -> tuple[int, int]:
    """``(qmin, qmax)`` of an integer dtype; ``narrow_range`` drops the most negative value.

    int8: (-128, 127), narrow (-127, 127); uint8: (0, 255); int16: (-32768, 32767), narrow
    (-32767, 32767) as TFLite's 16x8 activations; int32: the bias range.
    """
    info = np.iinfo(_dtype(dtype))
    qmin = int(info.min) + (1 if narrow_range and info.min < 0 else 0)
    return qmin, int(info.max)


@dataclass(frozen=True, eq=False)
class QuantParams:
    """How a quantized tensor maps to reals: ``real = (q - zero_point) * scale``.

    Fields:
      scale:        float64 array, shape (1,) per-tensor or (C,) per-axis; positive, finite.
      zero_point:   int64 array of the same shape, each in [qmin, qmax].
      dtype:        the storage dtype (int8, uint8, int16, int32, int64).
      axis:         None for per-tensor, else the quantized dimension (conv weights: 0,
                    depthwise weights: 3, as in the TFLite spec).
      narrow_range: True when the most negative value is unused (weights: [-127, 127]).

    Arrays are stored read-only; equality compares values.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: np.dtype = np.dtype(np.int8)
    axis: int | None = None
    narrow_range: bool = False

    def __post_init__(self):
        dt = _dtype(self.dtype)
        scale = np.array(self.scale, dtype=np.float64).reshape(-1)
        zp = np.array(self.zero_point).reshape(-1)
        if zp.size and not np.issubdtype(zp.dtype, np.integer):
            if not np.all(zp == np.round(zp)):
                raise QuantizationError(f"zero_point must be integers, got {self.zero_point!r}")
        zp = zp.astype(np.int64)
        if zp.size == 1 and scale.size > 1:
            zp = np.full(scale.shape, zp[0], dtype=np.int64)
        if scale.size == 0 or scale.shape != zp.shape:
            raise QuantizationError(
                f"scale and zero_point must be non-empty and of equal length, got {scale.size} and {zp.size}"
            )
        if not np.all(np.isfinite(scale)) or not np.all(scale > 0):
            raise QuantizationError(f"every scale must be positive and finite, got {scale.tolist()}")
        if self.axis is None and scale.size != 1:
            raise QuantizationError(f"{scale.size} scales given for a per-tensor QuantParams; set axis")
        if self.axis is not None and (not isinstance(self.axis, (int, np.integer)) or self.axis < 0):
            raise QuantizationError(f"axis must be a non-negative int or None, got {self.axis!r}")
        qmin, qmax = dtype_range(dt, self.narrow_range)
        if zp.min() < qmin or zp.max() > qmax:
            raise QuantizationError(f"zero_point {zp.tolist()} outside [{qmin}, {qmax}] for {dt.name}")
        scale.setflags(write=False)
        zp.setflags(write=False)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "zero_point", zp)
        object.__setattr__(self, "dtype", dt)
        object.__setattr__(self, "axis", None if self.axis is None else int(self.axis))
        object.__setattr__(self, "narrow_range", bool(self.narrow_range))

    @property
    def qmin(self) -> int:
        return dtype_range(self.dtype, self.narrow_range)[0]

    @property
    def qmax(self) -> int:
        return dtype_range(self.dtype, self.narrow_range)[1]

    @property
    def per_axis(self) -> bool:
        return self.axis is not None

    @property
    def tensor_scale(self) -> float:
        """The one scale of per-tensor parameters as the runtimes store it: ``float(float32(scale))``
        (a float32 value, read as a double — C's ``static_cast<double>(params.scale)``)."""
        return float(np.float32(self._single(self.scale, "scale")))

    @property
    def tensor_zero_point(self) -> int:
        """The one zero point of per-tensor parameters."""
        return int(self._single(self.zero_point, "zero point"))

    def _single(self, values: np.ndarray, what: str):
        if values.size != 1:
            raise QuantizationError(f"these parameters have {values.size} channels (axis {self.axis}); "
                                    f"a per-tensor {what} was expected")
        return values[0]

    def broadcast_to(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """``(scale, zero_point)`` reshaped to broadcast against an array of ``shape``."""
        if self.axis is None:
            return self.scale.reshape(()), self.zero_point.reshape(())
        if self.axis >= len(shape) or shape[self.axis] != self.scale.size:
            raise QuantizationError(
                f"per-axis parameters ({self.scale.size} channels on axis {self.axis}) "
                f"do not fit a tensor of shape {tuple(shape)}"
            )
        view = [1] * len(shape)
        view[self.axis] = self.scale.size
        return self.scale.reshape(view), self.zero_point.reshape(view)

    def __eq__(self, other):
        return (
            isinstance(other, QuantParams)
            and (self.dtype, self.axis, self.narrow_range) == (other.dtype, other.axis, other.narrow_range)
            and np.array_equal(self.scale, other.scale)
            and np.array_equal(self.zero_point, other.zero_point)
        )

    def __hash__(self):
        return hash((self.dtype.name, self.axis, self.narrow_range, self.scale.tobytes(), self.zero_point.tobytes()))

    def __repr__(self):
        s = float(self.scale[0]) if self.scale.size == 1 else self.scale.tolist()
        z = int(self.zero_point[0]) if self.zero_point.size == 1 else self.zero_point.tolist()
        extra = f", axis={self.axis}" if self.axis is not None else ""
        extra += ", narrow_range=True" if self.narrow_range else ""
        return f"QuantParams(scale={s!r}, zero_point={z!r}, dtype={self.dtype.name}{extra})"


def _as_range_array(v, name: str, what: str) -> np.ndarray:
    arr = np.asarray(v, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if np.any(bad):
        where = "" if arr.ndim == 0 else f" (channel {int(np.argwhere(bad.reshape(-1))[0][0])})"
        raise QuantizationError(
            f"{name}: the {what} of the range is {arr.reshape(-1)[bad.reshape(-1)][0]}{where}; "
            "a range must be finite. Check the calibration data for NaN/Inf values."
        )
    return arr


def choose_qparams(
    min,
    max,
    dtype="int8",
    symmetric: bool = False,
    narrow_range: bool = False,
    axis: int | None = None,
    *,
    symmetric_scale: Literal["qmax", "tpu-mlir"] = "qmax",
    name: str = "tensor",
) -> QuantParams:
    """Quantization parameters for reals in [min, max] (scalars, or per-axis arrays with ``axis``).

    The range is first widened to include 0 (so 0.0 is exactly representable, as zero padding
    and ReLU need): ``min = min(min, 0)``, ``max = max(max, 0)``.

    Asymmetric (activations): ``S = (max - min) / (qmax - qmin)`` rounded to float32, then
    ``Z = clamp(round_half_away(qmin - min / S), qmin, qmax)`` (spec 002, Jacob et al. eq. 2).
    ``real(Z) == 0`` exactly.

    Symmetric (weights): ``Z = 0`` and ``S = t / qmax`` with ``t = max(|min|, |max|)``, e.g.
    weights in [-127, 127] with ``narrow_range=True``. ``symmetric_scale="tpu-mlir"`` uses
    TPU-MLIR's threshold forms instead: ``S = t/128`` for full-range int8 activations,
    ``t/127`` with ``narrow_range`` (weights), ``t/255`` for uint8 (``S = t / max(-qmin, qmax)``).
    An unsigned symmetric range cannot hold negative values: ``min < 0`` is an error.

    Degenerate ranges: ``min == max == 0`` (a tensor that is always zero, a pruned channel)
    gets ``S = 1.0`` and ``Z = qmin`` (0 if symmetric) — any scale represents it exactly, and 1.0
    keeps downstream multipliers ordinary. ``min > max``, NaN or Inf raise
    :class:`QuantizationError` naming ``name`` (and the channel). A non-zero range so small that
    its scale underflows float32's normal range raises too.
    """
    dt = _dtype(dtype)
    qmin, qmax = dtype_range(dt, narrow_range)
    lo = _as_range_array(min, name, "minimum")
    hi = _as_range_array(max, name, "maximum")
    lo, hi = np.broadcast_arrays(lo, hi)
    if axis is None and lo.size != 1:
        raise QuantizationError(f"{name}: {lo.size} ranges given for a per-tensor quantization; pass axis=")
    if np.any(lo > hi):
        i = int(np.argwhere((lo > hi).reshape(-1))[0][0])
        raise QuantizationError(
            f"{name}: range minimum {lo.reshape(-1)[i]} is greater than maximum {hi.reshape(-1)[i]}"
            + (f" (channel {i})" if lo.size > 1 else "")
        )
    lo = np.minimum(lo.reshape(-1), 0.0)
    hi = np.maximum(hi.reshape(-1), 0.0)

    if symmetric:
        if qmin == 0 and np.any(lo < 0):
            raise QuantizationError(
                f"{name}: a symmetric {dt.name} range (zero point 0) cannot represent the negative "
                f"minimum {lo.min()}; use a signed dtype or asymmetric quantization"
            )
        if symmetric_scale == "qmax":
            divisor = qmax
        elif symmetric_scale == "tpu-mlir":
            divisor = -qmin if -qmin > qmax else qmax  # (the builtins min/max are shadowed here)
        else:
            raise QuantizationError(f"symmetric_scale must be 'qmax' or 'tpu-mlir', got {symmetric_scale!r}")
        threshold = np.maximum(-lo, hi)
        scale = (threshold / divisor).astype(np.float32).astype(np.float64)
        zero_point = np.zeros(scale.shape, dtype=np.int64)
        zero_range = threshold == 0
    else:
        scale = ((hi - lo) / (qmax - qmin)).astype(np.float32).astype(np.float64)
        zero_range = hi == lo
        safe = np.where(zero_range, 1.0, scale)
        zero_point = round_float(qmin - lo / safe, Rounding.HALF_AWAY_FROM_ZERO)
        zero_point = np.clip(zero_point, qmin, qmax).astype(np.int64)

    tiny = (scale < np.finfo(np.float32).tiny) & ~zero_range
    if np.any(tiny):
        i = int(np.argwhere(tiny)[0][0])
        raise QuantizationError(
            f"{name}: the range [{lo[i]}, {hi[i]}] is too small to quantize (its scale underflows "
            "float32); the tensor is effectively zero: check the model or the calibration data"
        )
    scale = np.where(zero_range, 1.0, scale)  # Z computed above with S = 1: qmin (or 0)
    return QuantParams(scale, zero_point, dt, axis, narrow_range)


def quantize(x, qp: QuantParams, rounding: Rounding | str = Rounding.HALF_AWAY_FROM_ZERO, *, compute_dtype=np.float32):
    """Reals to integers: ``q = clamp(round(x / S) + Z, qmin, qmax)`` in ``qp.dtype``.

    The division is done in ``compute_dtype`` — float32 by default, as TFLite's reference
    QUANTIZE kernel (``TfLiteRound(val / static_cast<float>(scale))``), so the result matches it
    bit for bit; pass ``np.float64`` for a double-precision division. ``rounding`` defaults to
    half away from zero (TFLite); ONNX Runtime's QuantizeLinear rounds half to even.
    ``+inf``/``-inf`` saturate to qmax/qmin; NaN raises. Per-axis ``qp`` broadcasts along its axis.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if np.any(np.isnan(x)):
        raise QuantizationError("quantize: the input contains NaN, which has no quantized value")
    scale, zp = qp.broadcast_to(x.shape)
    ct = np.dtype(compute_dtype)
    with np.errstate(over="ignore"):  # overflow to inf saturates below
        r = round_float(x.astype(ct) / scale.astype(ct), rounding)
    r = np.clip(r, qp.qmin - zp, qp.qmax - zp)  # clamp before the int cast: no UB, same result
    return (r.astype(np.int64) + zp).astype(qp.dtype)


def dequantize(q, qp: QuantParams, dtype=np.float32) -> np.ndarray:
    """Integers to reals: ``float32((q - Z) * S)`` with the product in float64.

    As TFLite's reference DEQUANTIZE (``static_cast<float>(scale * (val - zero_point))`` with a
    double scale): for float32 scales and |q - Z| < 2**29 the product is exact and the only
    rounding is the final one to ``dtype``.
    """
    q = np.asarray(q)
    if not np.issubdtype(q.dtype, np.integer):
        raise QuantizationError(f"dequantize takes integer values, got dtype {q.dtype}")
    scale, zp = qp.broadcast_to(q.shape)
    return ((q.astype(np.int64) - zp) * scale).astype(dtype)
