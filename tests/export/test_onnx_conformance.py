"""Every operator intq writes to ONNX, on >= 200 random single-op models each, run by onnxruntime
(QOperator int8 and uint8 under ORT_DISABLE_ALL and ORT_ENABLE_ALL, QDQ int8 and uint8 under
ORT_ENABLE_ALL; one thread): every output equals intq under the target that claims onnxruntime on this
machine for that file and level (``ort``, ``ort-u8-vnni`` or ``ort-u8s8-avx2``: tests/export/onnx_harness.py).

The models of one operator are merged into a few graphs (:func:`tests.export.onnx_harness.merge`)
so that each onnxruntime session runs 100 of them. Shapes, scales (several decades, some
saturating), zero points (extremes included), fused activations, per-channel and per-tensor
weights, strides, dilations, padding and broadcasting are drawn at random.
"""

from __future__ import annotations

import numpy as np
import pytest

from intq.ir import Tensor
from intq.kernels._conv_common import compute_padding
from intq.qmath import QuantParams

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


def _conv_integer(rng):
    """CONV_INTEGER: full-range int8 weights with a per-tensor zero point (extremes included), SAME or
    VALID padding, strides and dilations; the int32 sums."""
    n, h, w, c = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    kh, kw, sh, sw = (int(v) for v in rng.integers(1, 4, 4))
    dh, dw = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if rng.random() < 0.3 else (1, 1)
    padding = "SAME" if rng.random() < 0.6 else "VALID"
    pad = compute_padding(padding, (h, w), (kh, kw), (sh, sw), (dh, dw))
    if pad.out_h <= 0 or pad.out_w <= 0:
        padding, pad = "SAME", compute_padding("SAME", (h, w), (kh, kw), (sh, sw), (dh, dw))
    cout = int(rng.integers(1, 9))
    wt = const("w", rng.integers(-128, 128, size=(cout, kh, kw, c)).astype(np.int8), 1.0, _z(rng))
    x = q("x", (n, h, w, c), 1.0, _z(rng))
    y = Tensor("y", np.dtype(np.int32), (n, pad.out_h, pad.out_w, cout),
               qparams=QuantParams(np.float32(1.0), 0, np.int32))
    g = single("CONV_INTEGER", [x, wt], [y], dict(padding=padding, stride_h=sh, stride_w=sw, dilation_h_factor=dh,
                                                   dilation_w_factor=dw, fused_activation_function="NONE"))
    return g, {"x": _x(rng, x.shape)}


