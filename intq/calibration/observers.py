"""Calibration observers: each watches one float tensor over calibration batches and reports a range.

An observer sees one batch at a time (``update(x)``, the only mutating method) and reports a real
range ``[min, max]`` (``range()``); :func:`intq.qmath.choose_qparams` later turns the range into
:class:`~intq.qmath.QuantParams`. Every observer keeps a small state (a few floats, at most ``bins``
integer counts, or for ``ema`` two floats per batch), never the samples, and that state is *mergeable*:
``a.merge(b)`` returns a new observer holding what one observer fed a's batches then b's batches
would hold, so calibration can be split across processes (ship ``state_dict()``, rebuild with
``Observer.from_state_dict``, merge) and give the same ranges.

* :class:`MinMaxObserver` ("minmax"): running [min, max]. Merge exact, any order.
* :class:`MovingAverageMinMaxObserver` ("ema"): EMA of each batch's min and max (Jacob et al.
  2018). Merge exact (bit for bit), order-dependent (a's stream, then b's: shards merge in data
  order); its state keeps each batch's (min, max) to replay them.
* :class:`HistogramObserver`: exact [min, max] plus an aligned histogram; the base of
  :class:`PercentileObserver` ("percentile"), :class:`MSEObserver` ("mse") and
  :class:`EntropyObserver` ("entropy", KL divergence). Merge exact (bit for bit), any order.
* :class:`PerChannelMinMaxObserver`: per-channel [min, max] along an axis (weights). Merge exact,
  any order.
* :func:`make_observer` builds one by method name.

**Exactly mergeable histograms.** Bins have a power-of-two width ``w = 2**exponent`` and edges at
integer multiples of ``w``: value ``x`` falls in bin ``floor(x / w)`` (computed exactly: a division
by a power of two only moves the exponent). ``w`` is the smallest power of two (above a resolution
floor, see :func:`aligned_exponent`) for which the bins covering the observed range number at most
``bins``; only those bins are stored. When a batch widens the range, ``w`` doubles as often as
needed and every pair of aligned bins ``2j, 2j+1`` is summed into bin ``j`` — an exact operation,
since ``floor(floor(x / w) / 2) == floor(x / 2w)``. So after any stream the histogram is exactly
the histogram of all samples at the width that the overall [min, max] selects: a function of the
multiset of samples only. Merging coarsens both sides to the width the union range selects and
adds counts, which therefore gives *bit for bit* the single-stream state, in any order.

**Errors.** A batch with NaN or Inf, an empty batch, a non-numeric batch, asking a range of an
observer that has seen no data, merging incompatible observers and malformed state dicts raise
:class:`intq.errors.QuantizationError` naming the tensor (and the 0-based batch index). A batch
that raises leaves the observer unchanged.
"""

from __future__ import annotations

import abc
import array
import copy as _copy
import inspect
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numba import njit

from intq.errors import QuantizationError
from intq.qmath.compiled import round_clamp_half_away_scalar
from intq.qmath.params import choose_qparams, dtype_range
from intq.registry import Registry

#: Version of the ``state_dict`` layout; ``from_state_dict`` refuses other versions.
STATE_VERSION = 1

#: Smallest bin exponent: 2**-1074 is the smallest positive float64, so finer bins separate nothing.
MIN_EXPONENT = -1074

#: Bins are never narrower than ``max|x| * 2**-RESOLUTION_BITS`` (rounded down to a power of two).
#: This keeps every bin index below 2**41 (exact in float64 and int64) and gives constant data a
#: defined width. It is far finer than float32's 24-bit mantissa: once two distinct float32 values
#: have been seen (and ``bins <= 2**16``), the bin count alone decides the width.
RESOLUTION_BITS = 40

#: Largest ``bins`` accepted: the state is at most this many int64 counts (8 MiB).
MAX_BINS = 1 << 20

#: Elements binned per vectorised pass (:func:`_count_bins`' numpy path): bounds its temporaries to ~64 MiB.
_CHUNK = 1 << 22

#: Entropy calibration: total probability given to the bins where P > 0 but Q = 0 (spread evenly
#: over P's support), so that such a candidate costs ``p * log(p / q_eps)`` rather than infinity;
#: 1e-4 is the order of the smoothing epsilon used by common KL-calibration implementations.
_KL_SMOOTHING = 1e-4

#: Entropy calibration: the largest fraction of values a threshold may clip (0.1%: a percentile of
#: 99.9 is as far as common calibrators go; see :class:`EntropyObserver`).
DEFAULT_MAX_CLIPPED = 1e-3

#: Automatic calibration: entropy thresholds tried per tensor (every k-th bin; keeps ``auto`` within
#: 3x the time of minmax).
_AUTO_ENTROPY_CANDIDATES = 32

#: MSE calibration: grid lines of the coarse pass of the coarse-to-fine search (see MSEObserver).
_MSE_COARSE = 10

#: Candidate (low, high) pairs evaluated per vectorised MSE pass (times the number of bins).
_MSE_CHUNK_ELEMENTS = 1 << 20


# --------------------------------------------------------------------------------------------------
# helpers


def _label(name: str | None) -> str:
    return f"tensor {name!r}" if name is not None else "an unnamed tensor"


