"""Every operator intq writes to ONNX, on >= 200 random single-op models each, run by onnxruntime
(QOperator int8 and uint8 under ORT_DISABLE_ALL and ORT_ENABLE_ALL, QDQ int8 and uint8 under
ORT_ENABLE_ALL; one thread): every output equals intq's target ``ort`` (``ort-u8``).

The models of one operator are merged into a few graphs (:func:`tests.export.onnx_harness.merge`)
so that each onnxruntime session runs 100 of them. Shapes, scales (several decades, some
saturating), zero points (extremes included), fused activations, per-channel and per-tensor
weights, strides, dilations, padding and broadcasting are drawn at random.
"""

from __future__ import annotations

import numpy as np
import pytest

from intq.kernels._conv_common import compute_padding

from .onnx_harness import EXACT, TALLY, compare, const, merge, q, single

PER_GRAPH = 100
GRAPHS = 2  # 2 x 100 = 200 models per operator, one onnxruntime session per graph and combination
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def _s(rng, lo=-3.0, hi=0.0) -> float:
    return float(np.float32(10 ** rng.uniform(lo, hi)))


def _z(rng) -> int:
    return int(rng.choice([-128, 127])) if rng.random() < 0.1 else int(rng.integers(-128, 128))


def _x(rng, shape):
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _conv(rng, depthwise: bool):
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    c = int(rng.integers(1, 9))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    dh, dw = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if rng.random() < 0.3 else (1, 1)
    padding = "SAME" if rng.random() < 0.6 else "VALID"
    pad = compute_padding(padding, (h, w), (kh, kw), (sh, sw), (dh, dw))
    if pad.out_h <= 0 or pad.out_w <= 0:
        padding, pad = "SAME", compute_padding("SAME", (h, w), (kh, kw), (sh, sw), (dh, dw))
    if depthwise:
        mult = int(rng.integers(1, 3))
        cout = c * mult
        wdata = rng.integers(-127, 128, size=(1, kh, kw, cout)).astype(np.int8)
        axis = 3
    else:
        cout = int(rng.integers(1, 9))
        wdata = rng.integers(-127, 128, size=(cout, kh, kw, c)).astype(np.int8)
        axis = 0
    per_channel = rng.random() < 0.7
    s_in = _s(rng)
    s_w = (10 ** rng.uniform(-3.5, -1, size=cout if per_channel else 1)).astype(np.float32)
    s_out = _s(rng, -2, 1.5)
    wt = const("w", wdata, s_w if per_channel else float(s_w[0]), axis=axis if per_channel else None)
    bias = const("b", rng.integers(-20000, 20000, size=cout), dtype=np.int32)
    x = q("x", (n, h, w, c), s_in, _z(rng))
    y = q("y", (n, pad.out_h, pad.out_w, cout), s_out, _z(rng))
    attrs = dict(padding=padding, stride_h=sh, stride_w=sw, dilation_h_factor=dh, dilation_w_factor=dw,
                 fused_activation_function=str(rng.choice(ACTS)))
    if depthwise:
        attrs["depth_multiplier"] = cout // c
    g = single("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", [x, wt, bias], [y], attrs)
    return g, {"x": _x(rng, x.shape)}


def _fully_connected(rng):
    rows, k, units = int(rng.integers(1, 5)), int(rng.integers(1, 200)), int(rng.integers(1, 17))
    per_channel = rng.random() < 0.5
    s_w = (10 ** rng.uniform(-3.5, -1, size=units if per_channel else 1)).astype(np.float32)
    wt = const("w", rng.integers(-127, 128, size=(units, k)).astype(np.int8), s_w if per_channel else float(s_w[0]),
               axis=0 if per_channel else None)
    bias = const("b", rng.integers(-50000, 50000, size=units), dtype=np.int32)
    x = q("x", (rows, k), _s(rng), _z(rng))
    y = q("y", (rows, units), _s(rng, -2, 1.5), _z(rng))
    g = single("FULLY_CONNECTED", [x, wt, bias], [y], dict(fused_activation_function=str(rng.choice(ACTS)),
                                                          keep_num_dims=False))
    return g, {"x": _x(rng, x.shape)}


