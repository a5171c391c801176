"""GELU (int8; its 16x8 form is in tests/kernels/test_int16x8.py's suite) against LiteRT: every
input code of every model equal.

200 random single-op int8 models (exact and tanh forms alternate; input and output scales over
three decades, zero points often at the extremes), each holding every input code, run by LiteRT's
``BUILTIN_REF`` and its optimized resolvers (:mod:`tests.kernels.harness`); the 16x8 suite does the
same with all 65536 int16 codes. TensorFlow Lite Micro has no GELU kernel: the refusal is checked,
so the day it gains one this test says so. The float function is checked against double precision.
"""

import math

import numpy as np
import pytest

from intq.kernels import KernelError
from intq.kernels.gelu import gelu_float32
from intq.runtime.oracles.tflm import TflmOracleError, run_tflm
from intq.export.tflite_writer import to_tflite_bytes

from .harness import assert_matches_oracles, single_op_graph, tensor

CASES = 200


def _graph(dtype, n, s_in, z_in, s_out, z_out, approximate):
    return single_op_graph("GELU", [tensor("x", (n,), dtype=dtype, scale=s_in, zero_point=z_in)],
                           [tensor("y", (n,), dtype=dtype, scale=s_out, zero_point=z_out)],
                           {"approximate": approximate})


def _zero_point(rng):
    return int(rng.choice([-128, 127, int(rng.integers(-128, 128))]))


def test_gelu_int8_random_models():
    rng = np.random.default_rng(31)
    codes = np.arange(-128, 128, dtype=np.int8)
    for i in range(CASES):
        s_in = float(np.float32(10 ** rng.uniform(-3, 0)))
        # the output range follows the input's as a converter's calibration would (GELU(x) ~ x for x > 0)
        s_out = float(np.float32(s_in * 10 ** rng.uniform(-0.7, 0.3)))
        g = _graph(np.int8, 256, s_in, _zero_point(rng), s_out, _zero_point(rng), bool(i % 2))
        assert_matches_oracles(g, {"x": rng.permutation(codes)}, targets=("litert-ref",), context=f"GELU int8 case {i}")


def test_tflite_micro_has_no_gelu():
    g = _graph(np.int8, 256, 0.05, 0, 0.03, -10, False)
    with pytest.raises(TflmOracleError, match="GELU"):
        run_tflm(to_tflite_bytes(g), [np.zeros(256, np.int8)])


def test_contract():
    with pytest.raises(KernelError, match="zero points must be 0"):
        import intq

        intq.Interpreter(_graph(np.int16, 8, 1e-3, 3, 1e-3, 0, False))
    with pytest.raises(KernelError, match="must both be int8 or int16"):
        import intq

        g = single_op_graph("GELU", [tensor("x", (8,), dtype=np.int8, scale=0.1)],
                            [tensor("y", (8,), dtype=np.int16, scale=1e-3)])
        intq.Interpreter(g)


@pytest.mark.parametrize("approximate", [False, True])
def test_float_function_within_float32_rounding(approximate):
    x = np.linspace(-8, 8, 4001, dtype=np.float32)
    if approximate:
        want = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x.astype(float)]
    else:
        want = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(float)]
    got = gelu_float32(x, approximate).astype(np.float64)
    # a few float32 roundings in sequence (4 in the exact form, 8 in the tanh one) plus erff / tanhf's
    # own error: within 1e-6 of the double-precision value plus 4 ulp of it
    assert np.all(np.abs(got - want) <= 1e-6 + 4 * np.spacing(np.abs(np.float32(want))).astype(np.float64))
