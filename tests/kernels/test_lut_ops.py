"""LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX and L2_NORMALIZATION against LiteRT's reference kernels
(``litert-ref``) and TensorFlow Lite Micro (``tflite``): every tensor equal.

Per kernel 200 random single-op models (input scales 1e-3..1, zero points often at -128 / 127),
each compared with both oracles. LOGISTIC and TANH see all 256 int8 codes in every model (their
two runtimes differ: LiteRT's float-built table vs TFLM's fixed point). SOFTMAX uses beta 1 and
others, rows of 1, 2, 10, 1000 (and other) elements; L2_NORMALIZATION gets all-zero and
near-zero rows. Then the contract: refused parameters, the runtimes' own checks and aborts, and
the fixed-point helpers against double precision.
"""

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import intq
from intq.kernels import KernelError
from intq.kernels import _fixedpoint_lut as fp
from intq.kernels.litert.logistic import litert_float_lut
from intq.qmath import QuantParams, raw

from .harness import assert_matches_oracles, single_op_graph, tensor
from .test_integer_only import _violations

CASES = 200
FIXED_OUTPUT = {  # spec 003: (scale, zero point)
    "LOGISTIC": (1 / 256, -128),
    "TANH": (1 / 128, 0),
    "SOFTMAX": (1 / 256, -128),
    "LOG_SOFTMAX": (16 / 256, 127),
    "L2_NORMALIZATION": (1 / 128, 0),
}


def _scale(rng):
    return float(np.float32(10 ** rng.uniform(-3, 0)))


def _zero_point(rng):
    return int(rng.choice([-128, 127, int(rng.integers(-128, 128))]))  # extremes two times in three


def _graph(op, shape, scale, zero_point, attrs=None):
    out_scale, out_zp = FIXED_OUTPUT[op]
    return single_op_graph(op, [tensor("x", shape, scale=scale, zero_point=zero_point)],
                           [tensor("y", shape, scale=out_scale, zero_point=out_zp)], attrs)


# --- elementwise: every int8 code in every model -------------------------------------------

ELEMENTWISE_SHAPES = [(256,), (2, 128), (4, 8, 8), (1, 16, 16, 1)]


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_elementwise_all_codes(op):
    rng = np.random.default_rng({"LOGISTIC": 11, "TANH": 12}[op])
    codes = np.arange(-128, 128, dtype=np.int8)
    for i in range(CASES):
        shape = ELEMENTWISE_SHAPES[i % len(ELEMENTWISE_SHAPES)]
        scale = _scale(rng) if i % 10 else float(np.float32(rng.choice([1e-3, 1.0, 0.5, 2.0 ** -7])))
        x = rng.permutation(codes).reshape(shape)
        assert_matches_oracles(_graph(op, shape, scale, _zero_point(rng)), {"x": x}, context=f"{op} case {i}")


# Input scales (zero point 0) where LiteRT's float32 table and TFLM's fixed point round one input
# code differently (found by a search over 20000 scales; about 1 model in 1000 has such a code).
DIFFERING = {"LOGISTIC": [0.0049248491413891315, 0.015587636269629002],
             "TANH": [0.03543390706181526, 0.01113637164235115]}


@pytest.mark.parametrize("op", sorted(DIFFERING))
def test_the_two_runtimes_differ_and_each_target_matches_its_own(op):
    codes = np.arange(-128, 128, dtype=np.int8)
    for scale in DIFFERING[op]:
        mine = assert_matches_oracles(_graph(op, (256,), scale, 0), {"x": codes}, context=f"{op} {scale}")
        assert np.sum(mine["litert-ref"]["y"] != mine["tflite"]["y"]) > 0, (op, scale)


# --- softmax family: rows of different lengths ---------------------------------------------

ROW_LENGTHS = [1, 2, 10, 1000, 3, 37, 256]


def _rows(rng, shape, zero_point):
    """Random rows: full range, a narrow band, constant rows, or one hot spike."""
    kind = rng.integers(0, 4)
    if kind == 0:
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if kind == 1:
        lo = int(rng.integers(-128, 128))
        hi = int(rng.integers(lo, min(lo + 30, 127) + 1))
        return rng.integers(lo, hi + 1, size=shape).astype(np.int8)
    if kind == 2:
        return np.full(shape, rng.integers(-128, 128), dtype=np.int8)
    x = np.full(shape, zero_point, dtype=np.int8)
    x[..., int(rng.integers(0, shape[-1]))] = rng.integers(-128, 128)
    return x


