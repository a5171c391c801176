"""QUANTIZE (float -> int8 at the boundary, int8 -> int8 rescaling) and DEQUANTIZE against LiteRT's
reference kernels and TensorFlow Lite Micro: 200 random single-op models each, equality required."""

import numpy as np
import pytest

from .harness import assert_matches_oracles, single_op_graph, tensor


def _scale(rng):
    return float(np.float32(10 ** rng.uniform(-3, 0.5)))


def _shape(rng):
    return tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(1, 5))))


@pytest.mark.parametrize("seed", range(2))
def test_quantize_float_input(seed):
    rng = np.random.default_rng(3000 + seed)
    for i in range(100):
        shape, s, zp = _shape(rng), _scale(rng), int(rng.integers(-128, 128))
        x = (rng.standard_normal(shape) * s * rng.uniform(1, 200)).astype(np.float32)
        x.flat[0] = np.float32((3 + 0.5) * s)  # an exact tie of x / s
        graph = single_op_graph("QUANTIZE", [tensor("x", shape, np.float32)], [tensor("y", shape, scale=s, zero_point=zp)])
        assert_matches_oracles(graph, {"x": x}, context=f"QUANTIZE float {seed}/{i}")


@pytest.mark.parametrize("seed", range(2))
def test_quantize_int8_rescale(seed):
    rng = np.random.default_rng(3100 + seed)
    for i in range(100):
        shape = _shape(rng)
        s_in, s_out = _scale(rng), _scale(rng)
        if s_in / s_out > 100:  # keep the rescale multiplier in the runtimes' supported range
            s_out = float(np.float32(s_in / 50))
        graph = single_op_graph("QUANTIZE", [tensor("x", shape, scale=s_in, zero_point=int(rng.integers(-128, 128)))],
                                [tensor("y", shape, scale=s_out, zero_point=int(rng.integers(-128, 128)))])
        x = rng.integers(-128, 128, size=shape).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, context=f"QUANTIZE int8 {seed}/{i}")


@pytest.mark.parametrize("seed", range(2))
def test_dequantize(seed):
    rng = np.random.default_rng(3200 + seed)
    for i in range(100):
        shape = _shape(rng)
        graph = single_op_graph("DEQUANTIZE", [tensor("x", shape, scale=_scale(rng), zero_point=int(rng.integers(-128, 128)))],
                                [tensor("y", shape, np.float32)])
        x = rng.integers(-128, 128, size=shape).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, context=f"DEQUANTIZE {seed}/{i}")


def test_quantize_int8_rescale_where_a_float32_quotient_would_differ():
    """Scale pairs whose float32 and double quotients give different outputs for some int8 input:
    both runtimes divide in double (LiteRT and TFLM Prepare); intq must follow, on all 256 inputs."""
    from intq.qmath import multiply_by_quantized_multiplier, quantize_multiplier

    rng = np.random.default_rng(3300)
    x = np.arange(-128, 128)
    found = 0
    while found < 6:
        s_in, s_out = _scale(rng), _scale(rng)
        if not 0.01 < s_in / s_out < 50:
            continue
        zi, zo = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
        m32 = quantize_multiplier(float(np.float32(s_in) / np.float32(s_out)))
        m64 = quantize_multiplier(float(np.float64(np.float32(s_in)) / np.float64(np.float32(s_out))))
        a = multiply_by_quantized_multiplier(x - zi, int(m32.multiplier), int(m32.shift))
        b = multiply_by_quantized_multiplier(x - zi, int(m64.multiplier), int(m64.shift))
        visible = (a != b) & (np.abs(a + zo) <= 127) & (np.abs(b + zo) <= 127)  # not hidden by the clamp
        if not visible.any():
            continue
        found += 1
        graph = single_op_graph("QUANTIZE", [tensor("x", (256,), scale=s_in, zero_point=zi)],
                                [tensor("y", (256,), scale=s_out, zero_point=zo)])
        assert_matches_oracles(graph, {"x": x.astype(np.int8)}, context=f"QUANTIZE quotient {s_in}/{s_out}")
