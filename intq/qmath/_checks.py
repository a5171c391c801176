"""Contract checks shared by the arithmetic primitives (internal)."""

from __future__ import annotations

import numpy as np

from intq.errors import ContractError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def as_int64(x, name: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> np.ndarray:
    """Return ``x`` as an int64 array after checking every element lies in [lo, hi].

    Accepts integer numpy arrays, Python ints (arbitrary size) and sequences of them. Floats are
    refused: a primitive that mirrors integer C code must not silently truncate a float.
    """
    try:
        arr = np.asarray(x)
    except OverflowError:
        raise ContractError(f"{name}: value {x!r} does not fit in 64 bits") from None
    if arr.dtype == object:
        try:
            arr = arr.astype(np.int64)
        except (OverflowError, TypeError):
            raise ContractError(f"{name}: expected integers within [{lo}, {hi}], got {x!r}") from None
    if arr.dtype == np.uint64:
        if arr.size and int(arr.max()) > INT64_MAX:
            raise ContractError(f"{name}: value {int(arr.max())} exceeds {hi}")
        arr = arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_:
        raise ContractError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.dtype != np.bool_:
        info = np.iinfo(arr.dtype)
        if lo <= info.min and info.max <= hi:  # the dtype itself guarantees the range
            return arr.astype(np.int64, copy=False)
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        amin, amax = int(arr.min()), int(arr.max())
        if amin < lo or amax > hi:
            bad = amin if amin < lo else amax
            raise ContractError(f"{name}: value {bad} is outside the contract range [{lo}, {hi}]")
    return arr


def scalar_or_array(result: np.ndarray, dtype=np.int32):
    """Cast to ``dtype``; a 0-d result comes back as a numpy scalar."""
    out = result.astype(dtype, copy=False)
    return out[()] if out.ndim == 0 else out
