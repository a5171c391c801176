"""Exact, mergeable sums of floats: what makes a metric reduced over shards equal the one-process run.

A float sum depends on the order of its additions; a metric summed batch after batch in one process
and summed shard by shard on several machines would differ in the last bits. :class:`ExactSum`
keeps the *exact* sum of the float64 values added to it and rounds once, when it is read:

    value() = round_to_nearest_even( sum_i x_i )      (the real sum of every x_i added)

Every finite float64 is an integer multiple of ``2**-1074`` (the smallest subnormal), so the sum is
held as the Python integer ``sum_i x_i * 2**1074`` (at most ~2100 bits; an addition is a shift and
an integer add) and read as ``int / 2**1074``, which Python rounds correctly. Integer addition is
associative and commutative: adding in any order, or merging partial sums in any grouping, gives
the same integer, hence bit for bit the same value. Non-finite values are summed apart, in float
(``inf + -inf = nan``, ``nan`` absorbs): that too is order-free.

Contract: values are real numbers convertible to float (numpy scalars, Python floats and ints
within float range).
"""

from __future__ import annotations

import math

#: ``2**SCALE_BITS`` times any finite float64 is an integer (2**-1074 is the smallest subnormal).
SCALE_BITS = 1074


class ExactSum:
    """The exact sum of the float64 values added, correctly rounded when read (module docstring)."""

    __slots__ = ("_scaled", "_special")

    def __init__(self, value: float = 0.0):
        self._scaled = 0  # sum of the finite values, times 2**SCALE_BITS (an exact integer)
        self._special = 0.0  # float sum of the non-finite values (0.0, +-inf or nan)
        self.add(value)

    def add(self, x) -> "ExactSum":
        """Add ``x`` (in place); returns self."""
        x = float(x)
        if math.isfinite(x):
            num, den = x.as_integer_ratio()  # den is a power of two, at most 2**1074
            self._scaled += num << (SCALE_BITS + 1 - den.bit_length())
        else:
            self._special += x
        return self

    def __iadd__(self, x) -> "ExactSum":
        if isinstance(x, ExactSum):
            self._scaled += x._scaled
            self._special += x._special
            return self
        return self.add(x)

    def __add__(self, other: "ExactSum") -> "ExactSum":
        """The sum of both (a new ExactSum; neither changes)."""
        out = ExactSum()
        out += self
        out += other
        return out

    def value(self) -> float:
        """The exact sum rounded to the nearest float64 (ties to even); +-inf past float64's range."""
        if self._special != 0.0 or math.isnan(self._special):
            return self._special
        try:
            return self._scaled / (1 << SCALE_BITS)
        except OverflowError:
            return math.inf if self._scaled > 0 else -math.inf

    def __float__(self) -> float:
        return self.value()

    def __eq__(self, other) -> bool:
        return isinstance(other, ExactSum) and (self._scaled, repr(self._special)) == (other._scaled, repr(other._special))

    __hash__ = None

    def __repr__(self) -> str:
        return f"ExactSum({self.value()!r})"

    def __getstate__(self):
        return self._scaled, self._special

    def __setstate__(self, state):
        self._scaled, self._special = state
