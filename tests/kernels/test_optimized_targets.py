"""Targeted cases for the ``litert-opt`` and ``xnnpack`` emulations, where the random suites rarely
go: the vector-block / scalar-tail split of the optimized QUANTIZE, DEQUANTIZE and 4-D MEAN (tensor
sizes around multiples of 8 and 16, channels beyond 16), exact ties, XNNPACK's acceptance limits of
an int8 rescale (scale ratio 2^-8 and 2^7) and float inputs beyond the int32 range."""

import numpy as np
import pytest

from intq.kernels import KernelError

from .harness import TALLY, assert_matches_oracles, single_op_graph, tensor

OPT = ("litert-opt", "xnnpack")


def _pair(rng, i):
    """Equal shapes on even ``i``; otherwise a broadcasting pair: some dimensions of one operand set
    to 1 (squeeze-excite [1, H, W, C] x [1, C], per-row [N, 1] x [N, M], scalars, ...), shapes long
    enough for 16-element vector runs."""
    shape = tuple(int(d) for d in rng.integers(1, 9, size=int(rng.integers(1, 5))))
    if i % 2 == 0:
        return shape, shape
    if rng.random() < 0.5:
        shape = shape[:-1] + (int(rng.integers(12, 40)),)
    other = tuple(1 if rng.random() < 0.5 else d for d in shape)
    if rng.random() < 0.3:
        other = other[int(rng.integers(0, len(other))):] or (1,)
    return (shape, other) if rng.random() < 0.5 else (other, shape)


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
@pytest.mark.parametrize("n", [7, 8, 15, 16, 17, 33])
def test_quantize_float_blocks_ties_and_overflow(n, dtype):
    """Float input, int8 or int16 output (16x8's input QUANTIZE: zero point 0, no XNNPACK)."""
    rng = np.random.default_rng(n)
    span = 140 if dtype == np.int8 else 33000
    for zp in ((-5, 0, 7) if dtype == np.int8 else (0,)):
        s = float(np.float32(2.0 ** -rng.integers(1, 8)))
        x = ((rng.integers(-span, span, n) + 0.5) * s).astype(np.float32)  # exact ties of x / s
        x[::5] = np.float32(3e38) * np.sign(x[::5] + 1e-9).astype(np.float32)  # beyond int32: wraps in LiteRT
        x[1::7] = np.float32(-2.2e9 * s)
        graph = single_op_graph("QUANTIZE", [tensor("x", (n,), np.float32)],
                                [tensor("y", (n,), dtype, scale=s, zero_point=zp)])
        assert_matches_oracles(graph, {"x": x}, targets=OPT, context=f"QUANTIZE float n={n} zp={zp} {dtype.__name__}")


def test_quantize_int8_to_int16_is_the_reference():
    """int8 -> int16 rescale: ``Requantize<int8_t, int16_t>`` has no optimized specialization."""
    rng = np.random.default_rng(21)
    for n in (5, 16, 40):
        s_in = float(np.float32(10 ** rng.uniform(-3, -1)))
        graph = single_op_graph("QUANTIZE", [tensor("x", (n,), scale=s_in, zero_point=int(rng.integers(-128, 128)))],
                                [tensor("y", (n,), np.int16, scale=float(np.float32(s_in * 10 ** rng.uniform(-3, -1))))])
        x = rng.integers(-128, 128, n).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, targets=("litert-ref", *OPT), context=f"QUANTIZE 8->16 n={n}")


@pytest.mark.parametrize("ratio", [2.0**-8, 2.0**-8 * 0.999, 2.0**7, 2.0**7 * 1.001, 0.3, 1.0])
def test_quantize_int8_rescale_xnnpack_limits(ratio):
    rng = np.random.default_rng(int(ratio * 1000))
    for n in (5, 16, 37):
        s_in = 0.05
        s_out = float(np.float32(s_in / ratio))
        graph = single_op_graph("QUANTIZE", [tensor("x", (n,), scale=s_in, zero_point=3)],
                                [tensor("y", (n,), scale=s_out, zero_point=-9)])
        x = rng.integers(-128, 128, n).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, targets=OPT, context=f"QUANTIZE int8 ratio={ratio} n={n}")


