"""The conv family against LiteRT's reference kernels and TensorFlow Lite Micro: for each of
CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and BATCH_MATMUL, 200 random single-op models (shapes
with size-1 dimensions, strides 1-3, dilations 1-2, SAME/VALID, depth multipliers, grouped
convolutions, per-tensor and per-channel weights, with and without bias, every fused activation,
extreme scales that saturate, any zero points, a few larger layers), every output equal.

Where a runtime cannot run a variant, the case runs against the other one only:

* LiteRT's CONV_2D requires a bias (``conv.cc``: ``TF_LITE_ENSURE(context, has_bias)``), so
  convolutions without bias are checked against TFLite Micro alone (and the ``litert-ref`` target
  must refuse them);
* a DEPTHWISE_CONV_2D bias omitted as index -1 runs on neither runtime: LiteRT's Prepare fails
  ("Tensor at index 2 was optional but was expected") and TFLite Micro's
  ``CalculateOpDataDepthwiseConv`` crashes (it deallocates the null bias tensor). Depthwise cases
  without bias are two-input nodes, which both run.
* LiteRT 2.3 refuses a TRANSPOSE_CONV whose input is not the size a convolution of its output
  would give (:data:`intq.kernels.transpose_conv.SIZE_CHECKED_BY`); TFLite Micro computes it. Such
  cases (output sizes one pixel off) run against TFLite Micro, and the ``litert-ref`` target must
  refuse them like LiteRT.
"""

import numpy as np
import pytest

from intq.kernels import KernelError
from intq.kernels._conv_common import compute_padding
from intq.runtime.interpreter import Interpreter

from .harness import assert_matches_oracles, single_op_graph, tensor

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
BOTH = ("litert-ref", "tflite")
CASES_PER_SEED = 50  # against both runtimes
EXTRA_PER_SEED = 8  # variants only TFLite Micro runs (CONV_2D without bias, TRANSPOSE_CONV sizes)
SEEDS = range(4)  # 4 x 50 = 200 models per operator on both runtimes


def _scales(rng, channels: int, per_channel: bool):
    """Input, weight and output scales spanning ~4 decades: small output scales saturate."""
    s_in = float(np.float32(10 ** rng.uniform(-3, 0)))
    s_w = (10 ** rng.uniform(-3.5, -1, size=channels if per_channel else 1)).astype(np.float32)
    s_out = float(np.float32(10 ** rng.uniform(-2, 1.5)))
    return s_in, s_w, s_out


def _left_shift_regime(rng, s_in, s_w):
    """An output scale making M = s_in * s_w / s_out reach [1, 4): requantization shifts left.
    Used with small weights and inputs near the zero point, so the accumulators stay small."""
    return float(np.float32(s_in * float(s_w.max()) / rng.uniform(1, 4)))


def _input(rng, shape, zero_point, small=False):
    if small:
        return np.clip(zero_point + rng.integers(-3, 4, size=shape), -128, 127).astype(np.int8)
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _zero_points(rng):
    if rng.random() < 0.15:  # the extremes
        return int(rng.choice([-128, 127])), int(rng.choice([-128, 127]))
    return tuple(int(v) for v in rng.integers(-128, 128, size=2))


def _weights(rng, shape, small=False):
    w = rng.integers(-3, 4, size=shape) if small else rng.integers(-127, 128, size=shape)
    if not small and rng.random() < 0.1:  # all at the extremes: the largest accumulators
        w = rng.choice([-127, 127], size=shape)
    return w.astype(np.int8)


def _bias(rng, name, channels, s_in, s_w, axis, small=False):
    bound = 20 if small else 2**16
    b = rng.integers(-bound, bound, size=channels).astype(np.int32)
    return tensor(name, None, np.int32, data=b, scale=np.float32(s_in) * s_w, axis=axis)


def _geometry(rng, i):
    """Spatial sizes, kernel, strides, dilations and padding with a non-empty output."""
    large = i % 25 == 24
    h, w = (int(v) for v in (rng.integers(8, 15, size=2) if large else rng.integers(1, 9, size=2)))
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    sh, sw = (int(v) for v in rng.integers(1, 4, size=2))
    dh, dw = (int(v) for v in rng.choice([1, 1, 2], size=2))
    padding = "SAME" if rng.random() < 0.5 else "VALID"
    if padding == "VALID":  # VALID needs the dilated kernel to fit
        h, w = max(h, (kh - 1) * dh + 1), max(w, (kw - 1) * dw + 1)
    return large, (h, w), (kh, kw), (sh, sw), (dh, dw), padding


