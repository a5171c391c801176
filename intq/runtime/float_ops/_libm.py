"""Elementwise float32 transcendental functions as the C math library computes them.

TFLite's float kernels (LiteRT's and TensorFlow Lite Micro's SIN, COS, EXP, LOG) call
``std::sin(float)`` ... i.e. the C library's ``sinf``, ``cosf``, ``expf``, ``logf``; numpy's float32
loops are its own implementations and differ from glibc in the last bit on some inputs (measured:
``np.sin`` on 0.5 % of a float island's values). These loops compile to the same C functions
(numba lowers ``math.sin`` on a float32 to LLVM's ``llvm.sin.f32``, emitted as a call to ``sinf``),
so a float island of an "int8" ``.tflite`` computes what the runtimes compute, bit for bit
(``tests/runtime/test_float_ops.py`` checks them against ``sinf``... called through ctypes).
Other dtypes use numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit


# One top-level loop per function, each with its own name: numba keys its on-disk cache by the
# function's qualified name and source line, not by the variables a closure captures, so four
# closures made by one factory with ``cache=True`` shared one cache entry and could load each
# other's machine code (measured: LOG computed with another function's loop from a stale cache).
@njit(cache=True, nogil=True)
def _sin_loop(x):
    out = np.empty_like(x)
    flat_in, flat_out = x.ravel(), out.ravel()
    for i in range(flat_in.size):
        flat_out[i] = math.sin(flat_in[i])
    return out


@njit(cache=True, nogil=True)
def _cos_loop(x):
    out = np.empty_like(x)
    flat_in, flat_out = x.ravel(), out.ravel()
    for i in range(flat_in.size):
        flat_out[i] = math.cos(flat_in[i])
    return out


@njit(cache=True, nogil=True)
def _exp_loop(x):
    out = np.empty_like(x)
    flat_in, flat_out = x.ravel(), out.ravel()
    for i in range(flat_in.size):
        flat_out[i] = math.exp(flat_in[i])
    return out


@njit(cache=True, nogil=True)
def _log_loop(x):
    out = np.empty_like(x)
    flat_in, flat_out = x.ravel(), out.ravel()
    for i in range(flat_in.size):
        flat_out[i] = math.log(flat_in[i])
    return out


_SIN, _COS, _EXP, _LOG = _sin_loop, _cos_loop, _exp_loop, _log_loop


def _dispatch(loop: Callable, fallback: Callable) -> Callable:
    def f(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype == np.float32:
            return loop(np.ascontiguousarray(x))
        return fallback(x)
    return f


sin = _dispatch(_SIN, np.sin)
cos = _dispatch(_COS, np.cos)
exp = _dispatch(_EXP, np.exp)
log = _dispatch(_LOG, np.log)
