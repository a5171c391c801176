"""The native run paths (intq.runtime.native): equal, element for element, to the kernels' own run.

* single-op ADD, SUB and MUL models (every int8 pair; broadcast rows as squeeze-excitation blocks
  have them); the table ops (HARD_SWISH, LEAKY_RELU, LOGISTIC, TANH, the RELUs) on every int8 input;
  two-class SOFTMAX's pair table on every pair; MAX_POOL_2D on the pooling suite's geometries;
  TRANSPOSE of ranks 1-4 under every permutation; the data-movement suite's PAD and PADV2 models;
* single-op CONV_2D (grouped too), DEPTHWISE_CONV_2D and FULLY_CONNECTED models — the random cases
  of the kernels' oracle suites plus wider ones (more than one 32-pixel block, 32-channel tile and
  64-deep K step, extreme zero points and weights) — under the three requantization contracts the
  library implements (tflite, litert-ref: ties away; litert-opt: ties up), on every matrix-product
  path this CPU has (AMX, AVX-512 VNNI, portable C) and on the portable build (no ``-march=native``:
  the scalar loops a CPU without AVX-512 runs);
* whole models: every tensor of the third-party corpus' ``.tflite`` files (the float ones
  quantized by intq), intq's int8 ``.tflite`` fixtures and the quantized digits CNN, native plan against the kernels' plan;
* the fallbacks: no compiler, a failing compiler, ``INTQ_NATIVE=0`` give no library and a status
  saying why, and the plan then runs the kernels' own paths; the build goes to the per-user cache
  (``INTQ_CACHE_DIR``), never the source tree, under a unique temporary name.

The oracle suites (tests/kernels/test_conv.py, test_fully_connected.py, the whole-model tests) run
through the interpreter's default native plan, so the native paths are also checked against LiteRT
and TensorFlow Lite Micro there.
"""

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import intq
from intq.kernels import get_target
from intq.kernels._conv_common import compute_padding
from intq.runtime import native
from intq.runtime.native.accelerate import native_run
from intq.runtime.native.bound import Bound
from intq.ir.facts import batch_of as _batch_of
from intq.runtime.plan import ExecutionPlan, rebatch
from intq.testing.digits import load_split

from ..kernels.harness import single_op_graph, tensor
from ..kernels.test_elementwise import ALL_INT8, _arith_case
from ..kernels.test_squared_difference import _case as _sd_case
from ..kernels.test_data_movement import _pad_case, concatenation_case, gather_case, split_case, split_v_case
from ..kernels.test_pool_reduce import _pool_case
from ..kernels.test_conv import _batch_matmul_case, _bias, _conv_case, _depthwise_case, _scales, _weights, _zero_points
from ..kernels.test_fully_connected import _case as _fc_case
from ..kernels.test_int16x8 import ALL_INT16, _add_case as _add16_case, _fc_case as _fc16_case
from ..kernels.test_int16x8 import _mul_all_values as _mul16_all_values, _mul_case as _mul16_case
from ..kernels.test_int16x8 import _sub_case as _sub16_case

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("tflite", "litert-ref", "litert-opt")

needs_library = pytest.mark.skipif(native.library() is None, reason=f"no native library: {native.status()}")


@pytest.fixture(scope="module")
def builds():
    """``label -> Native``: one library per matrix-product path this CPU has, each compiled as
    ``INTQ_NATIVE_PATH=<path>`` compiles it (without the features above that path: the ``avx2``
    build has no AVX-512 or AVX-VNNI code, the ``c`` build is the portable one, scalar loops), and
    the process library with pointer arguments instead of array objects."""
    lib = native.library()
    out = {f"{lib.path}, pointers": replace(lib, gemm=True, objects=False)}
    for path in lib.paths:
        built, status = native.load(cap=path)
        assert built is not None and built.path == path, (path, status)
        out[f"{path} build"] = built
    yield out
    lib.use()  # the process library's own path again


@pytest.fixture(scope="module")
def variants(builds):
    """:func:`builds` and the process library on each of its other matrix-product paths (what the
    measurement may choose: e.g. an AVX-512 build with AVX2 products where the CPU has no VNNI)."""
    lib = native.library()
    out = dict(builds)
    for path in lib.paths:
        if path != lib.path:
            out[f"{lib.path}-level build, {path} products"] = lib.on(path)
    return out


def _call(variant: native.Native, bound, x):
    variant.use()  # the path is library state: set it per call
    try:
        return bound(x)[0]
    finally:
        native.library().use()


def _wide_case(rng, i):
    """CONV_2D or DEPTHWISE_CONV_2D larger than the oracle suites': several pixel blocks, channel
    tiles and K steps; extreme inputs and weights (the largest accumulators)."""
    depthwise = i % 2 == 1
    n = int(rng.choice([1, 2]))
    h, w = (int(v) for v in rng.integers(6, 15, size=2))
    kh, kw = (int(v) for v in rng.choice([1, 3, 5], size=2))
    sh, sw = (int(v) for v in rng.integers(1, 3, size=2))
    dh, dw = (int(v) for v in rng.choice([1, 1, 2], size=2))
    padding = "SAME" if rng.random() < 0.7 else "VALID"
    if padding == "VALID":
        h, w = max(h, (kh - 1) * dh + 1), max(w, (kw - 1) * dw + 1)
    c_in = int(rng.choice([3, 17, 33, 70, 130]))
    c_out = c_in if depthwise else int(rng.choice([1, 15, 32, 47, 96]))
    per_channel = bool(rng.integers(0, 2))
    s_in, s_w, s_out = _scales(rng, c_out, per_channel)
    zp_in, zp_out = _zero_points(rng)
    wshape = (1, kh, kw, c_out) if depthwise else (c_out, kh, kw, c_in)
    axis = (3 if depthwise else 0) if per_channel else None
    inputs = [tensor("x", (n, h, w, c_in), scale=s_in, zero_point=zp_in),
              tensor("w", None, data=_weights(rng, wshape), scale=s_w, axis=axis, narrow=True),
              _bias(rng, "b", c_out, s_in, s_w, 0 if per_channel else None)]
    pad = compute_padding(padding, (h, w), (kh, kw), (sh, sw), (dh, dw))
    out = tensor("y", (n, pad.out_h, pad.out_w, c_out), scale=s_out, zero_point=zp_out)
    attrs = {"padding": padding, "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh, "dilation_w_factor": dw,
             "fused_activation_function": ("NONE", "RELU", "RELU6")[i % 3]}
    if depthwise:
        attrs["depth_multiplier"] = 1
    x = rng.choice([-128, 127], size=(n, h, w, c_in)) if i % 4 == 0 else rng.integers(-128, 128, (n, h, w, c_in))
    return single_op_graph("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", inputs, [out], attrs), x.astype(np.int8)


def _cases(seed: int):
    rng = np.random.default_rng(9000 + seed)
    for i in range(12):
        graph, feeds, _ = _conv_case(rng, i)
        yield graph, feeds["x"]
        graph, feeds, _ = _depthwise_case(rng, i)
        yield graph, feeds["x"]
        graph, feeds = _fc_case(rng, i)
        yield graph, feeds["x"]
        yield _wide_case(rng, i)


@pytest.fixture(params=[1e9, 0.0], ids=["bordered-copy", "clipped-windows"])
def depthwise_mode(request, monkeypatch):
    """Both ways native.c's depthwise treats windows clipped by the image's edge: from a copy of the
    image inside a border of Z_x (every map with a clipped window) and on the clipped windows (never
    the copy)."""
    from intq.runtime.native import forms_conv

    monkeypatch.setattr(forms_conv, "PADDED_MAX_WORK_RATIO", request.param)
    return request.param


@needs_library
@pytest.mark.parametrize("seed", range(3))
def test_single_ops_equal_the_kernels_on_every_path(variants, seed, depthwise_mode):
    taken = {op: 0 for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")}
    rng = np.random.default_rng(seed)
    for k, (graph, x) in enumerate(_cases(seed)):
        node = graph.nodes[0]
        for target in TARGETS:
            try:
                plan = ExecutionPlan(graph, get_target(target), native=False)
            except intq.IntqError:
                continue  # the target refuses the node (e.g. LiteRT's CONV_2D without bias)
            run, params = plan.kernels[node.name]
            second = rng.integers(-128, 128, size=x.shape).astype(np.int8)
            want = [np.array(run(params, v)[0]) for v in (x, second)]
            for label, variant in variants.items():
                bound = native_run(plan.keys[node.name], node, graph, params, variant)
                if bound is None:
                    continue
                taken[node.op_type] += 1
                for v, expected in zip((x, second), want):  # twice: the scratch buffers carry nothing over
                    got = _call(variant, bound, v)
                    assert got.dtype == expected.dtype and got.shape == expected.shape
                    if not np.array_equal(got, expected):
                        bad = np.argwhere(got != expected)[:3]
                        raise AssertionError(
                            f"case {seed}/{k} {node.op_type} [{target}, {label}]: {int((got != expected).sum())} of "
                            f"{got.size} differ, first at {bad.tolist()}: native "
                            f"{[int(got[tuple(b)]) for b in bad]} vs kernel {[int(expected[tuple(b)]) for b in bad]}")
    # the native paths are taken for most of these nodes (only left shifts and depth multipliers
    # above 1 decline): a library that declines everything must not pass
    for op, count in taken.items():
        assert count >= 12 * len(variants), (op, count)


def _valid_conv(rng, n, h, w, c_in, c_out, k, stride, padding="VALID"):
    """A CONV_2D whose windows all lie inside the image (VALID) on a map at least 16 pixels wide:
    the AMX direct path's convolutions (native.c conv_amx_direct)."""
    per_channel = bool(rng.integers(0, 2))
    s_in, s_w, s_out = _scales(rng, c_out, per_channel)
    zp_in, zp_out = _zero_points(rng)
    inputs = [tensor("x", (n, h, w, c_in), scale=s_in, zero_point=zp_in),
              tensor("w", None, data=_weights(rng, (c_out, k, k, c_in)), scale=s_w, axis=0 if per_channel else None,
                     narrow=True),
              _bias(rng, "b", c_out, s_in, s_w, 0 if per_channel else None)]
    pad = compute_padding(padding, (h, w), (k, k), (stride, stride), (1, 1))
    out = tensor("y", (n, pad.out_h, pad.out_w, c_out), scale=s_out, zero_point=zp_out)
    attrs = {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": 1,
             "dilation_w_factor": 1, "fused_activation_function": "NONE"}
    x = rng.integers(-128, 128, (n, h, w, c_in)).astype(np.int8)
    x[..., ::5, :] = rng.choice([-128, 127], size=x[..., ::5, :].shape)  # extreme inputs: the largest sums
    return single_op_graph("CONV_2D", inputs, [out], attrs), x


# (n, h, w, c_in, c_out, k, stride): out_w a multiple of 16 and not (tail pixels on the VNNI path), a
# tap row of 9 bytes (3 read past it), of 64, of 120 and 144 (pieces of 64 and a tail), channels
# beyond one 16-block, the last window at the image's last byte (its group's read would pass the
# end: the VNNI path), batch 2; 1x1 convolutions on maps narrower than 16 (all pixels one row: 7x7,
# 2x3x5), on 96 and 130 channels
DIRECT_CASES = [(1, 33, 33, 3, 16, 3, 2), (2, 9, 37, 3, 8, 3, 1), (1, 5, 34, 3, 40, 3, 1), (1, 4, 16, 16, 16, 1, 1),
                (2, 3, 35, 64, 24, 1, 1), (1, 7, 40, 21, 33, 3, 1), (1, 6, 50, 5, 17, 3, 3), (1, 3, 18, 7, 5, 3, 1),
                (1, 4, 19, 40, 24, 3, 1), (1, 3, 20, 48, 16, 3, 1), (1, 7, 7, 96, 40, 1, 1), (2, 3, 5, 130, 17, 1, 1)]


@needs_library
@pytest.mark.parametrize("case", DIRECT_CASES, ids=str)
def test_direct_amx_convolutions_equal_the_kernel(variants, case, monkeypatch):
    from intq.runtime.native import forms_conv

    monkeypatch.setattr(forms_conv, "DIRECT_LIMITS", (10**9, 0, 10**9))  # wherever the geometry fits
    rng = np.random.default_rng(sum(case))
    graph, x = _valid_conv(rng, *case)
    node = graph.nodes[0]
    for target in TARGETS:
        plan = ExecutionPlan(graph, get_target(target), native=False)
        run, params = plan.kernels[node.name]
        want = run(params, x)[0]
        for label, variant in variants.items():
            bound = native_run(plan.keys[node.name], node, graph, params, variant)
            assert bound is not None
            if variant.path == "amx":
                variant.use()
                assert variant.lib.intq_conv_direct(bound.address) == 1, case
            np.testing.assert_array_equal(_call(variant, bound, x), want, err_msg=f"{case} [{target}, {label}]")


def _small_map_cases(rng):
    """DEPTHWISE_CONV_2D on maps as small as its kernel or smaller: ``(graph, x)``, 40 of them."""
    for i in range(40):
        n = int(rng.choice([1, 2]))
        h, w = int(rng.integers(1, 5)), int(rng.integers(1, 12))
        kh, kw = (int(v) for v in rng.choice([3, 5, 7], size=2))
        sh, sw = (int(v) for v in rng.integers(1, 3, size=2))
        dh, dw = (int(v) for v in rng.choice([1, 1, 2], size=2))
        c = int(rng.choice([3, 16, 40, 200]))
        per_channel = bool(rng.integers(0, 2))
        s_in, s_w, s_out = _scales(rng, c, per_channel)
        zp_in, zp_out = _zero_points(rng)
        pad = compute_padding("SAME", (h, w), (kh, kw), (sh, sw), (dh, dw))
        graph = single_op_graph(
            "DEPTHWISE_CONV_2D",
            [tensor("x", (n, h, w, c), scale=s_in, zero_point=zp_in),
             tensor("w", None, data=_weights(rng, (1, kh, kw, c)), scale=s_w, axis=3 if per_channel else None,
                    narrow=True),
             _bias(rng, "b", c, s_in, s_w, 0 if per_channel else None)],
            [tensor("y", (n, pad.out_h, pad.out_w, c), scale=s_out, zero_point=zp_out)],
            {"padding": "SAME", "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh, "dilation_w_factor": dw,
             "depth_multiplier": 1, "fused_activation_function": ("NONE", "RELU", "RELU6")[i % 3]})
        yield graph, rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)