# ------------------------------------------------------------------------------------ CONV_2D

def _conv_case(rng, i, with_bias=True):
    large, (h, w), (kh, kw), (sh, sw), (dh, dw), padding = _geometry(rng, i)
    n = int(rng.choice([1, 1, 2]))
    c_g = int(rng.choice([1, 2, 3, 4, 8]))
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    c_out = groups * int(rng.integers(1, 5))
    if large:
        c_g, groups, c_out = 32, 1, 24
    c_in = c_g * groups
    per_channel = bool(rng.integers(0, 2))
    s_in, s_w, s_out = _scales(rng, c_out, per_channel)
    small = i % 10 == 7
    if small:
        s_out = _left_shift_regime(rng, s_in, s_w)
    zp_in, zp_out = _zero_points(rng)
    axis = 0 if per_channel else None
    inputs = [tensor("x", (n, h, w, c_in), scale=s_in, zero_point=zp_in),
              tensor("w", None, data=_weights(rng, (c_out, kh, kw, c_g), small), scale=s_w, axis=axis, narrow=True)]
    targets = BOTH
    if with_bias:
        inputs.append(_bias(rng, "b", c_out, s_in, s_w, axis, small))
    else:  # LiteRT's CONV_2D requires a bias
        inputs.append(None)
        targets = ("tflite",)
    pad = compute_padding(padding, (h, w), (kh, kw), (sh, sw), (dh, dw))
    out = tensor("y", (n, pad.out_h, pad.out_w, c_out), scale=s_out, zero_point=zp_out)
    attrs = {"padding": padding, "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh,
             "dilation_w_factor": dw, "fused_activation_function": ACTIVATIONS[i % 4]}
    x = _input(rng, (n, h, w, c_in), zp_in, small)
    return single_op_graph("CONV_2D", inputs, [out], attrs), {"x": x}, targets


@pytest.mark.parametrize("seed", SEEDS)
def test_random_conv_2d_models(seed):
    rng = np.random.default_rng(3000 + seed)
    for i in range(CASES_PER_SEED + EXTRA_PER_SEED):
        graph, feeds, targets = _conv_case(rng, i, with_bias=i < CASES_PER_SEED)
        assert_matches_oracles(graph, feeds, targets=targets, context=f"case {seed}/{i}")
        if "litert-ref" not in targets:  # LiteRT refuses a convolution without bias; so must its target
            with pytest.raises(KernelError, match="without bias"):
                Interpreter(graph, target="litert-ref")


# -------------------------------------------------------------------------- DEPTHWISE_CONV_2D

def _depthwise_case(rng, i):
    large, (h, w), (kh, kw), (sh, sw), (dh, dw), padding = _geometry(rng, i)
    n = int(rng.choice([1, 1, 2]))
    c = int(rng.choice([1, 2, 3, 5, 8, 16]))
    mult = int(rng.choice([1, 1, 2, 3]))
    if large:
        c, mult = 24, 1
    c_out = c * mult
    per_channel = bool(rng.integers(0, 2))
    s_in, s_w, s_out = _scales(rng, c_out, per_channel)
    small = i % 10 == 7
    if small:
        s_out = _left_shift_regime(rng, s_in, s_w)
    zp_in, zp_out = _zero_points(rng)
    axis = 3 if per_channel else None
    inputs = [tensor("x", (n, h, w, c), scale=s_in, zero_point=zp_in),
              tensor("w", None, data=_weights(rng, (1, kh, kw, c_out), small), scale=s_w, axis=axis, narrow=True)]
    if rng.random() < 0.75:  # else a two-input node (index -1 runs on neither runtime)
        inputs.append(_bias(rng, "b", c_out, s_in, s_w, 0 if per_channel else None, small))
    pad = compute_padding(padding, (h, w), (kh, kw), (sh, sw), (dh, dw))
    out = tensor("y", (n, pad.out_h, pad.out_w, c_out), scale=s_out, zero_point=zp_out)
    attrs = {"padding": padding, "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh,
             "dilation_w_factor": dw, "depth_multiplier": mult, "fused_activation_function": ACTIVATIONS[i % 4]}
    x = _input(rng, (n, h, w, c), zp_in, small)
    return single_op_graph("DEPTHWISE_CONV_2D", inputs, [out], attrs), {"x": x}, BOTH


