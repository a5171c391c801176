"""Elementwise kernels against LiteRT's reference kernels and TensorFlow Lite Micro.

For each of ADD, SUB, MUL, MAXIMUM, MINIMUM, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL,
NOT_EQUAL, RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, PRELU and HARD_SWISH: 200 random single-op
models (shapes with broadcasting — scalars, size-1 dims, ranks 0 to 6 —, scales over orders of
magnitude, zero points at the extremes, every fused activation), every output equal to both
oracles'. Where LiteRT and TFLM prepare differently (float32 or double multipliers, RELU6's
rescale), searched-for cases show each target following its own runtime. Exhaustive cases run every int8 input (every 256 x 256 pair for ADD, SUB and MUL).
TFLM has no RELU_N1_TO_1: that op is checked against LiteRT for both targets. Then the
contract: inputs a kernel refuses raise KernelError naming the node.
"""

import numpy as np
import pytest

import intq
from intq.runtime.oracles.litert import run_litert
from intq.export.tflite_writer import to_tflite_bytes
from intq.kernels import KernelError, Requant, Runtime, Target

from .harness import assert_matches_oracles, single_op_graph, tensor

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
N_CASES = 200
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


# ------------------------------------------------------------------------------ generators

def _scale(rng, lo, hi) -> float:
    return float(np.float32(10 ** rng.uniform(lo, hi)))


def _zero_point(rng) -> int:
    if rng.random() < 0.4:
        return int(rng.choice([-128, 127, -127, 126, 0]))
    return int(rng.integers(-128, 128))


def _shape(rng, max_rank=4, min_rank=0) -> tuple[int, ...]:
    rank = int(rng.integers(min_rank, max_rank + 1))
    return tuple(int(d) for d in rng.integers(1, 6 if rank <= 4 else 4, size=rank))