def _matmul_integer(rng):
    """MATMUL_INTEGER: an operand of rank 2 to 4 by a constant full-range [K, N] matrix with a zero point per
    tensor or per column (extremes included); the int32 sums."""
    batch = tuple(int(v) for v in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    rows, k, units = int(rng.integers(1, 5)), int(rng.integers(1, 200)), int(rng.integers(1, 17))
    per_column = rng.random() < 0.5
    data = rng.integers(-128, 128, size=(k, units)).astype(np.int8)
    zb = np.array([_z(rng) for _ in range(units)]) if per_column else _z(rng)
    qp = QuantParams(np.ones(units if per_column else 1, np.float32), zb, np.int8, 1 if per_column else None)
    x = q("x", (*batch, rows, k), 1.0, _z(rng))
    y = Tensor("y", np.dtype(np.int32), (*batch, rows, units), qparams=QuantParams(np.float32(1.0), 0, np.int32))
    g = single("MATMUL_INTEGER", [x, Tensor("b", data=data, qparams=qp)], [y])
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


def _squared_difference(rng):
    """Scales up to a factor 30 apart, the output scale putting the largest square near the int8 range
    (sometimes far beyond: saturation)."""
    sa, sb = _broadcast_pair(rng)
    s_a = _s(rng)
    s_b = float(np.float32(s_a * 10 ** rng.uniform(-1.5, 1.5)))
    s_y = float(np.float32((255 * max(s_a, s_b)) ** 2 / 255 * 10 ** rng.uniform(-2.5, 0.3)))
    a, b = q("a", sa, s_a, _z(rng)), q("b", sb, s_b, _z(rng))
    g = single("SQUARED_DIFFERENCE", [a, b], [q("y", np.broadcast_shapes(sa, sb), s_y, _z(rng))])
    return g, {"a": _x(rng, sa), "b": _x(rng, sb)}


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
    """To int8, or (20%) to a uint8 tensor, which stays uint8 whatever the model's activations; float
    inputs hold exact halves. (NaN, which intq's interpreter refuses as an input, reaches
    QuantizeLinear inside RSQRT: codes below the zero point.)"""
    shape = _shape(rng)
    if rng.random() < 0.2:
        y = q("y", shape, _s(rng), int(rng.integers(0, 256)), dtype=np.uint8)
    else:
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
    """Random windows; 20% cover the whole unpadded image, which onnxruntime computes as its global
    average pool (integer sum, float32 requantization)."""
    if rng.random() < 0.2:
        n, h, w, c = _shape(rng, 4)
        s, z = _s(rng), _z(rng)
        attrs = dict(padding=str(rng.choice(["VALID", "SAME"])), stride_h=int(rng.integers(1, 3)),
                     stride_w=int(rng.integers(1, 3)), filter_height=h, filter_width=w,
                     fused_activation_function=str(rng.choice(ACTS)))
        pad = compute_padding(attrs["padding"], (h, w), (h, w), (attrs["stride_h"], attrs["stride_w"]), (1, 1))
        x, y = q("x", (n, h, w, c), s, z), q("y", (n, pad.out_h, pad.out_w, c), s, z)
        return single("AVERAGE_POOL_2D", [x], [y], attrs), {"x": _x(rng, x.shape)}
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


def _mean_any(rng):
    """MEAN over any set of axes (Transpose + Reshape around QLinearGlobalAveragePool); 20% over axes
    of size 1 only (a requantization, any output scale: silero-vad's MEAN has s_x / s_y = 510)."""
    shape = _shape(rng)
    rank = len(shape)
    axes = sorted(set(int(a) for a in rng.choice(rank, size=int(rng.integers(1, rank + 1)), replace=True)))
    keep = bool(rng.random() < 0.5)
    s_x = _s(rng)
    s_y = float(np.float32(s_x * 10 ** rng.uniform(-2, 1)))  # s_x / (s_y N) < 256: onnxruntime's range
    if rng.random() < 0.2:
        shape = tuple(1 if a in axes else d for a, d in enumerate(shape))
        s_y = float(np.float32(s_x * 10 ** rng.uniform(-3.5, 1)))
    x = q("x", shape, s_x, _z(rng))
    out = tuple(1 if a in axes else d for a, d in enumerate(shape)) if keep else \
        tuple(d for a, d in enumerate(shape) if a not in axes)
    y = q("y", out, s_y, _z(rng))
    stored = [a - rank if rng.random() < 0.3 else a for a in axes]
    return single("MEAN", [x, const("axes", np.array(stored, np.int32))], [y], dict(keep_dims=keep)), \
        {"x": _x(rng, shape)}


def _transpose_conv(rng):
    n, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 7)), int(rng.integers(1, 7))
    c, cout = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    padding = "SAME" if rng.random() < 0.5 else "VALID"
    oh, ow = (h * sh, w * sw) if padding == "SAME" else ((h - 1) * sh + kh, (w - 1) * sw + kw)
    if rng.random() < 0.25:  # TFLite Micro takes any output size (crops, or leaves the bias)
        oh, ow = max(1, oh + int(rng.integers(-2, 3))), max(1, ow + int(rng.integers(-2, 3)))
    per_channel = rng.random() < 0.6
    s_w = (10 ** rng.uniform(-3.5, -1, size=cout if per_channel else 1)).astype(np.float32)
    wt = const("w", rng.integers(-127, 128, size=(cout, kh, kw, c)).astype(np.int8),
               s_w if per_channel else float(s_w[0]), axis=0 if per_channel else None)
    ins = [const("shape", np.array([n, oh, ow, cout], np.int32)), wt, q("x", (n, h, w, c), _s(rng), _z(rng))]
    if rng.random() < 0.7:
        ins.append(const("b", rng.integers(-20000, 20000, size=cout), dtype=np.int32))
    y = q("y", (n, oh, ow, cout), _s(rng, -2, 1.5), _z(rng))
    attrs = dict(padding=padding, stride_h=sh, stride_w=sw, fused_activation_function=str(rng.choice(ACTS)))
    return single("TRANSPOSE_CONV", ins, [y], attrs), {"x": _x(rng, (n, h, w, c))}