@needs_library
def test_depthwise_windows_clipped_by_small_maps_equal_the_kernel(variants, depthwise_mode):
    """DEPTHWISE_CONV_2D on maps as small as its kernel or smaller (PP-OCR's 2 x 96 under 5 x 5
    taps, MobileNetV3's 7 x 7): the native loop runs each pixel (a pair where two neighbours share
    the window) on its in-image taps only, from an offset per clipped window (a cache of 8: more
    windows than that recompute); every stride, dilation, padding and odd width against the
    kernel's run."""
    taken = 0
    for i, (graph, x) in enumerate(_small_map_cases(np.random.default_rng(23))):
        node = graph.nodes[0]
        plan = ExecutionPlan(graph, get_target("tflite"), native=False)
        run, params = plan.kernels[node.name]
        want = np.array(run(params, x)[0])
        for label, variant in variants.items():
            bound = native_run(plan.keys[node.name], node, graph, params, variant)
            if bound is None:
                continue
            taken += 1
            np.testing.assert_array_equal(_call(variant, bound, x), want, err_msg=f"case {i} [{label}]")
    assert taken >= 40 * len(variants)


def _mean_cases(rng):
    """MEAN over axes {1, 2} written three ways, the last axis (LayerNorm's) two ways, axes {2, 3},
    keep_dims or not, and axes {1, 3} (not contiguous: declined): ``(graph, x, axes)``, 56 of them."""
    for i in range(56):
        n, h, w = int(rng.choice([1, 2])), int(rng.integers(1, 57)), int(rng.integers(1, 57))
        c = int(rng.choice([1, 3, 16, 40, 200, 384]))
        axes = [(1, 2), (2, 1), (-3, -2), (1, 3), (3,), (-1,), (2, 3)][i % 7]
        keep = bool(i % 2)
        s_in = float(10 ** rng.uniform(-3, 0))
        s_out = s_in * float(10 ** rng.uniform(-2.5, 0.5))
        zp_in, zp_out = (int(v) for v in rng.choice([-128, -3, 0, 5, 127], size=2))
        reduced = {a % 4 for a in axes}
        out_shape = tuple(1 if k in reduced else d for k, d in enumerate((n, h, w, c)) if keep or k not in reduced)
        graph = single_op_graph("MEAN", [tensor("x", (n, h, w, c), scale=s_in, zero_point=zp_in),
                                         tensor("axes", None, np.int32, data=np.array(axes, np.int32))],
                                [tensor("y", out_shape, scale=s_out, zero_point=zp_out)], {"keep_dims": keep})
        x = (rng.choice([-128, 127], size=(n, h, w, c)) if i % 7 == 0
             else rng.integers(-128, 128, (n, h, w, c))).astype(np.int8)
        yield graph, x, axes


@needs_library
def test_mean_over_contiguous_axes_equals_the_kernel(variants):
    """MEAN over axes {1, 2} (written 1, 2 / 2, 1 / -3, -2), the last axis (3 / -1) and {2, 3},
    keep_dims or not, on random int8 maps from 1 x 1 to 56 x 56 pixels, scales with the output
    finer and coarser than the input (the multiplier's right shift from 0 to about 20), every zero
    point extreme, multipliers of 1 or more (a left shift) included: equal to the kernel's run;
    axes {1, 3} (not contiguous) keep the kernel's."""
    taken = declined = shifted = 0
    forms = set()
    for i, (graph, x, axes) in enumerate(_mean_cases(np.random.default_rng(29))):
        keep = graph.nodes[0].attrs["keep_dims"]
        node = graph.nodes[0]
        plan = ExecutionPlan(graph, get_target("tflite"), native=False)
        run, params = plan.kernels[node.name]
        want = np.array(run(params, x, axes)[0])
        for label, variant in variants.items():
            bound = native_run(plan.keys[node.name], node, graph, params, variant)
            if bound is None:
                declined += 1
                continue
            taken += 1
            shifted += params.shift > 0
            forms.add((axes, keep))
            np.testing.assert_array_equal(_call(variant, bound, x), want, err_msg=f"case {i} {axes} [{label}]")
    assert shifted >= 2 * len(variants), shifted
    assert taken >= 12 * len(variants) and declined >= 8 * len(variants), (taken, declined)
    assert {a for a, _ in forms} == {(1, 2), (2, 1), (-3, -2), (3,), (-1,), (2, 3)}, forms
    assert {k for _, k in forms} == {True, False}, forms


@needs_library
@pytest.mark.parametrize("op", ["MUL", "ADD", "SUB"])
def test_a_one_value_constant_operand_is_a_table_equal_to_the_kernel(variants, op):
    """MUL / ADD / SUB of a tensor and a one-value constant (a hard sigmoid's scale and offset) is
    tabulated from the kernel's own run at plan time: every int8 input, shapes smaller and larger
    than the table, against the kernel's run; a constant first operand keeps the binary path."""
    from intq.runtime.native.bound import BoundTable

    rng = np.random.default_rng(37)
    taken = 0
    for k, shape in enumerate([(1, 1, 1, 1), (1, 1, 1, 40), (1, 5, 7, 16), (3, 300)]):
        s_a, s_b = float(10 ** rng.uniform(-3, 0)), float(10 ** rng.uniform(-3, 0))
        s_y = (s_a * s_b if op == "MUL" else max(s_a, s_b)) * float(10 ** rng.uniform(-1, 1))
        const = tensor("b", None, data=np.array([int(rng.integers(-128, 128))], np.int8).reshape((1,) * len(shape)),
                       scale=s_b, zero_point=int(rng.integers(-128, 128)))
        variable = tensor("a", shape, scale=s_a, zero_point=int(rng.integers(-128, 128)))
        out = tensor("y", shape, scale=s_y, zero_point=int(rng.integers(-128, 128)))
        for first in (variable, const):
            graph = single_op_graph(op, [first, const if first is variable else variable], [out],
                                    {"fused_activation_function": ("NONE", "RELU", "RELU6", "NONE")[k]})
            node = graph.nodes[0]
            plan = ExecutionPlan(graph, get_target("tflite"), native=False)
            run, params = plan.kernels[node.name]
            x = np.resize(ALL_INT8, int(np.prod(shape))).reshape(shape)
            for label, variant in variants.items():
                bound = native_run(plan.keys[node.name], node, graph, params, variant)
                if bound is None:
                    continue
                if first is const:
                    assert type(bound) is not BoundTable
                    continue
                assert type(bound) is BoundTable, (op, shape, label)
                taken += 1
                for v in (x, np.roll(x, 7)):
                    np.testing.assert_array_equal(_call(variant, bound, v), run(params, v, const.data)[0],
                                                  err_msg=f"{op} {shape} [{label}]")
    assert taken >= 4 * len(variants)


