"""Compiled single-pass loops (numba) for the elementwise work of a QAT step.

Each loop is the same arithmetic as its whole-tensor formulation (kept in
:mod:`intq.qat.fake_quant` and :mod:`intq.qat.requant`; the tests require equality), fused so a
fake quantization reads its input once and writes its output and gradient mask once instead of
a dozen passes. The loop bodies are branch-free selects in the operands' own precision so LLVM
vectorizes them (no fastmath: every division and rounding stays IEEE-exact). Inputs are
contiguous CPU arrays (views of torch tensors).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from intq.qmath.compiled import mbqm_scalar


@njit(cache=True, nogil=True)
def fake_quantize(x, scale, lo, hi, out, inside):
    """``r = round_half_away(float32(x / scale))``; ``inside = 1.0 if lo <= r <= hi else 0.0``;
    ``out = float32(clamp(r, lo, hi) * scale)`` (x, out, inside float32; scale, lo, hi float32)."""
    half = np.float32(0.5)
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for i in range(x.size):
        v = x[i] / scale  # float32 / float32, as intq.qmath.quantize
        t = np.trunc(v)
        f = v - t  # exact
        t = t + (one if f >= half else zero) - (one if f <= -half else zero)
        inside[i] = one if (t >= lo) and (t <= hi) else zero
        out[i] = min(max(t, lo), hi) * scale


@njit(cache=True, nogil=True)
def codes(x, scale, out):
    """``out = round_half_away(float32(x / scale))`` (the integer codes of on-grid values)."""
    half = np.float32(0.5)
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for i in range(x.size):
        v = x[i] / scale
        t = np.trunc(v)
        f = v - t
        out[i] = t + (one if f >= half else zero) - (one if f <= -half else zero)


@njit(cache=True, nogil=True)
def requantize_output(acc, bias, mult, left, right, zp, act_min, act_max, scale, out, inside):
    """The linear layers' requantization (:func:`intq.qat.requant.requantize`: the kernels'
    double rounding, :func:`intq.qmath.compiled.mbqm_scalar`), clamp and dequantization in one
    pass over ``acc`` [rows, C, inner] (integer values, any real dtype or int64). Returns the
    unclamped output's (min, max) in integers."""
    rows, channels, inner = acc.shape
    lo_seen = np.int64(2**62)
    hi_seen = -lo_seen
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for r in range(rows):
        for c in range(channels):
            for k in range(inner):
                y = mbqm_scalar(np.int64(acc[r, c, k]) + bias[c], mult[c], left[c], right[c], 1) + zp
                lo_seen = min(lo_seen, y)
                hi_seen = max(hi_seen, y)
                inside[r, c, k] = one if (y >= act_min) and (y <= act_max) else zero
                out[r, c, k] = np.float32(min(max(y, act_min), act_max) - zp) * scale
    return lo_seen, hi_seen


@njit(cache=True, nogil=True)
def quantize_rows(w, scales, qmax, q, dequantized):
    """Weights (or biases) ``w`` [C, K] (float32) with a float64 scale per row:
    ``q = clamp(round_half_away(float64(w) / s_c), -qmax, qmax)`` (float64 integer values) and
    ``dequantized = float32(q * s_c)``. One row and one scale for per-tensor weights."""
    rows, cols = w.shape
    for c in range(rows):
        s = scales[c]
        for k in range(cols):
            v = np.float64(w[c, k]) / s
            t = np.trunc(v)
            f = v - t
            t = t + (1.0 if f >= 0.5 else 0.0) - (1.0 if f <= -0.5 else 0.0)
            t = min(max(t, -qmax), qmax)
            q[c, k] = t
            dequantized[c, k] = np.float32(t * s)
