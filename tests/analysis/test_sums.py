"""Exact, mergeable sums: evaluation and comparison reduced over shards equal one pass bit for bit."""

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import intq
from intq.analysis.compare import compare, compare_runs, comparison_report
from intq.analysis.evaluate import evaluate, evaluate_runs, pair_outputs
from intq.analysis.sums import ExactSum
from intq.calibration import iter_batches
from intq.passes import simplify
from intq.testing.digits import load_split

finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, max_size=40), st.randoms(use_true_random=False))
def test_exact_sum_is_the_correctly_rounded_real_sum_in_any_order_and_grouping(values, rnd):
    exact = sum((Fraction(v) for v in values), Fraction(0))
    try:
        expected = float(exact)
    except OverflowError:
        expected = math.inf if exact > 0 else -math.inf
    assert ExactSum().value() == 0.0
    one = ExactSum()
    for v in values:
        one.add(v)
    assert one.value() == expected
    shuffled = list(values)
    rnd.shuffle(shuffled)
    cut = rnd.randint(0, len(shuffled))
    a, b = ExactSum(), ExactSum()
    for v in shuffled[:cut]:
        a.add(v)
    for v in shuffled[cut:]:
        b.add(v)
    assert (a + b) == one and (b + a).value() == expected
    assert pickle.loads(pickle.dumps(a + b)) == one


def test_exact_sum_differs_from_a_running_float_sum_where_that_one_rounds():
    values = [1.0, 1e-16, 1e-16, -1.0]
    assert sum(values) == 0.0  # 1 + 1e-16 rounds back to 1, twice: the small terms are lost
    s = ExactSum()
    for v in values:
        s.add(v)
    assert s.value() == 2e-16  # the real sum, rounded once
    assert ExactSum(1e308).add(1e308).value() == math.inf  # past float64: inf, as a float sum would say
    assert math.isnan(ExactSum(math.inf).add(-math.inf).add(1.0).value())
    assert ExactSum(-math.inf).add(5.0).value() == -math.inf


@pytest.fixture(scope="module")
def digits():
    g = simplify(intq.load("intq/data/digits_cnn.onnx", input_shapes={"image": (1, 1, 8, 8)}))
    (x_train, _), (x_test, y_test) = load_split()
    q = intq.quantize(g, table=intq.calibrate(g, [x[None] for x in x_train[:64]], "minmax"))
    return g, q, [x[None] for x in x_test[:200]], y_test[:200]


def _shards(runs, cuts):
    bounds = [0, *cuts, len(runs)]
    return [runs[a:b] for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("target", ["tflite", "litert-ref"])
def test_evaluation_sums_of_shards_merge_into_the_one_pass_numbers(digits, target):
    g, q, xs, ys = digits
    runs = list(iter_batches(xs, g, 16))  # the runs evaluate makes of xs at batch_size 16
    whole = evaluate(g, q, xs, ys, target=target, batch_size=16)
    fi, qi = intq.Interpreter(g), intq.Interpreter(q, target=target)
    pairs = pair_outputs(g, q)
    for cuts in ([3], [1, 5, 9], [12]):
        parts = [evaluate_runs(fi, qi, shard, pairs) for shard in _shards(runs, cuts)]
        merged = parts[0]
        for p in parts[1:]:
            merged = merged.merge(p)
        ev = merged.result(ys, graph=g)
        assert ev.samples == whole.samples == 200 and ev.rows == whole.rows
        assert (ev.float_accuracy, ev.int_accuracy) == (whole.float_accuracy, whole.int_accuracy)
        assert ev.outputs == whole.outputs  # SQNR, max error, agreement: bit for bit


def test_comparison_sums_of_shards_merge_into_the_one_pass_report(digits):
    g, q, xs, ys = digits
    runs = list(iter_batches(xs, g, 16))
    whole = compare(g, q, xs, batch_size=16, labels=ys)
    fi, qi = intq.Interpreter(g), intq.Interpreter(q)
    for cuts in ([2], [4, 7, 8]):
        parts = [compare_runs(fi, qi, shard) for shard in _shards(runs, cuts)]
        merged = parts[0]
        for p in parts[1:]:
            merged = merged.merge(p)
        report = comparison_report(g, q, merged, "tflite", labels=ys)
        assert report.rows == whole.rows and report.samples == whole.samples
        assert report.accuracy == whole.accuracy and report.labelled_rows == whole.labelled_rows == 200
        assert dict(report.output_agreement) == dict(whole.output_agreement)
        assert report.details.keys() == whole.details.keys()
        for k, d in report.details.items():
            w = whole.details[k]
            assert (d.float_range, d.clip, d.position, d.histogram) == (w.float_range, w.clip, w.position, w.histogram)
            assert all(np.array_equal(getattr(d, a), getattr(w, a)) for a in ("channel_low", "channel_high"))