def _binary_cases(rng):
    """ADD, SUB, MUL: the oracle suite's random cases (most broadcast as the native loop does not:
    declined), every int8 pair at equal shapes (with MUL multipliers above 1: a left shift), the
    squeeze-excitation MUL ([1, H, W, C] x [1, 1, 1, C] and x a scalar) and LayerNorm's columns
    ([1, H, W, C] x [1, H, W, 1], the leading 1 dropped or not; [1, 1, W, 1] broadcasts over H:
    declined); then SQUARED_DIFFERENCE's (:func:`_squared_difference_cases`)."""
    for op in ("ADD", "SUB", "MUL"):
        for i in range(20):
            graph, feeds = _arith_case(rng, op, i)
            yield graph, feeds
        for k, (s_a, s_b, s_y, mul_k) in enumerate(
                [(0.05, 0.05, 0.1, 40.0), (0.003, 0.8, 0.02, 0.3), (1.7, 0.0001, 0.5, 300.0)]):
            zps = [(0, 0, 0), (-128, 127, 5), (127, -128, -128), (3, -7, 127)][k]
            graph = single_op_graph(op, [tensor("a", (256, 256), scale=s_a, zero_point=zps[0]),
                                         tensor("b", (256, 256), scale=s_b, zero_point=zps[1])],
                                    [tensor("y", (256, 256), scale=s_a * s_b * mul_k if op == "MUL" else s_y,
                                            zero_point=zps[2])],
                                    {"fused_activation_function": ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")[k]})
            yield graph, {"a": np.repeat(ALL_INT8, 256).reshape(256, 256), "b": np.tile(ALL_INT8, 256).reshape(256, 256)}
    for op in ("MUL", "ADD", "SUB"):
        for c, b_shape in ((37, (1, 1, 1, 37)), (16, (1, 1, 1, 1)), (200, (200,)), (16, (1, 1, 1, 16)),
                           (48, (1, 1, 1, 48)), (384, (1, 5, 7, 1)), (33, (5, 7, 1)), (8, (1, 1, 7, 1))):
            for k in range(3):
                s_a, s_b = float(10 ** rng.uniform(-3, 0)), float(10 ** rng.uniform(-3, 0))
                s_y = (s_a * s_b if op == "MUL" else max(s_a, s_b)) * float(10 ** rng.uniform(-1.5, 1))
                a_shape = (1, 5, 7, c)
                if k == 2:
                    a_shape, b_shape = b_shape, a_shape  # the broadcast operand first
                out_shape = np.broadcast_shapes(a_shape, b_shape)
                graph = single_op_graph(op, [tensor("a", a_shape, scale=s_a, zero_point=int(rng.integers(-128, 128))),
                                             tensor("b", b_shape, scale=s_b, zero_point=int(rng.integers(-128, 128)))],
                                        [tensor("y", out_shape, scale=s_y, zero_point=int(rng.integers(-128, 128)))],
                                        {"fused_activation_function": ("NONE", "RELU", "RELU6")[k]})
                yield graph, {"a": rng.integers(-128, 128, a_shape).astype(np.int8),
                              "b": rng.integers(-128, 128, b_shape).astype(np.int8)}
    yield from _squared_difference_cases(rng)


def _squared_difference_cases(rng):
    """SQUARED_DIFFERENCE int8: the oracle suite's random cases (any rank, broadcasts up to rank 4,
    LayerNorm-like near operands, TFLM's left-shifted output multipliers), every int8 pair at equal
    shapes (the output multiplier in [1, 2): TFLM's left shift, refused for LiteRT, on scales a hair
    apart so that the squares of equal codes stay inside the int8 range; the extreme zero points and
    scales 10^4 apart), and LayerNorm's layouts: ``(x - mean)^2`` with the mean a column [1, H, W, 1]
    (first or second), a row, one value."""
    for i in range(30):
        yield _sd_case(rng, small_output=i % 3 == 0)
    for s_a, s_b, zps, real_out in ((0.05, 0.05 * (1 + 2e-3), (3, 3, -128), 1.5), (0.003, 0.8, (-128, 127, -128), 0.7),
                                    (1.7, 0.0001, (127, -128, 5), 0.01)):
        s_a, s_b = float(np.float32(s_a)), float(np.float32(s_b))
        s_y = float(np.float32((2 * max(s_a, s_b)) ** 2 / 2**14 / real_out))
        graph = single_op_graph("SQUARED_DIFFERENCE", [tensor("a", (256, 256), scale=s_a, zero_point=zps[0]),
                                                       tensor("b", (256, 256), scale=s_b, zero_point=zps[1])],
                                [tensor("y", (256, 256), scale=s_y, zero_point=zps[2])])
        yield graph, {"a": np.repeat(ALL_INT8, 256).reshape(256, 256), "b": np.tile(ALL_INT8, 256).reshape(256, 256)}
    for c, b_shape in ((64, (1, 5, 7, 1)), (33, (5, 7, 1)), (37, (1, 1, 1, 37)), (16, (1, 1, 1, 1)), (200, (200,))):
        for k in range(2):
            s_a = float(10 ** rng.uniform(-3, 0))
            s_b = float(s_a * 10 ** rng.uniform(-1, 1))
            s_y = (2 * max(s_a, s_b)) ** 2 * 128 * float(10 ** rng.uniform(-1.5, 0.5))
            a_shape, bs = ((1, 5, 7, c), b_shape) if k == 0 else (b_shape, (1, 5, 7, c))
            out_shape = np.broadcast_shapes(a_shape, bs)
            graph = single_op_graph("SQUARED_DIFFERENCE",
                                    [tensor("a", a_shape, scale=s_a, zero_point=int(rng.integers(-128, 128))),
                                     tensor("b", bs, scale=s_b, zero_point=int(rng.integers(-128, 128)))],
                                    [tensor("y", out_shape, scale=s_y, zero_point=-128)])
            yield graph, {"a": rng.integers(-128, 128, a_shape).astype(np.int8),
                          "b": rng.integers(-128, 128, bs).astype(np.int8)}


@needs_library
def test_add_sub_mul_equal_the_kernels_on_every_build(builds):
    rng = np.random.default_rng(5)
    taken = {"ADD": 0, "SUB": 0, "MUL": 0, "SQUARED_DIFFERENCE": 0}
    shifted = 0  # SQUARED_DIFFERENCE's TFLM left shift of the square, taken natively
    columns = {"taken": 0, "declined": 0}  # an operand [..., H, W, 1] of the output [..., H, W, C]
    for k, (graph, feeds) in enumerate(_binary_cases(rng)):
        node = graph.nodes[0]
        operands = [feeds[t] if t in feeds else graph.tensors[t].data for t in node.inputs]
        column = any(np.shape(v)[-1:] == (1,) and np.size(v) > 1 for v in operands)
        for target in TARGETS:
            try:
                plan = ExecutionPlan(graph, get_target(target), native=False)
            except intq.IntqError:
                continue  # a multiplier the target's runtime refuses
            run, params = plan.kernels[node.name]
            want = np.array(run(params, *operands)[0])
            for label, build in builds.items():
                bound = native_run(plan.keys[node.name], node, graph, params, build)
                if column and target == "tflite":
                    columns["declined" if bound is None else "taken"] += 1
                if bound is None:
                    continue
                taken[node.op_type] += 1
                shifted += node.op_type == "SQUARED_DIFFERENCE" and bound.params.left > 0
                _assert_same(bound(*operands)[0], want, f"case {k} {node.op_type} [{target}, {label}]")
    for op, count in taken.items():
        assert count >= 12, (op, count)
    assert shifted >= 4 * len(builds), shifted
    assert columns["taken"] >= 3 * 6 * len(builds) and columns["declined"] >= 3 * len(builds), columns


def _binary16_cases(rng):
    """16x8 ADD, SUB, MUL: the oracle suite's random cases (ranks 1-4, broadcasts, full-range and small
    values, the three fused activations), every int16 value (MUL: against random codes; ADD / SUB:
    every value against its reverse, the extremes included), MUL's left shifts (a real multiplier
    of 1.5 to 12: small products, and -2^15 * -2^15 shifted past int32, which wraps as the kernel's
    int32 arithmetic does), and LayerNorm's layouts (a column [1, H, W, 1], a row, one value; rows
    of C not a multiple of any vector)."""
    for i in range(25):
        yield _add16_case(rng, i)
        yield _sub16_case(rng, i)
        yield _mul16_case(rng, i)
    yield _mul16_all_values(rng)
    for op in ("ADD", "SUB"):
        s_a, s_b = float(np.float32(3e-4)), float(np.float32(7e-5))
        graph = single_op_graph(op, [tensor("a", (256, 256), np.int16, s_a), tensor("b", (256, 256), np.int16, s_b)],
                                [tensor("y", (256, 256), np.int16, float(np.float32(2.5 * s_a)))])
        yield graph, {"a": ALL_INT16.reshape(256, 256), "b": ALL_INT16[::-1].reshape(256, 256).copy()}
    for real in (1.5, 3.0, 12.0):
        s_a, s_b = float(np.float32(2e-3)), float(np.float32(5e-4))
        graph = single_op_graph("MUL", [tensor("a", (9, 70), np.int16, s_a), tensor("b", (9, 70), np.int16, s_b)],
                                [tensor("y", (9, 70), np.int16, float(np.float32(s_a * s_b / real)))])
        a, b = rng.integers(-100, 101, (9, 70)), rng.integers(-100, 101, (9, 70))
        a[0, :8], b[0, :8] = -32768, -32768
        a[1, :8], b[1, :8] = 32767, -32768
        yield graph, {"a": a.astype(np.int16), "b": b.astype(np.int16)}
    for op in ("ADD", "SUB", "MUL"):
        for c, b_shape in ((37, (1, 5, 7, 1)), (64, (5, 7, 1)), (37, (1, 1, 1, 37)), (16, (1, 1, 1, 1))):
            for k in range(2):
                s_a, s_b = (float(np.float32(10 ** rng.uniform(-4, -2))) for _ in range(2))
                s_y = float(np.float32(s_a * s_b * 2**30 / 3e4 if op == "MUL" else 2 * max(s_a, s_b)))
                a_shape, bs = ((1, 5, 7, c), b_shape) if k == 0 else (b_shape, (1, 5, 7, c))
                out_shape = np.broadcast_shapes(a_shape, bs)
                graph = single_op_graph(op, [tensor("a", a_shape, np.int16, s_a), tensor("b", bs, np.int16, s_b)],
                                        [tensor("y", out_shape, np.int16, s_y)],
                                        {"fused_activation_function": ("NONE", "RELU")[k]})
                yield graph, {"a": rng.integers(-32768, 32768, a_shape).astype(np.int16),
                              "b": rng.integers(-32768, 32768, bs).astype(np.int16)}


@needs_library
def test_16x8_add_sub_mul_equal_the_kernels_on_every_build(builds):
    """The reference 16x8 ADD, SUB, MUL (TFLM's int16 arithmetic) natively, equal to the kernels'
    run on every build (vector bodies and the scalar one) and target."""
    taken = {"ADD": 0, "SUB": 0, "MUL": 0}
    shifted = 0
    for k, (graph, feeds) in enumerate(_binary16_cases(np.random.default_rng(71))):
        node = graph.nodes[0]
        for target in TARGETS:
            for label, bound, operands, want in _bindings(graph, feeds, target, builds):
                if bound is None:
                    continue
                taken[node.op_type] += 1
                shifted += bound.params.left > 0
                _assert_same(bound(*operands)[0], want, f"case {k} {node.op_type} 16x8 [{target}, {label}]")
    for op, count in taken.items():
        assert count >= 20 * len(builds), (op, count)
    assert shifted >= 3 * len(builds), shifted


def _assert_same(got, want, what: str) -> None:
    """``got`` equals ``want`` (dtype, shape, every element), else an error naming ``what`` and where."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[:3]
        raise AssertionError(f"{what}: {int((got != want).sum())} of {got.size} differ, first at {bad.tolist()}")


def _attention_cases(rng):
    """BATCH_MATMUL as attention writes it: Q K^T ([1, H, T, D] x [1, H, T, D], adj_y) and P V
    ([1, H, T, T] x [1, H, T, D]), both operands activations, extreme zero points (the uint8-like
    -128 of a softmax output), products deeper than one vector and than 64."""
    for heads, tokens, depth in ((12, 32, 32), (2, 17, 64), (3, 5, 200), (1, 70, 8)):
        for qk in (True, False):
            a_shape = (1, heads, tokens, depth if qk else tokens)
            b_shape = (1, heads, tokens, depth)
            out = (1, heads, tokens, tokens if qk else depth)
            s_a, s_b = float(10 ** rng.uniform(-2, 0)), float(10 ** rng.uniform(-3, -1))
            k = a_shape[-1]
            s_y = s_a * s_b * float(np.sqrt(k)) * float(10 ** rng.uniform(0.5, 1.5))
            zps = [int(v) for v in rng.choice([-128, -5, 0, 9, 127], size=3)]
            graph = single_op_graph("BATCH_MATMUL", [tensor("a", a_shape, scale=s_a, zero_point=zps[0]),
                                                     tensor("b", b_shape, scale=s_b, zero_point=zps[1])],
                                    [tensor("y", out, scale=s_y, zero_point=zps[2])], {"adj_x": False, "adj_y": qk})
            extreme = rng.random() < 0.3
            feeds = {name: (rng.choice([-128, 127], size=shape) if extreme else rng.integers(-128, 128, shape)).astype(np.int8)
                     for name, shape in (("a", a_shape), ("b", b_shape))}
            yield graph, feeds


def _bindings(graph, feeds, target: str, builds):
    """``(label, bound or None, operands, the kernel's output)`` of a single-op graph's node per build,
    nothing where the target refuses the node."""
    node = graph.nodes[0]
    operands = [feeds[t] if t in feeds else graph.tensors[t].data if t else None for t in node.inputs]
    try:
        plan = ExecutionPlan(graph, get_target(target), native=False)
    except intq.IntqError:
        return
    run, params = plan.kernels[node.name]
    want = np.array(run(params, *operands)[0])
    for label, build in builds.items():
        yield label, native_run(plan.keys[node.name], node, graph, params, build), operands, want


@needs_library
def test_batch_matmul_equals_the_kernel(builds):
    """BATCH_MATMUL on the kernels' oracle suite's random cases (adj_x / adj_y, ranks 2-5, batch axes
    broadcast whole or in part, constant right-hand sides, long sums) and attention's two products:
    equal to the kernel's run on every build and target; a partial batch broadcast and a multiplier
    of 1 or more keep the kernel's run (declined), and most cases are taken."""
    rng = np.random.default_rng(61)
    cases = [_batch_matmul_case(rng, i)[:2] for i in range(60)] + list(_attention_cases(rng))
    taken = declined = attention = 0
    for k, (graph, feeds) in enumerate(cases):
        for target in TARGETS:
            for label, bound, operands, want in _bindings(graph, feeds, target, builds):
                if bound is None:
                    declined += 1
                    continue
                taken += 1
                attention += k >= 60
                got = bound(*operands)[0]
                assert got.dtype == want.dtype and got.shape == want.shape
                if not np.array_equal(got, want):
                    raise AssertionError(f"case {k} [{target}, {label}]: {int((got != want).sum())} of {got.size} differ")
    assert attention == 8 * len(TARGETS) * len(builds), attention
    assert taken >= 2 * declined and declined >= len(builds), (taken, declined)


@needs_library
def test_max_pool_equals_the_kernel(builds):
    """The pooling suite's random geometries (global windows, windows larger than the image, strides
    above the filter) plus wide channels (more than one 64-lane step)."""
    rng = np.random.default_rng(13)
    taken = 0
    for i in range(40):
        graph, feeds = _pool_case(rng, "MAX_POOL_2D", i)[:2]
        if i % 4 == 3:  # 70 or 130 channels: several vector steps and a tail
            x_t = graph.tensors["x"]
            c = int(rng.choice([70, 130]))
            shape, out_shape = (*x_t.shape[:3], c), (*graph.tensors["y"].shape[:3], c)
            graph = single_op_graph("MAX_POOL_2D", [tensor("x", shape, scale=0.1, zero_point=3)],
                                    [tensor("y", out_shape, scale=0.1, zero_point=3)], graph.nodes[0].attrs)
            feeds = {"x": rng.integers(-128, 128, shape).astype(np.int8)}
        for target in TARGETS:
            plan = ExecutionPlan(graph, get_target(target), native=False)
            run, params = plan.kernels[graph.nodes[0].name]
            want = np.array(run(params, feeds["x"])[0])
            for label, build in builds.items():
                bound = native_run(plan.keys[graph.nodes[0].name], graph.nodes[0], graph, params, build)
                assert bound is not None
                taken += 1
                np.testing.assert_array_equal(bound(feeds["x"])[0], want, err_msg=f"case {i} [{target}, {label}]")
    assert taken == 40 * len(TARGETS) * len(builds)


def _transpose_case(rng, shape, perm):
    out = tuple(shape[k] for k in perm)
    graph = single_op_graph("TRANSPOSE", [tensor("x", shape, scale=0.1, zero_point=3),
                                          tensor("perm", None, np.int32, data=np.array(perm, np.int32))],
                            [tensor("y", out, scale=0.1, zero_point=3)])
    plan = ExecutionPlan(graph, get_target("tflite"), native=False)
    run, params = plan.kernels[graph.nodes[0].name]
    x = rng.integers(-128, 128, shape).astype(np.int8)
    return graph, plan, x, run(params, x)[0]


@needs_library
def test_transpose_equals_the_kernel(builds):
    rng = np.random.default_rng(17)
    taken = 0
    for shape in [(1, 3, 224, 224), (1, 2, 5, 130), (2, 4, 3, 200), (2, 5, 7, 3), (4, 6, 5), (7, 9), (33,), (1, 1, 8, 1)]:
        for perm in itertools.permutations(range(len(shape))):
            graph, plan, x, want = _transpose_case(rng, shape, perm)
            node = graph.nodes[0]
            for label, build in builds.items():
                bound = native_run(plan.keys[node.name], node, graph, plan.kernels[node.name][1], build)
                assert bound is not None, (shape, perm)
                taken += 1
                np.testing.assert_array_equal(bound(x, perm)[0], want, err_msg=f"{shape} {perm} [{label}]")
    assert taken > 0
    # rank 5 (the most TFLM takes): taken where axes of length 1 and neighbours kept in order leave
    # rank <= 4 (attention's heads), declined otherwise
    merged = declined = 0
    for shape in [(1, 17, 3, 2, 8), (2, 3, 1, 4, 5), (2, 3, 4, 5, 6), (1, 2, 3, 1, 4)]:
        for perm in itertools.permutations(range(len(shape))):
            graph, plan, x, want = _transpose_case(rng, shape, perm)
            node = graph.nodes[0]
            bound = native_run(plan.keys[node.name], node, graph, plan.kernels[node.name][1])
            if bound is None:
                declined += 1
                continue
            merged += 1
            np.testing.assert_array_equal(bound(x, perm)[0], want, err_msg=f"{shape} {perm}")
    assert merged >= 300 and declined >= 50, (merged, declined)  # 427 and 53


@needs_library
@pytest.mark.parametrize("op", ["PAD", "PADV2"])
def test_pad_equals_the_kernel(builds, op):
    """The data-movement suite's random PAD / PADV2 models (ranks 1-5, every dtype: the native path
    takes the int8 ones of rank <= 4 with a constant pad value) plus a MobileNet-sized one."""
    rng = np.random.default_rng(19)
    taken = 0
    cases = [_pad_case(op, rng, i)[:2] for i in range(60)]
    big = single_op_graph(op, [tensor("x", (1, 112, 112, 16), scale=0.1, zero_point=-3),
                               tensor("paddings", None, np.int32, data=np.array([[0, 0], [0, 1], [0, 1], [0, 0]]))]
                          + ([tensor("value", None, data=np.array([-3], np.int8), scale=0.1, zero_point=-3)]
                             if op == "PADV2" else []),
                          [tensor("y", (1, 113, 113, 16), scale=0.1, zero_point=-3)])
    cases.append((big, {"x": rng.integers(-128, 128, (1, 112, 112, 16)).astype(np.int8)}))
    for k, (graph, feeds) in enumerate(cases):
        for label, bound, operands, want in _bindings(graph, feeds, "litert-ref", builds):
            if bound is None:
                continue
            taken += 1
            np.testing.assert_array_equal(bound(*operands)[0], want, err_msg=f"{op} case {k} [{label}]")
    assert taken >= 3 * 10


def _constant_indices(graph, feeds):
    """A GATHER case with its fed indices made a constant (what the native form takes)."""
    from intq.ir import Graph

    if "indices" not in feeds:
        return graph, feeds
    t = graph.tensors["indices"]
    tensors = {**graph.tensors, "indices": tensor("indices", None, t.dtype, data=feeds["indices"])}
    return (Graph(graph.nodes, tensors, [i for i in graph.inputs if i != "indices"], graph.outputs, name=graph.name),
            {"x": feeds["x"]})


_COPY_CASES = {"SPLIT": split_case, "SPLIT_V": split_v_case, "CONCATENATION": concatenation_case,
               "GATHER": gather_case}


@needs_library
@pytest.mark.parametrize("op", sorted(_COPY_CASES))
def test_block_copies_equal_the_kernels(builds, op):
    """SPLIT, SPLIT_V, CONCATENATION and GATHER at constant indices as native.c's strided block
    copies: the data-movement suite's random models (ranks 1-5, every axis, pieces of size 0,
    repeated indices, batch_dims; every dtype, of which the native forms take every int8 case) on
    every build and on both runtimes' rules: every output equal to the kernel's run (inside step
    programs: test_step_programs_equal_the_kernels_and_keep_each_runs_tensors, the token model)."""
    rng = np.random.default_rng(83)
    taken = declined = 0
    for i in range(120):
        graph, feeds, _ = _COPY_CASES[op](rng, i)
        if op == "GATHER":
            graph, feeds = _constant_indices(graph, feeds)
        node = graph.nodes[0]
        operands = [feeds[t] if t in feeds else graph.tensors[t].data for t in node.inputs]
        for target in ("tflite", "litert-ref"):
            try:
                plan = ExecutionPlan(graph, get_target(target), native=False)
                run, params = plan.kernels[node.name]
                want = run(params, *operands)
            except intq.IntqError:
                continue  # refused by this runtime's rules, or at run time: the kernel's business
            for label, build in builds.items():
                bound = native_run(plan.keys[node.name], node, graph, params, build)
                int8 = graph.tensors[node.outputs[0]].dtype == np.int8
                if bound is None:
                    assert not int8, (i, label)  # every int8 case is taken
                    declined += 1
                    continue
                taken += 1
                got = bound(*operands)
                assert len(got) == len(want)
                for k, (g, w) in enumerate(zip(got, want)):
                    assert g.dtype == w.dtype and g.shape == w.shape, (i, k, label)
                    np.testing.assert_array_equal(g, w, err_msg=f"{op} case {i} output {k} [{target}, {label}]")
    assert taken >= 60 and declined >= 10, (taken, declined)


def _long_fc16_cases(rng):
    """16x8 FULLY_CONNECTED with sums longer than native.c's int32 blocks of 256 products, at the
    extremes (x = -32768, w = -128: every product 2^22, a block 2^30) and at random; rows in blocks
    of four (native.c's 4 x 4 tiles) and the rest, columns likewise."""
    for k, m in zip((255, 256, 257, 513, 1536, 2001, 385, 384), (1, 3, 4, 9, 6, 7, 8, 5)):
        n = int(rng.integers(1, 10))
        extreme = k % 2 == 1
        w = np.full((n, k), -128, np.int8) if extreme else rng.integers(-128, 128, (n, k)).astype(np.int8)
        x = np.full((m, k), -32768, np.int16) if extreme else rng.integers(-32768, 32768, (m, k)).astype(np.int16)
        b = rng.integers(-2**30, 2**30, n).astype(np.int64)
        s_in, s_w = 1e-4, 1e-3
        s_out = float(np.abs((x.astype(np.int64) @ w.T.astype(np.int64) + b) * s_in * s_w).max()) / 30000 + 1e-9
        graph = single_op_graph("FULLY_CONNECTED", [tensor("x", (m, k), np.int16, s_in),
                                                    tensor("w", None, np.int8, s_w, 0, data=w),
                                                    tensor("b", None, np.int64, s_in * s_w, 0, data=b)],
                                [tensor("y", (m, n), np.int16, s_out)], {"fused_activation_function": "NONE"})
        yield graph, {"x": x}


@needs_library
def test_fully_connected_16x8_sums_equal_the_kernel(builds):
    """16x8 FULLY_CONNECTED with native.c's int64 sums and the kernel's own requantization (TFLM's
    int64 multiplier; LiteRT's double product): the 16x8 suite's random layers (per tensor and per
    channel, bias or none, fused activations) and sums past the int32 blocks at the extremes, equal
    to the kernel's run on every build and both targets."""
    rng = np.random.default_rng(97)
    cases = [_fc16_case(rng, i) for i in range(60)] + list(_long_fc16_cases(rng))
    taken = 0
    for k, (graph, feeds) in enumerate(cases):
        for target in ("tflite", "litert-ref"):
            for label, bound, operands, want in _bindings(graph, feeds, target, builds):
                assert bound is not None, (k, target, label)
                taken += 1
                got = bound(*operands)[0]
                assert got.dtype == want.dtype == np.int16 and got.shape == want.shape
                np.testing.assert_array_equal(got, want, err_msg=f"case {k} [{target}, {label}]")
    assert taken == len(cases) * 2 * len(builds)


_FIXED_OUTPUT = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}  # the int8 kernels' output quantization


@needs_library
@pytest.mark.parametrize("op", ["HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1"])
def test_tables_equal_the_kernels(builds, op):
    """The ops whose int8 kernels are a 256-entry table: every int8 input, at sizes that are and
    are not a multiple of the 64-lane step."""
    rng = np.random.default_rng(7)
    taken = 0
    for i in range(6):
        shape = ((4, 64), (3, 7, 5), (1, 300))[i % 3]
        s_in, z_in = float(10 ** rng.uniform(-3, 0.5)), int(rng.integers(-128, 128))
        s_out, z_out = _FIXED_OUTPUT.get(op, (float(s_in * 10 ** rng.uniform(-1, 1)), int(rng.integers(-128, 128))))
        attrs = {"alpha": float(rng.uniform(-1, 1))} if op == "LEAKY_RELU" else None
        graph = single_op_graph(op, [tensor("x", shape, scale=s_in, zero_point=z_in)],
                                [tensor("y", shape, scale=s_out, zero_point=z_out)], attrs)
        x = np.resize(ALL_INT8, shape)
        rng.shuffle(x.reshape(-1))
        for target in TARGETS:
            try:
                plan = ExecutionPlan(graph, get_target(target), native=False)
            except intq.IntqError:
                continue
            run, params = plan.kernels[graph.nodes[0].name]
            want = np.array(run(params, x)[0])
            for label, build in builds.items():
                bound = native_run(plan.keys[graph.nodes[0].name], graph.nodes[0], graph, params, build)
                if bound is None:
                    continue
                taken += 1
                np.testing.assert_array_equal(bound(x)[0], want, err_msg=f"{op} case {i} [{target}, {label}]")
    assert taken >= 6


@needs_library
def test_transformer_tables_equal_the_kernels(builds):
    """GELU (exact and tanh forms), RSQRT and an int8 -> int8 QUANTIZE as 256-entry tables: every
    int8 input against the kernel's run, on every build and target; RSQRT only where no input lies
    below its zero point (Z_in = -128: its run refuses such inputs, a lookup would not), and a
    float QUANTIZE keeps its run."""
    rng = np.random.default_rng(53)
    taken: dict[str, int] = {}
    for i in range(12):
        shape = ((4, 64), (3, 7, 5), (1, 300))[i % 3]
        s_in, z_in = float(10 ** rng.uniform(-3, 0)), int(rng.integers(-128, 128))
        cases = [("GELU", single_op_graph("GELU", [tensor("x", shape, scale=s_in, zero_point=z_in)],
                                          [tensor("y", shape, scale=s_in * float(10 ** rng.uniform(-0.5, 0.3)),
                                                  zero_point=int(rng.integers(-128, 128)))],
                                          {"approximate": bool(i % 2)}), True),
                 ("QUANTIZE", single_op_graph("QUANTIZE", [tensor("x", shape, scale=s_in, zero_point=z_in)],
                                              [tensor("y", shape, scale=s_in * float(10 ** rng.uniform(-1, 1)),
                                                      zero_point=int(rng.integers(-128, 128)))]), True),
                 ("QUANTIZE float", single_op_graph("QUANTIZE", [tensor("x", shape, np.float32)],
                                                    [tensor("y", shape, scale=s_in, zero_point=z_in)]), False)]
        z_rsqrt = -128 if i % 2 else int(rng.integers(-127, 100))
        s_rsqrt = float(10 ** rng.uniform(-4, 1))
        cases.append(("RSQRT", single_op_graph(
            "RSQRT", [tensor("x", shape, scale=s_rsqrt, zero_point=z_rsqrt)],
            [tensor("y", shape, scale=float(10 ** rng.uniform(-0.5, 0.5) / (255 * np.sqrt(s_rsqrt))),
                    zero_point=int(rng.integers(-128, 128)))]), z_rsqrt == -128))
        for op, graph, native_form in cases:
            node = graph.nodes[0]
            x = np.resize(ALL_INT8, shape)
            rng.shuffle(x.reshape(-1))
            if op == "RSQRT":
                x = np.maximum(x, z_rsqrt).astype(np.int8)
            if op == "QUANTIZE float":
                x = rng.standard_normal(shape).astype(np.float32)
            for target in TARGETS:
                try:
                    plan = ExecutionPlan(graph, get_target(target), native=False)
                except intq.IntqError:
                    continue  # TFLM has no GELU
                run, params = plan.kernels[node.name]
                want = np.array(run(params, x)[0])
                for label, build in builds.items():
                    bound = native_run(plan.keys[node.name], node, graph, params, build)
                    if not native_form or target == "litert-opt" and op == "QUANTIZE":
                        assert native_form or bound is None, (op, target, label)
                        if bound is None:
                            continue
                    assert bound is not None, (op, target, label)
                    taken[op] = taken.get(op, 0) + 1
                    np.testing.assert_array_equal(bound(x)[0], want, err_msg=f"{op} case {i} [{target}, {label}]")
    assert set(taken) == {"GELU", "QUANTIZE", "RSQRT"}, taken


@needs_library
def test_prelu_with_a_constant_slope_equals_the_kernel(builds):
    """PRELU with a constant slope of one value or one per channel is tabulated per channel from the
    kernel's own run (forms_elementwise.prelu_form): the elementwise suite's random shapes and every int8 input
    against every int8 slope; slopes of other shapes, or given at run time, keep the kernel's run."""
    from intq.runtime.native.bound import BoundChannelTables, BoundTable

    from ..kernels.test_elementwise import _prelu_alpha_shape, _scale, _shape, _unary_scales, _values
    from ..kernels.test_elementwise import _zero_point as _zp

    rng = np.random.default_rng(47)
    cases = []
    for i in range(40):
        shape = _shape(rng, max_rank=4, min_rank=1)
        a_shape = _prelu_alpha_shape(rng, shape)
        s_in, s_out = _unary_scales(rng, i)
        constant = i % 5 != 0
        alpha = (tensor("alpha", None, data=_values(rng, a_shape), scale=_scale(rng, -3, 0), zero_point=_zp(rng))
                 if constant else tensor("alpha", a_shape, scale=_scale(rng, -3, 0), zero_point=_zp(rng)))
        graph = single_op_graph("PRELU", [tensor("x", shape, scale=s_in, zero_point=_zp(rng)), alpha],
                                [tensor("y", shape, scale=s_out, zero_point=_zp(rng))])
        cases.append((graph, _values(rng, shape), None if constant else _values(rng, a_shape)))
    for s_in, s_alpha, s_out, zps in [(0.05, 0.004, 0.05, (0, 0, 0)), (0.3, 0.01, 0.02, (127, -128, -20))]:
        graph = single_op_graph("PRELU", [tensor("x", (256, 256), scale=s_in, zero_point=zps[0]),
                                          tensor("alpha", None, data=ALL_INT8.reshape(1, 256), scale=s_alpha,
                                                 zero_point=zps[1])],
                                [tensor("y", (256, 256), scale=s_out, zero_point=zps[2])])
        cases.append((graph, np.repeat(ALL_INT8[:, None], 256, axis=1), None))
    kinds = set()
    for k, (graph, x, alpha) in enumerate(cases):
        node = graph.nodes[0]
        a = graph.tensors["alpha"].data if alpha is None else alpha
        for target in TARGETS:
            plan = ExecutionPlan(graph, get_target(target), native=False)
            run, params = plan.kernels[node.name]
            want = np.array(run(params, x, a)[0])
            for label, build in builds.items():
                bound = native_run(plan.keys[node.name], node, graph, params, build)
                taken = alpha is None and np.asarray(a).size in (1, x.shape[-1]) and np.asarray(a).shape[-1:] in (
                    (), (1,), x.shape[-1:])
                if not taken:
                    assert bound is None, (k, np.asarray(a).shape, x.shape)
                    continue
                assert type(bound) in (BoundTable, BoundChannelTables), (k, label)
                kinds.add(type(bound))
                np.testing.assert_array_equal(bound(x, a)[0], want, err_msg=f"PRELU case {k} [{target}, {label}]")
    assert kinds == {BoundTable, BoundChannelTables}


@pytest.mark.parametrize("shape", [(1, 2), (3, 5, 2), (256, 256, 2)])
def test_two_class_softmax_table_equals_the_kernel(shape):
    """SOFTMAX over pairs (a two-class head) is tabulated at plan time from the kernel's own run
    on all 65536 rows: the lookup must return each row's own result, in place."""
    rng = np.random.default_rng(11)
    for beta, s_in in ((1.0, 0.05), (0.5, 0.3), (2.0, 0.001)):
        graph = single_op_graph("SOFTMAX", [tensor("x", shape, scale=s_in, zero_point=int(rng.integers(-128, 128)))],
                                [tensor("y", shape, scale=1 / 256, zero_point=-128)], {"beta": beta})
        x = (np.stack(np.meshgrid(ALL_INT8, ALL_INT8, indexing="ij"), axis=-1) if shape == (256, 256, 2)
             else rng.integers(-128, 128, shape).astype(np.int8))
        for target in ("tflite", "litert-ref"):
            plan = ExecutionPlan(graph, get_target(target), native=False)
            run, params = plan.kernels[graph.nodes[0].name]
            bound = native_run(plan.keys[graph.nodes[0].name], graph.nodes[0], graph, params)
            assert bound is not None
            np.testing.assert_array_equal(bound(x)[0], run(params, x)[0], err_msg=f"{shape} beta {beta} [{target}]")
            if x.size == 2:  # one row: the scalar lookup, on every row
                rows = np.stack(np.meshgrid(ALL_INT8, ALL_INT8, indexing="ij"), axis=-1).reshape(-1, *shape)
                for row in rows[::97]:
                    np.testing.assert_array_equal(bound(row)[0], run(params, row)[0], err_msg=f"{row} [{target}]")


@needs_library
def test_softmax_rows_equal_the_kernel(builds):
    """SOFTMAX over rows of 1 to 300 values (attention's rows, classifier heads) on every build and
    target: equal to the kernel's run on random rows, rows of one repeated value, rows holding
    both extremes and every difference 0..255; betas and input scales from the steep (most
    differences beyond the radius: -128) to the flat; a row whose sum of exps reaches 512 raises
    the kernel's error, natively as in the kernel."""
    rng = np.random.default_rng(71)
    taken = refused = 0
    for i in range(24):
        depth = [1, 3, 7, 16, 32, 33, 64, 128, 256, 300, 600, 1000][i % 12]
        shape = ((1, 12, 5, depth), (4, depth), (depth,))[i % 3]
        beta, s_in = float(rng.choice([0.5, 1.0, 2.0])), float(10 ** rng.uniform(-3, -0.3))
        graph = single_op_graph("SOFTMAX", [tensor("x", shape, scale=s_in, zero_point=int(rng.integers(-128, 128)))],
                                [tensor("y", shape, scale=1 / 256, zero_point=-128)], {"beta": beta})
        xs = [rng.integers(-128, 128, shape), np.full(shape, int(rng.integers(-128, 128))),
              rng.choice([-128, 127], size=shape), np.resize(np.arange(-128, 128), shape)]
        for target in ("tflite", "litert-ref"):
            plan = ExecutionPlan(graph, get_target(target), native=False)
            node = graph.nodes[0]
            run, params = plan.kernels[node.name]
            for label, build in builds.items():
                bound = native_run(plan.keys[node.name], node, graph, params, build)
                assert bound is not None, (shape, label)
                for x in xs:
                    x = x.astype(np.int8)
                    try:
                        want = run(params, x)[0]
                    except intq.IntqError as e:
                        with pytest.raises(type(e), match="sum of exponentials"):
                            bound(x)
                        refused += 1
                        continue
                    taken += 1
                    np.testing.assert_array_equal(bound(x)[0], want, err_msg=f"case {i} {shape} [{target}, {label}]")
    assert taken >= 150 and refused >= 2, (taken, refused)


def _corpus_graphs():
    files = sorted((ROOT / "tests/fixtures/corpus").glob("*.tflite")) + sorted(
        (ROOT / "tests/fixtures/tflite").glob("*int8*.tflite"))
    return files


def _libraries():
    """The process library as measured here and, when the measurement left CONV_2D / FULLY_CONNECTED
    to the kernels' GEMM, the same library running them natively too (what another host chooses)."""
    lib = native.library()
    return [lib] if lib.gemm else [lib, replace(lib, gemm=True)]


def _follows_the_choice(plan, lib, context):
    """The plan's native steps follow ``lib``'s choice: CONV_2D / FULLY_CONNECTED natively exactly
    when its matrix path was measured (or forced) faster than the kernels' GEMM."""
    ops = {n.op_type for n, s in zip(plan.graph.nodes, plan.steps) if isinstance(s.run, Bound)}
    gemm_ops = {"CONV_2D", "FULLY_CONNECTED"} & {n.op_type for n in plan.graph.nodes}
    if lib.gemm:
        assert not gemm_ops or ops & gemm_ops, (context, ops)
    else:
        assert not ops & gemm_ops, (context, ops)
    return ops


@needs_library
@pytest.mark.parametrize("path", _corpus_graphs(), ids=lambda p: p.stem)
def test_models_equal_the_kernels_every_tensor(path, monkeypatch):
    graph = intq.load(path)
    if not all(graph.tensors[i].is_static for i in graph.inputs):
        graph = rebatch(graph, _batch_of(graph))  # a dynamic batch: the stored shapes, as the interpreter does
    if not any(t.qparams is not None for t in graph.tensors.values() if not t.is_constant):
        rng = np.random.default_rng(1)  # a float model (MediaPipe's): intq quantizes it
        calib = [{i: rng.standard_normal(graph.tensors[i].shape).astype(np.float32) for i in graph.inputs}
                 for _ in range(2)]
        graph = intq.quantize(graph, calib)
    target = get_target("tflite")
    slow = ExecutionPlan(graph, target, native=False)
    for lib in _libraries():
        monkeypatch.setattr(native, "library", lambda lib=lib: lib)
        fast = ExecutionPlan(graph, target)
        ops = _follows_the_choice(fast, lib, path.name)
        if lib.gemm:
            assert ops, path.name
        rng = np.random.default_rng(0)
        values = []
        for name in graph.inputs:
            t = graph.tensors[name]
            shape = tuple(d or 1 for d in t.shape)
            if np.issubdtype(t.dtype, np.integer):
                info = np.iinfo(t.dtype)
                values.append(rng.integers(info.min, info.max + 1, size=shape).astype(t.dtype))
            else:
                values.append(rng.standard_normal(shape).astype(t.dtype))
        a, b = fast.execute(values), slow.execute(values)
        for i, name in enumerate(fast.names):
            if name is not None and a[i] is not None:
                np.testing.assert_array_equal(a[i], b[i], err_msg=f"{path.name}: tensor {name}")
        # the second run takes the hot path: runs of native steps as step programs (one C call each)
        values = [v[::-1].copy() if v.ndim and v.shape[0] > 1 else (v ^ 0x55 if v.dtype == np.int8 else -v)
                  for v in values]
        a, b = fast.complete(fast.execute(values)), slow.execute(values)  # complete: the programs' inner tensors too
        for i, name in enumerate(fast.names):
            if name is not None and b[i] is not None:
                np.testing.assert_array_equal(a[i], b[i], err_msg=f"{path.name}: tensor {name} (hot path)")


@needs_library
def test_quantized_digits_equal_and_native_steps_are_bound(monkeypatch):
    (x_train, _), (x_test, _) = load_split()
    calib = [x[None].astype(np.float32) for x in x_train[:16]]
    qg = intq.quantize(onnx.load(ROOT / "intq/data/digits_cnn.onnx"), calib, input_shapes={"image": (4, 1, 8, 8)})
    x = x_test[:4].reshape(4, 1, 8, 8).astype(np.float32)
    for lib in _libraries():
        monkeypatch.setattr(native, "library", lambda lib=lib: lib)
        for target in TARGETS:
            fast = intq.Interpreter(qg, target=target)
            slow = intq.Interpreter(qg, target=target, native=False)
            fast.run({"image": x})
            slow.run({"image": x})
            got, want = fast.tensors(), slow.tensors()
            assert got.keys() == want.keys()
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"[{target}] {name}")
            assert _follows_the_choice(fast._base, lib, target) or not lib.gemm
            assert not any(isinstance(s.run, Bound) for s in slow._base.steps)


def _conv_table_model(rng) -> onnx.ModelProto:
    """Conv -> HardSwish, depthwise Conv -> HardSwish (its output also read by an Add), Conv ->
    Relu (a fused activation: no table step), Gemm -> HardSwish: the three kinds of fused pair,
    and a fused output with two readers."""
    from onnx import TensorProto, helper, numpy_helper

    def init(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("HardSwish", ["c1"], ["h1"]),
        helper.make_node("Conv", ["h1", "w2", "b2"], ["c2"], kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=24),
        helper.make_node("HardSwish", ["c2"], ["h2"]),
        helper.make_node("Add", ["h2", "c2"], ["s2"]),
        helper.make_node("Conv", ["s2", "w3", "b3"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["c4"], transB=1),
        helper.make_node("HardSwish", ["c4"], ["y"]),
    ]
    inits = [init("w1", (24, 3, 3, 3)), init("b1", (24,)), init("w2", (24, 1, 5, 5)), init("b2", (24,)),
             init("w3", (40, 24, 1, 1)), init("b3", (40,)), init("w4", (10, 40)), init("b4", (10,))]
    graph = helper.make_graph(nodes, "conv_tables", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 20, 30])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_library
def test_convolutions_fused_with_their_table_ops_equal_the_kernels(monkeypatch):
    """A native convolution whose output a table op reads computes the table too, in one C call
    (programs.fuse_tables): every tensor of the plan equal to the kernels' run, the
    convolution's own output included; the table step given any other array looks it up itself.
    Three pairs where CONV_2D and FULLY_CONNECTED run natively here, else the depthwise one."""
    from intq.runtime.native.bound import TableAfter

    rng = np.random.default_rng(31)
    proto = _conv_table_model(rng)
    calib = [rng.standard_normal((1, 3, 20, 30)).astype(np.float32) for _ in range(4)]
    qg = intq.quantize(proto, calib)
    slow = intq.Interpreter(qg, native=False)
    for lib in _libraries():
        monkeypatch.setattr(native, "library", lambda lib=lib: lib)
        fast = intq.Interpreter(qg)
        for k in range(3):
            x = rng.standard_normal((1, 3, 20, 30)).astype(np.float32) * (1 + k)
            fast.run({"x": x})
            slow.run({"x": x})
            got, want = fast.tensors(), slow.tensors()
            assert got.keys() == want.keys()
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"run {k}: {name}")
        steps = fast._base.steps
        fused = [(i, s) for i, s in enumerate(steps) if isinstance(s.run, TableAfter)]
        assert len(fused) == (3 if lib.gemm else 1), [fast._base.graph.nodes[i].op_type for i, _ in fused]
        for i, s in fused:  # another input than the fused output: the step's own lookup
            node = fast._base.graph.nodes[i]
            x = rng.integers(-128, 128, qg.tensors[node.inputs[0]].shape).astype(np.int8)
            run, params = fast._base.kernels[node.name]
            np.testing.assert_array_equal(s.run(x)[0], run(params, x)[0], err_msg=node.name)