@pytest.mark.parametrize("seed", SEEDS)
def test_random_depthwise_conv_2d_models(seed):
    rng = np.random.default_rng(4000 + seed)
    # 3 more per seed: the optimized targets refuse the ~22% of nodes without bias (LiteRT crashes on
    # them), and need 200 compared models too (test_zz_target_coverage.py)
    for i in range(CASES_PER_SEED + 3):
        graph, feeds, targets = _depthwise_case(rng, i)
        assert_matches_oracles(graph, feeds, targets=targets, context=f"case {seed}/{i}")


# ----------------------------------------------------------------------------- TRANSPOSE_CONV

def _transpose_conv_case(rng, i, off_size=False):
    large = i % 25 == 24
    n = int(rng.choice([1, 1, 2]))
    h, w = (int(v) for v in (rng.integers(6, 10, size=2) if large else rng.integers(1, 6, size=2)))
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    sh, sw = (int(v) for v in rng.integers(1, 4, size=2))
    padding = "SAME" if rng.random() < 0.5 else "VALID"
    c_in, c_out = (32, 16) if large else (int(rng.choice([1, 2, 3, 8])), int(rng.integers(1, 7)))
    # the usual output size (or, off_size, one pixel more or less: TFLite Micro crops or leaves zeros)
    oh = h * sh if padding == "SAME" else (h - 1) * sh + kh
    ow = w * sw if padding == "SAME" else (w - 1) * sw + kw
    if off_size:
        oh, ow = max(oh + int(rng.choice([-1, 0, 1])), 1), max(ow + int(rng.choice([-1, 1])), 1)
    per_channel = bool(rng.integers(0, 2))
    s_in, s_w, s_out = _scales(rng, c_out, per_channel)
    small = i % 10 == 7
    if small:
        s_out = _left_shift_regime(rng, s_in, s_w)
    zp_in, zp_out = _zero_points(rng)
    axis = 0 if per_channel else None
    out_shape = np.array([n, oh, ow, c_out], np.int32)
    inputs = [tensor("output_shape", None, np.int32, data=out_shape),
              tensor("w", None, data=_weights(rng, (c_out, kh, kw, c_in), small), scale=s_w, axis=axis, narrow=True),
              tensor("x", (n, h, w, c_in), scale=s_in, zero_point=zp_in)]
    bias_mode = rng.random()
    if bias_mode < 0.7:
        inputs.append(_bias(rng, "b", c_out, s_in, s_w, axis, small))
    elif bias_mode < 0.85:
        inputs.append(None)  # index -1: an optional input both runtimes accept here
    out = tensor("y", tuple(out_shape), scale=s_out, zero_point=zp_out)
    attrs = {"padding": padding, "stride_h": sh, "stride_w": sw, "fused_activation_function": ACTIVATIONS[i % 4]}
    x = _input(rng, (n, h, w, c_in), zp_in, small)
    conv_of_output = compute_padding(padding, (oh, ow), (kh, kw), (sh, sw), (1, 1))
    consistent = (conv_of_output.out_h, conv_of_output.out_w) == (h, w)
    return single_op_graph("TRANSPOSE_CONV", inputs, [out], attrs), {"x": x}, BOTH if consistent else ("tflite",)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_transpose_conv_models(seed):
    rng = np.random.default_rng(5000 + seed)
    for i in range(CASES_PER_SEED + EXTRA_PER_SEED):
        graph, feeds, targets = _transpose_conv_case(rng, i, off_size=i >= CASES_PER_SEED)
        assert_matches_oracles(graph, feeds, targets=targets, context=f"case {seed}/{i}")
        if "litert-ref" not in targets:  # LiteRT refuses the size; so must its target
            with pytest.raises(KernelError, match="refuses this output size"):
                Interpreter(graph, target="litert-ref")


# ------------------------------------------------------------------------------ BATCH_MATMUL