def test_dequantize_blocks():
    rng = np.random.default_rng(11)
    for n in (1, 7, 8, 9, 24, 31):
        s, zp = float(np.float32(10 ** rng.uniform(-3, 0))), int(rng.integers(-128, 128))
        graph = single_op_graph("DEQUANTIZE", [tensor("x", (n,), scale=s, zero_point=zp)], [tensor("y", (n,), np.float32)])
        x = rng.integers(-128, 128, n).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, targets=OPT, context=f"DEQUANTIZE n={n}")
    for n in (7, 8, 9, 4099):  # int16 (16x8's output DEQUANTIZE): zero point 0
        s = float(np.float32(10 ** rng.uniform(-5, -1)))
        graph = single_op_graph("DEQUANTIZE", [tensor("x", (n,), np.int16, scale=s)], [tensor("y", (n,), np.float32)])
        x = rng.integers(-32768, 32768, n).astype(np.int16)
        assert_matches_oracles(graph, {"x": x}, targets=OPT, context=f"DEQUANTIZE int16 n={n}")


def test_mean_4d_spatial_channel_blocks():
    """Channels ``[0, 16 floor(C/16))`` round half up in LiteRT's optimized 4-D MEAN, the rest half
    away; XNNPACK's float32 MEAN on the same tie-heavy models."""
    rng = np.random.default_rng(12)
    for i in range(40):
        c = int(rng.integers(1, 50))
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 6)), c)
        if i % 2:  # tie-heavy: power-of-two scales, N a power of two
            shape = (shape[0], 2, 2 ** int(rng.integers(0, 3)), c)
            s_in = s_out = float(2.0 ** -rng.integers(2, 8))
        else:
            s_in, s_out = (float(np.float32(10 ** rng.uniform(-2, 0))) for _ in range(2))
        zi, zo = (int(v) for v in rng.integers(-128, 128, 2))
        graph = single_op_graph("MEAN", [tensor("x", shape, scale=s_in, zero_point=zi),
                                         tensor("axis", (2,), np.int32, data=np.array([1, 2], np.int32))],
                                [tensor("y", (shape[0], 1, 1, c), scale=s_out, zero_point=zo)], {"keep_dims": True})
        x = rng.integers(-128, 128, shape).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, targets=("litert-ref", "litert-opt", "xnnpack"),
                               context=f"MEAN 4-D {i}", optimized=False)


def test_mul_vector_part_saturates_and_wraps():
    """LiteRT's optimized MUL: int16 saturation, then the output zero point added with int16
    wrap-around on the 16-wide vector part of each kernel run; the reference arithmetic on each
    run's tail. 200 random models (half broadcasting), many with products far beyond the output
    range (the flip to 127)."""
    rng = np.random.default_rng(13)
    before = TALLY[(("MUL", "int8"), "litert-opt", "compared")]
    for i in range(200):
        sa_shape, sb_shape = _pair(rng, i)
        shape = np.broadcast_shapes(sa_shape, sb_shape)
        s_a, s_b = (float(np.float32(10 ** rng.uniform(-3, 0))) for _ in range(2))
        k = 10 ** rng.uniform(-3, 2.5) if i % 3 else 10 ** rng.uniform(-5, -3.5)  # tiny s_y: saturates
        s_y = float(np.float32(max(s_a * s_b * k, 1e-8)))
        za, zb, zy = (int(v) for v in rng.integers(-128, 128, 3))
        if i % 4 == 0:
            zy = int(rng.choice([-1, 1, -128, 127]))
        act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][i % 4]
        graph = single_op_graph("MUL", [tensor("a", sa_shape, scale=s_a, zero_point=za),
                                        tensor("b", sb_shape, scale=s_b, zero_point=zb)],
                                [tensor("y", shape, scale=s_y, zero_point=zy)], {"fused_activation_function": act})
        a, b = (rng.integers(-128, 128, size=sh).astype(np.int8) for sh in (sa_shape, sb_shape))
        try:
            assert_matches_oracles(graph, {"a": a, "b": b}, context=f"MUL equal shapes {i}")
        except KernelError as e:  # a multiplier the runtimes refuse (left shift beyond int32)
            assert "left shift" in str(e) or "too large" in str(e), e
    assert TALLY[(("MUL", "int8"), "litert-opt", "compared")] - before >= 150, TALLY