# ------------------------------------------------------------------------------ step programs


def _program_steps(plan):
    from intq.runtime.native.programs import Program, programs

    return [p for p, _, _ in programs(plan._flat, dict(plan.constants)) if isinstance(p, Program)]


def _squeeze_model(rng) -> onnx.ModelProto:
    """Conv -> HardSwish -> depthwise Conv -> Relu -> Mul by a constant per-channel row (a constant
    int8 operand of a native MUL) -> Add of two branches -> MaxPool -> Transpose: every kind of
    program step, a constant operand and a program input read by two steps."""
    from onnx import TensorProto, helper, numpy_helper

    def init(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("HardSwish", ["c1"], ["h1"]),
        helper.make_node("Conv", ["h1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Mul", ["r2", "m"], ["s2"]),
        helper.make_node("Add", ["s2", "h1"], ["a2"]),
        helper.make_node("MaxPool", ["a2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p2"], ["y"], perm=[0, 2, 3, 1]),
    ]
    inits = [init("w1", (16, 3, 3, 3)), init("b1", (16,)), init("w2", (16, 1, 3, 3)), init("b2", (16,)),
             numpy_helper.from_array((rng.random((1, 16, 1, 1)) + 0.5).astype(np.float32), "m")]
    graph = helper.make_graph(nodes, "squeeze", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 19, 23])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _split_model(rng) -> onnx.ModelProto:
    """Conv -> Split into two halves (not a native step) -> Add(a, b) -> Mul(sum, b): a program with
    two inputs from outside it, the second read twice."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Split", ["c1", "parts"], ["a", "b"], axis=1),
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Mul", ["s", "b"], ["y"]),
    ]
    inits = [numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1"),
             numpy_helper.from_array(np.array([8, 8], np.int64), "parts")]
    graph = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 11])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _attention_model(rng) -> onnx.ModelProto:
    """An attention head's shape: MatMul by a constant (FULLY_CONNECTED) -> Reshape to heads ->
    Transpose -> Q K^T (BATCH_MATMUL of two activations) -> Softmax -> its Reshape: a program that
    runs on through the reshapes (views of its arena) and holds the batch product."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Reshape", ["h", "heads"], ["r"]),
        helper.make_node("Transpose", ["r"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["r"], ["k"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["q", "k"], ["s"]),
        helper.make_node("Reshape", ["s", "flat"], ["f"]),
        helper.make_node("Softmax", ["f"], ["y"], axis=-1),
    ]
    inits = [numpy_helper.from_array((rng.standard_normal((32, 32)) * 0.3).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 6, 4, 8], np.int64), "heads"),
             numpy_helper.from_array(np.array([1, 4, 36], np.int64), "flat")]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _token_model(rng) -> onnx.ModelProto:
    """A ViT block's data movement around attention: a class token Concat-ed to the patch tokens,
    one MatMul to Q, K and V, Split into the three, heads transposed, Q K^T, Softmax, P V, the class
    token's row Gather-ed at a constant index: with SPLIT, CONCATENATION, GATHER and SOFTMAX native,
    one program from the Concat to the Gather."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Concat", ["cls", "x"], ["t"], axis=1),
        helper.make_node("MatMul", ["t", "w"], ["qkv"]),
        helper.make_node("Reshape", ["qkv", "heads"], ["r"]),
        helper.make_node("Split", ["r"], ["q0", "k0", "v0"], axis=2, num_outputs=3),
        helper.make_node("Reshape", ["q0", "hd"], ["q1"]),
        helper.make_node("Reshape", ["k0", "hd"], ["k1"]),
        helper.make_node("Reshape", ["v0", "hd"], ["v1"]),
        helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k1"], ["k"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "k"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("Gather", ["o", "first"], ["y"], axis=2),
    ]
    inits = [numpy_helper.from_array((rng.standard_normal((1, 1, 16)) * 0.5).astype(np.float32), "cls"),
             numpy_helper.from_array((rng.standard_normal((16, 48)) * 0.3).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 7, 3, 4, 4], np.int64), "heads"),
             numpy_helper.from_array(np.array([1, 7, 4, 4], np.int64), "hd"),
             numpy_helper.from_array(np.array(0, np.int64), "first")]
    graph = helper.make_graph(nodes, "tokens", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@needs_library
@pytest.mark.parametrize("cap", [None, 1])
def test_step_programs_equal_the_kernels_and_keep_each_runs_tensors(monkeypatch, cap):
    """The plan's hot path runs consecutive native steps as one C call (programs.programs): every
    tensor of every run equal to the kernels' plan (fused convolution + table, constant operands,
    inputs read twice), each run's tensors still intact after the next run (a fresh buffer per
    run); ``cap`` 1 byte: every program one step (the arena limit splits them)."""
    from intq.runtime.native import programs

    if cap is not None:
        monkeypatch.setattr(programs, "_ARENA_CAP", cap)
    calls = []
    monkeypatch.setattr(programs.Program, "__call__",  # counted: the programs are what the hot path runs
                        lambda self, *xs, _call=programs.Program.__call__: calls.append(self) or _call(self, *xs))
    rng = np.random.default_rng(41)
    for proto, shape in ((_conv_table_model(rng), (1, 3, 20, 30)), (_squeeze_model(rng), (1, 3, 19, 23)),
                         (_split_model(rng), (1, 3, 9, 11)), (_attention_model(rng), (1, 6, 32)),
                         (_token_model(rng), (1, 6, 16))):
        calib = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
        qg = intq.quantize(proto, calib)
        fast, slow = intq.Interpreter(qg), intq.Interpreter(qg, native=False)
        progs = _program_steps(fast._base)
        if cap is None:
            assert progs and max(len(p.outs) for p in progs) >= 2, [len(p.outs) for p in progs]
            if proto.graph.name == "attention":  # one program from the product to the batch product
                ops = {n.op_type for n in qg.nodes}
                assert {"BATCH_MATMUL", "RESHAPE", "SOFTMAX"} <= ops, ops
                assert max(len(p.outs) for p in progs) >= 5, [len(p.outs) for p in progs]
            if proto.graph.name == "tokens":  # the data movement inside the program: one from Concat to Gather
                ops = [n.op_type for n in qg.nodes]
                assert {"CONCATENATION", "SPLIT", "GATHER", "SOFTMAX"} <= set(ops), ops
                steps = [len(p.step_array) for p in progs]
                assert len(progs) == 1 and steps[0] >= len(ops) - ops.count("RESHAPE") - 2, (steps, ops)
        else:
            assert not progs  # one-step programs are left as the steps themselves
        calls.clear()
        previous = None
        for k in range(3):
            x = rng.standard_normal(shape).astype(np.float32) * (1 + k)
            fast.run({"x": x})
            slow.run({"x": x})
            got, want = fast.tensors(), slow.tensors()
            assert got.keys() == want.keys()
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"cap {cap} run {k}: {name}")
            if previous is not None:
                for name, (array, copy) in previous.items():
                    np.testing.assert_array_equal(array, copy, err_msg=f"run {k - 1}'s {name} overwritten")
            previous = {name: (v, v.copy()) for name, v in got.items()}
        assert len(calls) == (2 * len(progs) if cap is None else 0)  # runs 1 and 2 take the hot path


@needs_library
def test_a_program_refuses_unverified_inputs_and_the_plan_falls_back():
    from intq.runtime.native.programs import NotProgram

    rng = np.random.default_rng(43)
    qg = intq.quantize(_squeeze_model(rng), [rng.standard_normal((1, 3, 19, 23)).astype(np.float32)])
    fast = intq.Interpreter(qg)
    fast.run({"x": rng.standard_normal((1, 3, 19, 23)).astype(np.float32)})
    prog = _program_steps(fast._base)[0]
    good = np.zeros(prog.sizes[0], np.int8)
    assert len(prog(good)) == len(prog.outs)
    for bad in (good.astype(np.int16), np.zeros(2 * prog.sizes[0], np.int8)[::2], good[1:], list(good)):
        with pytest.raises(NotProgram):
            prog(bad)
    # a failing hot path (here: a program raising) reruns the steps one by one: the same outputs
    x = rng.standard_normal((1, 3, 19, 23)).astype(np.float32)
    want = intq.Interpreter(qg, native=False).run({"x": x})

    def broken(s):
        raise NotProgram

    fast._base._straight = broken
    got = fast.run({"x": x})
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


@needs_library
def test_a_softmax_row_refused_inside_a_program_raises_the_kernels_error():
    """SOFTMAX inside a step program: a row the kernel refuses (a sum of exponentials >= 512: 600
    equal values) makes the program return nonzero, and the plan's step loop reports the kernel's
    error naming the node, as the first (step-loop) run does; the run after computes again."""
    from intq.ir import Graph, Node

    shape = (2, 600)
    t = {"x": tensor("x", shape[::-1], scale=0.05, zero_point=0), "perm": tensor("perm", None, np.int32, data=[1, 0]),
         "xt": tensor("xt", shape, scale=0.05, zero_point=0), "y": tensor("y", shape, scale=1 / 256, zero_point=-128)}
    graph = Graph([Node("TRANSPOSE", "turn", ["x", "perm"], ["xt"], {}), Node("SOFTMAX", "sm", ["xt"], ["y"], {"beta": 1.0})],
                  t, ["x"], ["y"], name="refused")
    it, slow = intq.Interpreter(graph), intq.Interpreter(graph, native=False)
    assert _program_steps(it._base), "TRANSPOSE and SOFTMAX: one program"
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, shape[::-1]).astype(np.int8)
    for k in range(2):  # the checked first run, then the hot path
        np.testing.assert_array_equal(it.run({"x": x})["y"], slow.run({"x": x})["y"])
    flat = np.zeros(shape[::-1], np.int8)
    with pytest.raises(intq.IntqError, match="node 'sm'.*sum of exponentials") as native_error:
        it.run({"x": flat})
    with pytest.raises(intq.IntqError) as kernel_error:
        slow.run({"x": flat})
    assert str(native_error.value) == str(kernel_error.value)
    np.testing.assert_array_equal(it.run({"x": x})["y"], slow.run({"x": x})["y"])


# ------------------------------------------------------------------------------ the measured choice


@needs_library
def test_the_matrix_path_is_measured_and_never_slower_than_float32_blas(monkeypatch, tmp_path):
    """Every matrix-product path of the library and every exact GEMM backend of the kernels are
    timed; the library takes its fastest path, and CONV_2D / FULLY_CONNECTED run natively only if
    that path beats every kernel backend (float32 BLAS included); the numbers are cached next to
    the library and read back."""
    from intq.kernels import gemm
    from intq.runtime.native import measure

    monkeypatch.setenv("INTQ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm, "SHAPES", ((256, 288, 32), (49, 1152, 64), (1, 256, 100)))  # small: fast
    lib, status = native.load()
    assert lib is not None, status
    m = measure.measure(lib)
    assert not m.cached and Path(m.file).parent == lib.file.parent
    assert set(m.seconds) == {f"native-{p}" for p in lib.paths} | set(gemm.available_backends())
    assert m.seconds["blas-float32"] is not None  # the anchor is always timed
    timed = {k[7:]: t for k, t in m.seconds.items() if k.startswith("native-") and t is not None}
    kernels = [t for k, t in m.seconds.items() if not k.startswith("native-") and t is not None]
    assert timed and m.path == min(timed, key=timed.get)
    assert m.native_gemm == (timed[m.path] <= min(kernels))
    again = measure.measure(lib)
    assert again.cached and again.seconds == m.seconds and (again.path, again.native_gemm) == (m.path, m.native_gemm)


@needs_library
def test_a_native_path_slower_than_blas_is_not_chosen(monkeypatch, tmp_path):
    """With every native path measured slower than float32 BLAS the library keeps its path for the
    other kernels but CONV_2D and FULLY_CONNECTED run on the kernels' GEMM, and status() says so."""
    from intq.kernels import gemm
    from intq.runtime.native import measure

    lib = native.library()
    fake = {f"native-{p}": 0.002 + 0.001 * k for k, p in enumerate(reversed(lib.paths))}
    fake |= {b: None for b in gemm.available_backends()} | {"blas-float32": 0.0015}
    monkeypatch.setattr(gemm, "time_candidates", lambda factories, **_: {k: fake[k] for k in factories})
    m = measure.measure(replace(lib, file=tmp_path / lib.file.name))
    assert (m.path, m.native_gemm) == (lib.paths[-1], False)
    native.library.cache_clear()
    try:
        with monkeypatch.context() as patch:
            patch.delenv("INTQ_NATIVE_PATH", raising=False)  # measured, not forced
            patch.setattr(measure, "measure", lambda _lib: m)
            chosen = native.library()
            assert chosen.gemm is False and "the kernels'" in native.status() and "measured" in native.status()
            graph, x = _wide_case(np.random.default_rng(3), 2)  # a CONV_2D
            plan = ExecutionPlan(graph, get_target("tflite"))
            assert not any(isinstance(s.run, Bound) for s in plan.steps)
    finally:
        native.library.cache_clear()
        native.library()  # the process library again (the environment's), for the tests after this one


