"""Random single-op models that make MLAS's AVX2 U8S8 GEMM saturate (targets ``ort-u8s8-avx2`` and
``ort-u8-vnni``, where the same models sum exactly).

Shared by tools/record_ort_u8s8.py (runs them in onnxruntime under ``qemu-x86_64 -cpu Haswell`` and
natively on a CPU with VNNI, and records the outputs in tests/fixtures/ort_u8s8_avx2/ and
tests/fixtures/ort_u8_vnni/) and tests/export/test_ort_u8s8.py (compares intq with the recordings
on every host). Most models draw weights of one sign and large magnitude per output channel and
uint8 activation codes near 255, so that pairs ``u_a w_a + u_b w_b`` leave int16; the rest are
uniform. Output scales follow the accumulator's size so that the saturation shows in the output
codes. Deterministic: ``cases(op, graph)``. Besides intq's own operators: ``MATMUL_INTEGER`` and
``CONV_INTEGER`` (no requantization; weight zero points), and ``ASYMMETRIC_FULLY_CONNECTED`` /
``ASYMMETRIC_CONV_2D`` (QGemm / QLinearConv with weight zero points, as imported from
``quantize_static``'s output).
"""

from __future__ import annotations

import hashlib

import numpy as np

from intq.ir import Tensor
from intq.kernels._conv_common import compute_padding
from intq.qmath import QuantParams

from .onnx_harness import const, merge, q, single

#: The operators whose uint8 export runs an MLAS U8S8 kernel (QLinearConv, QGemm, MatMulInteger) or
#: could (the depthwise and transposed convolutions; QLinearMatMul of two uint8 activations runs
#: U8U8; ConvInteger passes the weights as the left operand, S8U8).
OPS = ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "BATCH_MATMUL", "MATMUL_INTEGER",
       "CONV_INTEGER", "ASYMMETRIC_FULLY_CONNECTED", "ASYMMETRIC_CONV_2D")
PER_GRAPH = 100
GRAPHS = 2  # 200 models per operator
#: (format, level) pairs recorded, all with uint8 activations.
COMBOS = (("qoperator", "disable_all"), ("qoperator", "enable_all"), ("qdq", "enable_all"))
ACTS = ["NONE", "RELU", "RELU6"]


def _weights(rng, shape, channel_axis):
    """Saturating (75%): each output channel one sign, magnitudes 64..127; else uniform."""
    if rng.random() < 0.75:
        signs_shape = [1] * len(shape)
        signs_shape[channel_axis] = shape[channel_axis]
        mag = rng.integers(64, 128, size=shape)
        return (rng.choice([-1, 1], size=signs_shape) * mag).astype(np.int8)
    return rng.integers(-127, 128, size=shape).astype(np.int8)


def _x(rng, shape):
    """int8 codes (uint8 code minus 128): near the top (75%) or uniform."""
    if rng.random() < 0.75:
        return rng.integers(40, 128, size=shape).astype(np.int8)
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _scales(rng, k, channels):
    s_in = float(np.float32(10 ** rng.uniform(-3, -1)))
    per_channel = rng.random() < 0.4
    s_w = (10 ** rng.uniform(-3, -2, size=channels if per_channel else 1)).astype(np.float32)
    s_y = float(np.float32(s_in * float(s_w.max()) * 170 * 95 * max(k, 1) / 100 * 10 ** rng.uniform(-0.6, 0.3)))
    return s_in, (s_w if per_channel else float(s_w[0])), s_y


def _zx(rng) -> int:
    return int(rng.choice([-128, -100, 0])) if rng.random() < 0.5 else int(rng.integers(-128, 128))