def _row_shape(rng, i):
    depth = ROW_LENGTHS[i % len(ROW_LENGTHS)]
    lead = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
    return (*lead, depth)


def _softmax_sum_fits(x, scale, beta):
    # TFLite's int8 softmax aborts when a row's sum of exps reaches 512; stay well below it
    d = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    return np.exp(np.float64(beta) * scale * d).sum(axis=-1).max() < 480


def test_softmax_random_models():
    rng = np.random.default_rng(21)
    done = 0
    while done < CASES:
        shape = _row_shape(rng, done)
        scale, zp = _scale(rng), _zero_point(rng)
        beta = float(np.float32(rng.choice([1.0, 1.0, 0.5, 2.0, 10 ** rng.uniform(-1, 1.3)])))
        x = _rows(rng, shape, zp)
        if shape[-1] >= 480 and not _softmax_sum_fits(x, scale, beta):
            continue  # would abort both runtimes (see test_flat_softmax_rows_abort_the_runtimes)
        assert_matches_oracles(_graph("SOFTMAX", shape, scale, zp, {"beta": beta}), {"x": x},
                               context=f"SOFTMAX case {done} beta={beta} scale={scale}")
        done += 1


def test_log_softmax_random_models():
    rng = np.random.default_rng(22)
    for i in range(CASES):
        shape = _row_shape(rng, i)
        zp = _zero_point(rng)
        assert_matches_oracles(_graph("LOG_SOFTMAX", shape, _scale(rng), zp), {"x": _rows(rng, shape, zp)},
                               context=f"LOG_SOFTMAX case {i}")


def test_softmax_saturated_scaling():
    # beta * scale * 2^26 above 2^31 - 1: the multiplier is capped, diff_min is 0 (one-hot output)
    x = np.array([[5, 5, 4, -128], [0, 1, 2, 3]], dtype=np.int8)
    for op, attrs in (("SOFTMAX", {"beta": 100.0}), ("LOG_SOFTMAX", None)):
        assert_matches_oracles(_graph(op, x.shape, 1.0, 0, attrs), {"x": x}, context=op)


def test_l2_normalization_random_models():
    rng = np.random.default_rng(23)
    for i in range(CASES):
        depth = ROW_LENGTHS[i % len(ROW_LENGTHS)]
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 3)), depth)[-int(rng.integers(1, 4)):]
        zp = _zero_point(rng)
        x = _rows(rng, shape, zp)
        rows = x.reshape(-1, depth)
        kind = i % 4  # some rows all at the zero point, some within one step of it
        if kind == 1:
            rows[0] = zp
        elif kind == 2:
            rows[-1] = np.clip(zp + rng.integers(-1, 2, size=depth), -128, 127)
        elif kind == 3 and depth > 1:
            rows[0] = zp
            rows[0, int(rng.integers(0, depth))] = np.clip(zp + rng.choice([-1, 1]), -128, 127)
        assert_matches_oracles(_graph("L2_NORMALIZATION", shape, _scale(rng), zp), {"x": x},
                               context=f"L2_NORMALIZATION case {i}")


# --- contract --------------------------------------------------------------------------------

WRONG_OUTPUTS = {
    "LOGISTIC": [(1 / 256, 0), (1 / 128, -128)],
    "TANH": [(1 / 128, 5), (1 / 256, 0)],
    "SOFTMAX": [(1 / 256, 0), (1 / 256 * 1.0005, -128)],
    "LOG_SOFTMAX": [(1 / 16, 0), (1 / 8, 127)],
    "L2_NORMALIZATION": [(1 / 64, 0), (1 / 128, 3)],
}


@pytest.mark.parametrize("op", sorted(FIXED_OUTPUT))
@pytest.mark.parametrize("target", ["tflite", "litert-ref"])
def test_output_parameters_are_fixed(op, target):
    attrs = {"beta": 1.0} if op == "SOFTMAX" else None
    for scale, zp in WRONG_OUTPUTS[op]:
        g = single_op_graph(op, [tensor("x", (2, 8), scale=0.05, zero_point=0)],
                            [tensor("y", (2, 8), scale=scale, zero_point=zp)], attrs)
        with pytest.raises(KernelError, match=f"'{op.lower()}'.*zero point"):
            intq.Interpreter(g, target)