@needs_library
def test_status_and_report_say_what_runs_here():
    from intq.host import describe

    lib = native.library()
    text = native.status()
    assert lib.file.name in text and lib.path in text
    assert "measured" in text or "INTQ_NATIVE_PATH" in text
    r = native.report()
    assert r["cpu_class"] == describe().cpu_class and r["path"] == lib.path and r["native_conv"] == lib.gemm
    assert set(r["paths"]) == set(lib.paths) and lib.path in lib.paths
    assert r["measurement"] is None or r["measurement"]["path"] == lib.path
    assert r["ort_u8s8"]["arithmetic"] in ("exact", "pair-saturating") and r["ort_u8s8"]["how"]
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "intq.cli", "inspect", str(ROOT / "intq/data/digits_cnn.onnx"),
                           "--input-shape", "image=1x1x8x8", "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["native"]  # the command's own process: under QEMU user mode a child
    assert shown["path"] in shown["paths"] and shown["status"] and shown["cpu_class"]  # runs natively


# ------------------------------------------------------------------------------ mutants

#: (what breaks, the path whose build runs it, text of native.c, its replacement): each must make at
#: least one of _mutant_suite's comparisons differ (a suite that cannot tell would pass them all)
MUTANTS = [
    ("AVX2 product: one row's second 8 channels on the first 8's weights", "avx2",
     "c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(v, w1));", "c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(v, w0));"),
    ("AVX-VNNI product: one row's second 8 channels on the first 8's weights", "avxvnni",
     "c31 = _mm256_dpbusd_avx_epi32(c31, v, w1);", "c31 = _mm256_dpbusd_avx_epi32(c31, v, w0);"),
    ("AVX2 SRDHM: the rounding half 2^29", "avx2",
     "const __m256i half = _mm256_set1_epi64x((int64_t)1 << 30);",
     "const __m256i half = _mm256_set1_epi64x((int64_t)1 << 29);"),
    ("vector requantization: ties never away from zero", "avx2",
     "const vi32 threshold = v_add(v->half, v_and(v->away, v_sign_bit(h)));", "const vi32 threshold = v->half;"),
    ("vector depthwise: the fourth pixel of a quad reads the third's taps", "avxvnni",
     "a3 = v_madd16(a3, v_load_i8(r + 3 * step), wv);", "a3 = v_madd16(a3, v_load_i8(r + 2 * step), wv);"),
    ("SQUARED_DIFFERENCE vectors: the square's left shift (TFLM) dropped", "avx2",
     "v_store_i8n(yr + c, valid, v_rq_shl(v_mullo(d, d), left, &v, zp, lo, hi));",
     "v_store_i8n(yr + c, valid, v_rq(v_mullo(d, d), &v, zp, lo, hi));"),
    ("SQUARED_DIFFERENCE vectors: the tables added, not subtracted", "vnni",
     "const vi32 d = v_sub(av, bv);", "const vi32 d = v_add(av, bv);"),
    ("AVX2 table lookup: the last 16 entries never looked up", "avx2",
     "for (int32_t k = 0; k < 16; ++k, s = _mm256_sub_epi8(s, sixteen))",
     "for (int32_t k = 0; k < 15; ++k, s = _mm256_sub_epi8(s, sixteen))"),
    ("AVX-512 product: one row's second 16 channels on the first 16's weights", "vnni",
     "c31 = _mm512_dpbusd_epi32(c31, v, w1);", "c31 = _mm512_dpbusd_epi32(c31, v, w0);"),
]


