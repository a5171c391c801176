"""Pooling, reductions, resizes and arg-min/max against LiteRT's reference kernels and TensorFlow
Lite Micro: for each of the ten kernels, 200 random single-op int8 models (plus edge cases) run
through both oracles, every output equal. Then the contract checks (KernelError naming the node).

Per kernel, the random models cover: pooling — SAME/VALID, strides below/equal/above the filter,
windows hanging over the edge, filters larger than the image, global pooling, size-1 dimensions,
every fused activation, extreme zero points; MEAN/SUM — ranks 1-4, every non-empty axis subset
(negative, duplicated), keep_dims, the 4-D axis=[1, 2] case, equal and different input/output
parameters; REDUCE_MAX/MIN — the same axes; resizes — up and down, every align_corners /
half_pixel_centers combination the op allows, size-1 images; ARG_MAX/MIN — every axis, int32 and
int64 axis and output types, many ties.

Where an oracle lacks a variant the case runs against the other alone: TFLM's ARG_MAX/MIN take
only int32 axis and output tensors, so int64 cases check LiteRT only. SUM on ``litert-ref`` is
checked against LiteRT 2.3's BUILTIN_REF as it is, including its uint8 reading of int8 tensors
(LiteRT issue #4079; see intq/kernels/sum.py).
"""

import numpy as np
import pytest

import intq
from intq.kernels import KernelError

from .harness import assert_matches_oracles, single_op_graph, tensor

CASES = 200  # random models per kernel run on both oracles
EXTRA = {"ARG_MAX": 100, "ARG_MIN": 100}  # int64 axis/output models, which TFLM cannot run
ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def _zero_point(rng) -> int:
    return int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))


def _scale(rng, lo=-3.0, hi=0.0) -> float:
    return float(np.float32(10 ** rng.uniform(lo, hi)))


def _int8(rng, shape) -> np.ndarray:
    """Random int8 data; sometimes a narrow range (many ties) or the extremes only."""
    kind = rng.integers(0, 4)
    if kind == 0:
        return rng.integers(-3, 4, size=shape).astype(np.int8)
    if kind == 1:
        return rng.choice(np.array([-128, 127], np.int8), size=shape)
    return rng.integers(-128, 128, size=shape).astype(np.int8)


# --- pooling -----------------------------------------------------------------------------------


def _pool_case(rng, op, i):
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 9))
    h, w = (int(v) for v in rng.integers(1, 11, size=2))
    kind = i % 5
    padding = "SAME" if rng.integers(0, 2) else "VALID"
    if kind == 1:  # global pooling: the window is the whole image
        fh, fw, sh, sw, padding = h, w, int(rng.integers(1, 3)), int(rng.integers(1, 3)), "VALID"
    elif kind == 2:  # the window is larger than the image (SAME only)
        fh, fw, padding = h + int(rng.integers(0, 3)), w + int(rng.integers(0, 3)), "SAME"
        sh, sw = (int(v) for v in rng.integers(1, 4, size=2))
    elif kind == 3:  # size-1 dimensions everywhere
        h, w = int(rng.choice([1, h])), 1
        fh, fw = int(rng.integers(1, 4)), 1
        sh, sw = int(rng.integers(1, 3)), 1
    elif kind == 4:  # strides larger than the filter
        fh, fw = (int(v) for v in rng.integers(1, 3, size=2))
        sh, sw = fh + int(rng.integers(1, 3)), fw + int(rng.integers(1, 3))
    else:
        fh, fw = (int(v) for v in rng.integers(1, 6, size=2))
        sh, sw = (int(v) for v in rng.integers(1, 4, size=2))
    if padding == "VALID":
        fh, fw = min(fh, h), min(fw, w)
        oh, ow = (h - fh) // sh + 1, (w - fw) // sw + 1
    else:
        oh, ow = -(-h // sh), -(-w // sw)
    s, z = _scale(rng), _zero_point(rng)
    attrs = {"padding": padding, "stride_h": sh, "stride_w": sw, "filter_height": fh, "filter_width": fw,
             "fused_activation_function": ACTIVATIONS[int(rng.integers(0, 4))]}
    graph = single_op_graph(op, [tensor("x", (n, h, w, c), scale=s, zero_point=z)],
                            [tensor("y", (n, oh, ow, c), scale=s, zero_point=z)], attrs)
    return graph, {"x": _int8(rng, (n, h, w, c))}


# --- reductions --------------------------------------------------------------------------------


def _axes(rng, rank, i):
    k = int(rng.integers(1, rank + 1))
    axes = [int(a) for a in rng.choice(rank, size=k, replace=False)]
    axes = [a - rank if rng.integers(0, 2) else a for a in axes]  # negative spellings
    if rng.integers(0, 4) == 0:
        axes.append(axes[0])  # a duplicate
    return axes


def _reduce_case(rng, op, i):
    if i % 6 == 1:  # the 4-D spatial mean (global average pooling written as MEAN)
        shape = (int(rng.integers(1, 3)), *(int(v) for v in rng.integers(1, 9, size=2)), int(rng.integers(1, 17)))
        axes, keep = [int(rng.choice([1, -3])), int(rng.choice([2, -2]))], bool(rng.integers(0, 3))
    else:
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 7, size=rank))
        axes, keep = _axes(rng, rank, i), bool(rng.integers(0, 2))
    rank = len(shape)
    resolved = {a % rank for a in axes}
    out_shape = tuple(1 if d in resolved else s for d, s in enumerate(shape)) if keep else \
        tuple(s for d, s in enumerate(shape) if d not in resolved)
    count = int(np.prod([shape[a] for a in resolved])) if resolved else 1
    s_in, z_in = _scale(rng), _zero_point(rng)
    if op in ("REDUCE_MAX", "REDUCE_MIN") or i % 4 == 0:
        s_out, z_out = s_in, z_in  # same parameters (the only ones REDUCE_MAX/MIN accept)
    elif op == "SUM":
        s_out, z_out = float(np.float32(s_in * count * 10 ** rng.uniform(-0.5, 1))), _zero_point(rng)
    else:
        s_out, z_out = float(np.float32(s_in * 10 ** rng.uniform(-0.5, 1))), _zero_point(rng)
    axis = tensor("axis", None, np.int32, data=np.array(axes, np.int32).reshape(len(axes)))
    graph = single_op_graph(op, [tensor("x", shape, scale=s_in, zero_point=z_in), axis],
                            [tensor("y", out_shape, scale=s_out, zero_point=z_out)], {"keep_dims": keep})
    return graph, {"x": _int8(rng, shape)}