@pytest.mark.parametrize("op", sorted(FIXED_OUTPUT))
def test_input_contract(op):
    attrs = {"beta": 1.0} if op == "SOFTMAX" else None
    out_scale, out_zp = FIXED_OUTPUT[op]
    y = tensor("y", (2, 8), scale=out_scale, zero_point=out_zp)
    bad_inputs = [
        tensor("x", (2, 8), np.int16, scale=0.05, zero_point=0),  # not int8
        tensor("x", (2, 8), scale=[0.05] * 8, zero_point=0, axis=1),  # per axis
        tensor("x", (2, 8)),  # not quantized
    ]
    for x in bad_inputs:
        with pytest.raises(KernelError, match=op.lower()):
            intq.Interpreter(single_op_graph(op, [x], [y], attrs))


@pytest.mark.parametrize("beta", [None, 0.0, -1.0, 1e-6])
def test_softmax_refuses_beta_the_runtimes_abort_on(beta):
    # absent beta is SoftmaxOptions' default 0; beta * scale * 2^26 must exceed 1
    attrs = None if beta is None else {"beta": beta}
    with pytest.raises(KernelError, match="beta"):
        intq.Interpreter(_graph("SOFTMAX", (2, 8), 0.01, 0, attrs))


@pytest.mark.parametrize("target", ["tflite", "litert-ref"])
def test_flat_softmax_rows_are_refused_at_run_time(target):
    g = _graph("SOFTMAX", (1, 512), 0.01, 0, {"beta": 1.0})
    with pytest.raises(KernelError, match="'softmax'.*512"):
        intq.Interpreter(g, target).run({"x": np.zeros((1, 512), np.int8)})
    # one element fewer fits: sum of exps 511
    assert_matches_oracles(_graph("SOFTMAX", (1, 511), 0.01, 0, {"beta": 1.0}), {"x": np.zeros((1, 511), np.int8)})


_ABORT_SCRIPT = """
import numpy as np
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.{module} import {runner}
from tests.kernels.harness import single_op_graph, tensor
g = single_op_graph("SOFTMAX", [tensor("x", (1, 512), scale=0.01, zero_point=0)],
                    [tensor("y", (1, 512), scale=1 / 256, zero_point=-128)], {{"beta": 1.0}})
{runner}(to_tflite_bytes(g), [np.zeros((1, 512), np.int8)])
"""


@pytest.mark.parametrize("module,runner", [("litert", "run_litert"), ("tflm", "run_tflm")])
def test_flat_softmax_rows_abort_the_runtimes(module, runner):
    # what the KernelError above stands for: TFLITE_CHECK(exponent <= 31) kills the process
    proc = subprocess.run([sys.executable, "-c", _ABORT_SCRIPT.format(module=module, runner=runner)],
                          capture_output=True, cwd=Path(__file__).parents[2], timeout=60)
    assert proc.returncode == -6, (proc.returncode, proc.stderr[-500:])  # SIGABRT


def test_l2_normalization_contract():
    g = single_op_graph("L2_NORMALIZATION", [tensor("x", (2, 8), scale=0.05, zero_point=0)],
                        [tensor("y", (2, 8), scale=1 / 128, zero_point=0)], {"fused_activation_function": "RELU"})
    with pytest.raises(KernelError, match="RELU"):
        intq.Interpreter(g)
    rank5 = _graph("L2_NORMALIZATION", (1, 1, 1, 2, 8), 0.05, 0)
    with pytest.raises(KernelError, match="rank <= 4"):
        intq.Interpreter(rank5, "tflite")  # TFLite Micro refuses rank 5; LiteRT does not
    assert_matches_oracles(rank5, {"x": np.arange(16, dtype=np.int8).reshape(1, 1, 1, 2, 8)}, targets=("litert-ref",))


def test_logistic_and_tanh_tiny_input_scale():
    for op in ("LOGISTIC", "TANH"):
        with pytest.raises(KernelError, match="2\\^-28"):
            intq.Interpreter(_graph(op, (4,), 2.0 ** -30, 0), "tflite")
        intq.Interpreter(_graph(op, (4,), 2.0 ** -30, 0), "litert-ref")  # LiteRT's float table takes it