def _batch_matmul_case(rng, i):
    large = i % 25 == 24
    rows, depth, cols = (int(v) for v in (rng.integers(16, 40, size=3) if large else rng.integers(1, 9, size=3)))
    if i % 10 == 3:
        depth = int(rng.choice([300, 1100]))  # long sums
    rank_a, rank_b = (int(v) for v in rng.integers(2, 6, size=2))
    batch = [int(v) for v in rng.integers(1, 4, size=3)]

    def batch_dims(rank):  # trailing batch dims of a common shape, each possibly broadcast (1)
        dims = batch[3 - (rank - 2):] if rank > 2 else []
        return [d if rng.random() < 0.7 else 1 for d in dims]

    adj_x, adj_y = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    a_shape = [*batch_dims(rank_a), *((depth, rows) if adj_x else (rows, depth))]
    b_shape = [*batch_dims(rank_b), *((cols, depth) if adj_y else (depth, cols))]
    out_batch = list(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    s_a = float(np.float32(10 ** rng.uniform(-3, 0)))
    s_b = float(np.float32(10 ** rng.uniform(-3, 0)))
    s_out = float(np.float32(10 ** rng.uniform(-2, 2)))
    zp_a, zp_b = _zero_points(rng)
    zp_out = int(rng.integers(-128, 128))
    a = tensor("a", tuple(a_shape), scale=s_a, zero_point=zp_a)
    b_data = rng.integers(-128, 128, size=b_shape).astype(np.int8)
    constant_rhs = rng.random() < 0.3
    b = (tensor("b", None, data=b_data, scale=s_b, zero_point=zp_b) if constant_rhs
         else tensor("b", tuple(b_shape), scale=s_b, zero_point=zp_b))
    out = tensor("y", (*out_batch, rows, cols), scale=s_out, zero_point=zp_out)
    feeds = {"a": rng.integers(-128, 128, size=a_shape).astype(np.int8)}
    if not constant_rhs:
        feeds["b"] = b_data
    graph = single_op_graph("BATCH_MATMUL", [a, b], [out], {"adj_x": adj_x, "adj_y": adj_y})
    return graph, feeds, BOTH


@pytest.mark.parametrize("seed", SEEDS)
def test_random_batch_matmul_models(seed):
    rng = np.random.default_rng(6000 + seed)
    for i in range(CASES_PER_SEED):
        graph, feeds, targets = _batch_matmul_case(rng, i)
        assert_matches_oracles(graph, feeds, targets=targets, context=f"case {seed}/{i}")


def product_split_case(rng, dtype):
    """A BATCH_MATMUL whose multiplier differs between the float32 product ``float(s_a * s_b)``
    (LiteRT) and the double product (TensorFlow Lite Micro), with an accumulator that rounds to
    different outputs under the two: ``a`` [1, K] sums to that accumulator against ``b`` = ones [K, 1]
    (zero points 0). ``dtype`` int8 (the double-rounding MBQM) or int16 (the int64 MBQM of the
    16-bit reduced multiplier). Returns the graph and its feeds."""
    from intq.qmath import effective_scale, quantize_multiplier
    from intq.qmath.raw import mbqm, mbqm_int64, reduce_multiplier

    top = int(np.iinfo(dtype).max)
    while True:
        s_a, s_b = (float(np.float32(10 ** rng.uniform(-4, -1))) for _ in range(2))
        s_y = float(np.float32(s_a * s_b * 10 ** rng.uniform(3, 4.5)))  # M ~ 1e-3.. 3e-5
        ms = [quantize_multiplier(effective_scale(s_a, s_b, s_y, product_dtype=t)) for t in (np.float32, np.float64)]
        if dtype == np.int8:
            pairs = [(int(m.multiplier), int(m.shift)) for m in ms]
        else:  # the int64 MBQM's 16-bit multiplier: most splits of the 31-bit one vanish here
            pairs = [tuple(int(v) for v in reduce_multiplier(int(m.multiplier), int(m.shift))) for m in ms]
        if pairs[0] == pairs[1]:
            continue
        limit = int(top / (s_a * s_b / s_y))  # the accumulators whose output is in range
        # every accumulator where that is cheap (int8: up to ~4M), else a sample (int16: up to ~1e9,
        # where a 2^-15 multiplier step moves a large fraction of the outputs)
        acc = (np.arange(1, limit, dtype=np.int64) if limit <= 1 << 23
               else np.unique(rng.integers(1, limit, size=1 << 18, dtype=np.int64)))
        f = mbqm if dtype == np.int8 else mbqm_int64
        ys = [f(acc, *p) for p in pairs]
        split = np.flatnonzero(ys[0] != ys[1])
        if split.size:
            break
    target = int(acc[split[rng.integers(0, split.size)]])
    depth = -(-target // top) + 1
    a = np.zeros((1, depth), np.int64)
    a[0, :target // top] = top
    a[0, target // top] = target % top
    graph = single_op_graph("BATCH_MATMUL", [tensor("a", (1, depth), dtype, s_a), tensor("b", (depth, 1), dtype, s_b)],
                            [tensor("y", (1, 1), dtype, s_y)])
    return graph, {"a": a.astype(dtype), "b": np.ones((depth, 1), dtype)}


def test_batch_matmul_targets_follow_their_runtimes_where_the_products_differ():
    """TFLite Micro computes the multiplier from the double product s_a * s_b, LiteRT from the float32
    one: on models where the two round differently, each target equals its runtime."""
    rng = np.random.default_rng(11)
    for i in range(8):
        graph, feeds = product_split_case(rng, np.int8)
        outs = assert_matches_oracles(graph, feeds, context=f"product split {i}")
        assert not np.array_equal(outs["tflite"]["y"], outs["litert-ref"]["y"]), "not a discriminating model"


# -------------------------------------------------------------------------- bad contracts

def _conv_graph(op="CONV_2D", x_dtype=np.int8, w_axis=0, w_const=True, attrs=None, w_shape=(4, 3, 3, 2)):
    c_out = w_shape[3] if op == "DEPTHWISE_CONV_2D" else w_shape[0]
    scales = np.full(w_shape[w_axis] if w_axis is not None else 1, 0.01, np.float32)
    w = tensor("w", None, data=np.ones(w_shape, np.int8), scale=scales, axis=w_axis, narrow=True)
    if not w_const:
        w = tensor("w", w_shape, scale=scales, axis=w_axis, narrow=True)
    inputs = [tensor("x", (1, 5, 5, 2), x_dtype, scale=0.1, zero_point=0), w,
              tensor("b", None, np.int32, data=np.zeros(c_out, np.int32), scale=0.001)]
    out = tensor("y", (1, 5, 5, c_out), scale=0.1)
    base = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
    if op == "DEPTHWISE_CONV_2D":
        base["depth_multiplier"] = c_out // 2
    return single_op_graph(op, inputs, [out], {**base, **(attrs or {})})


@pytest.mark.parametrize("make, message", [
    (lambda: _conv_graph(w_axis=3, w_shape=(4, 3, 3, 2)), "per axis 3"),
    (lambda: _conv_graph(w_const=False), "must be a constant"),
    (lambda: _conv_graph(x_dtype=np.int16), "int16"),
    (lambda: _conv_graph(attrs={"stride_h": 0}), "stride_h"),
    (lambda: _conv_graph(attrs={"padding": "EXPLICIT"}), "padding"),
    (lambda: _conv_graph(w_shape=(4, 3, 3, 3)), "multiple of the weights' channels"),
    (lambda: _conv_graph(op="DEPTHWISE_CONV_2D", w_axis=0, w_shape=(1, 3, 3, 4)), "per axis 0"),
    (lambda: _conv_graph(op="DEPTHWISE_CONV_2D", w_axis=3, w_shape=(1, 3, 3, 4), w_const=False),
     "must be a constant"),
    (lambda: _conv_graph(op="DEPTHWISE_CONV_2D", x_dtype=np.int16, w_axis=3, w_shape=(1, 3, 3, 4)), "int16"),
    (lambda: _conv_graph(op="DEPTHWISE_CONV_2D", w_axis=3, w_shape=(1, 3, 3, 4), attrs={"depth_multiplier": 1}),
     "depth_multiplier"),
])
def test_conv_kernels_refuse_bad_contracts(make, message):
    graph = make()
    with pytest.raises(KernelError, match=message) as info:
        Interpreter(graph)
    assert f"node {graph.nodes[0].name!r}" in str(info.value)


def _transpose_conv_graph(w_axis=0, w_const=True, x_dtype=np.int8, shape=(1, 6, 6, 4)):
    scales = np.full(4 if w_axis is not None else 1, 0.01, np.float32)
    w = (tensor("w", None, data=np.ones((4, 3, 3, 4), np.int8), scale=scales, axis=w_axis, narrow=True) if w_const
         else tensor("w", (4, 3, 3, 4), scale=scales, axis=w_axis, narrow=True))
    inputs = [tensor("output_shape", None, np.int32, data=np.array(shape, np.int32)), w,
              tensor("x", (1, 3, 3, 4), x_dtype, scale=0.1)]
    out = tensor("y", (1, 6, 6, 4), scale=0.1)
    return single_op_graph("TRANSPOSE_CONV", inputs, [out], {"padding": "SAME", "stride_h": 2, "stride_w": 2})


def _batch_matmul_graph(a_dtype=np.int8, a_axis=None, out_dtype=np.int8, b_shape=(3, 5)):
    scale_a = np.full(4, 0.1, np.float32) if a_axis is not None else 0.1
    inputs = [tensor("a", (2, 4, 3), a_dtype, scale=scale_a, axis=a_axis), tensor("b", b_shape, scale=0.1)]
    return single_op_graph("BATCH_MATMUL", inputs, [tensor("y", (2, 4, 5), out_dtype, scale=0.1)])


@pytest.mark.parametrize("make, message", [
    (lambda: _transpose_conv_graph(w_axis=3), "per axis 3"),
    (lambda: _transpose_conv_graph(w_const=False), "must be a constant"),
    (lambda: _transpose_conv_graph(x_dtype=np.int16), "int16"),
    (lambda: _transpose_conv_graph(shape=(1, 7, 6, 4)), "output_shape"),
    (lambda: _batch_matmul_graph(a_dtype=np.int16), "int16"),
    (lambda: _batch_matmul_graph(a_axis=1), "per tensor"),
    (lambda: _batch_matmul_graph(out_dtype=np.int32), "int32"),
    (lambda: _batch_matmul_graph(b_shape=(4, 5)), "contracted lengths"),
])
def test_transpose_conv_and_batch_matmul_refuse_bad_contracts(make, message):
    graph = make()
    with pytest.raises(KernelError, match=message) as info:
        Interpreter(graph)
    assert f"node {graph.nodes[0].name!r}" in str(info.value)


# -------------------------------------------------------------------------- realistic layers

def _realistic(op):
    rng = np.random.default_rng(7000)
    s_w = (10 ** rng.uniform(-3, -2, size=144)).astype(np.float32)
    x_qp = {"scale": 0.02, "zero_point": -7}
    out_qp = {"scale": 0.05, "zero_point": 4}
    if op == "CONV_2D":  # a ResNet-18 stage-1 layer (the shape benchmarks/conv_kernels.py times)
        w = _weights(rng, (64, 3, 3, 64))
        inputs = [tensor("x", (1, 56, 56, 64), **x_qp), tensor("w", None, data=w, scale=s_w[:64], axis=0, narrow=True),
                  _bias(rng, "b", 64, 0.02, s_w[:64], 0)]
        out, attrs = (1, 56, 56, 64), {"padding": "SAME", "stride_h": 1, "stride_w": 1,
                                       "fused_activation_function": "RELU"}
    elif op == "DEPTHWISE_CONV_2D":  # a MobileNetV2 block's depthwise layer (benchmarked too)
        w = _weights(rng, (1, 3, 3, 144))
        inputs = [tensor("x", (1, 56, 56, 144), **x_qp), tensor("w", None, data=w, scale=s_w, axis=3, narrow=True),
                  _bias(rng, "b", 144, 0.02, s_w, 0)]
        out, attrs = (1, 56, 56, 144), {"padding": "SAME", "stride_h": 1, "stride_w": 1, "depth_multiplier": 1,
                                        "fused_activation_function": "RELU6"}
    else:  # TRANSPOSE_CONV: a decoder's 2x upsampling
        w = _weights(rng, (64, 3, 3, 32))
        inputs = [tensor("output_shape", None, np.int32, data=np.array([1, 28, 28, 64], np.int32)),
                  tensor("w", None, data=w, scale=s_w[:64], axis=0, narrow=True), tensor("x", (1, 14, 14, 32), **x_qp),
                  _bias(rng, "b", 64, 0.02, s_w[:64], 0)]
        out, attrs = (1, 28, 28, 64), {"padding": "SAME", "stride_h": 2, "stride_w": 2}
    x_shape = next(t.shape for t in inputs if t.name == "x")
    graph = single_op_graph(op, inputs, [tensor("y", out, **out_qp)], attrs)
    return graph, {"x": rng.integers(-128, 128, size=x_shape).astype(np.int8)}


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV"])
def test_realistic_layers(op):
    graph, feeds = _realistic(op)
    assert_matches_oracles(graph, feeds, context=op)


# ------------------------------------------------------------- ties: where the targets' roundings differ

def _tie_cases():
    """1x1 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED with one unit weight, zero points 0 and
    ``s_in = s_out = 1``: ``M = s_w`` has few significant bits, the accumulator ``x + b`` runs over
    256 consecutive integers, and most right shifts land on exact ties — the elements where double
    rounding (half away), NEON-style half-up double rounding and float32 half-to-even differ
    (tools/probe_litert_rounding.py's crafted set). 11 channels: 8 vector channels and a 3-channel
    scalar tail for litert-opt's depthwise output stage."""
    s_w = np.array([0.75, 0.5, 0.25, 0.125, 3 / 16, 5 / 32, 7 / 64, 9 / 16, 3 / 8, 3 / 32, 11 / 1024], np.float32)
    c = s_w.size
    bias = ((np.arange(c) - c // 2) * 37).astype(np.int32)
    x = np.arange(-128, 128, dtype=np.int8)
    for per_channel in (True, False):
        scales = s_w if per_channel else s_w[:1]
        axis = 0 if per_channel else None
        for act in ACTIVATIONS:
            attrs = {"padding": "VALID", "stride_h": 1, "stride_w": 1, "dilation_h_factor": 1, "dilation_w_factor": 1,
                     "fused_activation_function": act}
            conv = single_op_graph("CONV_2D", [
                tensor("x", (1, 16, 16, 1), scale=1.0, zero_point=0),
                tensor("w", None, data=np.ones((c, 1, 1, 1), np.int8), scale=scales, axis=axis, narrow=True),
                tensor("b", None, np.int32, data=bias, scale=scales, axis=axis)],
                [tensor("y", (1, 16, 16, c), scale=1.0, zero_point=0)], attrs)
            yield f"CONV_2D per_channel={per_channel} {act}", conv, {"x": x.reshape(1, 16, 16, 1)}
            dw = single_op_graph("DEPTHWISE_CONV_2D", [
                tensor("x", (1, 16, 16, c), scale=1.0, zero_point=0),
                tensor("w", None, data=np.ones((1, 1, 1, c), np.int8), scale=scales, axis=3 if per_channel else None,
                       narrow=True),
                tensor("b", None, np.int32, data=bias, scale=scales, axis=axis)],
                [tensor("y", (1, 16, 16, c), scale=1.0, zero_point=0)], {**attrs, "depth_multiplier": 1})
            xs = np.stack([np.roll(x, 7 * i) for i in range(c)], axis=-1).reshape(1, 16, 16, c)
            yield f"DEPTHWISE_CONV_2D per_channel={per_channel} {act}", dw, {"x": xs}
            fc = single_op_graph("FULLY_CONNECTED", [
                tensor("x", (256, 1), scale=1.0, zero_point=0),
                tensor("w", None, data=np.ones((c, 1), np.int8), scale=scales, axis=axis, narrow=True),
                tensor("b", None, np.int32, data=bias, scale=scales, axis=axis)],
                [tensor("y", (256, c), scale=1.0, zero_point=0)], {"fused_activation_function": act})
            yield f"FULLY_CONNECTED per_channel={per_channel} {act}", fc, {"x": x.reshape(256, 1)}


def test_rounding_ties_follow_each_target():
    """Every target equals its runtime on tie-heavy layers, and the targets really differ there
    (so equality is not an accident of data without ties)."""
    outputs = {}
    for context, graph, feeds in _tie_cases():
        got = assert_matches_oracles(graph, feeds, targets=("litert-ref", "tflite", "litert-opt", "xnnpack"),
                                     context=context)
        outputs[context] = {t: got[t]["y"] for t in got}
    differ = {t: sum(not np.array_equal(o["litert-ref" if "FULLY" not in c else "tflite"], o[t])
                     for c, o in outputs.items()) for t in ("litert-opt", "xnnpack")}
    assert differ["litert-opt"] >= 4 and differ["xnnpack"] >= 4, differ  # measured: 6 and more