def _broadcast_pair(rng):
    shape = tuple(int(v) for v in rng.integers(1, 7, size=int(rng.integers(1, 5))))
    other = tuple(1 if rng.random() < 0.3 else d for d in shape)
    return (shape, other) if rng.random() < 0.5 else (other, shape)


def _binary(op):
    def make(rng):
        sa, sb = _broadcast_pair(rng)
        a, b = q("a", sa, _s(rng), _z(rng)), q("b", sb, _s(rng), _z(rng))
        y = q("y", np.broadcast_shapes(sa, sb), _s(rng, -2.5, 0.5), _z(rng))
        g = single(op, [a, b], [y], dict(fused_activation_function=str(rng.choice(ACTS))))
        return g, {"a": _x(rng, sa), "b": _x(rng, sb)}
    return make


def _shape(rng, rank=None):
    return tuple(int(v) for v in rng.integers(1, 9, size=rank or int(rng.integers(1, 5))))


def _unary(op, out=None, attrs=None):
    def make(rng):
        shape = _shape(rng)
        x = q("x", shape, _s(rng, -3, 0.5), _z(rng))
        y = q("y", shape, *(out if out else (_s(rng, -3, 0), _z(rng))))
        a = attrs(rng) if attrs else {}
        return single(op, [x], [y], a), {"x": _x(rng, shape)}
    return make


def _quantize(rng):
    shape = _shape(rng)
    y = q("y", shape, _s(rng), _z(rng))
    if rng.random() < 0.5:
        x = q("x", shape, _s(rng), _z(rng))
        return single("QUANTIZE", [x], [y]), {"x": _x(rng, shape)}
    from intq.ir import Tensor
    x = Tensor("x", np.dtype(np.float32), shape)
    v = (rng.standard_normal(shape) * 10 ** rng.uniform(-2, 2)).astype(np.float32)
    v.reshape(-1)[: min(4, v.size)] = np.float32(y.qparams.tensor_scale) * rng.integers(-40, 40, size=min(4, v.size)
                                                                                         ) + np.float32(0.5) * y.qparams.tensor_scale
    return single("QUANTIZE", [x], [y]), {"x": v}


def _dequantize(rng):
    from intq.ir import Tensor
    shape = _shape(rng)
    x = q("x", shape, _s(rng), _z(rng))
    return single("DEQUANTIZE", [x], [Tensor("y", np.dtype(np.float32), shape)]), {"x": _x(rng, shape)}


def _mean(rng):
    n, h, w, c = _shape(rng, 4)
    keep = bool(rng.random() < 0.5)
    s_x = _s(rng)
    s_y = float(np.float32(s_x * 10 ** rng.uniform(-2, 1)))  # QLinearGlobalAveragePool takes s_x / (s_y HW) < 256
    x = q("x", (n, h, w, c), s_x, _z(rng))
    y = q("y", (n, 1, 1, c) if keep else (n, c), s_y, _z(rng))
    axes = const("axes", np.array([1, 2], np.int32))
    return single("MEAN", [x, axes], [y], dict(keep_dims=keep)), {"x": _x(rng, x.shape)}


def _max_pool(rng):
    n, h, w, c = _shape(rng, 4)
    fh, fw, sh, sw = (int(v) for v in rng.integers(1, 4, size=4))
    padding = "SAME" if rng.random() < 0.5 or fh > h or fw > w else "VALID"
    pad = compute_padding(padding, (h, w), (fh, fw), (sh, sw), (1, 1))
    s, z = _s(rng), _z(rng)
    x, y = q("x", (n, h, w, c), s, z), q("y", (n, pad.out_h, pad.out_w, c), s, z)
    attrs = dict(padding=padding, stride_h=sh, stride_w=sw, filter_height=fh, filter_width=fw,
                 fused_activation_function="NONE")
    return single("MAX_POOL_2D", [x], [y], attrs), {"x": _x(rng, x.shape)}


def _average_pool(rng):
    g, feeds = _max_pool(rng)
    node = g.nodes[0]
    attrs = {**node.attrs, "fused_activation_function": str(rng.choice(ACTS))}
    return single("AVERAGE_POOL_2D", [g.tensors["x"]], [g.tensors["y"]], attrs), feeds