def _mutant_suite(lib: native.Native) -> int:
    """Comparisons with the kernels' run that differ on ``lib``: convolutions, depthwise and fully
    connected single ops (the first seed of the random suite), ADD / SUB / MUL / SQUARED_DIFFERENCE on every int8 pair
    (ties of the requantization's rounding), the table ops on every input."""
    differ = 0
    for graph, feeds in _binary_cases(np.random.default_rng(5)):
        node = graph.nodes[0]
        if graph.tensors[node.inputs[0]].shape != (256, 256):
            continue
        plan = ExecutionPlan(graph, get_target("tflite"), native=False)
        run, params = plan.kernels[node.name]
        bound = native_run(plan.keys[node.name], node, graph, params, lib)
        if bound is not None:
            differ += not np.array_equal(bound(feeds["a"], feeds["b"])[0], run(params, feeds["a"], feeds["b"])[0])
    for graph, x in itertools.islice(_cases(0), 24):
        node = graph.nodes[0]
        plan = ExecutionPlan(graph, get_target("tflite"), native=False)
        run, params = plan.kernels[node.name]
        bound = native_run(plan.keys[node.name], node, graph, params, lib)
        if bound is not None:
            differ += not np.array_equal(_call(lib, bound, x), run(params, x)[0])
    for op in ("HARD_SWISH", "LOGISTIC"):
        s_out, z_out = _FIXED_OUTPUT.get(op, (0.02, 3))
        graph = single_op_graph(op, [tensor("x", (4, 64), scale=0.05, zero_point=-5)],
                                [tensor("y", (4, 64), scale=s_out, zero_point=z_out)])
        plan = ExecutionPlan(graph, get_target("tflite"), native=False)
        run, params = plan.kernels[graph.nodes[0].name]
        x = ALL_INT8.reshape(4, 64)
        differ += not np.array_equal(native_run(plan.keys[graph.nodes[0].name], graph.nodes[0], graph, params, lib)(x)[0], run(params, x)[0])
    return differ


