"""Reusable work buffers for an op's internal temporaries (padded inputs, im2col matrices).

A fresh multi-megabyte numpy array is backed by new pages from the OS, and touching them for
the first time costs page faults: measured ~0.5 ms per MiB on the benchmark VM, as much as
the im2col copy itself. An op's temporaries therefore live in per-thread buffers that are
kept and reused from call to call; only returned outputs are fresh arrays.

Contract: a buffer obtained under one ``key`` is valid until the next request for the same
key in the same thread, and must never escape the op (never returned, never stored). Each
call site uses its own key, so one op can hold several buffers at once.
"""

from __future__ import annotations

import math
import threading

import numpy as np

_LOCAL = threading.local()


def buffer(key: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` backed by the calling
    thread's buffer ``key`` (grown when too small, never shrunk)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    pool = getattr(_LOCAL, "pool", None)
    if pool is None:
        pool = _LOCAL.pool = {}
    raw = pool.get(key)
    if raw is None or raw.size < nbytes:
        raw = pool[key] = np.empty(max(nbytes, 1), np.uint8)
    return raw[:nbytes].view(dtype).reshape(shape)


def release() -> None:
    """Drop the calling thread's buffers (they are rebuilt on demand)."""
    _LOCAL.pool = {}