def _concatenation(rng):
    shape = _shape(rng)
    axis = int(rng.integers(0, len(shape)))
    k = int(rng.integers(1, 4))
    same = rng.random() < 0.2
    sy, zy = _s(rng), _z(rng)
    parts, feeds = [], {}
    for i in range(k):
        sh = list(shape)
        sh[axis] = int(rng.integers(1, 5))
        parts.append(q(f"x{i}", sh, *((sy, zy) if same else (_s(rng), _z(rng)))))
        feeds[f"x{i}"] = _x(rng, sh)
    out = list(shape)
    out[axis] = sum(p.shape[axis] for p in parts)
    return single("CONCATENATION", parts, [q("y", out, sy, zy)], dict(axis=axis, fused_activation_function="NONE")), feeds


def _movement(op_asked):
    return lambda rng: _move(rng, op_asked)


def _move(rng, op):
    shape = _shape(rng)
    s, z = _s(rng), _z(rng)
    x = q("x", shape, s, z)
    feeds = {"x": _x(rng, shape)}
    if op in ("RESHAPE", "SQUEEZE"):
        if op == "SQUEEZE" and 1 not in shape:
            shape = (*shape, 1)
            x, feeds = q("x", shape, s, z), {"x": _x(rng, shape)}
        if op == "SQUEEZE" and all(d == 1 for d in shape):
            shape = (2, *shape)
            x, feeds = q("x", shape, s, z), {"x": _x(rng, shape)}
        out = (int(np.prod(shape)),) if op == "RESHAPE" else tuple(d for d in shape if d != 1)
        ins = [x, const("shape", np.array(out, np.int32))] if op == "RESHAPE" else [x]
        attrs = {"new_shape": out} if op == "RESHAPE" else {"squeeze_dims": tuple(i for i, d in enumerate(shape) if d == 1)}
        return single(op, ins, [q("y", out, s, z)], attrs), feeds
    if op == "TRANSPOSE":
        perm = rng.permutation(len(shape))
        return single(op, [x, const("perm", perm.astype(np.int32))], [q("y", tuple(shape[p] for p in perm), s, z)]), feeds
    if op in ("PAD", "PADV2"):
        pads = rng.integers(0, 3, size=(len(shape), 2)).astype(np.int32)
        out = tuple(d + int(p.sum()) for d, p in zip(shape, pads))
        ins = [x, const("pads", pads)]
        if op == "PADV2":
            ins.append(const("value", np.array([int(rng.integers(-128, 128))], np.int8), s, z))
        return single(op, ins, [q("y", out, s, z)]), feeds
    axis = int(rng.integers(0, len(shape)))
    if op == "SPLIT":
        k = int(rng.choice([d for d in (1, 2, 3, 4) if shape[axis] % d == 0]))
        outs = [q(f"y{i}", tuple(d // k if j == axis else d for j, d in enumerate(shape)), s, z) for i in range(k)]
        return single(op, [const("axis", np.array([axis], np.int32)), x], outs, dict(num_splits=k)), feeds
    cut = sorted(set(int(v) for v in rng.integers(0, shape[axis] + 1, size=2)))
    sizes = [cut[0], *np.diff(cut).tolist(), shape[axis] - cut[-1]]
    sizes = [v for v in sizes if v > 0] or [shape[axis]]
    outs = [q(f"y{i}", tuple(v if j == axis else d for j, d in enumerate(shape)), s, z) for i, v in enumerate(sizes)]
    return single("SPLIT_V", [x, const("sizes", np.array(sizes, np.int32)), const("axis", np.array([axis], np.int32))],
                  outs, dict(num_splits=len(sizes))), feeds


def _resize_nearest(rng):
    n, h, w, c = _shape(rng, 4)
    oh, ow = int(rng.integers(1, 17)), int(rng.integers(1, 17))
    s, z = _s(rng), _z(rng)
    attrs = dict(align_corners=bool(rng.random() < 0.3), half_pixel_centers=bool(rng.random() < 0.5))
    g = single("RESIZE_NEAREST_NEIGHBOR", [q("x", (n, h, w, c), s, z), const("size", np.array([oh, ow], np.int32))],
               [q("y", (n, oh, ow, c), s, z)], attrs)
    return g, {"x": _x(rng, (n, h, w, c))}


def _prelu(rng):
    shape = _shape(rng, 4)
    alpha_shape = tuple(d if rng.random() < 0.5 else 1 for d in shape[1:])
    sa = _s(rng, -3, -1)
    alpha = const("alpha", rng.integers(-128, 128, size=alpha_shape).astype(np.int8), sa, _z(rng))
    x, y = q("x", shape, _s(rng), _z(rng)), q("y", shape, _s(rng), _z(rng))
    return single("PRELU", [x, alpha], [y]), {"x": _x(rng, shape)}


def _strided_slice(rng):
    from tests.kernels.test_data_movement import strided_slice_case

    while True:
        g, feeds, _ = strided_slice_case(rng, 0)
        y = g.tensors[g.outputs[0]]
        if y.dtype == np.int8 and 0 not in y.shape:
            return g, feeds


MAKERS = {
    "CONV_2D": lambda rng: _conv(rng, False),
    "DEPTHWISE_CONV_2D": lambda rng: _conv(rng, True),
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _binary("ADD"),
    "MUL": _binary("MUL"),
    "SUB": _binary("SUB"),
    "LOGISTIC": _unary("LOGISTIC", out=(1.0 / 256, -128)),
    "SOFTMAX": _unary("SOFTMAX", out=(1.0 / 256, -128), attrs=lambda rng: {"beta": 1.0}),
    "LEAKY_RELU": _unary("LEAKY_RELU", attrs=lambda rng: {"alpha": float(np.float32(rng.uniform(0.01, 0.9)))}),
    "HARD_SWISH": _unary("HARD_SWISH"),
    "TANH": _unary("TANH", out=(1.0 / 128, 0)),
    "RELU": _unary("RELU"),
    "RELU6": _unary("RELU6"),
    "RELU_N1_TO_1": _unary("RELU_N1_TO_1"),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "MEAN": _mean,
    "MAX_POOL_2D": _max_pool,
    "AVERAGE_POOL_2D": _average_pool,
    "PRELU": _prelu,
    "STRIDED_SLICE": _strided_slice,
    "CONCATENATION": _concatenation,
    "RESIZE_NEAREST_NEIGHBOR": _resize_nearest,
    **{op: _movement(op) for op in ("RESHAPE", "SQUEEZE", "TRANSPOSE", "PAD", "PADV2", "SPLIT", "SPLIT_V")},
}


@pytest.mark.parametrize("op", sorted(MAKERS))
def test_every_output_equals_onnxruntime(op):
    rng = np.random.default_rng(sum(map(ord, op)))
    for k in range(GRAPHS):
        cases = [MAKERS[op](rng) for _ in range(PER_GRAPH)]
        graph = merge([g for g, _ in cases], f"{op.lower()}_{k}")
        feeds = {f"c{i}/{name}": v for i, (_, f) in enumerate(cases) for name, v in f.items()}
        compare(graph, feeds, ops=[op])
    for combo in EXACT:
        assert TALLY[(op, "/".join(combo))] >= GRAPHS * PER_GRAPH


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_every_code_pair(op):
    """All 65536 input pairs of QLinearAdd / QLinearMul, with parameters for which the uint8 codes
    round differently from the int8 ones (tests/kernels/test_ort_target.py): onnxruntime equals
    ``ort`` on the int8 model and ``ort-u8`` on the uint8 one."""
    (sa, za), (sb, zb), (sy, zy) = (0.03431348875164986, 65), (0.0027069412171840668, 115), (0.7013718485832214, -65)
    codes = np.arange(-128, 128, dtype=np.int8)
    g = single(op, [q("a", (256, 256), sa, za), q("b", (256, 256), sb, zb)], [q("y", (256, 256), sy, zy)],
               dict(fused_activation_function="NONE"))
    compare(g, {"a": np.repeat(codes[:, None], 256, 1), "b": np.repeat(codes[None, :], 256, 0)})
