"""FULLY_CONNECTED against LiteRT's reference kernel and TensorFlow Lite Micro: 200 random
single-op models (shapes, per-tensor/per-channel weights, with/without bias, every fused
activation, extreme scales and zero points), every output equal."""

import numpy as np
import pytest

from .harness import assert_matches_oracles, single_op_graph, tensor

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def _case(rng, i):
    m = int(rng.integers(1, 6))
    k = int(rng.choice([1, 3, 16, 64, 250, 1100]))  # 1100: more than one exact-GEMM chunk may be needed
    n = int(rng.integers(1, 33))
    per_channel = bool(rng.integers(0, 2))
    s_in = float(np.float32(10 ** rng.uniform(-3, 0)))
    s_out = float(np.float32(10 ** rng.uniform(-2, 1.5)))  # small output scales saturate
    s_w = (10 ** rng.uniform(-3.5, -1, size=n if per_channel else 1)).astype(np.float32)
    zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, size=2))
    w = rng.integers(-127, 128, size=(n, k)).astype(np.int8)
    inputs = [
        tensor("x", (m, k), scale=s_in, zero_point=zp_in),
        tensor("w", None, data=w, scale=s_w, axis=0 if per_channel else None, narrow=True),
    ]
    if rng.integers(0, 4):
        bias = rng.integers(-(2**20), 2**20, size=n).astype(np.int32)
        inputs.append(tensor("b", None, np.int32, data=bias, scale=np.float32(s_in) * s_w,
                             axis=0 if per_channel else None))
    else:
        inputs.append(None)
    out = tensor("y", (m, n), scale=s_out, zero_point=zp_out)
    attrs = {"fused_activation_function": ACTIVATIONS[i % 4]}
    x = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
    return single_op_graph("FULLY_CONNECTED", inputs, [out], attrs), {"x": x}


@pytest.mark.parametrize("seed", range(4))
def test_random_fully_connected_models(seed):
    rng = np.random.default_rng(1000 + seed)
    for i in range(50):
        graph, feeds = _case(rng, i)
        assert_matches_oracles(graph, feeds, context=f"case {seed}/{i}")