# --- resizes -----------------------------------------------------------------------------------


def _resize_case(rng, op, i):
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 6))
    h, w = (int(v) for v in rng.integers(1, 9, size=2))
    oh, ow = (int(v) for v in rng.integers(1, 17, size=2))
    if i % 5 == 0:
        oh, ow = h * int(rng.integers(1, 4)), w * int(rng.integers(1, 4))  # integer upscale
    align, half = bool(i % 2), bool((i // 2) % 2)
    if op == "RESIZE_BILINEAR" and align and half:
        align = False  # rejected by the op (tested below)
    s, z = _scale(rng), _zero_point(rng)
    size = tensor("size", None, np.int32, data=np.array([oh, ow], np.int32))
    graph = single_op_graph(op, [tensor("x", (n, h, w, c), scale=s, zero_point=z), size],
                            [tensor("y", (n, oh, ow, c), scale=s, zero_point=z)],
                            {"align_corners": align, "half_pixel_centers": half})
    return graph, {"x": _int8(rng, (n, h, w, c))}


# --- arg max / min -----------------------------------------------------------------------------


def _arg_case(rng, op, i):
    rank = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 7, size=rank))
    axis = int(rng.integers(-rank, rank))
    axis_dtype = np.int64 if i % 6 == 0 else np.int32  # 4 of 6 cases are int32-only: both oracles
    out_dtype = np.int64 if i % 6 == 3 else np.int32
    out_shape = tuple(s for d, s in enumerate(shape) if d != axis % rank)
    graph = single_op_graph(
        op, [tensor("x", shape, scale=_scale(rng), zero_point=_zero_point(rng)),
             tensor("axis", None, axis_dtype, data=np.array([axis], axis_dtype))],
        [tensor("y", out_shape, out_dtype)], {"output_type": np.dtype(out_dtype).name.upper()})
    # TFLM's ARG_MAX/MIN accept only int32 axis and output tensors ("Only int32_t are supported
    # currently"): int64 variants are checked against LiteRT alone.
    targets = ("litert-ref", "tflite") if axis_dtype == out_dtype == np.int32 else ("litert-ref",)
    return graph, {"x": _int8(rng, shape)}, targets


#: op -> generator(rng, op, i) returning (graph, feeds) or (graph, feeds, targets)
GENERATORS = {
    "AVERAGE_POOL_2D": _pool_case, "MAX_POOL_2D": _pool_case,
    "MEAN": _reduce_case, "SUM": _reduce_case, "REDUCE_MAX": _reduce_case, "REDUCE_MIN": _reduce_case,
    "RESIZE_BILINEAR": _resize_case, "RESIZE_NEAREST_NEIGHBOR": _resize_case,
    "ARG_MAX": _arg_case, "ARG_MIN": _arg_case,
}