def test_add_vector_part_rounds_once_and_wraps():
    """LiteRT's optimized ADD: one rounding per input rescale and a truncating int16 narrow on the
    16-wide vector part of each elementwise run, a truncating second rescale step on the 8-wide
    vector part of each scalar-broadcast run, the reference on each run's tail. 200 random
    models (half broadcasting, through both of LiteRT's kernels), scales up to 10^4 apart
    (XNNPACK declines the farthest: the xnnpack target then runs the same code)."""
    rng = np.random.default_rng(14)
    before = TALLY[(("ADD", "int8"), "litert-opt", "compared")]
    for i in range(200):
        sa_shape, sb_shape = _pair(rng, i)
        shape = np.broadcast_shapes(sa_shape, sb_shape)
        s_a, s_b = (float(np.float32(10 ** rng.uniform(-3, 1))) for _ in range(2))
        s_y = float(np.float32(max(s_a, s_b) * 10 ** rng.uniform(-2.5, 1.5)))
        za, zb, zy = (int(v) for v in rng.integers(-128, 128, 3))
        act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][i % 4]
        graph = single_op_graph("ADD", [tensor("a", sa_shape, scale=s_a, zero_point=za),
                                        tensor("b", sb_shape, scale=s_b, zero_point=zb)],
                                [tensor("y", shape, scale=s_y, zero_point=zy)], {"fused_activation_function": act})
        a, b = (rng.integers(-128, 128, size=sh).astype(np.int8) for sh in (sa_shape, sb_shape))
        try:
            assert_matches_oracles(graph, {"a": a, "b": b}, context=f"ADD equal shapes {i}")
        except KernelError as e:  # an output scale the runtimes refuse (multiplier >= 1)
            assert "(0, 1)" in str(e), e
    assert TALLY[(("ADD", "int8"), "litert-opt", "compared")] - before >= 150, TALLY


def test_mean_xnnpack_ties_any_axes():
    """XNNPACK's float32 MEAN (``nearbyint(float32(sum) * S_m + Y_z)``, ties to even) on power-of-two
    scales, where exact ties are common, over any axes: half of the models reduce the innermost axis
    (XNNPACK's rsum path), half leave it (its rdsum path)."""
    rng = np.random.default_rng(15)
    for i in range(100):
        rank = int(rng.integers(2, 5))
        shape = tuple(int(d) for d in rng.integers(1, 7, size=rank))
        pool = rank if i % 2 else rank - 1
        axes = sorted({int(a) for a in rng.choice(pool, size=int(rng.integers(1, pool + 1)), replace=False)}
                      | ({rank - 1} if i % 2 else set()))
        keep = bool(i % 2)
        out = tuple(1 if d in axes else n for d, n in enumerate(shape)) if keep else \
            tuple(n for d, n in enumerate(shape) if d not in axes)
        s_in = float(2.0 ** -rng.integers(1, 8))
        s_out = float(s_in * 2.0 ** rng.integers(-2, 3))
        zi, zo = (int(v) for v in rng.integers(-128, 128, 2))
        graph = single_op_graph("MEAN", [tensor("x", shape, scale=s_in, zero_point=zi),
                                         tensor("axis", (len(axes),), np.int32, data=np.array(axes, np.int32))],
                                [tensor("y", out, scale=s_out, zero_point=zo)], {"keep_dims": keep})
        x = rng.integers(-128, 128, shape).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, targets=OPT, context=f"MEAN ties {i}", optimized=False)