def _resize_bilinear(rng):
    n, h, w, c = _shape(rng, 4)
    oh, ow = int(rng.integers(1, 17)), int(rng.integers(1, 17))
    if rng.random() < 0.2:
        oh = h  # width only: written between two H/W Transposes
    s, z = _s(rng), _z(rng)
    mode = int(rng.integers(0, 3))
    attrs = dict(align_corners=mode == 1, half_pixel_centers=mode == 2)
    g = single("RESIZE_BILINEAR", [q("x", (n, h, w, c), s, z), const("size", np.array([oh, ow], np.int32))],
               [q("y", (n, oh, ow, c), s, z)], attrs)
    return g, {"x": _x(rng, (n, h, w, c))}


def _shape_op(rng):
    from intq.ir import Tensor
    shape = _shape(rng)
    out = np.dtype(np.int64 if rng.random() < 0.3 else np.int32)
    x = q("x", shape, _s(rng), _z(rng))
    return single("SHAPE", [x], [Tensor("y", out, (len(shape),))],
                  {"out_type": "INT64" if out == np.int64 else "INT32"}), {"x": _x(rng, shape)}


def _pack(rng):
    shape = _shape(rng)
    k = int(rng.integers(1, 5))
    axis = int(rng.integers(-(len(shape) + 1), len(shape) + 1))
    s, z = _s(rng), _z(rng)
    ax = axis % (len(shape) + 1)
    ins = [q(f"x{i}", shape, s, z) for i in range(k)]
    y = q("y", (*shape[:ax], k, *shape[ax:]), s, z)
    return single("PACK", ins, [y], {"axis": axis, "values_count": k}), {f"x{i}": _x(rng, shape) for i in range(k)}