# --- the fixed-point helpers against double precision -----------------------------------------

RUN_PATH_HELPERS = ["rescale", "rounding_half_sum", "count_leading_zeros32",
                    "_exp_on_interval_between_negative_one_quarter_and_0_excl", "exp_on_negative_values",
                    "_newton_reciprocal_of_half_denominator", "one_over_one_plus_x_for_x_in_0_1",
                    "one_minus_x_over_one_plus_x_for_x_in_0_1", "logistic", "tanh", "_saturating_add",
                    "log_x_for_x_greater_than_or_equal_to_1", "get_reciprocal", "inv_sqrt_multiplier"]
#: The primitives those helpers (and tflm_q4_table) call, whose one copy is intq.qmath.raw (DESIGN decision 7).
RAW_PRIMITIVES = ["wrap32", "srdhm", "rdbp", "mul_by_pot", "mul_by_pot_param", "mbqm"]


def test_run_path_helpers_are_integer_only():
    for module, names in ((fp, RUN_PATH_HELPERS), (raw, RAW_PRIMITIVES)):
        tree = ast.parse(inspect.getsource(module))
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        problems = {name: _violations(functions[name]) for name in names}
        assert not {k: v for k, v in problems.items() if v}, module.__name__


def test_fixed_point_functions_against_double():
    # Sanity, not exactness (the oracles settle that): gemmlowp's accuracy on its whole input range
    rng = np.random.default_rng(5)
    q5 = np.concatenate([rng.integers(-(2**31), 1, size=20000), [0, -1, -(2**26), -(2**31)]]).astype(np.int64)
    x = q5 / 2.0**26
    assert np.abs(fp.exp_on_negative_values(q5, 5) / 2.0**31 - np.exp(x)).max() < 3e-7
    q4 = rng.integers(-(2**31), 2**31, size=20000).astype(np.int64)
    x = q4 / 2.0**27
    assert np.abs(fp.logistic(q4, 4) / 2.0**31 - 1 / (1 + np.exp(-x))).max() < 1e-7
    assert np.abs(fp.tanh(q4, 4) / 2.0**31 - np.tanh(x)).max() < 2e-7
    a = rng.integers(0, 2**31, size=20000).astype(np.int64)
    assert np.abs(fp.one_over_one_plus_x_for_x_in_0_1(a) / 2.0**31 - 1 / (1 + a / 2.0**31)).max() < 1e-8
    s = rng.integers(2**19, 2**31, size=20000).astype(np.int64)  # Q12.19 sums >= 1
    assert np.abs(fp.log_x_for_x_greater_than_or_equal_to_1(s, 12, 5) / 2.0**26 - np.log(s / 2.0**19)).max() < 1e-7
    inverse, bits = fp.get_reciprocal(s, 12)
    assert np.allclose(inverse / 2.0**31 * 2.0 ** -bits.astype(np.float64), 2.0**19 / s, rtol=1e-8)
    acc = np.concatenate([rng.integers(2, 2**31, size=20000), [2, 3, 2**29 - 1, 2**29, 2**31 - 1]]).astype(np.int64)
    m, shift = fp.inv_sqrt_multiplier(acc)
    assert np.allclose(m * 2.0 ** (shift.astype(np.float64) - 31), 1 / np.sqrt(acc), rtol=2e-6)
    v = rng.integers(0, 2**32, size=20000).astype(np.int64)
    want = 32 - np.array([int(u).bit_length() for u in v])
    assert np.array_equal(fp.count_leading_zeros32(v), want) and fp.count_leading_zeros32(np.int64(0)) == 32


def test_litert_table_without_libm_matches(monkeypatch):
    # The float64-rounded fallback (no loadable C math library) builds the same tables here
    rng = np.random.default_rng(6)
    outs = {"logistic": QuantParams(np.float32(1 / 256), -128, np.int8),
            "tanh": QuantParams(np.float32(1 / 128), 0, np.int8)}
    with_libm = []
    for _ in range(100):
        qp = QuantParams(np.float32(_scale(rng)), _zero_point(rng), np.int8)
        with_libm += [(qp, t, litert_float_lut(qp, out, t)) for t, out in outs.items()]
    monkeypatch.setattr(fp, "c_math_library", lambda: None)
    for qp, t, table in with_libm:
        assert np.array_equal(litert_float_lut(qp, outs[t], t), table)