#: input quantizations (s_in, Z_in) where XNNPACK's table differs from LiteRT's, found by a search
#: over 10^-3 <= s_in <= 1 (about 1 in 1200 for LOGISTIC, 1 in 4000 for TANH)
LUT_DIFFERENCES = {
    "LOGISTIC": [(0.03704802319407463, 32), (0.0042512379586696625, 6), (0.0010280921123921871, -75),
                 (0.002790537429973483, 98), (0.002170421415939927, -124), (0.10910488665103912, -103),
                 (0.02343844808638096, -13), (0.0014692724216729403, 125)],
    "TANH": [(0.0346880704164505, -10), (0.010728184133768082, 122), (0.011933472938835621, 104),
             (0.001869749161414802, -88), (0.003825986525043845, -124), (0.037239786237478256, 45),
             (0.010350476950407028, -123), (0.10187260806560516, -13)],
}
#: also checked: where XNNPACK's tanh follows glibc's tanhf, not the correctly rounded value
#: (tanhf(-0.38066086) = -0.36328128; -0.36328125 would be an exact tie, 46.5 steps of 1/128)
LUT_PINNED = {"LOGISTIC": [], "TANH": [(0.0026252472307533026, 35)]}


@pytest.mark.parametrize("op,out", [("LOGISTIC", (1 / 256, -128)), ("TANH", (1 / 128, 0))])
def test_lut_xnnpack_where_its_table_differs_from_litert(op, out):
    """XNNPACK's float-built tables (``xnnpack_float_lut``: half to even, zero point added in float,
    correctly rounded sigmoid / the C library's tanhf), on every input code of input quantizations
    where they differ from LiteRT's (expf-based, half away from zero)."""
    from intq.kernels.litert.logistic import litert_float_lut
    from intq.kernels.xnnpack.logistic import xnnpack_float_lut
    from intq.qmath import QuantParams

    out_qp = QuantParams(np.float32([out[0]]), np.array([out[1]]), np.int8)
    for s_in, zi in LUT_DIFFERENCES[op] + LUT_PINNED[op]:
        in_qp = QuantParams(np.float32([s_in]), np.array([zi]), np.int8)
        differs = not np.array_equal(xnnpack_float_lut(in_qp, out_qp, op.lower()),
                                     litert_float_lut(in_qp, out_qp, op.lower()))
        assert differs or (s_in, zi) in LUT_PINNED[op]
        graph = single_op_graph(op, [tensor("x", (256,), scale=s_in, zero_point=zi)],
                                [tensor("y", (256,), scale=out[0], zero_point=out[1])])
        assert_matches_oracles(graph, {"x": np.arange(-128, 128).astype(np.int8)}, targets=("litert-ref", "xnnpack"),
                               context=f"{op} s_in={s_in} zi={zi}", optimized=False)


def test_sum_float32_both_targets():
    """LiteRT's optimized SUM (float32, half away from zero) and XNNPACK's (float32, half to even):
    150 models, half on power-of-two scales where exact ties are common."""
    rng = np.random.default_rng(18)
    for i in range(150):
        rank = int(rng.integers(2, 5))
        shape = tuple(int(d) for d in rng.integers(1, 7, size=rank))
        pool = rank - 1 if i % 5 else rank  # four in five leave the innermost axis (XNNPACK's rdsum path)
        axes = sorted(int(a) for a in rng.choice(pool, size=int(rng.integers(1, pool + 1)), replace=False))
        keep = bool(i % 2)
        out = tuple(1 if d in axes else n for d, n in enumerate(shape)) if keep else \
            tuple(n for d, n in enumerate(shape) if d not in axes)
        if i % 2:
            s_in = float(2.0 ** -rng.integers(1, 8))
            s_out = float(s_in * 2.0 ** rng.integers(-1, 5))
        else:
            s_in = float(np.float32(10 ** rng.uniform(-2, 0)))
            s_out = float(np.float32(s_in * 10 ** rng.uniform(-0.5, 1.5)))
        zi, zo = (int(v) for v in rng.integers(-128, 128, 2))
        graph = single_op_graph("SUM", [tensor("x", shape, scale=s_in, zero_point=zi),
                                        tensor("axis", (len(axes),), np.int32, data=np.array(axes, np.int32))],
                                [tensor("y", out, scale=s_out, zero_point=zo)], {"keep_dims": keep})
        x = rng.integers(-128, 128, shape).astype(np.int8)
        assert_matches_oracles(graph, {"x": x}, targets=("litert-ref",), context=f"SUM {i}")


