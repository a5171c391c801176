"""Elementwise float32 transcendental functions as the C math library computes them, and the
float32 LOGISTIC of TFLite's reference kernels built on them.

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


@njit(cache=True, nogil=True)
def _tanh_loop(x):
    out = np.empty_like(x)
    flat_in, flat_out = x.ravel(), out.ravel()
    for i in range(flat_in.size):
        flat_out[i] = math.tanh(flat_in[i])
    return out


_SIN, _COS, _EXP, _LOG, _TANH = _sin_loop, _cos_loop, _exp_loop, _log_loop, _tanh_loop


def _dispatch(loop: Callable, fallback: Callable) -> Callable:
    def f(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype == np.float32:
            return loop(np.ascontiguousarray(x))
        return fallback(x)
    return f


#: TFLite's reference float LOGISTIC (``reference_ops::Logistic``, which LiteRT's reference kernel and
#: TensorFlow Lite Micro run): 1 above this input, ``expf(x)`` below LOGISTIC_CUTOFF_LOWER,
#: ``1.f / (1.f + expf(-x))`` between, every step in float32.
LOGISTIC_CUTOFF_UPPER = np.float32(16.619047164916992188)
LOGISTIC_CUTOFF_LOWER = np.float32(-9.0)


@njit(cache=True, nogil=True)
def _logistic(x):
    out = np.empty_like(x)
    flat_in, flat_out = x.ravel(), out.ravel()
    one = np.float32(1.0)
    for i in range(flat_in.size):
        v = flat_in[i]
        if v > LOGISTIC_CUTOFF_UPPER:
            flat_out[i] = one
        elif v < LOGISTIC_CUTOFF_LOWER:
            flat_out[i] = math.exp(v)
        else:
            flat_out[i] = one / (one + math.exp(-v))
    return out


sin = _dispatch(_SIN, np.sin)
cos = _dispatch(_COS, np.cos)
exp = _dispatch(_EXP, np.exp)
log = _dispatch(_LOG, np.log)
tanh = _dispatch(_TANH, np.tanh)  # TFLite's reference float TANH: std::tanh(float), the C library's tanhf


def logistic(x: np.ndarray) -> np.ndarray:
    """``sigmoid(x)`` for float32 ``x`` exactly as TFLite's reference float LOGISTIC computes it (the
    C library's ``expf``, the two cutoffs, float32 arithmetic): bit for bit what LiteRT's reference
    kernels and TensorFlow Lite Micro give (``tests/tflite/test_float_builtins.py``). Its difference
    from the exact sigmoid: below -9 it returns exp(x), relatively 1e-4 off at -9 (1.2e-8
    absolute) and less below; above 16.62 it returns 1, the exact value being within 6e-8 of 1."""
    assert x.dtype == np.float32
    return _logistic(np.ascontiguousarray(x))