@needs_library
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m[0])
def test_every_mutant_of_a_path_is_killed(mutant, builds, monkeypatch, tmp_path):
    what, path, text, replacement = mutant
    if f"{path} build" not in builds:
        pytest.skip(f"no {path} build in this run: the CPU lacks it or INTQ_NATIVE_PATH caps the builds")
    source = native.SOURCE.read_text()
    assert source.count(text) == 1, f"the mutated text must occur once in native.c: {text}"
    mutated = tmp_path / "native.c"
    mutated.write_text(source.replace(text, replacement))
    monkeypatch.setenv("INTQ_CACHE_DIR", str(tmp_path / "cache"))
    lib, status = native.load(cap=path, source=mutated)
    assert lib is not None and lib.path == path, status
    try:
        assert _mutant_suite(lib) > 0, f"mutant not killed: {what}"
    finally:
        native.library().use()
    assert _mutant_suite(builds[f"{path} build"]) == 0  # the same comparisons pass on the real source


# ------------------------------------------------------------------------------ fallbacks, build


def test_no_compiler_no_library_and_the_plan_runs_the_kernels(monkeypatch, tmp_path):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang on it
    lib, status = native.load()
    assert lib is None and "no C compiler" in status
    monkeypatch.setattr(native, "library", lambda: None)
    (x_train, _), _ = load_split()
    calib = [x[None].astype(np.float32) for x in x_train[:8]]
    qg = intq.quantize(onnx.load(ROOT / "intq/data/digits_cnn.onnx"), calib, input_shapes={"image": (1, 1, 8, 8)})
    plan = ExecutionPlan(qg, get_target("tflite"))
    assert not any(isinstance(s.run, Bound) for s in plan.steps)
    x = calib[0]
    np.testing.assert_array_equal(intq.Interpreter(qg).run({"image": x})[qg.outputs[0]],
                                  plan.execute([x])[plan.output_slots[0][1]])