#: (input scale, zero point, beta, row) where LiteRT's optimized float32 SOFTMAX / LOG_SOFTMAX
#: differ from the fixed-point reference kernel (tools/probe_litert_rounding.py softmax: about 1
#: random model in 4,000 for SOFTMAX, 1 in 1,500 for LOG_SOFTMAX); the first SOFTMAX row is the
#: one found in a TensorFlow-converter CNN (126 at index 7 where the reference gives 125)
FLOAT_SOFTMAX_ROWS = {
    "SOFTMAX": [
        (0.2359921932220459, 6, 1.0, [-91, 7, 11, 26, 13, -59, -3, 46, 9, -56]),
        (0.21321292221546173, -85, 1.0, [68, -76, -69, -117, 77, 81, 118, -105, 92, 123, -94, -52]),
        (0.07747307419776917, 35, 1.0, [36, 7, -86, -115]),
        (0.08250770717859268, -14, 1.0, [-88, -37, -43, -121]),
        (0.07736910134553909, -33, 2.0, [-25, -7, -116, -26, -75, 74, -67, -105, -17, 57, -112, 73, -62, 4, 98,
                                         -26, -105]),
        (0.06891530007123947, 19, 0.5, [12, 107, 28, -42, 98, 127, -49, 89]),
        (0.09408841282129288, 60, 2.6557159423828125, [-43, -54, -98, 122, 112, -19, 20, 89, -37]),
        (1.0711915493011475, -57, 0.5, [-19, -27, -74, 32, -87, -93, 89, -40, 105, 115, -113, -111, 23, -64, -79,
                                        5, 64, 113, -119, 109, 88, 44, 81, -16, 87, -92, -88, 41, -1, 70, -41,
                                        -46, -24, -91, -34, -89, -86]),
    ],
    "LOG_SOFTMAX": [
        (0.10643353313207626, 1, 1.0, [-32, 89, -110, -116, -39, 101, 6, -41, -114, -44, -77, -39, -47, -48, 44,
                                       53, -87, -7, -22, -49, -116, -108, 49]),
        (0.04218263551592827, -3, 1.0, [57, 54, -9, -108, 40, -55, 106, -47, 33, -62, 104, 71, -110, 19, -47,
                                        -112, 98]),
        (0.1262689232826233, 101, 1.0, [35, -72, -24, 21, -121, -80, 66, -86, -8, -4, -59, -90, -15, 41, -77, -88,
                                        -39, -101, -124, -20, 40, -83]),
        (0.14422203600406647, 30, 1.0, [-121, -125, -62, 88, 29, -66, -103, -86, 97, 88, -36, 28, -115, -86, -89,
                                        87, 57, -101, 35, -22]),
        (0.2512444853782654, 85, 1.0, [-82, 0, 40, -9, 69, 125, 26, -75, 90, -124, 22, 64, -96, 62, -105, -110,
                                       -14, -16, 2, 95, -8, -70, 85, -100, 43, -2, -87, -70, 25, 31, -58, -10,
                                       -85, -11, -22, 107, -66, 29, 70]),
    ],
}


@pytest.mark.parametrize("op", sorted(FLOAT_SOFTMAX_ROWS))
def test_softmax_float32_path_where_it_differs_from_the_reference(op):
    """LiteRT's optimized int8 SOFTMAX / LOG_SOFTMAX (float32 table, sum, reciprocal or log; the
    ``litert-opt`` and ``xnnpack`` targets) on rows where their result differs from the fixed-point
    reference kernel's: each runtime matched, and the two targets really disagree there."""
    out = {"SOFTMAX": (1 / 256, -128), "LOG_SOFTMAX": (16 / 256, 127)}[op]
    for s, zp, beta, row in FLOAT_SOFTMAX_ROWS[op]:
        x = np.array([row], np.int8)
        graph = single_op_graph(op, [tensor("x", x.shape, scale=s, zero_point=zp)],
                                [tensor("y", x.shape, scale=out[0], zero_point=out[1])],
                                {"beta": beta} if op == "SOFTMAX" else None)
        got = assert_matches_oracles(graph, {"x": x}, targets=("litert-ref", *OPT), context=f"{op} s={s} zp={zp}",
                                     optimized=False)
        assert not np.array_equal(got["litert-ref"]["y"], got["litert-opt"]["y"]), (op, s, zp, row)


