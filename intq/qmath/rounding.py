"""Rounding modes, named after what they do, for floats and for integer right shifts.

Every place intq turns a real number (or a wide integer) into a narrower integer names one of
these modes; which runtime uses which is part of that runtime's contract (docs/arithmetic.md).

==================== ================= ================= ======================================
mode                 2.5 -> / -2.5 ->  C spelling        used by
==================== ================= ================= ======================================
HALF_AWAY_FROM_ZERO   3 / -3           std::round        TFLite reference QUANTIZE (TfLiteRound),
                                                         gemmlowp RoundingDivideByPOT
HALF_TO_EVEN          2 / -2           std::nearbyint    ONNX Runtime (MLAS), XNNPACK, numpy.rint
HALF_UP               3 / -2           floor(x + 0.5)    (x + 2^(n-1)) >> n: single-rounding
                                                         TFLite, CMSIS-NN, ruy, spec 000
HALF_DOWN             2 / -3           ceil(x - 0.5)     TPU-MLIR ROUNDING_HALF_DOWN
FLOOR                 2 / -3           floor, x >> n     plain arithmetic shift
CEIL                  3 / -2           ceil              TPU-MLIR ROUNDING_UP
TOWARD_ZERO           2 / -2           trunc, (int)x     C casts (truncation)
==================== ================= ================= ======================================
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from intq.errors import ContractError


class Rounding(str, Enum):
    """How a value exactly halfway (or anywhere) between two integers is resolved."""

    HALF_AWAY_FROM_ZERO = "half_away_from_zero"
    HALF_TO_EVEN = "half_to_even"
    HALF_UP = "half_up"
    HALF_DOWN = "half_down"
    FLOOR = "floor"
    CEIL = "ceil"
    TOWARD_ZERO = "toward_zero"

    @classmethod
    def parse(cls, value: "Rounding | str") -> "Rounding":
        """Accept a member or its string value; raise a clear error listing the valid names."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise ContractError(f"unknown rounding mode {value!r}; use one of: {names}") from None


def round_float(x, rounding: Rounding | str = Rounding.HALF_AWAY_FROM_ZERO) -> np.ndarray:
    """Round a float array to integral values (same float dtype) with the named mode.

    Exact for every finite input: the fractional part ``f = x - trunc(x)`` is computed exactly
    (it is representable in x's own format), and the decision is taken on ``f``, never on
    ``x + 0.5``, which misrounds e.g. 0.49999997 in float32. Infinities pass through.
    """
    mode = Rounding.parse(rounding)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise ContractError(f"round_float takes a float array, got dtype {x.dtype}")
    if mode is Rounding.HALF_TO_EVEN:
        return np.rint(x)
    if mode is Rounding.FLOOR:
        return np.floor(x)
    if mode is Rounding.CEIL:
        return np.ceil(x)
    if mode is Rounding.TOWARD_ZERO:
        return np.trunc(x)
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):  # inf - inf = nan is masked below
        f = x - t  # exact; in (-1, 1)
    one = np.ones((), dtype=x.dtype)
    if mode is Rounding.HALF_AWAY_FROM_ZERO:
        step = np.where(f >= 0.5, one, np.where(f <= -0.5, -one, 0))
    elif mode is Rounding.HALF_UP:
        step = np.where(f >= 0.5, one, np.where(f < -0.5, -one, 0))
    else:  # HALF_DOWN
        step = np.where(f > 0.5, one, np.where(f <= -0.5, -one, 0))
    return np.where(np.isfinite(x), t + step, x).astype(x.dtype, copy=False)


def shift_right_rounded(x: np.ndarray, n: np.ndarray, mode: Rounding) -> np.ndarray:
    """``x / 2**n`` rounded with ``mode``, for int64 ``x`` and int64 ``n`` in [0, 63].

    The unchecked core of the integer rounding shifts; callers validate their own contract.
    With ``q = x >> n`` (floor) and ``r = x - q * 2**n`` in [0, 2**n), the result is ``q`` plus
    0 or 1 chosen by comparing ``r`` with the half ``2**(n-1)``. No intermediate overflows.
    """
    q = x >> n
    mask = (np.int64(1) << n) - 1
    r = x & mask
    half = np.where(n > 0, np.int64(1) << np.maximum(n - 1, 0), 1)  # n == 0: r == 0 < half
    if mode is Rounding.FLOOR:
        up = np.zeros(np.broadcast(x, n).shape, dtype=bool)
    elif mode is Rounding.HALF_UP:
        up = r >= half
    elif mode is Rounding.HALF_DOWN:
        up = r > half
    elif mode is Rounding.HALF_AWAY_FROM_ZERO:
        up = np.where(x >= 0, r >= half, r > half)
    elif mode is Rounding.HALF_TO_EVEN:
        up = (r > half) | ((r == half) & ((q & 1) == 1))
    elif mode is Rounding.CEIL:
        up = r != 0
    else:  # TOWARD_ZERO
        up = (x < 0) & (r != 0)
    return q + up.astype(np.int64)
