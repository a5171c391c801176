"""Random single-op models for the C backend, from the kernel tests' own generators
(tests/kernels: the models every kernel is checked on against LiteRT and TFLite Micro).

``CASES[op](rng, i)`` returns ``(graph, feeds)``. A case the ``tflite`` target or the C backend
refuses (another dtype, a variant TFLite Micro lacks) is skipped by the caller and not counted.
Every int8 kernel intq registers and TFLite Micro runs has an entry (DEQUANTIZE and SHAPE excepted:
a DEQUANTIZE inside a model writes float, the boundary one is cut off; a SHAPE is a constant).
RELU_N1_TO_1 is lowered (a table, like RELU) but TFLite Micro has no kernel for it: no entry.
"""

from __future__ import annotations

import numpy as np

from tests.kernels import test_conv, test_data_movement, test_elementwise, test_fully_connected, test_lut_ops
from tests.kernels import test_int16x8, test_pool_reduce, test_rsqrt, test_squared_difference
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


def _first_two(make):
    """A generator returning (graph, feeds, ...) as one returning (graph, feeds)."""
    def case(rng, i):
        return make(rng, i)[:2]
    return case


def _comparison(op):
    te = test_elementwise

    def case(rng, i):  # test_elementwise.test_random_comparison_models
        sa_shape, sb_shape = te._broadcast_pair(rng)
        s_a = te._scale(rng, -4, -0.01)
        s_b = s_a if i % 3 == 0 else te._scale(rng, -4, -0.01)
        za = te._zero_point(rng)
        zb = za if i % 6 == 0 else te._zero_point(rng)
        inputs, feeds = te._binary_operands(rng, (sa_shape, sb_shape), (s_a, s_b), (za, zb))
        return single_op_graph(op, inputs, [tensor("y", np.broadcast_shapes(sa_shape, sb_shape), np.bool_)]), feeds
    return case


def _prelu(rng, i):  # test_elementwise.test_random_prelu_models
    te = test_elementwise
    shape = te._shape(rng, max_rank=6, min_rank=1)
    a_shape = te._prelu_alpha_shape(rng, shape)
    s_in, s_out = te._unary_scales(rng, i)
    s_alpha, z_alpha = te._scale(rng, -3, 0), te._zero_point(rng)
    alpha_values = te._values(rng, a_shape)
    constant = i % 4 != 0 or a_shape == ()
    alpha = (tensor("alpha", None, data=alpha_values, scale=s_alpha, zero_point=z_alpha) if constant
             else tensor("alpha", a_shape, scale=s_alpha, zero_point=z_alpha))
    graph = single_op_graph("PRELU", [tensor("x", shape, scale=s_in, zero_point=te._zero_point(rng)), alpha],
                            [tensor("y", shape, scale=s_out, zero_point=te._zero_point(rng))])
    return graph, {"x": te._values(rng, shape)} | ({} if constant else {"alpha": alpha_values})


def _log_softmax(rng, i):  # test_lut_ops.test_log_softmax_random_models
    lo = test_lut_ops
    shape = lo._row_shape(rng, i)
    zp = lo._zero_point(rng)
    return lo._graph("LOG_SOFTMAX", shape, lo._scale(rng), zp), {"x": lo._rows(rng, shape, zp)}


def _l2_normalization(rng, i):  # test_lut_ops.test_l2_normalization_random_models
    lo = test_lut_ops
    depth = lo.ROW_LENGTHS[i % len(lo.ROW_LENGTHS)]
    shape = (int(rng.integers(1, 4)), int(rng.integers(1, 3)), depth)[-int(rng.integers(1, 4)):]
    zp = lo._zero_point(rng)
    x = lo._rows(rng, shape, zp)
    rows = x.reshape(-1, depth)
    if i % 4 == 1:
        rows[0] = zp
    elif i % 4 == 2:
        rows[-1] = np.clip(zp + rng.integers(-1, 2, size=depth), -128, 127)
    return lo._graph("L2_NORMALIZATION", shape, lo._scale(rng), zp), {"x": x}


def _rsqrt(rng, i):  # test_rsqrt.test_random_rsqrt_models (inputs at or above the zero point)
    shapes = [(256,), (2, 128), (4, 8, 8), (1, 16, 16, 1)]
    s_in = float(np.float32(10 ** rng.uniform(-4, 1)))
    z_in = int(rng.choice([-128, int(rng.integers(-128, 100))]))
    s_out = float(np.float32(10 ** rng.uniform(-0.5, 0.5) / (255 * np.sqrt(s_in))))
    z_out = int(rng.choice([-128, int(rng.integers(-128, 128))]))
    shape = shapes[i % len(shapes)]
    x = np.resize(np.clip(rng.permutation(test_elementwise.ALL_INT8), z_in, 127), shape).astype(np.int8)
    return test_rsqrt._graph(shape, s_in, z_in, s_out, z_out), {"x": x}


def _transpose_conv(rng, i):  # test_conv: 1 in 8 with an output size only TFLite Micro accepts
    graph, feeds, _ = test_conv._transpose_conv_case(rng, i, off_size=i % 8 == 7)
    return graph, feeds


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
    **{op: _movement(op) for op in ("RESHAPE", "SQUEEZE", "TRANSPOSE", "CONCATENATION", "PAD", "PADV2", "SPLIT",
                                    "SPLIT_V", "SELECT_V2", "SLICE", "STRIDED_SLICE", "GATHER", "SPACE_TO_DEPTH",
                                    "DEPTH_TO_SPACE", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "PACK",
                                    "BROADCAST_TO")},
    **{op: _comparison(op) for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")},
    "PRELU": _prelu, "RSQRT": _rsqrt, "LOG_SOFTMAX": _log_softmax, "L2_NORMALIZATION": _l2_normalization,
    **{op: (lambda op: lambda rng, i: test_pool_reduce._reduce_case(rng, op, i))(op)
       for op in ("SUM", "REDUCE_MAX", "REDUCE_MIN")},
    **{op: (lambda op: lambda rng, i: test_pool_reduce._resize_case(rng, op, i))(op)
       for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")},
    **{op: (lambda op: lambda rng, i: test_pool_reduce._arg_case(rng, op, i)[:2])(op) for op in ("ARG_MAX", "ARG_MIN")},
    "TRANSPOSE_CONV": _transpose_conv,
    "BATCH_MATMUL": _first_two(test_conv._batch_matmul_case),
    "SQUARED_DIFFERENCE": lambda rng, i: test_squared_difference._case(rng, small_output=i % 8 == 7),
    # 16x8 (int16 activations) operators the C backend implements: tests/kernels/test_int16x8.py's generators
    "RSQRT_16x8": test_int16x8._rsqrt_case,
    "MAXIMUM_16x8": lambda rng, i: test_int16x8._max_min_case(rng, i, "MAXIMUM"),
    "MINIMUM_16x8": lambda rng, i: test_int16x8._max_min_case(rng, i, "MINIMUM"),
}
