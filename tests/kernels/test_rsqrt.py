"""RSQRT against LiteRT's reference kernels (``litert-ref``, and the optimized targets, which run
the same kernel) and TensorFlow Lite Micro (``tflite``): every tensor equal.

200 random single-op models see every int8 code at or above the input's zero point (below it
both runtimes fail the invocation: a negative input); then the scales where the runtimes' Prepare
arithmetic (float32 ``sqrtf`` in LiteRT, double in TFLM) gives different outputs, the refusal of a
negative input, and the contract.
"""

import numpy as np
import pytest

import intq
from intq.kernels import KernelError
from intq.runtime.oracles.litert import LiteRtOracleError, run_litert
from intq.runtime.oracles.tflm import TflmOracleError, run_tflm
from intq.export.tflite_writer import to_tflite_bytes

from .harness import assert_matches_oracles, single_op_graph, tensor

CASES = 200
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def _graph(shape, s_in, z_in, s_out, z_out):
    return single_op_graph("RSQRT", [tensor("x", shape, scale=s_in, zero_point=z_in)],
                           [tensor("y", shape, scale=s_out, zero_point=z_out)])


def test_random_rsqrt_models():
    rng = np.random.default_rng(21)
    shapes = [(256,), (2, 128), (4, 8, 8), (1, 16, 16, 1)]
    for i in range(CASES):
        s_in = float(np.float32(10 ** rng.uniform(-4, 1)))
        z_in = int(rng.choice([-128, int(rng.integers(-128, 100))]))
        # the output range spans 1/sqrt(s_in) (code Z_in + 1) within a factor of 3
        s_out = float(np.float32(10 ** rng.uniform(-0.5, 0.5) / (255 * np.sqrt(s_in))))
        z_out = int(rng.choice([-128, int(rng.integers(-128, 128))]))
        shape = shapes[i % len(shapes)]
        x = np.resize(np.clip(rng.permutation(ALL_INT8), z_in, 127), shape).astype(np.int8)
        assert_matches_oracles(_graph(shape, s_in, z_in, s_out, z_out), {"x": x}, context=f"RSQRT case {i}")


# Found by search: LiteRT's float32 ``sqrtf(s_in) * s_out`` and TFLM's double give multipliers
# that change one output code; each target must equal its own runtime.
TARGETS_DIFFER = [(2.7615201473236084, 0.006007860880345106), (0.0038803054485470057, 0.02214057557284832),
                  (0.016084708273410797, 0.02489161305129528)]


@pytest.mark.parametrize("s_in,s_out", TARGETS_DIFFER)
def test_targets_follow_their_runtimes_where_the_runtimes_differ(s_in, s_out):
    outs = assert_matches_oracles(_graph((256,), s_in, -128, s_out, -128), {"x": ALL_INT8})
    assert not np.array_equal(outs["litert-ref"]["y"], outs["tflite"]["y"]), "not a discriminating case"


def test_an_input_below_the_zero_point_fails_like_the_runtimes():
    graph = _graph((4,), 0.01, 0, 0.05, -128)
    x = np.array([5, 0, -1, 9], np.int8)
    blob = to_tflite_bytes(graph)
    with pytest.raises(LiteRtOracleError, match="failed to run"):
        run_litert(blob, [x])
    with pytest.raises(TflmOracleError, match="failed to run"):
        run_tflm(blob, [x])
    with pytest.raises(KernelError, match="'rsqrt' \\(RSQRT\\): an input below the zero point 0"):
        intq.Interpreter(graph).run({"x": x})


def test_zero_gives_the_largest_code_and_the_contract_is_checked():
    graph = _graph((256,), 0.5, -128, 0.01, -128)
    y = intq.Interpreter(graph).run({"x": ALL_INT8})["y"]
    assert y[0] == 127 and np.all(np.diff(y.astype(int)) <= 0)  # 1/sqrt decreases
    with pytest.raises(KernelError, match="needs a shift of"):  # 1/(sqrt(1e-4) 1e-9): far beyond int32
        intq.Interpreter(_graph((4,), 1e-4, 0, 1e-9, 0))
    with pytest.raises(KernelError, match="shape"):
        intq.Interpreter(single_op_graph("RSQRT", [tensor("x", (4,), scale=0.1)], [tensor("y", (2,), scale=0.1)]))