def _transpose_conv_ties(per_channel: bool, act: str, kernel: int, stride: int, padding: str):
    """A tie-heavy TRANSPOSE_CONV: unit weights, ``s_in = s_out = 1``, ``M = s_w`` with few significant
    bits, 11 output channels (8 vector channels and a 3-channel scalar tail in LiteRT's optimized
    output stage); the accumulators (sums of up to ``ceil(kernel / stride)^2`` inputs plus a bias)
    land on exact ties of the right shift."""
    s_w = np.array([0.75, 0.5, 0.25, 0.125, 3 / 16, 5 / 32, 7 / 64, 9 / 16, 3 / 8, 3 / 32, 11 / 1024], np.float32)
    c = s_w.size
    scales, axis = (s_w, 0) if per_channel else (s_w[:1], None)
    h = 4
    out_hw = h * stride if padding == "SAME" else (h - 1) * stride + kernel
    bias = ((np.arange(c) - c // 2) * 37).astype(np.int32)
    graph = single_op_graph("TRANSPOSE_CONV", [
        tensor("output_shape", None, np.int32, data=np.array([1, out_hw, out_hw, c], np.int32)),
        tensor("w", None, data=np.ones((c, kernel, kernel, 1), np.int8), scale=scales, axis=axis, narrow=True),
        tensor("x", (1, h, h, 1), scale=1.0, zero_point=0),
        tensor("b", None, np.int32, data=bias, scale=scales, axis=axis)],
        [tensor("y", (1, out_hw, out_hw, c), scale=1.0, zero_point=0)],
        {"padding": padding, "stride_h": stride, "stride_w": stride, "fused_activation_function": act})
    return graph


def test_transpose_conv_ties_follow_each_target():
    """LiteRT's optimized TRANSPOSE_CONV (reference accumulators; channels [0, 8 floor(C/8)) rounded
    half up, the rest half away) and XNNPACK's (float32, half to even; SAME with a kernel smaller
    than the stride declined, then LiteRT's optimized kernel) on tie-heavy layers: each target
    equals its runtime, and the targets really differ there."""
    rng = np.random.default_rng(19)
    differ = {"litert-opt": 0, "xnnpack": 0}
    for per_channel in (True, False):
        for act in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            for kernel, stride, padding in ((3, 2, "SAME"), (2, 2, "VALID"), (1, 2, "SAME"), (3, 1, "SAME")):
                graph = _transpose_conv_ties(per_channel, act, kernel, stride, padding)
                x = rng.integers(-128, 128, (1, 4, 4, 1)).astype(np.int8)
                got = assert_matches_oracles(graph, {"x": x}, targets=("litert-ref", *OPT), optimized=False,
                                             context=f"TRANSPOSE_CONV ties k={kernel} s={stride} {padding} {act}")
                for t in differ:
                    differ[t] += not np.array_equal(got["litert-ref"]["y"], got[t]["y"])
    assert differ["litert-opt"] >= 5 and differ["xnnpack"] >= 15, differ  # measured: 6 and 20 of 32


#: (s_in, s_out, Z_in, Z_out, N, sum) where XNNPACK's float fold of the input zero point
#: (``nearbyint(float32(sum) * S + float32(Z_out - float32(N Z_in) * S))``) and an integer one
#: (``rint(float32(sum - N Z_in) * S + Z_out)``) give different outputs (tools/probe_litert_rounding.py
#: reduce: about 1 random parameter set in 150 for MEAN, 1 in 60 for SUM, has such a sum)
XNNPACK_REDUCE_FOLDS = {
    "MEAN": [(0.92916339635849, 0.6234908699989319, -93, 2, 27, -2665),
             (0.03896018862724304, 0.030758021399378777, 113, -65, 8, 844),
             (0.022194096818566322, 0.09667155146598816, -16, 100, 22, 750),
             (0.04241030290722847, 0.020265625789761543, 55, 24, 35, 1348),
             (0.08510386943817139, 0.09351642429828644, 25, 8, 9, 942)],
    "SUM": [(0.07491309940814972, 0.1186542734503746, 63, 52, 32, 1898),
            (0.04596871882677078, 0.05165017023682594, -49, -38, 24, -1126),
            (0.01325029507279396, 0.01892903819680214, -43, -16, 9, -392),
            (0.026728512719273567, 0.045232951641082764, -116, 34, 22, -2585),
            (0.13876621425151825, 0.3643326759338379, 125, 17, 17, 1806)],
}


def _values_summing_to(total: int, n: int) -> np.ndarray:
    """``n`` int8 values whose sum is ``total`` (|total| <= 127 n)."""
    q, r = divmod(total, n)
    return (np.full(n, q) + (np.arange(n) < r)).astype(np.int8)


@pytest.mark.parametrize("op", sorted(XNNPACK_REDUCE_FOLDS))
def test_xnnpack_reduce_folds_the_input_zero_point_in_float(op):
    """XNNPACK's MEAN / SUM where folding ``N Z_in`` in float and in integers differ, through both of
    its paths: the innermost axis reduced (rsum) and an outer axis reduced (rdsum)."""
    for s_in, s_out, zi, zo, n, total in XNNPACK_REDUCE_FOLDS[op]:
        row = _values_summing_to(total, n)
        for shape, axis, x in (((2, n), 1, np.stack([row, row[::-1]])), ((n, 3), 0, np.stack([row] * 3, axis=1))):
            out = (shape[1 - axis],)
            graph = single_op_graph(op, [tensor("x", shape, scale=s_in, zero_point=zi),
                                         tensor("axis", (1,), np.int32, data=np.array([axis], np.int32))],
                                    [tensor("y", out, scale=s_out, zero_point=zo)], {"keep_dims": False})
            assert_matches_oracles(graph, {"x": x}, targets=("xnnpack",), optimized=False,
                                   context=f"{op} axis={axis} s_in={s_in} N={n} sum={total}")


def test_resize_bilinear_xnnpack_eleven_bit_weights():
    """XNNPACK's int8 RESIZE_BILINEAR (11-bit weights from float32 coordinates, ``(acc + 2^21) >> 22``)
    on 123 random geometries — up- and downscales, every coordinate mode, tiny inputs upscaled far
    (which LiteRT's reference kernel cannot run, XNNPACK can) — against LiteRT's XNNPACK; the
    reference's 10-bit interpolation gives different values on many of them."""
    import intq

    rng = np.random.default_rng(20)
    differ = beyond_reference = 0
    for i in range(123):
        n, h, w, c = 1 + i % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 5))
        out_h, out_w = (int(v) for v in rng.integers(1, 24, size=2))
        if i >= 120:  # one pixel stretched to 70: the reference's integer coordinate passes the image
            h, w, out_h, out_w = 1, 1, 1, 70
        mode = i % 3  # align_corners / half_pixel_centers / legacy (neither)
        attrs = {"align_corners": mode == 0, "half_pixel_centers": mode == 1}
        s, zp = float(np.float32(10 ** rng.uniform(-2, 0))), int(rng.integers(-128, 128))
        graph = single_op_graph("RESIZE_BILINEAR", [tensor("x", (n, h, w, c), scale=s, zero_point=zp),
                                                    tensor("size", None, np.int32, data=np.array([out_h, out_w], np.int32))],
                                [tensor("y", (n, out_h, out_w, c), scale=s, zero_point=zp)], attrs)
        x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        got = assert_matches_oracles(graph, {"x": x}, targets=("xnnpack",), optimized=False,
                                     context=f"RESIZE_BILINEAR {i} {(h, w)}->{(out_h, out_w)} {attrs}")
        try:
            reference = intq.Interpreter(graph, target="litert-ref")
        except KernelError:  # the reference kernel would read outside the image
            beyond_reference += 1
            continue
        reference.run({"x": x})
        differ += not np.array_equal(reference.tensors()["y"], got["xnnpack"]["y"])
    assert differ >= 80 and beyond_reference >= 1, (differ, beyond_reference)  # measured: 106 and 1