def _gather(rng):
    shape = _shape(rng)
    axis = int(rng.integers(0, len(shape)))
    ishape = tuple(int(v) for v in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    idx_dtype = [np.int32, np.int64, np.int16][int(rng.choice(3, p=[0.6, 0.2, 0.2]))]
    indices = rng.integers(0, shape[axis], size=ishape).astype(idx_dtype)
    s, z = _s(rng), _z(rng)
    y = q("y", (*shape[:axis], *ishape, *shape[axis + 1:]), s, z)
    attrs = {"axis": axis - len(shape) if rng.random() < 0.3 else axis}
    return single("GATHER", [q("x", shape, s, z), const("indices", indices)], [y], attrs), {"x": _x(rng, shape)}


def _batch_matmul(rng):
    rank = int(rng.integers(2, 5))
    batch = tuple(int(v) for v in rng.integers(1, 4, size=rank - 2))
    bb = tuple(1 if rng.random() < 0.3 else d for d in batch)
    if rng.random() < 0.5:
        batch, bb = bb, batch
    m, k, n = (int(v) for v in rng.integers(1, 40, size=3))
    adj_x, adj_y = bool(rng.random() < 0.3), bool(rng.random() < 0.3)
    sa = (*batch, *((k, m) if adj_x else (m, k)))
    sb = (*bb, *((n, k) if adj_y else (k, n)))
    a, b = q("a", sa, _s(rng), _z(rng)), q("b", sb, _s(rng), _z(rng))
    y = q("y", (*np.broadcast_shapes(batch, bb), m, n), _s(rng, -1, 2), _z(rng))
    return single("BATCH_MATMUL", [a, b], [y], dict(adj_x=adj_x, adj_y=adj_y)), {"a": _x(rng, sa), "b": _x(rng, sb)}


def _slice(rng):
    shape = _shape(rng)
    begin = [int(rng.integers(0, d)) for d in shape]
    size = [-1 if rng.random() < 0.25 else int(rng.integers(1, d - b + 1)) for b, d in zip(begin, shape)]
    out = tuple(d - b if k == -1 else k for b, k, d in zip(begin, size, shape))
    s, z = _s(rng), _z(rng)
    dt = np.int32 if rng.random() < 0.7 else np.int64
    g = single("SLICE", [q("x", shape, s, z), const("begin", np.array(begin, dt)), const("size", np.array(size, dt))],
               [q("y", out, s, z)])
    return g, {"x": _x(rng, shape)}


def _broadcast_to(rng):
    out = _shape(rng)
    shape = tuple(d if rng.random() < 0.5 else 1 for d in out[len(out) - int(rng.integers(1, len(out) + 1)):])
    s, z = _s(rng), _z(rng)
    g = single("BROADCAST_TO", [q("x", shape, s, z), const("shape", np.array(out, np.int32))], [q("y", out, s, z)])
    return g, {"x": _x(rng, shape)}


def _extremum(op):
    def make(rng):
        sa, sb = _broadcast_pair(rng)
        s, z = _s(rng), _z(rng)
        g = single(op, [q("a", sa, s, z), q("b", sb, s, z)], [q("y", np.broadcast_shapes(sa, sb), s, z)])
        return g, {"a": _x(rng, sa), "b": _x(rng, sb)}
    return make


def _reduce_extremum(op):
    def make(rng):
        shape = _shape(rng)
        rank = len(shape)
        axes = sorted(set(int(a) for a in rng.choice(rank, size=int(rng.integers(0, rank + 1)), replace=True)))
        keep = bool(rng.random() < 0.5)
        out = tuple(1 if a in axes else d for a, d in enumerate(shape)) if keep else \
            tuple(d for a, d in enumerate(shape) if a not in axes)
        s, z = _s(rng), _z(rng)
        stored = [a - rank if rng.random() < 0.3 else a for a in axes]
        g = single(op, [q("x", shape, s, z), const("axes", np.array(stored, np.int32))], [q("y", out, s, z)],
                   dict(keep_dims=keep))
        x = _x(rng, shape)
        if rng.random() < 0.5:  # ties: few distinct codes
            x = rng.integers(-2, 2, size=shape).astype(np.int8)
        return g, {"x": x}
    return make


def _arg_extremum(op):
    def make(rng):
        from intq.ir import Tensor
        shape = _shape(rng)
        axis = int(rng.integers(0, len(shape)))
        out_dt = np.dtype(np.int64 if rng.random() < 0.3 else np.int32)
        x = _x(rng, shape) if rng.random() < 0.5 else rng.integers(-2, 2, size=shape).astype(np.int8)  # ties
        g = single(op, [q("x", shape, _s(rng), _z(rng)), const("axis", np.array([axis - len(shape) if rng.random() < 0.3
                                                                                else axis], np.int32))],
                   [Tensor("y", out_dt, tuple(d for a, d in enumerate(shape) if a != axis))],
                   {"output_type": "INT64" if out_dt == np.int64 else "INT32"})
        return g, {"x": x}
    return make


def _depth_space(op):
    def make(rng):
        bs = int(rng.integers(1, 4))
        n, h, w, c = (int(v) for v in rng.integers(1, 4, size=4))
        s, z = _s(rng), _z(rng)
        if op == "DEPTH_TO_SPACE":
            shape, out = (n, h, w, c * bs * bs), (n, h * bs, w * bs, c)
        else:
            shape, out = (n, h * bs, w * bs, c), (n, h, w, c * bs * bs)
        return single(op, [q("x", shape, s, z)], [q("y", out, s, z)], dict(block_size=bs)), {"x": _x(rng, shape)}
    return make


def _comparison(op):
    def make(rng):
        from intq.ir import Tensor
        sa, sb = _broadcast_pair(rng)
        qa = (_s(rng, -3, 1), _z(rng))
        qb = qa if rng.random() < 0.3 else ((float(np.float32(qa[0] * rng.choice([1, 2, 0.5, 3]))), _z(rng))
                                           if rng.random() < 0.5 else (_s(rng, -3, 1), _z(rng)))
        g = single(op, [q("a", sa, *qa), q("b", sb, *qb)], [Tensor("y", np.dtype(np.bool_), np.broadcast_shapes(sa, sb))])
        return g, {"a": _x(rng, sa), "b": _x(rng, sb)}
    return make


def _select_v2(rng):
    from intq.ir import Tensor
    sa, sb = _broadcast_pair(rng)
    sc = tuple(1 if rng.random() < 0.3 else d for d in np.broadcast_shapes(sa, sb))
    out = np.broadcast_shapes(sa, sb, sc)
    s, z = _s(rng), _z(rng)
    g = single("SELECT_V2", [Tensor("c", np.dtype(np.bool_), sc), q("a", sa, s, z), q("b", sb, s, z)], [q("y", out, s, z)])
    return g, {"c": rng.random(sc) < 0.5, "a": _x(rng, sa), "b": _x(rng, sb)}


def _space_batch(op):
    def make(rng):
        rank = 4 if rng.random() < 0.8 else 3
        spatial = rank - 2
        block = [int(v) for v in rng.integers(1, 4, size=spatial)]
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        s, z = _s(rng), _z(rng)
        if op == "SPACE_TO_BATCH_ND":
            pads = rng.integers(0, 3, size=(spatial, 2))
            sizes = [int(b * rng.integers(1, 4)) for b in block]  # padded sizes, multiples of the block
            dims = [sz - int(p.sum()) for sz, p in zip(sizes, pads)]
            if min(dims) < 1:
                pads[:] = 0
                dims = sizes
            shape = (n, *dims, c)
            out = (n * int(np.prod(block)), *[sz // b for sz, b in zip(sizes if pads.any() else dims, block)], c)
            pairs = pads
        else:
            dims = [int(v) for v in rng.integers(1, 4, size=spatial)]
            shape = (n * int(np.prod(block)), *dims, c)
            pairs = np.array([[int(rng.integers(0, d * b // 2 + 1)), 0] for d, b in zip(dims, block)])
            pairs[:, 1] = [int(rng.integers(0, d * b - p + 1)) if d * b - p > 1 else 0
                           for (p, _), d, b in zip(pairs, dims, block)]
            pairs[:, 1] = np.minimum(pairs[:, 1], [d * b - p - 1 for (p, _), d, b in zip(pairs, dims, block)])
            out = (n, *[d * b - int(p.sum()) for d, b, p in zip(dims, block, pairs)], c)
        g = single(op, [q("x", shape, s, z), const("block", np.array(block, np.int32)),
                        const("pairs", np.asarray(pairs, np.int32))], [q("y", out, s, z)])
        return g, {"x": _x(rng, shape)}
    return make


def _sum(rng):
    """SUM over random axes (QLinearGlobalAveragePool with the output scale s_y / N), 20% over axes of
    size 1 only; the output scale keeps s_x / s_y in onnxruntime's range."""
    g, feeds = _mean_any(rng)
    node = g.nodes[0]
    x, y = g.tensors["x"], g.tensors["y"]
    n = int(np.prod(x.shape) // np.prod(y.shape))
    y = q("y", y.shape, float(np.float32(y.qparams.tensor_scale * n)), y.qparams.tensor_zero_point)
    return single("SUM", [x, g.tensors["axes"]], [y], dict(node.attrs)), feeds


def _lut(rng):
    """A random 256-entry int8 table (TPU-MLIR's activation tables) on int8 codes."""
    shape = _shape(rng)
    table = rng.integers(-128, 128, size=256).astype(np.int8)
    g = single("LUT", [q("x", shape, _s(rng), _z(rng)), const("table", table, _s(rng), _z(rng))],
               [q("y", shape, _s(rng), _z(rng))])
    return g, {"x": _x(rng, shape)}


def _gelu(rng):
    """int8 GELU (exact and tanh forms): the kernel's 256-entry table, written as a Gather."""
    shape = _shape(rng)
    g = single("GELU", [q("x", shape, _s(rng), _z(rng))], [q("y", shape, _s(rng), _z(rng))],
               {"approximate": bool(rng.integers(0, 2))})
    return g, {"x": _x(rng, shape)}


MAKERS = {
    "LUT": _lut,
    "GELU": _gelu,
    "SUM": _sum,
    "SELECT_V2": _select_v2,
    "SPACE_TO_BATCH_ND": _space_batch("SPACE_TO_BATCH_ND"),
    "BATCH_TO_SPACE_ND": _space_batch("BATCH_TO_SPACE_ND"),
    **{op: _comparison(op) for op in ("EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL")},
    "SLICE": _slice,
    "BROADCAST_TO": _broadcast_to,
    "MAXIMUM": _extremum("MAXIMUM"),
    "MINIMUM": _extremum("MINIMUM"),
    "REDUCE_MAX": _reduce_extremum("REDUCE_MAX"),
    "REDUCE_MIN": _reduce_extremum("REDUCE_MIN"),
    "ARG_MAX": _arg_extremum("ARG_MAX"),
    "ARG_MIN": _arg_extremum("ARG_MIN"),
    "DEPTH_TO_SPACE": _depth_space("DEPTH_TO_SPACE"),
    "SPACE_TO_DEPTH": _depth_space("SPACE_TO_DEPTH"),
    "TRANSPOSE_CONV": _transpose_conv,
    "RESIZE_BILINEAR": _resize_bilinear,
    "SHAPE": _shape_op,
    "PACK": _pack,
    "GATHER": _gather,
    "BATCH_MATMUL": _batch_matmul,
    "RSQRT": _unary("RSQRT"),
    "MEAN_ANY_AXES": _mean_any,
    "CONV_2D": lambda rng: _conv(rng, False),
    "DEPTHWISE_CONV_2D": lambda rng: _conv(rng, True),
    "FULLY_CONNECTED": _fully_connected,
    "CONV_INTEGER": _conv_integer,
    "MATMUL_INTEGER": _matmul_integer,
    "ADD": _binary("ADD"),
    "MUL": _binary("MUL"),
    "SUB": _binary("SUB"),
    "SQUARED_DIFFERENCE": _squared_difference,
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


def test_softmax_quotient_is_a_double():
    """A row of ppocr_rec_v4's attention softmax near a rounding half: onnxruntime writes 17 (+ Z_y)
    at the -48 codes, which its table (shift from ``logf``) and double quotient give; the float32
    quotient with a double ``log`` gave 16 (measured). tools/probe_ort_softmax.py: 0 of 39,008,198
    random elements differ."""
    row = np.array([[-57, -52, -56, -60, -58, -50, -50, -49, -46, -48, -54, -51, -53, -50, -51, -48, -51, -47, -43, -48]],
                   np.int8)
    g = single("SOFTMAX", [q("x", row.shape, 0.11797058582305908, -33)], [q("y", row.shape, 1.0 / 256, -128)],
               dict(beta=1.0))
    compare(g, {"x": row})


@pytest.mark.parametrize("opset", [13, 17, 18])
def test_reduce_extremum_axes_follow_the_opset(opset):
    """ReduceMax / ReduceMin take ``axes`` as an attribute before opset 18 and as an input from it:
    the same 50 models exported at each opset equal intq."""
    import intq
    from tests.export.onnx_harness import session

    rng = np.random.default_rng(opset)
    cases = [_reduce_extremum(op)(rng) for op in ("REDUCE_MAX", "REDUCE_MIN") for _ in range(25)]
    graph = merge([g for g, _ in cases], "reduce")
    feeds = {f"c{i}/{name}": v for i, (_, f) in enumerate(cases) for name, v in f.items()}
    want = intq.Interpreter(graph, target="ort").run(dict(feeds))
    sess = session(intq.export_onnx(graph, format="qoperator", opset=opset), "disable_all")
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})))
    assert all(np.array_equal(got[k], want[k]) for k in graph.outputs)