def test_a_failing_compiler_gives_no_library(monkeypatch, tmp_path):
    cc = tmp_path / "broken-cc"
    cc.write_text("#!/bin/sh\necho 'broken-cc: cannot compile' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("INTQ_CACHE_DIR", str(tmp_path / "cache"))
    lib, status = native.load()
    assert lib is None and "compiler failed" in status and "cannot compile" in status
    assert not list((tmp_path / "cache").rglob("*.so"))


@needs_library
def test_disabled_by_the_environment(monkeypatch):
    monkeypatch.setenv("INTQ_NATIVE", "0")
    assert native.library.__wrapped__() is None
    assert "INTQ_NATIVE=0" in native._status
    native.library.cache_clear()
    monkeypatch.delenv("INTQ_NATIVE")
    assert native.library() is not None  # the process library again, for the tests after this one


@needs_library
def test_the_build_goes_to_the_user_cache_not_the_source_tree(monkeypatch, tmp_path):
    monkeypatch.setenv("INTQ_CACHE_DIR", str(tmp_path))
    before = sorted(p.name for p in native.SOURCE.parent.iterdir())
    lib, status = native.load(portable=True)
    assert lib is not None, status
    assert lib.file.parent == tmp_path / "native"
    assert [p.name for p in (tmp_path / "native").iterdir()] == [lib.file.name]  # no temporary left behind
    assert sorted(p.name for p in native.SOURCE.parent.iterdir()) == before
    again, _ = native.load(portable=True)  # found in the cache: the same file
    assert again.file == lib.file


def test_the_library_builds_where_a_compiler_exists():
    """A machine with a C compiler (``make test``'s) must get the library: a build that breaks
    there fails here rather than silently running the slower paths."""
    if native._compiler() is None:
        pytest.skip("no C compiler on this machine: the fallback is tested above")
    assert native.library() is not None, native.status()


@needs_library
def test_array_objects_are_read_where_numpy_lays_them_out():
    """The ``*_obj`` entry points read an ndarray's data pointer from the object (checked at load):
    on this CPython and numpy the check passes, and the pointer read is numpy's for new arrays
    and views alike."""
    lib = native.library()
    assert lib.objects
    base = np.arange(1000, dtype=np.int8)
    for a in (np.zeros((3, 5), np.int8), base[7:], base[::1][100:200].reshape(10, 10), np.empty(0, np.int8)):
        assert lib.lib.intq_array_data(a) == a.ctypes.data