def _as_batch(x, name: str | None, batch: int) -> np.ndarray:
    """The batch as a float32 or float64 array; raise on non-numeric or empty input."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise QuantizationError(
            f"{_label(name)}: calibration batch {batch} (0-based) has dtype {arr.dtype}; "
            "observers take real-valued numeric arrays"
        )
    if arr.size == 0:
        raise QuantizationError(
            f"{_label(name)}: calibration batch {batch} (0-based) is empty (shape {arr.shape}); "
            "an empty tensor has no range: skip it or check the data loader"
        )
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    return arr


def _raise_nonfinite(arr: np.ndarray, name: str | None, batch: int):
    bad = ~np.isfinite(arr)
    flat = int(np.argmax(bad.reshape(-1)))
    pos = tuple(int(i) for i in np.unravel_index(flat, arr.shape))
    value = arr.reshape(-1)[flat]
    raise QuantizationError(
        f"{_label(name)}: calibration batch {batch} (0-based) contains {int(bad.sum())} non-finite "
        f"value(s), the first {value} at index {pos}; a quantization range needs finite data: "
        "check the calibration inputs and the float model (overflow, log of 0, division by 0)"
    )


def _batch_min_max(arr: np.ndarray, name: str | None, batch: int) -> tuple[float, float]:
    """Exact (min, max) of a batch as Python floats; NaN/Inf raise (min/max propagate them)."""
    lo, hi = arr.min(), arr.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):
        _raise_nonfinite(arr, name, batch)
    return float(lo), float(hi)


def _floor_index_scalar(v: float, exponent: int) -> int:
    """``floor(v / 2**exponent)`` exactly, for a finite float ``v``."""
    f = math.floor(math.ldexp(v, -exponent))
    if f == 0 and v < 0:  # the scaled value underflowed to -0.0; a negative value's bin is -1
        f = -1
    return f


def _floor_indices(x: np.ndarray, exponent: int) -> np.ndarray:
    """``floor(x / 2**exponent)`` exactly, as int64, for finite float32/float64 ``x``.

    ``ldexp`` by a negative power is exact unless the result underflows, which only happens for
    ``exponent > 0`` and values of magnitude below 1; those floor to 0 (positive, correct) or to
    -0.0 (negative: corrected to -1).
    """
    idx = np.floor(np.ldexp(x, -exponent)).astype(np.int64)
    if exponent > 0:
        fix = (idx == 0) & (x < 0)
        if fix.any():
            idx[fix] = -1
    return idx


@njit(cache=True, nogil=True)
def _count_bins_float32(flat, scale, first, counts):
    """``counts[floor(x * scale) - first] += 1`` for every float32 x of ``flat``, in one pass;
    returns -1, or the position of a value outside the window.

    ``x * scale`` with ``scale = 2**-k`` (a normal float64) is computed in float64, where it is
    exact: a power of two only moves the exponent, and a float32 times a normal float64 power of
    two neither overflows nor underflows float64. Four partial histograms (one per lane of 4
    consecutive values) summed at the end: a run of equal values (a ReLU's zeros) would otherwise
    wait on the previous increment of the same count (measured 0.9 -> 0.6 ns per value)."""
    n = counts.size
    part = np.zeros((4, n), np.int64)
    whole = flat.size - flat.size % 4
    for i in range(0, whole, 4):
        for u in range(4):
            j = np.int64(np.floor(np.float64(flat[i + u]) * scale)) - first
            if j < 0 or j >= n:
                return i + u
            part[u, j] += 1
    for i in range(whole, flat.size):
        j = np.int64(np.floor(np.float64(flat[i]) * scale)) - first
        if j < 0 or j >= n:
            return i
        part[0, j] += 1
    for u in range(4):
        for j in range(n):
            counts[j] += part[u, j]
    return -1


@njit(cache=True, nogil=True)
def _count_bins_float64(flat, scale, first, counts):
    """:func:`_count_bins_float32` for float64 values, where ``x * scale`` can underflow: only for
    ``|x * scale| < 1``, where floor gives 0 for x > 0 and, corrected as in :func:`_floor_indices`,
    -1 for x < 0 (whose product rounded to -0.0)."""
    n = counts.size
    for i in range(flat.size):
        v = flat[i]
        j = np.int64(np.floor(v * scale)) - first
        if j == -first and v < 0:
            j -= 1
        if j < 0 or j >= n:
            return i
        counts[j] += 1
    return -1


@njit(cache=True, nogil=True)
def _squared_errors(values, values32, scale32, scale, zero_point, qmin, qmax, out):
    """``out[c, i] = (dequantize(quantize(v_i, qp_c), qp_c, float64) - v_i)**2`` for candidate
    parameters ``(scale[c], zero_point[c])``: the quantization as qmath's compiled form computes it
    (float32 division, :func:`intq.qmath.compiled.round_clamp_half_away_scalar`), the
    dequantization ``(q - Z) * S`` in float64 as :func:`intq.qmath.dequantize`, then the
    difference and its square: the elementwise float64 operations of the vectorised form, one pass.
    ``out`` is column-major, the layout the vectorised form produced, so the dot products that
    follow (BLAS, whose summation order depends on the layout) are those it computed."""
    for i in range(values.size):
        x = values32[i]
        v = values[i]
        for c in range(out.shape[0]):
            zp = zero_point[c]
            code = round_clamp_half_away_scalar(x / scale32[c], zp, np.float32(qmin - zp), np.float32(qmax - zp))
            err = np.float64(np.int64(code) - zp) * scale[c] - v
            out[c, i] = err * err


def _count_bins(flat: np.ndarray, exponent: int, first: int, counts: np.ndarray, magnitude: bool) -> None:
    """Add the values of ``flat`` (finite float32/float64; ``|x|`` if ``magnitude``) to the aligned
    histogram ``counts`` of bins ``floor(x / 2**exponent) - first``: a compiled one-pass loop where
    ``2**-exponent`` is a normal float64 (every float32 datum and all but the tiniest float64 data),
    else vectorised :func:`_floor_indices` + ``np.bincount`` per chunk. Both give the same counts."""
    if -1022 <= -exponent <= 1023:
        if magnitude:
            flat = np.abs(flat)
        count = _count_bins_float32 if flat.dtype == np.float32 else _count_bins_float64
        bad = count(flat, math.ldexp(1.0, -exponent), first, counts)
        assert bad < 0, f"value {flat[bad]} outside the histogram window"
        return
    for start in range(0, flat.size, _CHUNK):
        part = flat[start:start + _CHUNK]
        if magnitude:
            part = np.abs(part)
        idx = _floor_indices(part, exponent)
        idx -= first
        counts += np.bincount(idx, minlength=counts.size)


def _edge(index: int, exponent: int) -> float:
    """The real value ``index * 2**exponent`` (float64; ±inf past float64's range)."""
    try:
        return math.ldexp(float(index), exponent)
    except OverflowError:
        return math.copysign(math.inf, index)


def aligned_exponent(lo: float, hi: float, bins: int) -> int:
    """The bin exponent ``k`` (bin width ``2**k``) that an aligned histogram uses for [lo, hi].

    ``k`` is the smallest integer with ``k >= k_floor`` and
    ``floor(hi / 2**k) - floor(lo / 2**k) + 1 <= bins`` (the bins touching [lo, hi] fit), where
    ``k_floor = max(e - RESOLUTION_BITS, MIN_EXPONENT)`` for ``max(|lo|, |hi|)`` in
    ``[2**(e-1), 2**e)`` (``MIN_EXPONENT`` when lo == hi == 0).

    Both conditions only get harder to meet as [lo, hi] widens, so ``k`` never decreases along a
    stream, and it depends on the range alone — what makes merging exact.
    Contract: ``lo <= hi`` finite floats, ``bins >= 2`` (a range straddling 0 needs 2 bins).
    """
    assert lo <= hi and bins >= 2
    m = max(abs(lo), abs(hi))
    if m == 0.0:
        return MIN_EXPONENT
    k_floor = max(math.frexp(m)[1] - RESOLUTION_BITS, MIN_EXPONENT)

    def nbins(k: int) -> int:
        return _floor_index_scalar(hi, k) - _floor_index_scalar(lo, k) + 1

    span = hi / 2 - lo / 2  # half the width, without overflow; only an estimate
    k = k_floor if span == 0 else max(k_floor, math.frexp(span)[1] + 1 - bins.bit_length())
    while nbins(k) > bins:
        k += 1
    while k > k_floor and nbins(k - 1) <= bins:
        k -= 1
    return k


# --------------------------------------------------------------------------------------------------
# the aligned histogram value


@dataclass(frozen=True, eq=False)
class AlignedHistogram:
    """Counts of samples in power-of-two-aligned bins: bin ``i`` is ``[e_i, e_{i+1})`` with
    ``e_i = (offset + i) * 2**exponent``.

    Fields:
      exponent: int, the bin width is ``2**exponent`` (may be negative).
      offset:   int, index of the first stored bin; sample ``x`` is in stored bin
                ``floor(x / 2**exponent) - offset``.
      counts:   read-only int64 array, one count per bin (its length is the number of bins).

    Values only: :meth:`rebin` and :meth:`__add__` return new histograms. Equality compares
    values.
    """

    exponent: int
    offset: int
    counts: np.ndarray

    def __post_init__(self):
        counts = np.array(self.counts, dtype=np.int64).reshape(-1)
        counts.setflags(write=False)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "exponent", int(self.exponent))
        object.__setattr__(self, "offset", int(self.offset))

    @property
    def width(self) -> float:
        """The bin width ``2**exponent`` (float64; inf past float64's range)."""
        return _edge(1, self.exponent)

    @property
    def nbins(self) -> int:
        return int(self.counts.size)

    @property
    def total(self) -> int:
        """Number of samples counted."""
        return int(self.counts.sum())

    def edges(self) -> np.ndarray:
        """The ``nbins + 1`` bin edges ``(offset + i) * 2**exponent`` (float64, exact)."""
        idx = np.arange(self.offset, self.offset + self.nbins + 1, dtype=np.float64)
        with np.errstate(over="ignore"):
            return np.ldexp(idx, self.exponent)

    def rebin(self, exponent: int, offset: int, nbins: int) -> "AlignedHistogram":
        """The same samples in the window of ``nbins`` bins of width ``2**exponent`` from ``offset``.

        ``exponent >= self.exponent``: bin ``j`` goes to ``floor(j / 2**(exponent - self.exponent))``,
        i.e. aligned groups of ``2**d`` bins are summed (exact). Contract: every non-empty bin must
        land inside the new window.
        """
        d = exponent - self.exponent
        assert d >= 0, "an aligned histogram can only be coarsened"
        out = np.zeros(nbins, dtype=np.int64)
        nz = np.flatnonzero(self.counts)
        if nz.size:
            idx = (nz.astype(np.int64) + self.offset) >> min(d, 63)  # |index| < 2**41: 63 gives the sign
            idx -= offset
            assert idx[0] >= 0 and idx[-1] < nbins, "rebin window does not cover the samples"
            np.add.at(out, idx, self.counts[nz])
        return AlignedHistogram(exponent, offset, out)

    def __add__(self, other: "AlignedHistogram") -> "AlignedHistogram":
        """Bin-wise sum of two histograms on the same window (same exponent, offset, length)."""
        assert (self.exponent, self.offset, self.nbins) == (other.exponent, other.offset, other.nbins)
        return AlignedHistogram(self.exponent, self.offset, self.counts + other.counts)

    def __eq__(self, other):
        return (
            isinstance(other, AlignedHistogram)
            and (self.exponent, self.offset) == (other.exponent, other.offset)
            and np.array_equal(self.counts, other.counts)
        )

    __hash__ = None


def _window(lo: float, hi: float, bins: int) -> tuple[int, int, int]:
    """(exponent, offset, nbins) of the aligned histogram covering [lo, hi] with at most ``bins`` bins."""
    k = aligned_exponent(lo, hi, bins)
    first = _floor_index_scalar(lo, k)
    return k, first, _floor_index_scalar(hi, k) - first + 1


# --------------------------------------------------------------------------------------------------
# the interface


#: Class name -> observer class (what ``Observer.from_state_dict`` builds from a state's ``"type"``);
#: each class joins with ``@OBSERVERS.register()``.
OBSERVERS: Registry[type["Observer"]] = Registry("observer class", QuantizationError)


def _check_int(value, what: str, low: int, high: int, name: str | None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise QuantizationError(f"{_label(name)}: {what} must be an integer in [{low}, {high}], got {value!r}")
    return int(value)


def _check_float(value, what: str, low: float, high: float, name: str | None, low_open=False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not (low < v <= high if low_open else low <= v <= high):
        interval = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise QuantizationError(f"{_label(name)}: {what} must be a number in {interval}, got {value!r}")
    return v


class Observer(abc.ABC):
    """Common interface of the calibration observers (see the module docstring).

    * ``update(x)``: fold one batch (a real numeric array) into the state — the only mutating method.
    * ``merge(other)``: a new observer, as if one observer saw this one's batches then other's;
      neither input changes. Requires the same class, the same options, and equal names (or one
      of them ``None``).
    * ``range()``: the real range ``(min, max)`` as floats (arrays for per-channel observers).
    * ``state_dict()`` / ``from_state_dict(state)``: a JSON-serialisable plain dict (ints, floats,
      strings, lists, None) and back; ``Observer.from_state_dict`` picks the class from the dict.
    * ``count``: the number of batches seen; error messages name the batch by this 0-based index.

    Equality (``==``) compares class and state exactly.
    """

    #: The ``make_observer`` method name, or None for observers the factory does not build.
    method: ClassVar[str | None] = None

    def __init__(self, *, name: str | None = None):
        if name is not None and not isinstance(name, str):
            raise QuantizationError(f"an observer's name must be a string or None, got {name!r}")
        self._name = name
        self._count = 0

    # -- public API --------------------------------------------------------------------------------

    @property
    def name(self) -> str | None:
        """The observed tensor's name (used in error messages), or None."""
        return self._name

    @property
    def count(self) -> int:
        """Number of batches folded in so far (by ``update`` or ``merge``)."""
        return self._count

    @abc.abstractmethod
    def update(self, x) -> None:
        """Fold one batch into the state. Contract: a non-empty real array with finite values."""

    @abc.abstractmethod
    def range(self):
        """The observed real range ``(min, max)``."""

    def observed_range(self):
        """The range before any clipping rule: the exact [min, max] for histogram observers (what
        :meth:`range` gives for the others)."""
        return self.range()

    def merge(self, other: "Observer") -> "Observer":
        """A new observer: this one's stream followed by ``other``'s. Neither input changes."""
        if type(other) is not type(self):
            raise QuantizationError(
                f"{_label(self._name)}: cannot merge a {type(self).__name__} with a {type(other).__name__}"
            )
        if self.options() != other.options():
            raise QuantizationError(
                f"{_label(self._name)}: cannot merge observers with different options "
                f"{self.options()} and {other.options()}"
            )
        if self._name is not None and other._name is not None and self._name != other._name:
            raise QuantizationError(
                f"cannot merge the observer of tensor {self._name!r} with the observer of tensor {other._name!r}"
            )
        out = type(self)(name=self._name if self._name is not None else other._name, **self.options())
        out._count = self._count + other._count
        out._set_state(self._merged_state(other))
        return out

    def options(self) -> dict[str, Any]:
        """The constructor options (besides ``name``) as a plain dict."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The complete state as a JSON-serialisable dict (see :meth:`from_state_dict`)."""
        return {
            "type": type(self).__name__,
            "version": STATE_VERSION,
            "name": self._name,
            "options": self.options(),
            "count": self._count,
            "state": self._get_state(),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "Observer":
        """Rebuild an observer from :meth:`state_dict` output (possibly through JSON).

        Called on :class:`Observer` it builds whichever class ``state["type"]`` names; called on a
        subclass it requires that class. Malformed dicts raise :class:`QuantizationError`.
        """
        if not isinstance(state, dict):
            raise QuantizationError(f"an observer state must be a dict, got {type(state).__name__}")
        name = state.get("name")
        typ = state.get("type")
        target = OBSERVERS.get(typ) if cls is Observer else cls
        if target is None or typ != target.__name__:
            known = OBSERVERS.available()
            expected = known if cls is Observer else cls.__name__
            raise QuantizationError(
                f"{_label(name) if isinstance(name, str) else 'observer state'}: type {typ!r} is not "
                f"an observer of this kind; expected {expected}"
            )
        if state.get("version") != STATE_VERSION:
            raise QuantizationError(
                f"{_label(name)}: observer state version {state.get('version')!r} is not supported "
                f"(this intq reads version {STATE_VERSION})"
            )
        try:
            obs = target(name=name, **dict(state["options"]))
            count = state["count"]
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"count must be a non-negative int, got {count!r}")
            obs._count = count
            obs._load_state(state["state"])
        except QuantizationError:
            raise
        except (KeyError, TypeError, ValueError, AssertionError, OverflowError) as exc:
            raise QuantizationError(f"{_label(name)}: malformed {typ} state: {exc!r}") from None
        return obs

    def copy(self) -> "Observer":
        """An independent observer with the same state."""
        return type(self).from_state_dict(self.state_dict())

    def renamed(self, name: str | None) -> "Observer":
        """An independent observer with this one's state, observing tensor ``name``: what
        ``from_state_dict({**state_dict(), "name": name})`` builds, without the round trip through
        lists (every state value is immutable or replaced, never changed in place, by ``update``; an
        observer whose ``update`` changes a value in place, ``ema``'s per-batch log, copies it)."""
        if name is not None and not isinstance(name, str):
            raise QuantizationError(f"an observer's name must be a string or None, got {name!r}")
        out = _copy.copy(self)
        out._name = name
        return out

    def __eq__(self, other):
        return type(other) is type(self) and self.state_dict() == other.state_dict()

    __hash__ = None

    def __repr__(self):
        opts = "".join(f", {k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}(name={self._name!r}{opts}, count={self._count})"

    # -- hooks -----------------------------------------------------------------------------------

    @abc.abstractmethod
    def _get_state(self) -> dict[str, Any]:
        """The state fields as JSON-ready values."""

    @abc.abstractmethod
    def _load_state(self, state: dict[str, Any]) -> None:
        """Set the state from ``_get_state`` output, validating it (raise ValueError if malformed)."""

    @abc.abstractmethod
    def _merged_state(self, other: "Observer"):
        """The state of self's stream followed by other's, in ``_set_state``'s form."""

    @abc.abstractmethod
    def _set_state(self, state) -> None:
        """Install a state produced by ``_merged_state``."""

    def _no_data(self) -> QuantizationError:
        return QuantizationError(
            f"{_label(self._name)}: the {type(self).__name__} has seen no data; "
            "run calibration batches through it before asking for its range"
        )


def _float_or_none(v) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"expected a finite number or None, got {v!r}")
    return float(v)


# --------------------------------------------------------------------------------------------------
# min / max


@OBSERVERS.register()
class MinMaxObserver(Observer):
    """Running minimum and maximum of every value seen.

    ``range() = (min over all batches, max over all batches)``, exact (the values themselves, as
    float64). Merge: element-wise min/max — exact and order-independent.
    Degenerate data is reported as is: all zeros -> (0.0, 0.0), a constant c -> (c, c);
    :func:`~intq.qmath.choose_qparams` widens every range to include 0.
    """

    method = "minmax"

    def __init__(self, *, name: str | None = None):
        super().__init__(name=name)
        self._min: float | None = None
        self._max: float | None = None

    def update(self, x) -> None:
        arr = _as_batch(x, self._name, self._count)
        lo, hi = _batch_min_max(arr, self._name, self._count)
        if self._count:
            lo, hi = min(lo, self._min), max(hi, self._max)
        self._min, self._max = lo, hi
        self._count += 1

    def range(self) -> tuple[float, float]:
        if not self._count:
            raise self._no_data()
        return self._min, self._max

    def _get_state(self):
        return {"min": self._min, "max": self._max}

    def _load_state(self, state):
        lo, hi = _float_or_none(state["min"]), _float_or_none(state["max"])
        if (lo is None) != (self._count == 0) or (hi is None) != (self._count == 0) or (lo is not None and lo > hi):
            raise ValueError(f"min/max {lo!r}, {hi!r} inconsistent with count {self._count}")
        self._min, self._max = lo, hi

    def _merged_state(self, other):
        if not self._count or not other._count:
            return other._get_state() if not self._count else self._get_state()
        return {"min": min(self._min, other._min), "max": max(self._max, other._max)}

    def _set_state(self, state):
        self._min, self._max = state["min"], state["max"]


@OBSERVERS.register()
class MovingAverageMinMaxObserver(Observer):
    """Exponential moving average of each batch's min and max (Jacob et al. 2018, spec 004).

    For batches ``x_1 .. x_n`` with ``m_k = min(x_k)`` (likewise for max) and momentum ``c``::

        ema_1 = m_1                              (the first batch initialises)
        ema_k = (1 - c) * ema_{k-1} + c * m_k    (k >= 2; computed as ema + c * (m_k - ema),
                                                  which keeps a constant sequence exact)

    so ``ema_n = (1-c)**(n-1) * m_1 + sum_{k>=2} c * (1-c)**(n-k) * m_k``; ``range() = (ema_min,
    ema_max)``. With ``momentum=1`` it is the last batch's range. Each batch range needs finite
    data; all-zero data gives (0.0, 0.0).

    Merge — **order matters**: ``a.merge(b)`` is a's stream followed by b's, so the shards of a
    split calibration merge in data order (left to right, or as a tree that keeps the order:
    ``(a.merge(b)).merge(c.merge(d))`` equals ``a.merge(b).merge(c).merge(d)``). Feeding b's
    batches after a's turns b's first step into an ordinary EMA step; in real arithmetic
    ``ema_ab = (1 - c)**n_b * (ema_a - first_b) + ema_b``, but float steps do not re-associate, so
    that formula is a few ulps off the sequential stream. The state therefore keeps every batch's
    (min, max) (``batch_min`` / ``batch_max``, two floats per batch) and the merge *replays* b's
    batches from a's EMA with the very same float operations: ``a.merge(b)`` equals, bit for bit,
    one observer fed a's batches then b's. That log is the price of the exact merge: the state
    grows by 16 bytes per batch (1,000 calibration samples of ``ema``, fed one sample at a time: 16
    KB per tensor).
    """

    method = "ema"

    def __init__(self, momentum: float = 0.01, *, name: str | None = None):
        super().__init__(name=name)
        self._momentum = _check_float(momentum, "momentum", 0.0, 1.0, name, low_open=True)
        self._ema: tuple[float, float] | None = None
        self._log = (array.array("d"), array.array("d"))  # every batch's (min, max), in order

    @property
    def momentum(self) -> float:
        return self._momentum

    def options(self):
        return {"momentum": self._momentum}

    def _step(self, ema: tuple[float, float] | None, lo: float, hi: float) -> tuple[float, float]:
        """One batch folded in: the only place the EMA arithmetic is written (update and replay)."""
        if ema is None:
            return lo, hi
        c = self._momentum  # ema + c*(m - ema) == (1-c)*ema + c*m; keeps a constant exactly
        return ema[0] + c * (lo - ema[0]), ema[1] + c * (hi - ema[1])

    def _replay(self, ema, mins, maxs) -> tuple[float, float] | None:
        for lo, hi in zip(mins, maxs):
            ema = self._step(ema, lo, hi)
        return ema

    def update(self, x) -> None:
        arr = _as_batch(x, self._name, self._count)
        lo, hi = _batch_min_max(arr, self._name, self._count)
        self._ema = self._step(self._ema, lo, hi)
        self._log[0].append(lo)
        self._log[1].append(hi)
        self._count += 1

    def range(self) -> tuple[float, float]:
        if not self._count:
            raise self._no_data()
        return self._ema

    def _get_state(self):
        mins, maxs = self._log
        first = (mins[0], maxs[0]) if self._count else (None, None)
        ema = self._ema or (None, None)
        return {"first_min": first[0], "first_max": first[1], "ema_min": ema[0], "ema_max": ema[1],
                "batch_min": mins.tolist(), "batch_max": maxs.tolist()}

    def _load_state(self, state):
        vals = [_float_or_none(state[k]) for k in ("first_min", "first_max", "ema_min", "ema_max")]
        if any((v is None) != (self._count == 0) for v in vals):
            raise ValueError(f"EMA state {vals} inconsistent with count {self._count}")
        if "batch_min" not in state:
            raise ValueError("the state has no per-batch extremes (batch_min / batch_max: saved by an older intq, "
                             "which merged EMAs only approximately); calibrate again to get a mergeable state")
        log = tuple(array.array("d", [_float_or_none(v) for v in state[k]]) for k in ("batch_min", "batch_max"))
        if len(log[0]) != self._count or len(log[1]) != self._count:
            raise ValueError(f"{len(log[0])} and {len(log[1])} per-batch extremes for {self._count} batches")
        ema = self._replay(None, *log)
        if self._count and ((log[0][0], log[1][0]) != (vals[0], vals[1]) or ema != (vals[2], vals[3])):
            raise ValueError(f"the EMA {vals[2:]} and first batch {vals[:2]} are not those of the per-batch extremes "
                             f"(replayed: {list(ema)})")
        self._set_state((ema, log))

    def _merged_state(self, other):
        ema = self._replay(self._ema, *other._log)  # b's batches replayed from a's EMA: the sequential stream
        return ema, tuple(array.array("d", mine + theirs) for mine, theirs in zip(self._log, other._log))

    def _set_state(self, state):
        self._ema, self._log = state

    def renamed(self, name: str | None) -> "Observer":
        out = super().renamed(name)
        out._log = tuple(array.array("d", a) for a in self._log)  # update appends to the log in place
        return out


@OBSERVERS.register()
class PerChannelMinMaxObserver(Observer):
    """Per-channel running min and max along ``axis`` (weights: conv axis 0, depthwise axis 3).

    ``range() = (mins, maxs)``: float64 arrays of length C (the size of ``axis``), each the
    min/max over every other dimension and every batch. Every batch must have the same C.
    Merge: element-wise min/max, exact and order-independent. A channel that is all zeros gets
    (0.0, 0.0) (``choose_qparams`` gives it scale 1).
    """

    def __init__(self, axis: int, *, name: str | None = None):
        super().__init__(name=name)
        self._axis = _check_int(axis, "axis", 0, 64, name)
        self._min: np.ndarray | None = None
        self._max: np.ndarray | None = None

    @property
    def axis(self) -> int:
        return self._axis

    def options(self):
        return {"axis": self._axis}

    def update(self, x) -> None:
        arr = _as_batch(x, self._name, self._count)
        if arr.ndim <= self._axis:
            raise QuantizationError(
                f"{_label(self._name)}: calibration batch {self._count} (0-based) has shape {arr.shape}, "
                f"which has no axis {self._axis} for per-channel observation"
            )
        channels = arr.shape[self._axis]
        if self._count and channels != self._min.size:
            raise QuantizationError(
                f"{_label(self._name)}: calibration batch {self._count} (0-based) has {channels} "
                f"channels on axis {self._axis}, earlier batches had {self._min.size}"
            )
        others = tuple(i for i in range(arr.ndim) if i != self._axis)
        lo = arr.min(axis=others).astype(np.float64)
        hi = arr.max(axis=others).astype(np.float64)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            _raise_nonfinite(arr, self._name, self._count)
        if self._count:
            lo, hi = np.minimum(lo, self._min), np.maximum(hi, self._max)
        self._min, self._max = lo, hi
        self._count += 1

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._count:
            raise self._no_data()
        return self._min.copy(), self._max.copy()

    def _get_state(self):
        if not self._count:
            return {"min": None, "max": None}
        return {"min": self._min.tolist(), "max": self._max.tolist()}

    def _load_state(self, state):
        if self._count == 0:
            if state["min"] is not None or state["max"] is not None:
                raise ValueError("an observer with count 0 has no min/max")
            return
        lo = np.array([_float_or_none(v) for v in state["min"]], dtype=np.float64)
        hi = np.array([_float_or_none(v) for v in state["max"]], dtype=np.float64)
        if lo.size == 0 or lo.shape != hi.shape or np.any(lo > hi):
            raise ValueError("per-channel min/max must be equal-length non-empty lists with min <= max")
        self._min, self._max = lo, hi

    def _merged_state(self, other):
        if not self._count or not other._count:
            src = other if not self._count else self
            return None if not src._count else (src._min.copy(), src._max.copy())
        if self._min.size != other._min.size:
            raise QuantizationError(
                f"{_label(self._name)}: cannot merge per-channel observers with {self._min.size} "
                f"and {other._min.size} channels"
            )
        return np.minimum(self._min, other._min), np.maximum(self._max, other._max)

    def _set_state(self, state):
        self._min, self._max = (None, None) if state is None else state


# --------------------------------------------------------------------------------------------------
# histograms


@OBSERVERS.register()
class HistogramObserver(Observer):
    """Exact min/max plus an exactly mergeable power-of-two-aligned histogram of the values.

    The histogram (:meth:`histogram`) covers the observed [min, max] with at most ``bins`` bins of
    width ``2**k``, ``k = aligned_exponent(min, max, bins)`` — between ``bins/2`` and ``bins`` bins
    once the range spans more than a few bins (see the module docstring). ``update`` bins a batch
    in one compiled pass (``floor(x * 2**-k)``, :func:`_count_bins`); the state is the
    exact min, max and at most ``bins`` int64 counts. ``range()`` of this base class is the exact
    (min, max); subclasses derive clipped ranges from the histogram. Merge is exact and
    order-independent.

    Contract: ``2 <= bins <= MAX_BINS``.
    """

    #: Histogram |x| over [0, max|x|] instead of x over [min, max] (EntropyObserver).
    _magnitude: ClassVar[bool] = False

    def __init__(self, bins: int = 2048, *, name: str | None = None):
        super().__init__(name=name)
        self._bins = _check_int(bins, "bins", 2, MAX_BINS, name)
        self._min: float | None = None
        self._max: float | None = None
        self._hist: AlignedHistogram | None = None
        self._cache = None

    @property
    def bins(self) -> int:
        return self._bins

    def options(self):
        return {"bins": self._bins}

    def _cover(self, lo: float, hi: float) -> tuple[float, float]:
        """The interval the histogram covers for an observed [lo, hi]."""
        return (0.0, max(-lo, hi)) if self._magnitude else (lo, hi)

    def update(self, x) -> None:
        arr = _as_batch(x, self._name, self._count)
        lo, hi = _batch_min_max(arr, self._name, self._count)
        if self._count:
            lo, hi = min(lo, self._min), max(hi, self._max)
        k, first, n = _window(*self._cover(lo, hi), self._bins)
        if self._hist is None:
            counts = np.zeros(n, dtype=np.int64)
        else:
            counts = self._hist.rebin(k, first, n).counts.copy()
        _count_bins(arr.reshape(-1), k, first, counts, self._magnitude)
        self._min, self._max = lo, hi
        self._hist = AlignedHistogram(k, first, counts)
        self._count += 1
        self._cache = None

    def histogram(self) -> AlignedHistogram:
        """The aligned histogram of everything seen (|x| for :class:`EntropyObserver`)."""
        if not self._count:
            raise self._no_data()
        return self._hist

    def range(self) -> tuple[float, float]:
        """The exact observed (min, max)."""
        if not self._count:
            raise self._no_data()
        return self._min, self._max

    def observed_range(self) -> tuple[float, float]:
        """The exact observed (min, max), whatever a subclass clips."""
        return HistogramObserver.range(self)

    def _cached_range(self, compute) -> tuple[float, float]:
        if not self._count:
            raise self._no_data()
        if self._cache is None:
            self._cache = compute()
        return self._cache

    def _get_state(self):
        if not self._count:
            return {"min": None, "max": None, "exponent": None, "offset": None, "counts": None}
        h = self._hist
        return {"min": self._min, "max": self._max, "exponent": h.exponent, "offset": h.offset,
                "counts": h.counts.tolist()}

    def _load_state(self, state):
        lo, hi = _float_or_none(state["min"]), _float_or_none(state["max"])
        if self._count == 0:
            if any(state[k] is not None for k in ("min", "max", "exponent", "offset", "counts")):
                raise ValueError("an observer with count 0 has no histogram")
            return
        if lo is None or hi is None or lo > hi:
            raise ValueError(f"min/max {lo!r}, {hi!r} do not form a range")
        k, first, n = _window(*self._cover(lo, hi), self._bins)
        if (state["exponent"], state["offset"]) != (k, first) or len(state["counts"]) != n:
            raise ValueError(
                f"histogram window (exponent {state['exponent']!r}, offset {state['offset']!r}, "
                f"{len(state['counts'])} bins) is not the aligned window of the range [{lo}, {hi}] "
                f"with {self._bins} bins (exponent {k}, offset {first}, {n} bins)"
            )
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in state["counts"]):
            raise ValueError("histogram counts must be integers")
        counts = np.array(state["counts"], dtype=np.int64)
        if np.any(counts < 0) or counts[-1] == 0 or (not self._magnitude and counts[0] == 0):
            raise ValueError("histogram counts must be non-negative, with the min's and max's bins non-empty")
        self._min, self._max, self._hist = lo, hi, AlignedHistogram(k, first, counts)

    def _merged_state(self, other):
        if not self._count or not other._count:
            src = other if not self._count else self
            return (src._min, src._max, src._hist)
        lo, hi = min(self._min, other._min), max(self._max, other._max)
        k, first, n = _window(*self._cover(lo, hi), self._bins)
        return (lo, hi, self._hist.rebin(k, first, n) + other._hist.rebin(k, first, n))

    def _set_state(self, state):
        self._min, self._max, self._hist = state
        self._cache = None

    def quantile(self, q: float) -> float:
        """``Q(q)`` for ``q`` in [0, 1], interpolated linearly within a bin (see
        :class:`PercentileObserver`)."""
        if not self._count:
            raise self._no_data()
        q = _check_float(q, "quantile", 0.0, 1.0, self._name)
        counts = self._hist.counts
        cum = np.cumsum(counts)
        r = q * float(cum[-1])
        b = min(int(np.searchsorted(cum, r, side="left")), counts.size - 1)
        before = float(cum[b] - counts[b])
        left, right = (float(v[b]) for v in self._bin_supports())
        frac = min(max((r - before) / float(counts[b]), 0.0), 1.0)
        return min(max(left + frac * (right - left), self._min), self._max)

    def _bin_supports(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, the interval its samples can occupy: the bin clipped to the observed range."""
        edges = self._hist.edges()
        lo, hi = self._cover(self._min, self._max)
        return np.maximum(edges[:-1], lo), np.minimum(edges[1:], hi)


@OBSERVERS.register()
class PercentileObserver(HistogramObserver):
    """Range = the lower and upper ``percentile`` of the values (e.g. 0.01% and 99.99%).

    ``range() = (Q(1 - p/100), Q(p/100))`` where ``Q(q)`` inverts the histogram's CDF assuming the
    samples of each bin are spread uniformly over the bin's support (the bin clipped to the
    observed [min, max]): for rank ``r = q * n`` (``n`` samples), bin ``b`` is the first whose
    cumulative count ``C_b >= r``, and ``Q(q) = L_b + (r - C_{b-1}) / count_b * (R_b - L_b)``
    (linear interpolation within the bin). ``Q(0) = min`` and ``Q(1) = max`` exactly, so
    ``percentile=100`` gives the min/max range, and constant data c gives (c, c).

    ``symmetric=True`` (for signed tensors) returns ``(-t, t)`` with ``t = max(-Q(1 - p/100), Q(p/100))``.
    Contract: ``50 <= percentile <= 100``. Merge: that of the histogram (exact, any order).
    """

    method = "percentile"

    def __init__(self, percentile: float = 99.99, *, symmetric: bool = False, bins: int = 2048,
                 name: str | None = None):
        super().__init__(bins, name=name)
        self._percentile = _check_float(percentile, "percentile", 50.0, 100.0, name)
        if not isinstance(symmetric, bool):
            raise QuantizationError(f"{_label(name)}: symmetric must be True or False, got {symmetric!r}")
        self._symmetric = symmetric

    def options(self):
        return {"percentile": self._percentile, "symmetric": self._symmetric, "bins": self._bins}

    def range(self) -> tuple[float, float]:
        def compute():
            p = self._percentile / 100.0
            lo, hi = self.quantile(1.0 - p), self.quantile(p)
            if self._symmetric:
                t = max(-lo, hi, 0.0)
                return -t, t
            return lo, hi

        return self._cached_range(compute)


@OBSERVERS.register()
class MSEObserver(HistogramObserver):
    """Range = the clipping range [a, b] that minimises the int8 quantize-dequantize MSE.

    Search: with ``L = min(min, 0)`` and ``U = max(max, 0)``, the candidates are the grid
    ``a = L * i / steps``, ``b = U * j / steps`` for ``i, j = 1 .. steps`` (just ``a = 0`` when
    ``L = 0``, e.g. post-ReLU; just ``b = 0`` when ``U = 0``): ``steps**2`` candidates for signed
    data, ``steps`` for one-sided data. Each candidate gets its parameters from
    :func:`~intq.qmath.choose_qparams` (asymmetric, ``dtype``), and its error is

        E(a, b) = sum_bins count * (v - dequantize(quantize(v)))**2 / n

    over the histogram, each bin's mass at ``v`` = the centre of the bin's support (the bin
    clipped to [min, max]), with intq's own :func:`~intq.qmath.quantize` (TFLite rounding, float32
    division) and saturation — so the clipping error of values outside [a, b] is included.
    The candidate of least error wins; ties go to the wider candidate. ``range()`` searches the
    grid coarse to fine (every 10th line, then around the coarse winner: :meth:`_mse_range`), 20x
    fewer evaluations than the exhaustive :meth:`candidate_errors`, whose minimum it returns on 58
    of 60 random tensors (the other two within 0.3% of the least error).
    Candidates whose scale would underflow float32 are skipped.

    Results: all zeros -> (0.0, 0.0); constant c -> (min(c, 0), max(c, 0)); the range always has
    ``a <= 0 <= b``. Cost of ``range()``: about ``(100 + 4 * steps) * nbins`` quantize-dequantize
    evaluations, vectorised (a few ms for the defaults; the result is cached until the next update).
    Contract: ``1 <= steps <= 1000``. Merge: that of the histogram (exact).
    """

    method = "mse"

    def __init__(self, bins: int = 2048, *, steps: int = 100, dtype: str = "int8", name: str | None = None):
        super().__init__(bins, name=name)
        self._steps = _check_int(steps, "steps", 1, 1000, name)
        try:
            dtype_range(dtype)
        except QuantizationError as exc:
            raise QuantizationError(f"{_label(name)}: {exc}") from None
        self._dtype = np.dtype(dtype).name

    def options(self):
        return {"bins": self._bins, "steps": self._steps, "dtype": self._dtype}

    def candidate_errors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(a, b, E)``: the candidate ranges (in search order) and their expected squared errors."""
        if not self._count:
            raise self._no_data()
        lo0, hi0 = min(self._min, 0.0), max(self._max, 0.0)
        fractions = np.arange(self._steps, 0, -1, dtype=np.float64) / self._steps  # widest first
        a_set = lo0 * fractions if lo0 < 0 else np.zeros(1)
        b_set = hi0 * fractions if hi0 > 0 else np.zeros(1)
        a, b = (g.reshape(-1) for g in np.meshgrid(a_set, b_set, indexing="ij"))
        qmin, qmax = dtype_range(self._dtype)
        usable = ((b - a) / (qmax - qmin)).astype(np.float32) >= np.finfo(np.float32).tiny
        a, b = a[usable], b[usable]
        return a, b, self.expected_errors(a, b)

    def expected_errors(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``E(a, b)`` of each candidate range (see the class docstring) over this histogram."""
        left, right = self._bin_supports()
        nz = self._hist.counts > 0
        values = ((left + right) / 2)[nz]
        weights = self._hist.counts[nz] / float(self._hist.total)
        a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
        errors = np.empty(a.size, dtype=np.float64)
        chunk = max(1, _MSE_CHUNK_ELEMENTS // values.size)
        label = self._name if self._name is not None else "tensor"
        values32 = values.astype(np.float32)  # quantize's float32 division reads float32 values
        for s in range(0, a.size, chunk):
            qp = choose_qparams(a[s:s + chunk], b[s:s + chunk], self._dtype, axis=0, name=label)
            # (dequantize(quantize(v, qp_c), qp_c, float64) - v)**2 per candidate c and value v
            sq = np.empty((qp.scale.size, values.size), np.float64, order="F")
            _squared_errors(values, values32, qp.scale.astype(np.float32), qp.scale, qp.zero_point,
                            qp.qmin, qp.qmax, sq)
            errors[s:s + chunk] = sq @ weights
        return errors

    def _grid_errors(self, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(a, b, E, usable)`` of the grid points ``a = L i / steps``, ``b = U j / steps`` for the
        index arrays ``i``, ``j`` (all pairs, ``i`` outer, each in decreasing order: widest first)."""
        lo0, hi0 = min(self._min, 0.0), max(self._max, 0.0)
        ii, jj = (g.reshape(-1) for g in np.meshgrid(i, j, indexing="ij"))
        a = lo0 * (ii / self._steps) if lo0 < 0 else np.zeros(ii.size)  # as candidate_errors computes them
        b = hi0 * (jj / self._steps) if hi0 > 0 else np.zeros(jj.size)
        qmin, qmax = dtype_range(self._dtype)
        usable = ((b - a) / (qmax - qmin)).astype(np.float32) >= np.finfo(np.float32).tiny
        errors = np.full(a.size, np.inf)
        if usable.any():
            errors[usable] = self.expected_errors(a[usable], b[usable])
        return a, b, errors, usable

    def _mse_range(self) -> tuple[float, float]:
        """The least-error grid point, found coarse to fine: every ``stride``-th grid line
        (``stride = ceil(steps / COARSE)``), then every grid point within ``stride - 1`` lines of the
        coarse winner. The exhaustive grid's minimum wherever the error varies smoothly at the
        coarse resolution (a sum of rounding and clipping errors does); ``steps**2`` evaluations
        become about ``COARSE**2 + (2 stride)**2`` (461 instead of 10,000 for ``steps=100``), which
        keeps ``mse`` within 3x the time of minmax. Ties go to the wider candidate."""
        lo0, hi0 = min(self._min, 0.0), max(self._max, 0.0)
        if lo0 == hi0:
            return 0.0, 0.0
        n = self._steps
        stride = -(-n // _MSE_COARSE)
        coarse = np.arange(n, 0, -stride)
        one = np.array([n])
        a, b, errors, usable = self._grid_errors(coarse if lo0 < 0 else one, coarse if hi0 > 0 else one)
        if not usable.any():  # every candidate scale underflows: report the observed range
            return lo0, hi0
        best = int(np.argmin(errors))
        i0 = round(a[best] / lo0 * n) if lo0 < 0 else n
        j0 = round(b[best] / hi0 * n) if hi0 > 0 else n

        def around(k: int) -> np.ndarray:
            return np.arange(min(n, k + stride - 1), max(1, k - stride + 1) - 1, -1)

        fa, fb, ferrors, fusable = self._grid_errors(around(i0) if lo0 < 0 else one, around(j0) if hi0 > 0 else one)
        a, b, errors = np.concatenate([a, fa]), np.concatenate([b, fb]), np.concatenate([errors, ferrors])
        width = b - a
        best = int(np.lexsort((a, -width, errors))[0])  # least error, then the wider, then the lower (stable)
        return float(a[best]), float(b[best])

    def range(self) -> tuple[float, float]:
        return self._cached_range(self._mse_range)


@OBSERVERS.register()
class EntropyObserver(HistogramObserver):
    """Range from the KL-divergence threshold (TensorRT's entropy calibration, as in TPU-MLIR).

    Keeps an aligned histogram of ``|x|`` over ``[0, max|x|]`` (bin 0 starts at 0; between
    ``bins/2`` and ``bins`` bins of width ``w = 2**k`` once max|x| spans a few bins) and the exact
    signed min/max. TensorRT stretches exactly 2048 bins over [0, max|x|]; here the bins are
    power-of-two aligned so that merging stays exact, which keeps the same resolution up to a
    factor of 2. For every candidate ``i`` in ``[L, N]`` (N = number of bins):

    * the spike at zero: ``h[0]`` is replaced by ``h[1]`` before anything else (TensorRT's
      calibrator does the same). A ReLU output's zeros would otherwise hold most of the mass, and
      the divergence, dominated by one bin every candidate represents exactly, would barely notice
      the tail being clipped (issue 13: every ReLU6 of a MobileNetV2 clipped to about [0, 1]);
    * one-sided data (``min >= 0`` or ``max <= 0``) is quantized to ``2 * levels`` levels (the
      whole int8 grid covers [0, t]), signed data to ``levels``; call that ``L``;
    * reference ``P = h[0:i]`` with the outlier mass ``sum(h[i:])`` added to ``P[i-1]``;
    * candidate ``Q``: ``h[0:i]`` (without the outliers) summed into ``L`` groups, group
      ``g`` = bins ``[floor(g*i/L), floor((g+1)*i/L))``, each group's sum spread evenly
      over the group's bins where ``P > 0`` (zero elsewhere);
    * ``KL(P || Q) = sum_{P>0} p log(p / q)`` after normalising both. A bin with ``P > 0`` and
      ``Q = 0`` (the whole top group of ``h[0:i]`` is empty but outliers land in ``P[i-1]``) would
      make it infinite; there ``Q`` is smoothed: those bins get ``1e-4 / |{P > 0}|`` each, then
      ``Q`` is renormalised — so clipping a few far outliers stays cheap, as in TensorRT.
      A candidate that keeps no sample unclipped (``h[0:i]`` all zero) has divergence ``+inf``.

    ``Q`` is built from the bins *without* the outlier mass, as TensorRT describes it: built from
    ``P`` instead, ``i = L`` would give ``Q = P`` and a divergence of 0 for any data.
    The smallest threshold is thus ``L * w`` (about ``max|x| * L / bins``, as in TensorRT).
    The first ``i`` of least divergence gives the threshold ``t = i * w`` (the upper edge of the
    last kept bin); ``range() = (max(-t, min), min(t, max))``, so a post-ReLU tensor keeps min 0
    and ``i = N`` reproduces the observed range. With ``N <= L`` (little data spread) or all
    zeros, nothing is clipped: the range is the observed (min, max).

    **Safety bound.** Only candidates that clip at most ``max_clipped`` of the values (default
    0.1%) compete. KL divergence compares the *shapes* of P and Q; on data that is not bell-shaped
    it happily clips the signal: the first conv of PP-OCR's text classifier (a ReLU output whose
    strongest 1% are the text's edges) was clipped to [0, 3.8] of [0, 9], and data away from zero
    (a HardSigmoid in [0.1, 0.34]) collapsed to a single value. ``max_clipped=1`` is TensorRT's
    unbounded search.

    ``levels=128`` is the number of non-negative int8 levels. Contract: ``2 <= levels``,
    ``0 <= max_clipped <= 1``.
    Merge: that of the histogram (exact, any order).
    """

    method = "entropy"
    _magnitude = True

    def __init__(self, bins: int = 2048, *, levels: int = 128, max_clipped: float = DEFAULT_MAX_CLIPPED,
                 name: str | None = None):
        super().__init__(bins, name=name)
        self._levels = _check_int(levels, "levels", 2, MAX_BINS, name)
        self._max_clipped = _check_float(max_clipped, "max_clipped", 0.0, 1.0, name)

    def options(self):
        return {"bins": self._bins, "levels": self._levels, "max_clipped": self._max_clipped}

    def levels_used(self) -> int:
        """Quantized levels of the candidate ``Q``: ``levels`` for signed data, ``2 * levels`` for
        one-sided data (min >= 0 or max <= 0), whose range the whole int8 grid covers."""
        if not self._count:
            raise self._no_data()
        one_sided = self._min >= 0.0 or self._max <= 0.0
        return 2 * self._levels if one_sided else self._levels

    def divergences(self) -> tuple[np.ndarray, np.ndarray]:
        """``(i, KL_i)`` for every candidate bin count ``i`` in ``[L, N]`` (empty if N < L), with
        ``L`` = :meth:`levels_used`."""
        if not self._count:
            raise self._no_data()
        return entropy_divergences(self._hist.counts, self.levels_used(), self._max_clipped)

    def threshold(self) -> float:
        """The clipping threshold t on |x| (``inf`` when nothing is clipped)."""
        cands, kl = self.divergences()
        if cands.size == 0 or self._max == self._min == 0.0:
            return math.inf
        i = int(cands[int(np.argmin(kl))])
        return _edge(i, self._hist.exponent)

    def range(self) -> tuple[float, float]:
        def compute():
            t = self.threshold()
            return max(-t, self._min), min(t, self._max)

        return self._cached_range(compute)


@OBSERVERS.register()
class AutoObserver(MSEObserver):
    """Range = whichever of minmax, percentile, entropy and MSE quantizes *this* tensor best.

    One histogram (that of :class:`HistogramObserver`, so the state and its exact merge are the
    same) gives four candidate ranges: the observed (min, max); the ``percentile`` range
    (:meth:`HistogramObserver.quantile`); the entropy threshold (the search of
    :class:`EntropyObserver` on the histogram folded to ``|x|``, with its spike, one-sided and
    ``max_clipped`` rules); and the MSE search of :class:`MSEObserver` on a ``steps`` x ``steps``
    grid. Each is scored by its expected int8 quantize-dequantize error over the histogram
    (:meth:`MSEObserver.expected_errors`: rounding inside the range, clipping outside); the least
    wins, ties to the earlier in the order above (minmax first). :meth:`choice` names the winner.
    The criterion is local: it does not see how a tensor's error grows downstream. Since the MSE
    candidate is :class:`MSEObserver`'s own search (``steps=100``, coarse to fine), auto's choice
    has at most mse's expected error on every tensor; on the corpus of docs/accuracy.md its output
    is within 0.05 dB of mse's or closer to float (with a 10 x 10 grid it was up to 1.5 dB behind).
    Requiring clipping to beat minmax by 10% made it worse.

    Cost: the MSE search, at most 32 entropy thresholds (every k-th bin) and four scores per tensor
    (calibration 1.5x-2.5x the time of minmax on that corpus, docs/accuracy.md; the aliases of
    :func:`intq.calibration.calibrate.value_aliases` are searched once). Merge: that of the
    histogram (exact, any order).
    """

    method = "auto"
    #: candidate names, in tie-breaking order
    CANDIDATES = ("minmax", "percentile", "entropy", "mse")

    def __init__(self, bins: int = 2048, *, steps: int = 100, percentile: float = 99.99, levels: int = 128,
                 max_clipped: float = DEFAULT_MAX_CLIPPED, name: str | None = None):
        super().__init__(bins, steps=steps, dtype="int8", name=name)
        self._percentile = _check_float(percentile, "percentile", 50.0, 100.0, name)
        self._levels = _check_int(levels, "levels", 2, MAX_BINS, name)
        self._max_clipped = _check_float(max_clipped, "max_clipped", 0.0, 1.0, name)

    def options(self):
        return {"bins": self._bins, "steps": self._steps, "percentile": self._percentile, "levels": self._levels,
                "max_clipped": self._max_clipped}

    def _entropy_range(self) -> tuple[float, float]:
        # the |x| histogram from bin 0: at the width the magnitude observer would use (or this
        # histogram's, if coarser), so data far from zero does not need 2**40 bins
        k = max(_window(0.0, max(-self._min, self._max), self._bins)[0], self._hist.exponent)
        first = _floor_index_scalar(self._min, k)
        h = self._hist.rebin(k, first, _floor_index_scalar(self._max, k) - first + 1)
        idx = np.arange(h.offset, h.offset + h.nbins)
        mag = np.where(idx >= 0, idx, -idx - 1)  # bin [j w, (j+1) w) of x < 0 holds |x| in (-(j+1) w, -j w]
        counts = np.bincount(mag, weights=h.counts, minlength=int(mag.max()) + 1).astype(np.int64)
        one_sided = self._min >= 0.0 or self._max <= 0.0
        cands, kl = entropy_divergences(counts, 2 * self._levels if one_sided else self._levels, self._max_clipped,
                                        _AUTO_ENTROPY_CANDIDATES)
        if cands.size == 0 or not np.isfinite(kl).any():
            return self._min, self._max
        t = _edge(int(cands[int(np.argmin(kl))]), h.exponent)
        return max(-t, self._min), min(t, self._max)

    def candidates(self) -> dict[str, tuple[float, float]]:
        """The candidate ranges by method name."""
        if not self._count:
            raise self._no_data()
        p = self._percentile / 100.0
        out = {"minmax": (self._min, self._max), "percentile": (self.quantile(1.0 - p), self.quantile(p)),
               "entropy": self._entropy_range()}
        out["mse"] = self._mse_range()
        return out

    def scores(self, cands: dict[str, tuple[float, float]] | None = None) -> dict[str, float]:
        """The expected squared error of each candidate range (smaller is better)."""
        cands = self.candidates() if cands is None else cands
        lo = np.array([min(a, 0.0) for a, _ in cands.values()])
        hi = np.array([max(b, 0.0) for _, b in cands.values()])
        if np.all(hi - lo == 0):
            return dict.fromkeys(cands, 0.0)
        usable = (hi - lo) > 0
        errors = np.full(lo.size, np.inf)
        errors[usable] = self.expected_errors(lo[usable], hi[usable])
        return dict(zip(cands, errors.tolist()))

    def _decide(self) -> tuple[str, tuple[float, float]]:
        cands = self.candidates()
        scores = self.scores(cands)
        best = min(self.CANDIDATES, key=lambda m: (scores[m], self.CANDIDATES.index(m)))
        lo, hi = cands[best]
        return best, (float(lo), float(hi))

    def choice(self) -> str:
        """The method whose range :meth:`range` returns."""
        return self._decide()[0]

    def range(self) -> tuple[float, float]:
        return self._cached_range(lambda: self._decide()[1])


def entropy_divergences(counts: np.ndarray, levels: int, max_clipped: float,
                        max_candidates: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(i, KL_i)`` of the entropy search over a histogram of ``|x|`` (bin 0 starting at 0), with
    ``levels`` quantized levels and at most ``max_clipped`` of the values clipped (the rules of
    :class:`EntropyObserver`). ``max_candidates`` thins the candidates to every k-th (TensorRT's
    ``stride``), the last (nothing clipped) always kept."""
    h = counts.astype(np.float64)
    n = h.size
    if n > 1:  # the spike at zero (a ReLU's zeros) counts as much as its neighbour, as in TensorRT
        h[0] = h[1]
    tail = np.concatenate([np.cumsum(h[::-1])[::-1], [0.0]])  # tail[i] = sum(h[i:])
    clipped = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]]) / float(max(int(counts.sum()), 1))
    cands = np.arange(levels, n + 1)
    cands = cands[clipped[cands] <= max_clipped]  # never clip more than max_clipped of the values
    if max_candidates is not None and cands.size > max_candidates:
        stride = -(-cands.size // max_candidates)
        cands = np.unique(np.append(cands[::stride], cands[-1]))
    kl = np.array([_kl_divergence(h[:i], tail[i], levels) for i in cands], dtype=np.float64)
    return cands, kl


def _kl_divergence(ref: np.ndarray, outliers: float, levels: int) -> float:
    """KL(P || Q) of one entropy-calibration candidate (see :class:`EntropyObserver`)."""
    i = ref.size
    p = ref.copy()
    p[-1] += outliers
    nonzero = p > 0
    starts = (np.arange(levels) * i) // levels  # strictly increasing since i >= levels
    group_sum = np.add.reduceat(ref, starts)
    group_nz = np.add.reduceat(nonzero.astype(np.int64), starts)
    per_bin = np.divide(group_sum, group_nz, out=np.zeros(levels), where=group_nz > 0)
    q = np.repeat(per_bin, np.diff(np.append(starts, i))) * nonzero
    p_nz, q_nz = p[nonzero], q[nonzero]
    if q_nz.sum() == 0:  # every sample is beyond the candidate threshold: Q says nothing
        return math.inf
    p_nz = p_nz / p_nz.sum()
    q_nz = q_nz / q_nz.sum()
    empty = q_nz == 0
    if empty.any():  # P > 0 where Q = 0: smooth Q there instead of an infinite divergence
        q_nz[empty] = _KL_SMOOTHING / q_nz.size
        q_nz = q_nz / q_nz.sum()
    return float(np.sum(p_nz * np.log(p_nz / q_nz)))


# --------------------------------------------------------------------------------------------------
# factory


#: ``make_observer`` method names and the classes they build.
OBSERVER_METHODS: dict[str, type[Observer]] = {cls.method: cls for cls in OBSERVERS.values() if cls.method}


def make_observer(method: str, *, name: str | None = None, **options) -> Observer:
    """Build the observer for a calibration ``method`` ("minmax", "ema", "percentile", "mse",
    "entropy") with its options, e.g. ``make_observer("percentile", name="conv1", percentile=99.9)``.

    An unknown method or option raises :class:`QuantizationError` listing the valid ones.
    """
    cls = OBSERVER_METHODS.get(method) if isinstance(method, str) else None
    if cls is None:
        valid = ", ".join(repr(m) for m in OBSERVER_METHODS)
        raise QuantizationError(f"{_label(name)}: unknown calibration method {method!r}; use one of: {valid}")
    params = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "name")]
    unknown = sorted(set(options) - set(params))
    if unknown:
        valid = ", ".join(params) if params else "none"
        raise QuantizationError(
            f"{_label(name)}: unknown option(s) {', '.join(unknown)} for calibration method "
            f"{method!r}; its options are: {valid}"
        )
    return cls(name=name, **options)