def _conv(rng, depthwise=False):
    n, h, w = 1, int(rng.integers(1, 6)), int(rng.integers(1, 6))
    c = int(rng.integers(1, 9))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    padding = "SAME" if rng.random() < 0.6 else "VALID"
    pad = compute_padding(padding, (h, w), (kh, kw), (sh, sw), (1, 1))
    if pad.out_h <= 0 or pad.out_w <= 0:
        padding, pad = "SAME", compute_padding("SAME", (h, w), (kh, kw), (sh, sw), (1, 1))
    if depthwise:
        cout = c * int(rng.integers(1, 3))
        wdata, axis, k = _weights(rng, (1, kh, kw, cout), 3), 3, kh * kw
    else:
        groups = int(rng.choice([g for g in (1, 2, 3, 4) if c % g == 0])) if rng.random() < 0.2 else 1
        cout = groups * int(rng.integers(1, 4))
        wdata, axis, k = _weights(rng, (cout, kh, kw, c // groups), 0), 0, kh * kw * (c // groups)
    s_in, s_w, s_y = _scales(rng, k, cout)
    wt = const("w", wdata, s_w, axis=axis if np.ndim(s_w) else None)
    bias = const("b", rng.integers(-20000, 20000, size=cout), dtype=np.int32)
    x = q("x", (n, h, w, c), s_in, _zx(rng))
    y = q("y", (n, pad.out_h, pad.out_w, cout), s_y, int(rng.integers(-20, 21)))
    attrs = dict(padding=padding, stride_h=sh, stride_w=sw, dilation_h_factor=1, dilation_w_factor=1,
                 fused_activation_function=str(rng.choice(ACTS)))
    if depthwise:
        attrs["depth_multiplier"] = cout // c
    g = single("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", [x, wt, bias], [y], attrs)
    return g, {"x": _x(rng, x.shape)}


def _fully_connected(rng):
    rows, k, units = int(rng.integers(1, 4)), int(rng.integers(1, 80)), int(rng.integers(1, 9))
    s_in, s_w, s_y = _scales(rng, k, units)
    wt = const("w", _weights(rng, (units, k), 0), s_w, axis=0 if np.ndim(s_w) else None)
    bias = const("b", rng.integers(-50000, 50000, size=units), dtype=np.int32)
    x = q("x", (rows, k), s_in, _zx(rng))
    y = q("y", (rows, units), s_y, int(rng.integers(-20, 21)))
    g = single("FULLY_CONNECTED", [x, wt, bias], [y], dict(fused_activation_function=str(rng.choice(ACTS)),
                                                          keep_num_dims=False))
    return g, {"x": _x(rng, x.shape)}


def _transpose_conv(rng):
    n, h, w = 1, int(rng.integers(1, 5)), int(rng.integers(1, 5))
    c, cout = int(rng.integers(1, 7)), int(rng.integers(1, 5))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    padding = "SAME" if rng.random() < 0.5 else "VALID"
    oh, ow = (h * sh, w * sw) if padding == "SAME" else ((h - 1) * sh + kh, (w - 1) * sw + kw)
    if rng.random() < 0.25:  # any output size (the export crops, or leaves the bias alone)
        oh, ow = max(1, oh + int(rng.integers(-2, 3))), max(1, ow + int(rng.integers(-2, 3)))
    s_in, s_w, s_y = _scales(rng, c * kh * kw, cout)
    wt = const("w", _weights(rng, (cout, kh, kw, c), 0), s_w, axis=0 if np.ndim(s_w) else None)
    ins = [const("shape", np.array([n, oh, ow, cout], np.int32)), wt, q("x", (n, h, w, c), s_in, _zx(rng)),
           const("b", rng.integers(-20000, 20000, size=cout), dtype=np.int32)]
    y = q("y", (n, oh, ow, cout), s_y, int(rng.integers(-20, 21)))
    attrs = dict(padding=padding, stride_h=sh, stride_w=sw, fused_activation_function=str(rng.choice(ACTS)))
    return single("TRANSPOSE_CONV", ins, [y], attrs), {"x": _x(rng, (n, h, w, c))}


def _batch_matmul(rng):
    m, k, n = (int(v) for v in rng.integers(1, 24, size=3))
    s_a, s_b = float(np.float32(10 ** rng.uniform(-3, -1))), float(np.float32(10 ** rng.uniform(-3, -1)))
    s_y = float(np.float32(s_a * s_b * 200 * 100 * k / 100 * 10 ** rng.uniform(-0.6, 0.3)))
    a, b = q("a", (m, k), s_a, _zx(rng)), q("b", (k, n), s_b, _zx(rng))
    y = q("y", (m, n), s_y, int(rng.integers(-20, 21)))
    return single("BATCH_MATMUL", [a, b], [y], dict(adj_x=False, adj_y=False)), \
        {"a": _x(rng, (m, k)), "b": _x(rng, (k, n))}


def _replaced(g, **tensors):
    """The single-op graph ``g`` with some of its tensors replaced (by name)."""
    node = g.nodes[0]
    pick = lambda name: tensors.get(name, g.tensors[name]) if name else None  # noqa: E731
    return single(node.op_type, [pick(i) for i in node.inputs], [pick(o) for o in node.outputs], node.attrs)


def _with_weight_zero_points(rng, g):
    """``g`` with its weights ``w`` given zero points: small, per tensor or per output channel (axis 0)."""
    w = g.tensors["w"]
    channels, per_channel = w.data.shape[0], w.qparams.per_axis
    zw = rng.integers(-20, 21, size=channels) if per_channel else int(rng.integers(-20, 21))
    qp = QuantParams(w.qparams.scale, zw, np.int8, 0 if per_channel else None)
    return _replaced(g, w=Tensor("w", data=w.data, qparams=qp))


def _asymmetric_fully_connected(rng):
    g, feeds = _fully_connected(rng)
    return _with_weight_zero_points(rng, g), feeds


def _asymmetric_conv(rng):
    while True:  # one group: intq emulates no grouped convolution with asymmetric weights
        g, feeds = _conv(rng)
        if g.tensors["w"].data.shape[3] == g.tensors["x"].shape[3]:
            return _with_weight_zero_points(rng, g), feeds


def _matmul_integer(rng):
    rows, k, units = int(rng.integers(1, 4)), int(rng.integers(1, 80)), int(rng.integers(1, 9))
    data = _weights(rng, (k, units), 1)
    per_column = rng.random() < 0.5
    zb = rng.integers(-128, 128, size=units) if per_column else int(rng.integers(-128, 128))
    qp = QuantParams(np.ones(units if per_column else 1, np.float32), zb, np.int8, 1 if per_column else None)
    x = q("x", (rows, k), 1.0, _zx(rng))
    y = Tensor("y", np.dtype(np.int32), (rows, units), qparams=QuantParams(np.float32(1.0), 0, np.int32))
    return single("MATMUL_INTEGER", [x, Tensor("b", data=data, qparams=qp)], [y]), {"x": _x(rng, x.shape)}


def _conv_integer(rng):
    g, feeds = _conv(rng)
    node, w, x, y = g.nodes[0], g.tensors["w"], g.tensors["x"], g.tensors["y"]
    data = np.resize(w.data, (*w.data.shape[:3], x.shape[3]))  # ConvInteger: no groups
    wq = Tensor("w", data=data, qparams=QuantParams(np.float32(1.0), int(rng.integers(-128, 128)), np.int8))
    out = Tensor("y", np.dtype(np.int32), y.shape, qparams=QuantParams(np.float32(1.0), 0, np.int32))
    return single("CONV_INTEGER", [x, wq], [out], {**node.attrs, "fused_activation_function": "NONE"}), feeds


MAKERS = {"CONV_2D": _conv, "DEPTHWISE_CONV_2D": lambda rng: _conv(rng, True), "FULLY_CONNECTED": _fully_connected,
          "TRANSPOSE_CONV": _transpose_conv, "BATCH_MATMUL": _batch_matmul, "MATMUL_INTEGER": _matmul_integer,
          "CONV_INTEGER": _conv_integer, "ASYMMETRIC_FULLY_CONNECTED": _asymmetric_fully_connected,
          "ASYMMETRIC_CONV_2D": _asymmetric_conv}


def cases(op: str, graph: int):
    """The merged graph number ``graph`` of ``op`` (``PER_GRAPH`` models), its int8 feeds and a
    digest of both (the recording names the digest it was made from)."""
    rng = np.random.default_rng([sum(map(ord, op)), graph, 15])
    made = [MAKERS[op](rng) for _ in range(PER_GRAPH)]
    g = merge([m for m, _ in made], f"{op.lower()}_{graph}")
    feeds = {f"c{i}/{name}": v for i, (_, f) in enumerate(made) for name, v in f.items()}
    h = hashlib.sha256()
    for name in sorted(g.tensors):
        t = g.tensors[name]
        h.update(name.encode())
        h.update(repr((t.shape, None if t.qparams is None else (t.qparams.scale.tobytes(),
                                                                np.asarray(t.qparams.zero_point).tobytes()))).encode())
        if t.data is not None:
            h.update(np.ascontiguousarray(t.data).tobytes())
    for n in g.nodes:
        h.update(repr((n.op_type, n.inputs, n.outputs, sorted(n.attrs.items()))).encode())
    for name in sorted(feeds):
        h.update(name.encode() + feeds[name].tobytes())
    return g, feeds, h.hexdigest()[:16]
