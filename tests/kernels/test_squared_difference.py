"""SQUARED_DIFFERENCE against LiteRT's kernels (``litert-ref`` and the optimized targets) and TensorFlow
Lite Micro (``tflite``): every tensor equal.

int8: 200 random single-op models (scales of the two inputs a factor up to 30 apart, zero points
anywhere, equal shapes of any rank and broadcasts up to rank 4; the output scale puts the largest
square near the int8 range, sometimes far beyond) against both runtimes; then 40 models whose output
multiplier is 1 or more, which TFLM computes with a left shift and LiteRT aborts on (intq refuses
them for the LiteRT targets). The 16x8 kernel is TFLM-only (LiteRT 2.3 fails the invocation on
int16): tests/kernels/test_int16x8.py compares it with TFLM and checks LiteRT's refusal.
"""

import numpy as np
import pytest

import intq
from intq.kernels import KernelError

from .harness import assert_matches_oracles, single_op_graph, tensor

CASES = 200
OP = "SQUARED_DIFFERENCE"


def _shapes(rng):
    rank = int(rng.integers(1, 6))
    shape = tuple(int(v) for v in rng.integers(1, 7, size=rank))
    if rank <= 4 and rng.random() < 0.5:  # a broadcast (BroadcastBinaryFunction4DSlow: rank 4 at most)
        b_shape = tuple(d if rng.random() < 0.5 else 1 for d in shape)[int(rng.integers(0, rank)):]
        return (shape, b_shape) if rng.random() < 0.5 else (b_shape, shape)
    return shape, shape


def _case(rng, small_output: bool = False):
    a_shape, b_shape = _shapes(rng)
    out_shape = tuple(int(d) for d in np.broadcast_shapes(a_shape, b_shape))
    s_a = float(np.float32(10 ** rng.uniform(-3, 0)))
    s_b = s_a if rng.random() < 0.2 else float(np.float32(s_a * 10 ** rng.uniform(-1.5, 1.5)))
    z_a, z_b = (int(rng.integers(-128, 128)) for _ in range(2))
    a = rng.integers(-128, 128, size=a_shape).astype(np.int8)
    b = rng.integers(-128, 128, size=b_shape).astype(np.int8)
    if rng.random() < 0.3:  # the LayerNorm case: b near a (x and its mean), small squares
        b = np.clip(np.resize(a, b_shape).astype(int) + rng.integers(-6, 7, size=b_shape), -128, 127).astype(np.int8)
    extent = float(np.max(((a.astype(float) - z_a) * s_a - (b.astype(float) - z_b) * s_b) ** 2, initial=0.0))
    extent = max(extent, (2 * max(s_a, s_b)) ** 2)
    if small_output:  # M_out = T^2 / (2^14 s_y) >= 1: a left shift in TFLM; the same codes on scales a hair
        # apart, so that the squares (in steps of T / 2^8 before the square) stay inside the int8 range
        s_b = float(np.float32(s_a * (1 + rng.choice([-1, 1]) * 10 ** rng.uniform(-4, -2))))
        z_b = z_a
        b = np.resize(a, b_shape).astype(np.int8)
        s_y = float(np.float32((2 * max(s_a, s_b)) ** 2 / 2**14 / rng.uniform(1.0, 1.95)))  # a shift of 1: every square fits
    else:
        s_y = float(np.float32(extent / 255 * 10 ** rng.uniform(-1.2, 0.3)))
    z_y = int(rng.choice([-128, -128, int(rng.integers(-128, 0))]))
    g = single_op_graph(OP, [tensor("a", a_shape, scale=s_a, zero_point=z_a), tensor("b", b_shape, scale=s_b, zero_point=z_b)],
                        [tensor("y", out_shape, scale=s_y, zero_point=z_y)])
    return g, {"a": a, "b": b}


def test_random_squared_difference_models():
    rng = np.random.default_rng(2025)
    for i in range(CASES):
        graph, feeds = _case(rng)
        assert_matches_oracles(graph, feeds, context=f"{OP} case {i}")


def test_output_multipliers_of_one_or_more_shift_left_in_tflm_and_are_refused_for_litert():
    rng = np.random.default_rng(7)
    for i in range(40):
        graph, feeds = _case(rng, small_output=True)
        p = intq.Interpreter(graph, target="tflite").prepared(OP.lower())
        assert p.shift > 0, "not a left-shift case"
        assert_matches_oracles(graph, feeds, targets=("tflite",), context=f"{OP} left-shift case {i}")
        with pytest.raises(KernelError, match="output multiplier .* must be in \\(0, 1\\)"):
            intq.Interpreter(graph, target="litert-ref")  # LiteRT's TFLITE_CHECK aborts the process (measured)


def test_rank_5_broadcasts_are_refused():
    g = single_op_graph(OP, [tensor("a", (2, 1, 2, 2, 2), scale=0.1), tensor("b", (2, 2), scale=0.1)],
                        [tensor("y", (2, 1, 2, 2, 2), scale=0.1)])
    for target in ("tflite", "litert-ref"):
        with pytest.raises(KernelError, match="rank 4 at most"):
            intq.Interpreter(g, target=target)