def _broadcast_pair(rng, max_rank=6) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: equal, a scalar, size-1 dims, dropped leading dims."""
    out = _shape(rng, max_rank)
    kind = rng.integers(0, 4)
    if kind == 0:
        return out, out

    def thin(shape):
        keep = int(rng.integers(0, len(shape) + 1))  # drop leading dims
        s = list(shape[len(shape) - keep:])
        for i in range(len(s)):
            if rng.random() < 0.4:
                s[i] = 1
        return tuple(s)

    if kind == 1:
        pair = (out, ()) if rng.random() < 0.5 else ((), out)
    elif kind == 2:
        pair = (out, thin(out)) if rng.random() < 0.5 else (thin(out), out)
    else:
        pair = thin(out), thin(out)
    return pair if pair != ((), ()) else ((), (1,))


def _values(rng, shape) -> np.ndarray:
    x = rng.integers(-128, 128, size=shape).astype(np.int8)
    if x.size >= 8 and rng.random() < 0.3:  # the extremes, which saturate
        flat = x.reshape(-1)
        flat[: 4] = [-128, 127, -128, 127]
    return x


def _operand(name, shape, values, scale, zero_point):
    """A rank-0 operand is a constant (the oracle runners cannot feed 0-d inputs); others are inputs."""
    if shape == ():
        return tensor(name, None, data=values, scale=scale, zero_point=zero_point), {}
    return tensor(name, shape, scale=scale, zero_point=zero_point), {name: values}


def _binary_operands(rng, shapes, scales, zero_points):
    (a, fa), (b, fb) = (_operand(n, sh, _values(rng, sh), s, z)
                        for n, sh, s, z in zip("ab", shapes, scales, zero_points))
    return [a, b], fa | fb


def _check(graph, feeds, context, targets=("litert-ref", "tflite")):
    assert_matches_oracles(graph, feeds, targets=targets, context=context)


# ------------------------------------------------------------------------------ ADD, SUB, MUL

def _arith_case(rng, op, i):
    sa_shape, sb_shape = _broadcast_pair(rng)
    s_a, s_b = _scale(rng, -4, 1), _scale(rng, -4, 1)  # independent: up to 10^5 apart
    if op == "MUL":
        # above 1e-8: 6 / s_y must fit int32 for the fused RELU6 bound (TFLite refuses it otherwise).
        # |a b| reaches 2^14: s_y >= 30 s_a s_b keeps most products inside the int8 range (informative
        # outputs); a quarter of the models keep output scales that saturate
        ratio = rng.uniform(-2.5, 2) if i % 4 == 3 else rng.uniform(1.5, 3)
        s_y = float(np.float32(max(s_a * s_b * 10 ** ratio, 1e-8)))
    else:
        s_y = float(np.float32(max(s_a, s_b) * 10 ** rng.uniform(-1.5, 1.5)))
    zp = [_zero_point(rng) for _ in range(3)]
    inputs, feeds = _binary_operands(rng, (sa_shape, sb_shape), (s_a, s_b), zp[:2])
    graph = single_op_graph(op, inputs, [tensor("y", np.broadcast_shapes(sa_shape, sb_shape), scale=s_y,
                                                zero_point=zp[2])],
                            {"fused_activation_function": ACTIVATIONS[i % 4]})
    return graph, feeds


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_random_arithmetic_models(op):
    rng = np.random.default_rng({"ADD": 1, "SUB": 2, "MUL": 3}[op])
    for i in range(N_CASES):
        _check(*_arith_case(rng, op, i), context=f"{op} case {i}")


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("scales", [(0.05, 0.05, 0.1, 40.0), (0.003, 0.8, 0.02, 0.3), (1.7, 0.0001, 0.5, 300.0)])
def test_every_int8_pair(op, scales):
    """Both inputs cover all 256 x 256 pairs (broadcast [256, 1] against [1, 256]). MUL's output
    scale is ``s_a * s_b * k`` (k = 0.3: a multiplier above 1, a left shift)."""
    s_a, s_b, s_y, k = scales
    if op == "MUL":
        s_y = s_a * s_b * k
    for act, zps in zip(ACTIVATIONS, [(0, 0, 0), (-128, 127, 5), (127, -128, -128), (3, -7, 127)]):
        graph = single_op_graph(op, [tensor("a", (256, 1), scale=s_a, zero_point=zps[0]),
                                     tensor("b", (1, 256), scale=s_b, zero_point=zps[1])],
                                [tensor("y", (256, 256), scale=s_y, zero_point=zps[2])],
                                {"fused_activation_function": act})
        _check(graph, {"a": ALL_INT8.reshape(256, 1), "b": ALL_INT8.reshape(1, 256)}, f"{op} {scales} {act}")


# ------------------------------------------------------------------------------ MAXIMUM, MINIMUM

@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
def test_random_maximum_minimum_models(op):
    rng = np.random.default_rng({"MAXIMUM": 5, "MINIMUM": 6}[op])
    for i in range(N_CASES):
        sa_shape, sb_shape = _broadcast_pair(rng)
        s, zp = _scale(rng, -4, 1), _zero_point(rng)
        inputs, feeds = _binary_operands(rng, (sa_shape, sb_shape), (s, s), (zp, zp))
        graph = single_op_graph(op, inputs, [tensor("y", np.broadcast_shapes(sa_shape, sb_shape), scale=s,
                                                    zero_point=zp)])
        _check(graph, feeds, f"{op} case {i}")


# ------------------------------------------------------------------------------ comparisons

COMPARISONS = ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]


@pytest.mark.parametrize("op", COMPARISONS)
def test_random_comparison_models(op):
    rng = np.random.default_rng(10 + COMPARISONS.index(op))
    for i in range(N_CASES):
        sa_shape, sb_shape = _broadcast_pair(rng)
        s_a = _scale(rng, -4, -0.01)
        # every third case on one scale (exact equalities happen), else up to 10^4 apart
        s_b = s_a if i % 3 == 0 else _scale(rng, -4, -0.01)
        za = _zero_point(rng)
        zb = za if i % 6 == 0 else _zero_point(rng)
        inputs, feeds = _binary_operands(rng, (sa_shape, sb_shape), (s_a, s_b), (za, zb))
        graph = single_op_graph(op, inputs, [tensor("y", np.broadcast_shapes(sa_shape, sb_shape), np.bool_)])
        _check(graph, feeds, f"{op} case {i}")


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_on_every_int8_pair(op):
    for s_a, s_b, za, zb in [(0.02, 0.02, 0, 0), (0.02, 0.0201, -128, 127), (0.5, 0.003, 7, -100)]:
        graph = single_op_graph(op, [tensor("a", (256, 1), scale=s_a, zero_point=za),
                                     tensor("b", (1, 256), scale=s_b, zero_point=zb)],
                                [tensor("y", (256, 256), np.bool_)])
        _check(graph, {"a": ALL_INT8.reshape(256, 1), "b": ALL_INT8.reshape(1, 256)}, f"{op} {s_a} {s_b}")


# ------------------------------------------------------------------------------ RELU family

def _unary_graph(op, shape, s_in, z_in, s_out, z_out, attrs=None):
    return single_op_graph(op, [tensor("x", shape, scale=s_in, zero_point=z_in)],
                           [tensor("y", shape, scale=s_out, zero_point=z_out)], attrs)


def _unary_scales(rng, i):
    s_in = _scale(rng, -4, 1)
    if i % 5 == 0:
        return s_in, s_in  # the common case: one scale (TFLM's RELU6 assumes it)
    return s_in, float(np.float32(s_in * 10 ** rng.uniform(-1.5, 1.5)))


def _assert_tflite_target_equals_litert(graph, feeds, context):
    """For ops TFLM lacks: intq's default target must still compute LiteRT's reference result."""
    want = run_litert(to_tflite_bytes(graph), [feeds[n] for n in graph.inputs], resolver="ref")["outputs"][0]
    it = intq.Interpreter(graph, target="tflite")
    got = it.run(dict(feeds))[graph.outputs[0]]
    assert np.array_equal(got, want), f"{context} [tflite target vs LiteRT]: {np.argwhere(got != want)[:3].tolist()}"


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_random_relu_models(op):
    rng = np.random.default_rng({"RELU": 20, "RELU6": 21, "RELU_N1_TO_1": 22}[op])
    tflm = op != "RELU_N1_TO_1"  # TFLM has no RELU_N1_TO_1 kernel
    for i in range(N_CASES):
        shape = (256,) if i % 10 == 0 else _shape(rng, max_rank=6, min_rank=1)
        s_in, s_out = _unary_scales(rng, i)
        graph = _unary_graph(op, shape, s_in, _zero_point(rng), s_out, _zero_point(rng))
        x = ALL_INT8.copy() if shape == (256,) else _values(rng, shape)
        _check(graph, {"x": x}, f"{op} case {i}", ("litert-ref", "tflite") if tflm else ("litert-ref",))
        if not tflm:
            _assert_tflite_target_equals_litert(graph, {"x": x}, f"{op} case {i}")


def test_relu6_targets_differ_when_the_output_is_rescaled():
    """TFLM's RELU6 clamps in the input's scale; LiteRT's requantizes to the output's."""
    graph = _unary_graph("RELU6", (256,), 0.05, 3, 0.03, -5)
    outs = assert_matches_oracles(graph, {"x": ALL_INT8})
    assert not np.array_equal(outs["litert-ref"]["y"], outs["tflite"]["y"])


# ------------------------------------------------------------------------------ LEAKY_RELU, PRELU

def test_random_leaky_relu_models():
    rng = np.random.default_rng(30)
    for i in range(N_CASES):
        shape = (256,) if i % 10 == 0 else _shape(rng, max_rank=6, min_rank=1)
        s_in, s_out = _unary_scales(rng, i)
        kind = i % 4
        alpha = [float(np.float32(rng.uniform(0.0, 1.0))), float(np.float32(10 ** rng.uniform(-3, 0.5))),
                 float(np.float32(-rng.uniform(0.01, 3.0))), [0.0, 1.0, 0.2, -1.0, 0.5][i % 5]][kind]
        graph = _unary_graph("LEAKY_RELU", shape, s_in, _zero_point(rng), s_out, _zero_point(rng), {"alpha": alpha})
        x = ALL_INT8.copy() if i % 10 == 0 else _values(rng, shape)
        _check(graph, {"x": x}, f"LEAKY_RELU case {i} alpha={alpha}")


def test_leaky_relu_negative_alpha_rounds_as_the_reference():
    """A negative alpha is applied as -MBQM(v, |m|): ties differ from MBQM(v, -|m|) (v = -2, -6)."""
    graph = _unary_graph("LEAKY_RELU", (256,), 0.5, 0, 0.5, 0, {"alpha": -0.75})
    outs = assert_matches_oracles(graph, {"x": ALL_INT8})
    y = dict(zip(ALL_INT8.tolist(), outs["tflite"]["y"].tolist()))
    assert (y[-2], y[-6]) == (1, 4)  # 1.5 -> 1 and 4.5 -> 4: -round_half_up(-1.5), -round_half_up(-4.5)


def _prelu_alpha_shape(rng, shape):
    if not shape:
        return ()
    kind = rng.integers(0, 4)
    if kind == 0:
        return shape[-1:]  # per channel
    if kind == 1:
        return shape
    if kind == 2:
        return ()
    k = int(rng.integers(1, len(shape) + 1))
    return tuple(d if rng.random() < 0.6 else 1 for d in shape[-k:])


def test_random_prelu_models():
    rng = np.random.default_rng(31)
    for i in range(N_CASES):
        shape = _shape(rng, max_rank=6, min_rank=1)
        a_shape = _prelu_alpha_shape(rng, shape)
        s_in, s_out = _unary_scales(rng, i)
        s_alpha, z_alpha = _scale(rng, -3, 0), _zero_point(rng)
        alpha_values = _values(rng, a_shape)
        constant = i % 4 != 0 or a_shape == ()  # a 0-d input cannot be fed to the oracles
        alpha = (tensor("alpha", None, data=alpha_values, scale=s_alpha, zero_point=z_alpha) if constant
                 else tensor("alpha", a_shape, scale=s_alpha, zero_point=z_alpha))
        graph = single_op_graph("PRELU", [tensor("x", shape, scale=s_in, zero_point=_zero_point(rng)), alpha],
                                [tensor("y", shape, scale=s_out, zero_point=_zero_point(rng))])
        feeds = {"x": _values(rng, shape)} | ({} if constant else {"alpha": alpha_values})
        _check(graph, feeds, f"PRELU case {i}")


def test_prelu_on_every_int8_input_and_alpha():
    x = ALL_INT8.reshape(256, 1)
    alpha = ALL_INT8.reshape(1, 256)
    for s_in, s_alpha, s_out, zps in [(0.05, 0.004, 0.05, (0, 0, 0)), (0.3, 0.01, 0.02, (127, -128, -20))]:
        graph = single_op_graph("PRELU", [tensor("x", (256, 256), scale=s_in, zero_point=zps[0]),
                                          tensor("alpha", (1, 256), scale=s_alpha, zero_point=zps[1])],
                                [tensor("y", (256, 256), scale=s_out, zero_point=zps[2])])
        _check(graph, {"x": np.broadcast_to(x, (256, 256)).copy(), "alpha": alpha}, f"PRELU exhaustive {s_in}")


# ------------------------------------------------------------------------------ HARD_SWISH

def test_random_hard_swish_models():
    rng = np.random.default_rng(40)
    for i in range(N_CASES):
        shape = (256,) if i % 4 == 0 else _shape(rng, max_rank=6, min_rank=1)
        s_in = _scale(rng, -3.5, 1)
        if i % 25 == 3:  # output 2^9+ times coarser: gemmlowp's int16 RoundingDivideByPOT by >= 16
            s_out = float(np.float32(s_in * 10 ** rng.uniform(2.8, 4)))
        else:
            s_out = float(np.float32(s_in * 10 ** rng.uniform(-1.5, 1.2)))
        graph = _unary_graph("HARD_SWISH", shape, s_in, _zero_point(rng), s_out, _zero_point(rng))
        x = ALL_INT8.copy() if shape == (256,) else _values(rng, shape)
        _check(graph, {"x": x}, f"HARD_SWISH case {i}")


def test_hard_swish_tiny_input_scale():
    """An input scale below ~1.8e-7 shifts the reluish value right by >= 16 bits."""
    for s_in, s_out in [(1e-7, 1e-7), (3e-8, 1e-9), (2e-7, 5e-6)]:
        graph = _unary_graph("HARD_SWISH", (256,), s_in, 5, s_out, -3)
        _check(graph, {"x": ALL_INT8.copy()}, f"HARD_SWISH s_in={s_in}")


# ------------------------------------------------------------------------------ contract

def _binary(op, a=None, b=None, y=None, attrs=None):
    a = a or tensor("a", (2, 3), scale=0.1, zero_point=0)
    b = b or tensor("b", (2, 3), scale=0.1, zero_point=0)
    y = y or (tensor("y", (2, 3), np.bool_) if op in COMPARISONS else tensor("y", (2, 3), scale=0.1, zero_point=0))
    return single_op_graph(op, [a, b], [y], attrs)


CONTRACT_VIOLATIONS = [
    ("int16 input", lambda: _binary("ADD", a=tensor("a", (2, 3), np.int16, scale=0.1)), "int16"),
    ("per-axis input", lambda: _binary("MUL", a=tensor("a", (2, 3), scale=[0.1, 0.2, 0.3], zero_point=0, axis=1)),
     "per tensor"),
    ("shapes do not broadcast", lambda: _binary("SUB", b=tensor("b", (4,), scale=0.1)), "do not broadcast"),
    ("wrong output shape", lambda: _binary("ADD", y=tensor("y", (3, 3), scale=0.1)), "broadcast to"),
    ("ADD output scale too small", lambda: _binary("ADD", y=tensor("y", (2, 3), scale=1e-8)), "(0, 1)"),
    ("SUB output scale too small", lambda: _binary("SUB", y=tensor("y", (2, 3), scale=1e-8)), "(0, 1)"),
    ("MUL left shift overflows", lambda: _binary("MUL", y=tensor("y", (2, 3), scale=1e-7)), "left shift"),
    ("unknown fused activation", lambda: _binary("ADD", attrs={"fused_activation_function": "TANH"}), "TANH"),
    ("fused RELU6 bound beyond int32", lambda: _binary(
        "MUL", a=tensor("a", (2, 3), scale=1e-5), b=tensor("b", (2, 3), scale=1e-5),
        y=tensor("y", (2, 3), scale=1e-10), attrs={"fused_activation_function": "RELU6"}), "beyond int32"),
    ("MAXIMUM on two scales", lambda: _binary("MAXIMUM", b=tensor("b", (2, 3), scale=0.2)), "same scale"),
    ("MINIMUM zero point differs", lambda: _binary("MINIMUM", y=tensor("y", (2, 3), scale=0.1, zero_point=4)),
     "same scale"),
    ("comparison scale >= 1", lambda: _binary("LESS", a=tensor("a", (2, 3), scale=1.5)), "(0, 1)"),
    ("comparison int8 output", lambda: _binary("EQUAL", y=tensor("y", (2, 3), scale=0.1)), "bool output"),
    ("RELU output shape", lambda: single_op_graph("RELU", [tensor("x", (2, 3), scale=0.1)],
                                                  [tensor("y", (3, 2), scale=0.1)]), "shape"),
    ("RELU two inputs", lambda: single_op_graph("RELU", [tensor("x", (2,), scale=0.1), tensor("z", (2,), scale=0.1)],
                                                [tensor("y", (2,), scale=0.1)]), "1 inputs"),
    ("LEAKY_RELU alpha not a number", lambda: single_op_graph("LEAKY_RELU", [tensor("x", (2,), scale=0.1)],
                                                              [tensor("y", (2,), scale=0.1)], {"alpha": float("nan")}),
     "alpha"),
    ("PRELU alpha wider than input", lambda: single_op_graph(
        "PRELU", [tensor("x", (3,), scale=0.1), tensor("alpha", (2, 3), scale=0.1)],
        [tensor("y", (2, 3), scale=0.1)]), "input's shape"),
    ("HARD_SWISH output scale too small", lambda: single_op_graph(
        "HARD_SWISH", [tensor("x", (4,), scale=1.0)], [tensor("y", (4,), scale=0.001)]), "below 1"),
]


@pytest.mark.parametrize("name,build,fragment", CONTRACT_VIOLATIONS, ids=[c[0] for c in CONTRACT_VIOLATIONS])
def test_contract_violations_name_the_node(name, build, fragment):
    graph = build()
    node = graph.nodes[0]
    with pytest.raises(KernelError) as err:
        intq.Interpreter(graph, target="tflite")
    message = str(err.value)
    assert f"node {node.name!r} ({node.op_type})" in message and fragment in message, message


SINGLE_ROUNDING = Target("single-rounding-device", "a TFLITE_SINGLE_ROUNDING build of TFLM", Runtime.TFLM,
                         requant=Requant.SINGLE)


def test_add_follows_a_single_rounding_target():
    """Where LiteRT and TFLM agree (ADD), only the rounding matters: TFLITE_SINGLE_ROUNDING's
    MultiplyByQuantizedMultiplier is ``(x * m + 2^(30 - s)) >> (31 - s)`` at each of the 3 steps."""
    s_a, s_b, s_y, za, zb, zy = 0.03, 0.011, 0.05, 5, -9, 2
    graph = single_op_graph("ADD", [tensor("a", (256, 1), scale=s_a, zero_point=za),
                                    tensor("b", (1, 256), scale=s_b, zero_point=zb)],
                            [tensor("y", (256, 256), scale=s_y, zero_point=zy)])
    a, b = ALL_INT8.reshape(256, 1), ALL_INT8.reshape(1, 256)
    got = intq.Interpreter(graph, target=SINGLE_ROUNDING).run({"a": a, "b": b})["y"]

    def mbqm(x, real):  # big-integer reference: frexp mantissa rounded half away, one rounding
        m, e = np.frexp(real)
        m, e = int(np.floor(m * 2**31 + 0.5)), int(e)  # half away from zero (m > 0)
        return [(int(v) * m + (1 << (30 - e))) >> (31 - e) for v in np.ravel(x)]

    s_a, s_b, s_y = (float(np.float32(s)) for s in (s_a, s_b, s_y))
    twice = 2 * max(s_a, s_b)
    ra = np.array(mbqm((a.astype(np.int64) - za) << 20, s_a / twice)).reshape(256, 1)
    rb = np.array(mbqm((b.astype(np.int64) - zb) << 20, s_b / twice)).reshape(1, 256)
    want = np.clip(np.array(mbqm(ra + rb, twice / (2**20 * s_y))).reshape(256, 256) + zy, -128, 127)
    assert np.array_equal(got, want)


# ------------------------------------------------------------------------------ where the targets differ

def _pair_graph(op, s, z):
    """``op`` on every (a, b) int8 pair: a [256, 1] against b [1, 256] (PRELU: x against alpha)."""
    names = ("x", "alpha") if op == "PRELU" else ("a", "b")
    x_shape = (256, 256) if op == "PRELU" else (256, 1)
    graph = single_op_graph(op, [tensor(names[0], x_shape, scale=s[0], zero_point=z[0]),
                                 tensor(names[1], (1, 256), scale=s[1], zero_point=z[1])],
                            [tensor("y", (256, 256), scale=s[2], zero_point=z[2])])
    first = np.broadcast_to(ALL_INT8.reshape(256, 1), x_shape).copy()
    return graph, {names[0]: first, names[1]: ALL_INT8.reshape(1, 256)}


# Scales found by search where LiteRT's float32 Prepare arithmetic and TFLM's double arithmetic
# give different multipliers *and* different outputs: each target must equal its own runtime.
TARGETS_DIFFER = [
    ("MUL", lambda: _pair_graph("MUL", (0.02751387096941471, 0.002369306981563568, 0.0002598816645331681),
                                (68, -65, 93))),
    ("MUL", lambda: _pair_graph("MUL", (0.008834044449031353, 0.03262067958712578, 0.00648374343290925),
                                (-23, 99, 104))),
    ("PRELU", lambda: _pair_graph("PRELU", (0.007861267775297165, 0.009721064940094948, 0.0063172392547130585),
                                  (24, -121, 114))),
    ("PRELU", lambda: _pair_graph("PRELU", (0.004046558868139982, 0.003989345394074917, 0.005762944463640451),
                                  (120, 125, -80))),
    ("RELU", lambda: (_unary_graph("RELU", (256,), 0.2506483197212219, 0, 0.16368870437145233, 0), {"x": ALL_INT8})),
    ("RELU", lambda: (_unary_graph("RELU", (256,), 0.12400674819946289, 0, 0.4147110879421234, 0), {"x": ALL_INT8})),
    ("LEAKY_RELU", lambda: (_unary_graph("LEAKY_RELU", (256,), 0.37045326828956604, -48, 0.31931325793266296, -109,
                                         {"alpha": 1.8175559043884277}), {"x": ALL_INT8})),
    ("LEAKY_RELU", lambda: (_unary_graph("LEAKY_RELU", (256,), 0.0021318315993994474, 0, 0.006163550540804863, -35,
                                         {"alpha": 0.8011031746864319}), {"x": ALL_INT8})),
    ("HARD_SWISH", lambda: (_unary_graph("HARD_SWISH", (256,), 0.015234669670462608, -50, 0.0017178584821522236, -7),
                            {"x": ALL_INT8})),
    ("HARD_SWISH", lambda: (_unary_graph("HARD_SWISH", (256,), 0.1366124302148819, -94, 0.17418690025806427, -37),
                            {"x": ALL_INT8})),
]


@pytest.mark.parametrize("op,build", TARGETS_DIFFER, ids=[f"{c[0]}-{i}" for i, c in enumerate(TARGETS_DIFFER)])
def test_targets_follow_their_runtimes_where_the_runtimes_differ(op, build):
    graph, feeds = build()
    outs = assert_matches_oracles(graph, feeds, context=op)
    assert not np.array_equal(outs["litert-ref"]["y"], outs["tflite"]["y"]), "not a discriminating case"


# Found by search: on these scales SUB's multipliers computed in float32 (TFLM's newest source)
# change an output, and ADD with a left shift of 16 instead of 20 changes an output. Both
# runtimes compute in double with a left shift of 20.
ONE_ARITHMETIC = [
    ("SUB", (0.04224097356200218, 0.07736986130475998, 0.01926979050040245), (15, 101, 93)),
    ("SUB", (0.22383220493793488, 0.47351911664009094, 0.9462253451347351), (80, -4, -60)),
    ("ADD", (0.30416399240493774, 0.016888746991753578, 0.01092008501291275), (-20, 93, 64)),
    ("ADD", (0.03431348875164986, 0.7102170586585999, 1.772923469543457), (-65, -49, 94)),
]


@pytest.mark.parametrize("op,s,z", ONE_ARITHMETIC)
def test_add_sub_prepare_as_both_runtimes(op, s, z):
    _check(*_pair_graph(op, s, z), context=f"{op} {s}")


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "PRELU", *COMPARISONS])
def test_rank_0_operands_give_0_d_arrays(op):
    """Two scalars (the oracle runners cannot feed 0-d inputs): intq's result is a 0-d array equal
    to the oracle-checked result of the same values as [1]-shaped tensors."""
    s, z = (0.05, 0.05, 0.05), (3, 3, 3)
    results = []
    for shape in [(), (1,)]:
        names = ("x", "alpha") if op == "PRELU" else ("a", "b")
        out = tensor("y", shape, np.bool_) if op in COMPARISONS else tensor("y", shape, scale=s[2], zero_point=z[2])
        graph = single_op_graph(op, [tensor(names[0], shape, scale=s[0], zero_point=z[0]),
                                     tensor(names[1], shape, scale=s[1], zero_point=z[1])], [out])
        feeds = {names[0]: np.full(shape, 100, np.int8), names[1]: np.full(shape, -7, np.int8)}
        if shape:
            _check(graph, feeds, f"{op} [1]")
        results.append(intq.Interpreter(graph).run(feeds)["y"])
    assert isinstance(results[0], np.ndarray) and results[0].shape == ()
    assert results[0].dtype == results[1].dtype and results[0] == results[1][0]


@pytest.mark.parametrize("activation", ["NONE", "RELU6"])
def test_add_same_shape_fused_path_all_pairs(activation):
    """Equal shapes take ADD's fused single pass: every (a, b) pair of int8 values, both oracles."""
    a = np.repeat(ALL_INT8, 256).reshape(1, 256, 256, 1)
    b = np.tile(ALL_INT8, 256).reshape(1, 256, 256, 1)
    graph = single_op_graph("ADD", [tensor("a", a.shape, scale=0.031, zero_point=-7),
                                    tensor("b", b.shape, scale=0.0123, zero_point=90)],
                            [tensor("y", a.shape, scale=0.047, zero_point=-20)],
                            {"fused_activation_function": activation})
    assert_matches_oracles(graph, {"a": a, "b": b}, context=f"ADD same-shape {activation}")
