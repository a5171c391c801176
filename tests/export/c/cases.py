"""Random single-op models for the C backend, from the kernel tests' own generators
(tests/kernels: the models every kernel is checked on against LiteRT and TFLite Micro).

``CASES[op](rng, i)`` returns ``(graph, feeds)``. A case the ``tflite`` target or the C backend
refuses (another dtype, a variant TFLite Micro lacks) is skipped by the caller and not counted.
"""

from __future__ import annotations

import numpy as np

from tests.kernels import test_conv, test_data_movement, test_elementwise, test_fully_connected, test_lut_ops
from tests.kernels import test_pool_reduce
from tests.kernels.harness import single_op_graph, tensor


def _conv(rng, i):
    graph, feeds, _ = test_conv._conv_case(rng, i, with_bias=i % 8 != 7)  # 1 in 8 without bias (TFLM runs it)
    return graph, feeds


def _depthwise(rng, i):
    graph, feeds, _ = test_conv._depthwise_case(rng, i)
    return graph, feeds


def _minmax(op):
    te = test_elementwise

    def case(rng, i):
        sa_shape, sb_shape = te._broadcast_pair(rng)
        s, zp = te._scale(rng, -4, 1), te._zero_point(rng)
        inputs, feeds = te._binary_operands(rng, (sa_shape, sb_shape), (s, s), (zp, zp))
        y = tensor("y", np.broadcast_shapes(sa_shape, sb_shape), scale=s, zero_point=zp)
        return single_op_graph(op, inputs, [y]), feeds
    return case


def _lut(op):
    def case(rng, i):
        shape = test_lut_ops.ELEMENTWISE_SHAPES[i % len(test_lut_ops.ELEMENTWISE_SHAPES)]
        x = rng.permutation(np.arange(-128, 128, dtype=np.int8)).reshape(shape)
        return test_lut_ops._graph(op, shape, test_lut_ops._scale(rng), test_lut_ops._zero_point(rng)), {"x": x}
    return case


def _softmax(rng, i):
    lo = test_lut_ops
    while True:
        shape = lo._row_shape(rng, i)
        scale, zp = lo._scale(rng), lo._zero_point(rng)
        beta = float(np.float32(rng.choice([1.0, 1.0, 0.5, 2.0, 10 ** rng.uniform(-1, 1.3)])))
        x = lo._rows(rng, shape, zp)
        if shape[-1] < 480 or lo._softmax_sum_fits(x, scale, beta):
            return lo._graph("SOFTMAX", shape, scale, zp, {"beta": beta}), {"x": x}


def _unary(op):
    te = test_elementwise

    def case(rng, i):
        shape = (256,) if i % 10 == 0 else te._shape(rng, max_rank=6, min_rank=1)
        s_in, s_out = te._unary_scales(rng, i)
        attrs = None
        if op == "LEAKY_RELU":
            attrs = {"alpha": [float(np.float32(rng.uniform(0.0, 1.0))), float(np.float32(10 ** rng.uniform(-3, 0.5))),
                               float(np.float32(-rng.uniform(0.01, 3.0))), 0.2][i % 4]}
        if op == "HARD_SWISH":
            s_out = float(np.float32(s_in * 10 ** rng.uniform(-1.5, 1.2)))
        graph = te._unary_graph(op, shape, s_in, te._zero_point(rng), s_out, te._zero_point(rng), attrs)
        x = te.ALL_INT8.copy() if shape == (256,) else te._values(rng, shape)
        return graph, {"x": x}
    return case


def _requantize(rng, i):
    """int8 -> int8 QUANTIZE (TFLite's Requantize), scales up to 30x apart either way."""
    te = test_elementwise
    shape = (256,) if i % 4 == 0 else te._shape(rng, max_rank=4, min_rank=1)
    s_in = te._scale(rng, -3, 0)
    s_out = float(np.float32(s_in * 10 ** rng.uniform(-1.5, 1.5)))
    graph = single_op_graph("QUANTIZE", [tensor("x", shape, scale=s_in, zero_point=te._zero_point(rng))],
                            [tensor("y", shape, scale=s_out, zero_point=te._zero_point(rng))])
    x = te.ALL_INT8.copy() if shape == (256,) else te._values(rng, shape)
    return graph, {"x": x}


def _movement(op):
    make = test_data_movement.CASES[op]

    def case(rng, i):
        graph, feeds, _ = make(rng, i)
        return graph, feeds
    return case


CASES = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": lambda rng, i: test_fully_connected._case(rng, i),
    **{op: (lambda op: lambda rng, i: test_elementwise._arith_case(rng, op, i))(op) for op in ("ADD", "SUB", "MUL")},
    "MAXIMUM": _minmax("MAXIMUM"), "MINIMUM": _minmax("MINIMUM"),
    **{op: (lambda op: lambda rng, i: test_pool_reduce._pool_case(rng, op, i))(op)
       for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D")},
    "MEAN": lambda rng, i: test_pool_reduce._reduce_case(rng, "MEAN", i),
    "LOGISTIC": _lut("LOGISTIC"), "TANH": _lut("TANH"), "SOFTMAX": _softmax,
    **{op: _unary(op) for op in ("RELU", "RELU6", "LEAKY_RELU", "HARD_SWISH")},
    "QUANTIZE": _requantize,
    **{op: _movement(op) for op in ("RESHAPE", "SQUEEZE", "TRANSPOSE", "CONCATENATION", "PAD", "PADV2")},
}
