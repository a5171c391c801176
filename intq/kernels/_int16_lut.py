"""The 513-entry interpolated int16 tables of the 16x8 SOFTMAX (no ``OP``).

**Building a table** (prepare time, floats allowed) — TFLite's ``gen_lut`` / ``LUTPopulateInt16``
(one algorithm; the runtimes differ in the float type and how they pass the range): over
``[input_min, input_max]`` in 512 steps, entry ``i`` is ``round(f(x_i) * S) - bias_i`` where
``S = 65536 / (output_max - output_min)`` and ``bias_i = round((round((f(x_{i+1}) * S +
round(f(x_i) * S)) / 2) - round(f(x_i + step/2) * S)) / 2)`` — the value at the knot, nudged by
half the midpoint error of the linear interpolation — clamped to int16; entry 512 is
``round(f(input_max) * S)``. Every ``round`` is C's (half away from zero) in the build's float
type, every operation rounded to that type; ``f`` is the C library's ``exp``/``expf``, called
through ctypes so the table equals the runtime's bit for bit.

**Looking a value up** (run time, integer-only) — ``generic_int16_table_lookup`` / ``LUTLookup``:
``index = 256 + (v >> 7)``, ``offset = v & 127``, ``base = lut[index]``,
``slope = int16(lut[index + 1] - lut[index])``, result ``int16(base + ((slope * offset + 64) >> 7))``.
"""

from __future__ import annotations

import numpy as np

from intq.kernels._fixedpoint_lut import c_math_library

NB_STEPS = 512


def c_exp(x: np.ndarray) -> np.ndarray:
    """The C library's ``expf`` (float32 ``x``) or ``exp`` (float64 ``x``), elementwise; numpy's
    function where no C math library loads (it may differ in the last bit)."""
    lib = c_math_library()
    if lib is None:
        return np.exp(x).astype(x.dtype)
    fn = lib.expf if x.dtype == np.float32 else lib.exp
    return np.array([fn(float(v)) for v in x.reshape(-1)], dtype=x.dtype).reshape(x.shape)


def c_round(x: np.ndarray) -> np.ndarray:
    """C's ``round``/``roundf``: half away from zero, exactly, keeping the float type."""
    t = np.trunc(x)
    frac = x - t  # exact
    return (t + np.where(np.abs(frac) >= x.dtype.type(0.5), np.sign(x), x.dtype.type(0))).astype(x.dtype)


def populate(func, input_min, input_max, output_min, output_max, dtype) -> np.ndarray:
    """``gen_lut<FloatT, int16_t, int16_t>`` with ``FloatT = dtype`` (float32 or float64); ``func``
    maps an array of ``dtype`` to ``dtype`` as the C function would. Returns int16 [513]."""
    f = np.dtype(dtype).type
    lo, hi, out_lo, out_hi = f(input_min), f(input_max), f(output_min), f(output_max)
    step = f((hi - lo) / f(NB_STEPS))
    half_step = f(step / f(2))
    scaling_inv = f(f(65536) / f(out_hi - out_lo))
    i = np.arange(NB_STEPS).astype(dtype)
    x = (lo + (i * step).astype(dtype)).astype(dtype)
    x_mid = (x + half_step).astype(dtype)
    x_next = (lo + ((i + f(1)) * step).astype(dtype)).astype(dtype)
    val, val_mid, val_next = func(x), func(x_mid), func(x_next)
    sample = c_round((val * scaling_inv).astype(dtype))
    interp = c_round((((val_next * scaling_inv).astype(dtype) + sample).astype(dtype) / f(2)).astype(dtype))
    midpoint = c_round((val_mid * scaling_inv).astype(dtype))
    bias = c_round(((interp - midpoint).astype(dtype) / f(2)).astype(dtype))
    table = np.clip((sample - bias).astype(dtype), -32768, 32767)
    last = np.clip(c_round((func(np.array([hi], dtype)) * scaling_inv).astype(dtype)), -32768, 32767)
    return np.concatenate([table, last]).astype(np.int16)


def lookup(v: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Interpolated lookup of int16 values ``v`` (held in int64) in a 513-entry table; int64
    results in the int16 range (the C code narrows ``base + delta`` to int16: it wraps)."""
    index = 256 + (v >> 7)
    offset = v & 127
    base = lut[index].astype(np.int64)
    slope = lut[index + 1].astype(np.int64) - base
    slope = ((slope + 32768) & 0xFFFF) - 32768  # int16 slope
    out = base + ((slope * offset + 64) >> 7)
    return ((out + 32768) & 0xFFFF) - 32768