@pytest.mark.parametrize("op", sorted(GENERATORS))
def test_random_models_match_both_oracles(op):
    rng = np.random.default_rng(sum(map(ord, op)))  # a fixed seed per op
    for i in range(CASES + EXTRA.get(op, 0)):
        graph, feeds, *targets = GENERATORS[op](rng, op, i)
        assert_matches_oracles(graph, feeds, *targets, context=f"{op} case {i}")


# --- deterministic edge cases --------------------------------------------------------------------


def _pool(op, shape, filt, stride, padding, z=0, act="NONE"):
    n, h, w, c = shape
    if padding == "VALID":
        out = (n, (h - filt[0]) // stride[0] + 1, (w - filt[1]) // stride[1] + 1, c)
    else:
        out = (n, -(-h // stride[0]), -(-w // stride[1]), c)
    attrs = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "filter_height": filt[0],
             "filter_width": filt[1], "fused_activation_function": act}
    return single_op_graph(op, [tensor("x", shape, scale=0.02, zero_point=z)],
                           [tensor("y", out, scale=0.02, zero_point=z)], attrs)


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pooling_edge_cases(op):
    rng = np.random.default_rng(7)
    cases = [
        ((1, 7, 7, 32), (7, 7), (1, 1), "VALID"),  # global pooling, MobileNet-style
        ((1, 5, 5, 3), (3, 3), (2, 2), "SAME"),  # windows over the edge on both sides
        ((2, 4, 6, 2), (2, 2), (2, 2), "SAME"),  # even window counts: ties round away from zero
        ((1, 1, 1, 4), (3, 3), (1, 1), "SAME"),  # a 1x1 image under a 3x3 window
        ((1, 9, 1, 1), (4, 1), (3, 1), "SAME"),
        ((1, 6, 6, 1), (1, 1), (4, 4), "VALID"),  # stride skips pixels
    ]
    for shape, filt, stride, padding in cases:
        for z, act in ((-128, "NONE"), (127, "RELU"), (5, "RELU6"), (0, "RELU_N1_TO_1")):
            graph = _pool(op, shape, filt, stride, padding, z, act)
            for x in (_int8(rng, shape), np.full(shape, -128, np.int8), np.full(shape, 127, np.int8)):
                assert_matches_oracles(graph, {"x": x}, context=f"{op} {shape} {filt} {stride} {padding} z={z}")


def test_pooling_accepts_scales_within_tflm_tolerance():
    # TFLM's PoolingPrepare allows |s_in - s_out| <= 1e-6; the raw integers are pooled as they are
    rng = np.random.default_rng(3)
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        attrs = {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 3}
        graph = single_op_graph(op, [tensor("x", (1, 5, 5, 2), scale=0.01, zero_point=-7)],
                                [tensor("y", (1, 3, 3, 2), scale=0.0100005, zero_point=-7)], attrs)
        assert_matches_oracles(graph, {"x": _int8(rng, (1, 5, 5, 2))}, context=op)


def test_average_pool_rounds_half_away_from_zero():
    graph = _pool("AVERAGE_POOL_2D", (1, 1, 2, 1), (1, 2), (1, 1), "VALID")
    got = {}
    for a, b in ((1, 2), (-1, -2), (0, 1), (0, -1), (-128, -127), (126, 127)):
        got[(a, b)] = int(assert_matches_oracles(graph, {"x": np.array([a, b], np.int8).reshape(1, 1, 2, 1)})
                          ["tflite"]["y"].item())
    assert got == {(1, 2): 2, (-1, -2): -2, (0, 1): 1, (0, -1): -1, (-128, -127): -128, (126, 127): 127}


def test_sum_targets_differ_as_litert_reads_int8_as_uint8():
    graph = single_op_graph("SUM", [tensor("x", (1, 3), scale=0.1, zero_point=0),
                                    tensor("axis", None, np.int32, data=np.array([1], np.int32))],
                            [tensor("y", (1,), scale=0.1, zero_point=0)])
    got = assert_matches_oracles(graph, {"x": np.array([[-1, -2, -3]], np.int8)})
    assert int(got["tflite"]["y"][0]) == -6  # TFLM: the int8 sum
    assert int(got["litert-ref"]["y"][0]) == -1  # LiteRT BUILTIN_REF: 255+254+253 clamped to 255, read as int8


def test_mean_of_large_spatial_extent_and_extreme_ratios():
    rng = np.random.default_rng(11)
    for shape, axes, s_in, s_out in [((1, 32, 32, 8), [1, 2], 0.02, 0.02), ((1, 3, 3, 8), [1, 2], 0.5, 0.004),
                                     ((4, 100), [1], 0.001, 0.5), ((2, 3, 4, 5), [0, 1, 2, 3], 0.1, 0.1),
                                     ((1, 32, 32, 2), [1, 2], 1e-6, 10.0)]:  # k clamped to 31 + shift
        for op in ("MEAN", "SUM"):
            keep = op == "MEAN"
            out = tuple(1 if d in axes else s for d, s in enumerate(shape)) if keep else \
                tuple(s for d, s in enumerate(shape) if d not in axes)
            graph = single_op_graph(op, [tensor("x", shape, scale=s_in, zero_point=-128),
                                         tensor("axis", None, np.int32, data=np.array(axes, np.int32))],
                                    [tensor("y", out, scale=s_out * (1 if op == "MEAN" else 40), zero_point=127)],
                                    {"keep_dims": keep})
            assert_matches_oracles(graph, {"x": _int8(rng, shape)}, context=f"{op} {shape} {axes}")


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_large_resizes(op):
    """Ratios far from 1 stress the 10-bit coordinates (bilinear) and float32 indices (nearest)."""
    rng = np.random.default_rng(5)
    for (h, w), (oh, ow) in [((7, 7), (224, 224)), ((224, 160), (7, 5)), ((3, 5), (100, 33)), ((1, 2), (1, 45)),
                             ((13, 17), (29, 31)), ((64, 64), (63, 65))]:
        for align, half in ((False, False), (True, False), (False, True), (True, True)):
            if op == "RESIZE_BILINEAR" and align and half:
                continue
            graph = single_op_graph(op, [tensor("x", (1, h, w, 1), scale=0.05, zero_point=-128),
                                         tensor("size", None, np.int32, data=np.array([oh, ow], np.int32))],
                                    [tensor("y", (1, oh, ow, 1), scale=0.05, zero_point=-128)],
                                    {"align_corners": align, "half_pixel_centers": half})
            assert_matches_oracles(graph, {"x": _int8(rng, (1, h, w, 1))}, context=f"{op} {h}x{w}->{oh}x{ow} {align} {half}")


# --- contract checks -----------------------------------------------------------------------------


def _prepare(graph):
    return intq.Interpreter(graph, target="tflite")


def _raises(graph, *words):
    with pytest.raises(KernelError) as info:
        _prepare(graph)
    message = str(info.value)
    node = graph.nodes[0]
    assert f"{node.name!r}" in message and node.op_type in message, message
    for w in words:
        assert w in message, message
    return message


def test_pooling_contract():
    base = {"padding": "VALID", "stride_h": 1, "stride_w": 1, "filter_height": 2, "filter_width": 2}
    x = tensor("x", (1, 4, 4, 1), scale=0.1, zero_point=3)
    _raises(single_op_graph("AVERAGE_POOL_2D", [x], [tensor("y", (1, 3, 3, 1), scale=0.1, zero_point=4)], base),
            "zero point")
    _raises(single_op_graph("MAX_POOL_2D", [x], [tensor("y", (1, 3, 3, 1), scale=0.2, zero_point=3)], base), "scale")
    _raises(single_op_graph("MAX_POOL_2D", [x], [tensor("y", (1, 2, 2, 1), scale=0.1, zero_point=3)], base),
            "[1, 3, 3, 1]")
    _raises(single_op_graph("AVERAGE_POOL_2D", [x], [tensor("y", (1, 3, 3, 1), scale=0.1, zero_point=3)],
                            {**base, "filter_height": 5}), "does not fit")
    _raises(single_op_graph("AVERAGE_POOL_2D", [x], [tensor("y", (1, 3, 3, 1), scale=0.1, zero_point=3)],
                            {**base, "stride_w": 0}), "strides")
    _raises(single_op_graph("MAX_POOL_2D", [tensor("x", (4, 4, 1), scale=0.1, zero_point=3)],
                            [tensor("y", (3, 3, 1), scale=0.1, zero_point=3)], base), "4-D")
    _raises(single_op_graph("MAX_POOL_2D", [tensor("x", (1, 4, 4, 1), np.int16, scale=0.1, zero_point=3)],
                            [tensor("y", (1, 3, 3, 1), np.int16, scale=0.1, zero_point=3)], base), "int16")


def test_reduction_contract():
    x = tensor("x", (2, 3, 4), scale=0.1, zero_point=3)
    axis = tensor("axis", None, np.int32, data=np.array([1], np.int32))
    y = tensor("y", (2, 4), scale=0.1, zero_point=3)
    _raises(single_op_graph("MEAN", [x, tensor("axis", (1,), np.int32)], [y]), "constant")
    _raises(single_op_graph("SUM", [x, tensor("axis", None, np.int32, data=np.array([3], np.int32))], [y]),
            "out of range")
    _raises(single_op_graph("MEAN", [x, tensor("axis", None, np.int64, data=np.array([1], np.int64))], [y]), "int64")
    _raises(single_op_graph("SUM", [x, axis], [tensor("y", (2, 1, 4), scale=0.1, zero_point=3)]), "[2, 4]")
    _raises(single_op_graph("REDUCE_MAX", [x, axis], [tensor("y", (2, 4), scale=0.1, zero_point=2)]), "zero point")
    _raises(single_op_graph("REDUCE_MIN", [x, axis], [tensor("y", (2, 4), scale=0.1000001, zero_point=3)]), "scale")
    _raises(single_op_graph("SUM", [x, axis], [tensor("y", (2, 4), scale=1e-9, zero_point=3)]), "beyond int32")
    _raises(single_op_graph("MEAN", [x, axis], [tensor("y", (2, 4), scale=1e-11, zero_point=3)]), "too large")


def test_resize_contract():
    x = tensor("x", (1, 4, 4, 2), scale=0.1, zero_point=3)
    size = tensor("size", None, np.int32, data=np.array([8, 8], np.int32))
    y = tensor("y", (1, 8, 8, 2), scale=0.1, zero_point=3)
    _raises(single_op_graph("RESIZE_BILINEAR", [x, size], [y], {"align_corners": True, "half_pixel_centers": True}),
            "align_corners")
    _raises(single_op_graph("RESIZE_NEAREST_NEIGHBOR", [x, tensor("size", (2,), np.int32)], [y]), "constant")
    _raises(single_op_graph("RESIZE_BILINEAR", [x, size], [tensor("y", (1, 8, 8, 2), scale=0.2, zero_point=3)]),
            "scale")
    _raises(single_op_graph("RESIZE_NEAREST_NEIGHBOR", [x, size], [tensor("y", (1, 8, 8, 2), scale=0.1, zero_point=4)]),
            "zero point")
    _raises(single_op_graph("RESIZE_NEAREST_NEIGHBOR", [x, size], [tensor("y", (1, 8, 4, 2), scale=0.1, zero_point=3)]),
            "[1, 8, 8, 2]")
    _raises(single_op_graph("RESIZE_BILINEAR", [x, tensor("size", None, np.int32, data=np.array([0, 8], np.int32))],
                            [y]), "positive")
    # a 1-pixel-wide image resized to 70 columns: TFLite's 10-bit coordinate passes the pixel
    tiny = tensor("x", (1, 1, 1, 1), scale=0.1, zero_point=3)
    _raises(single_op_graph("RESIZE_BILINEAR", [tiny, tensor("size", None, np.int32, data=np.array([1, 70], np.int32))],
                            [tensor("y", (1, 1, 70, 1), scale=0.1, zero_point=3)]), "outside the image")


def test_arg_contract():
    x = tensor("x", (2, 3), scale=0.1, zero_point=3)
    y = tensor("y", (2,), np.int32)
    _raises(single_op_graph("ARG_MAX", [x, tensor("axis", None, np.int32, data=np.array([2], np.int32))], [y],
                            {"output_type": "INT32"}), "out of range")
    _raises(single_op_graph("ARG_MIN", [x, tensor("axis", None, np.int32, data=np.array([0, 1], np.int32))], [y],
                            {"output_type": "INT32"}), "exactly one")
    _raises(single_op_graph("ARG_MAX", [x, tensor("axis", None, np.int32, data=np.array([1], np.int32))],
                            [tensor("y", (2,), np.int8)], {"output_type": "INT32"}), "int32 or int64")
    _raises(single_op_graph("ARG_MAX", [x, tensor("axis", None, np.int32, data=np.array([1], np.int32))], [y],
                            {"output_type": "INT64"}), "output_type")
    # TFLM runs only int32 axis and output tensors: refused on the tflite target, fine on litert-ref
    for axis_dtype, out_dtype in ((np.int64, np.int32), (np.int32, np.int64)):
        graph = single_op_graph("ARG_MIN", [x, tensor("axis", None, axis_dtype, data=np.array([1], axis_dtype))],
                                [tensor("y", (2,), out_dtype)], {"output_type": np.dtype(out_dtype).name.upper()})
        _raises(graph, "Micro", "int32")
        intq.Interpreter(graph, target="litert-ref")
