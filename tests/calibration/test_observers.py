"""Calibration observers: ranges on known data, exact merges, state dicts, errors, degenerate data."""

import json
import math
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intq.calibration import (
    OBSERVER_METHODS,
    AlignedHistogram,
    AutoObserver,
    EntropyObserver,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MSEObserver,
    Observer,
    PercentileObserver,
    PerChannelMinMaxObserver,
    aligned_exponent,
    make_observer,
)
from intq.calibration.observers import MIN_EXPONENT, RESOLUTION_BITS
from intq.errors import IntqError, QuantizationError
from intq.qmath import choose_qparams, dequantize, quantize


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


#: Every observer whose merge is exact bit for bit and independent of the order.
EXACT_FACTORIES = {
    "minmax": lambda: MinMaxObserver(name="t"),
    "histogram": lambda: HistogramObserver(bins=256, name="t"),
    "percentile": lambda: PercentileObserver(99.0, bins=256, name="t"),
    "percentile_sym": lambda: PercentileObserver(99.9, symmetric=True, name="t"),
    "mse": lambda: MSEObserver(bins=128, steps=20, name="t"),
    "entropy": lambda: EntropyObserver(bins=512, name="t"),
    "entropy_default": lambda: EntropyObserver(name="t"),
    "auto": lambda: AutoObserver(bins=256, name="t"),
    "per_channel": lambda: PerChannelMinMaxObserver(1, name="t"),
}

ALL_FACTORIES = dict(EXACT_FACTORIES, ema=lambda: MovingAverageMinMaxObserver(0.1, name="t"))


def gaussian_with_outliers(rng, n=400_000):
    x = rng.normal(0.0, 1.0, n).astype(np.float32)
    x[rng.choice(n, 4, replace=False)] = [100.0, -100.0, 80.0, -90.0]
    return x


def random_stream(rng, n_batches=12):
    """Batches of varied shape and scale whose range keeps widening (forces many coarsenings)."""
    batches = []
    for i in range(n_batches):
        scale = 10.0 ** rng.uniform(-3, 3)
        shift = rng.choice([0.0, 0.0, 5.0 * scale, -3.0 * scale])
        shape = (int(rng.integers(1, 4)), 3, int(rng.integers(1, 50)))
        x = (rng.normal(shift, scale, shape)).astype(rng.choice([np.float32, np.float64]))
        if i % 4 == 3:
            x = np.maximum(x, 0)  # some post-ReLU batches: many exact zeros
        batches.append(x)
    return batches


def feed(obs, batches):
    for b in batches:
        obs.update(b)
    return obs


def assert_same_state(a: Observer, b: Observer):
    assert type(a) is type(b)
    assert a.state_dict() == b.state_dict()
    assert a == b
    if isinstance(a, HistogramObserver):
        ha, hb = a.histogram(), b.histogram()
        assert (ha.exponent, ha.offset) == (hb.exponent, hb.offset)
        assert np.array_equal(ha.counts, hb.counts)


def ranges_equal(ra, rb):
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(ra, rb))


# ------------------------------------------------------------------------------------------------
# ranges on known data


def test_minmax_is_the_exact_running_range(rng):
    batches = random_stream(rng)
    obs = feed(MinMaxObserver(), batches)
    lo, hi = obs.range()
    assert type(lo) is float and type(hi) is float
    assert lo == min(float(b.min()) for b in batches) and hi == max(float(b.max()) for b in batches)
    assert obs.count == len(batches)


def test_minmax_keeps_outliers_that_the_histogram_methods_clip(rng):
    x = gaussian_with_outliers(rng)
    ranges = {}
    for method in OBSERVER_METHODS:
        obs = make_observer(method, name="act")
        obs.update(x)
        ranges[method] = obs.range()
    assert ranges["minmax"] == (-100.0, 100.0)
    for method in ("percentile", "entropy"):
        lo, hi = ranges[method]
        assert -12.0 < lo < -2.0 and 2.0 < hi < 12.0, (method, ranges[method])
    # 4 outliers in 400k samples still weigh in the mean squared error: MSE clips them only partly
    lo, hi = ranges["mse"]
    assert -90.0 < lo < -2.0 and 2.0 < hi < 80.0, ranges["mse"]
    assert ranges["auto"] != ranges["minmax"]  # auto clips the outliers too


def test_auto_picks_the_candidate_of_least_expected_error(rng):
    outliers = AutoObserver(name="a")
    outliers.update(gaussian_with_outliers(rng))
    cands, scores = outliers.candidates(), outliers.scores()
    assert set(cands) == {"minmax", "percentile", "entropy", "mse"}
    assert cands["minmax"] == (-100.0, 100.0)
    best = outliers.choice()
    assert best == "mse" and scores[best] == min(scores.values()) and scores[best] < 0.6 * scores["minmax"]
    assert outliers.range() == cands[best]
    # a uniform distribution has nothing to clip: minmax (first in the tie order) or as good
    flat = AutoObserver()
    flat.update(rng.uniform(-1, 1, 200_000))
    s = flat.scores()
    assert s[flat.choice()] <= s["minmax"] and flat.range()[0] < -0.95 and flat.range()[1] > 0.95
    # the entropy candidate is one of the EntropyObserver's candidates, of nearly its least
    # divergence (auto tries every k-th candidate, at most 32, and the KL curve is flat near its minimum)
    x = np.maximum(rng.normal(0, 1, 300_000), 0) * 3
    auto, ent = AutoObserver(), EntropyObserver()
    auto.update(x)
    ent.update(x)
    cands, kl = ent.divergences()
    i = auto.candidates()["entropy"][1] / ent.histogram().width
    assert i == int(i) and int(i) in cands
    assert kl[cands == int(i)][0] <= 1.1 * kl.min() and kl[cands == int(i)][0] < np.median(kl)
    # its MSE candidate is mse's own range, so auto's expected error is never above mse's
    for data in (gaussian_with_outliers(rng), x, rng.laplace(0, 1, 100_000), rng.exponential(1, 50_000) - 0.5):
        auto, mse = AutoObserver(), MSEObserver()
        auto.update(data)
        mse.update(data)
        assert auto.candidates()["mse"] == mse.range()
        assert auto.expected_errors(*map(np.array, zip(auto.range())))[0] <= \
            auto.expected_errors(*map(np.array, zip(mse.range())))[0]
    # constant zeros: every candidate is (0, 0)
    zeros = AutoObserver()
    zeros.update(np.zeros(10))
    assert zeros.range() == (0.0, 0.0)


def test_ema_follows_the_recursion_exactly():
    # dyadic values and momentum 1/4: every step is exact in float64
    obs = MovingAverageMinMaxObserver(momentum=0.25)
    obs.update(np.array([-4.0, 8.0]))
    assert obs.range() == (-4.0, 8.0)  # the first batch initialises
    obs.update(np.array([0.0, 4.0]))
    assert obs.range() == (0.75 * -4.0 + 0.25 * 0.0, 0.75 * 8.0 + 0.25 * 4.0)
    obs.update(np.array([-8.0, 16.0], dtype=np.float32))
    assert obs.range() == (0.75 * -3.0 + 0.25 * -8.0, 0.75 * 7.0 + 0.25 * 16.0)
    last = MovingAverageMinMaxObserver(momentum=1.0)
    feed(last, [np.array([-1.0, 1.0]), np.array([2.0, 3.0])])
    assert last.range() == (2.0, 3.0)


def test_percentile_on_uniform_data(rng):
    x = rng.uniform(-1.0, 3.0, 1_000_000)
    obs = PercentileObserver(99.0)
    obs.update(x)
    lo, hi = obs.range()
    assert abs(lo - (-0.96)) < 0.01 and abs(hi - 2.96) < 0.01
    full = PercentileObserver(100.0)
    full.update(x)
    assert full.range() == (float(x.min()), float(x.max()))


def test_percentile_interpolates_linearly_within_a_bin():
    # integers 0..1023 with 2048 bins: width 1/2, integer j alone in bin 2j = [j, j + 1/2)
    obs = PercentileObserver(99.0)
    obs.update(np.arange(1024))
    h = obs.histogram()
    assert h.width == 0.5 and h.offset == 0 and h.nbins == 2047
    assert obs.quantile(0.0) == 0.0 and obs.quantile(1.0) == 1023.0
    # rank 512 reaches the end of integer 511's bin: its right edge
    assert obs.quantile(0.5) == 511.5
    # rank 512.5: half-way through integer 512's bin [512, 512.5)
    assert obs.quantile(512.5 / 1024) == 512.25
    lo, hi = obs.range()
    assert lo == obs.quantile(1 - 0.99) and hi == obs.quantile(0.99)


def test_symmetric_percentile(rng):
    x = rng.normal(0.5, 1.0, 200_000)
    plain, sym = PercentileObserver(99.9), PercentileObserver(99.9, symmetric=True)
    plain.update(x)
    sym.update(x)
    lo, hi = plain.range()
    assert sym.range() == (-max(-lo, hi), max(-lo, hi))


def test_mse_picks_the_least_error_candidate(rng):
    x = rng.normal(0.0, 1.0, 400_000)
    x[:2] = [30.0, -30.0]
    obs = MSEObserver(name="act")
    obs.update(x)
    a, b, errors = obs.candidate_errors()
    assert a.size == b.size == errors.size == 100 * 100
    assert (a[0], b[0]) == (-30.0, 30.0)  # the widest candidate first
    lo, hi = obs.range()
    best = int(np.argmin(errors))
    assert (lo, hi) == (a[best], b[best]) and lo <= 0.0 <= hi
    assert -20.0 < lo < -4.0 and 4.0 < hi < 20.0
    assert errors[best] < 0.6 * errors[0]  # clipping the rare outliers pays off


def test_mse_errors_match_a_scalar_recomputation(rng):
    x = np.concatenate([rng.exponential(1.0, 5000), -rng.exponential(0.2, 3000), [25.0]])
    obs = MSEObserver(bins=64, steps=7)
    obs.update(x)
    a, b, errors = obs.candidate_errors()
    h = obs.histogram()
    edges = h.edges()
    centres = (np.maximum(edges[:-1], x.min()) + np.minimum(edges[1:], x.max())) / 2
    for k in rng.choice(a.size, 10, replace=False):
        qp = choose_qparams(a[k], b[k], "int8")
        err = dequantize(quantize(centres, qp), qp, np.float64) - centres
        expected = float(np.sum(h.counts * err**2) / h.total)
        assert errors[k] == pytest.approx(expected, rel=1e-12)


def test_mse_coarse_to_fine_search_finds_the_exhaustive_minimum(rng):
    """range() searches coarse to fine; on tensors of four shapes it returns the exhaustive grid's
    least-error candidate (ties: the wider), or one within 0.5% of its error."""
    exact = 0
    for k in range(16):
        kind = k % 4
        if kind == 0:
            x = rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 3), 20000)
        elif kind == 1:
            x = np.maximum(rng.normal(0, 1, 20000), 0) * rng.uniform(0.5, 5)
        elif kind == 2:
            x = rng.laplace(0, 1, 20000)
            x[:3] = rng.uniform(-40, 40, 3)
        else:
            x = np.concatenate([rng.exponential(1.0, 8000), -rng.exponential(0.2, 4000), rng.uniform(-30, 60, 4)])
        obs = MSEObserver(name="t")
        obs.update(x)
        a, b, errors = obs.candidate_errors()
        best = int(np.argmin(errors))
        lo, hi = obs.range()
        found = float(obs.expected_errors(np.array([lo]), np.array([hi]))[0])
        assert found <= 1.005 * errors[best], (k, (lo, hi), (a[best], b[best]))
        exact += (lo, hi) == (a[best], b[best])
    assert exact >= 13


def test_mse_post_relu_keeps_zero_as_minimum(rng):
    x = np.maximum(rng.normal(0, 1, 100_000), 0)
    x[0] = 60.0
    obs = MSEObserver()
    obs.update(x)
    a, b, _ = obs.candidate_errors()
    assert a.size == 100 and np.all(a == 0)
    lo, hi = obs.range()
    assert lo == 0.0 and 2.0 < hi < 60.0


def test_entropy_threshold_matches_a_hand_computation():
    # |x| histogram with width 1: h = [4, 0, 2, 1, 1]; the spike at zero becomes h[1]: [0, 0, 2, 1, 1]
    x = np.array([0.5] * 4 + [-2.5, 2.5, 3.5, -4.5])
    obs = EntropyObserver(bins=8, levels=2, max_clipped=1.0)  # TensorRT's unbounded search
    obs.update(x)
    h = obs.histogram()
    assert (h.width, h.offset, h.counts.tolist()) == (1.0, 0, [4, 0, 2, 1, 1])
    assert obs.levels_used() == 2  # signed data
    cands, kl = obs.divergences()
    assert cands.tolist() == [2, 3, 4, 5]
    # i = 2: P = [0, 0 + 4], but h[0:2] is empty: Q says nothing -> inf
    assert kl[0] == np.inf
    # i = 3: P = [0, 0, 2 + 2]; groups [0, 1), [1, 3): Q = [0, 0, 2] where P > 0: Q = P -> 0
    # i = 4: P = [0, 0, 2, 1 + 1]; groups [0, 2), [2, 4): Q = [0, 0, 3/2, 3/2] = P -> 0
    assert kl[1] == 0.0 and kl[2] == pytest.approx(0.0, abs=1e-15)
    # i = 5 = N: nothing clipped; groups [0, 2) and [2, 5): Q = [0, 0, 4/3, 4/3, 4/3]
    p = np.array([2, 1, 1]) / 4
    q = np.array([1, 1, 1]) / 3
    assert kl[3] == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-12)
    assert obs.threshold() == 3.0  # the first of least divergence
    assert obs.range() == (-3.0, 3.0)
    # the default bound: no candidate may clip more than 0.1% of the values -> only i = N remains
    safe = EntropyObserver(bins=8, levels=2)
    safe.update(x)
    assert safe.divergences()[0].tolist() == [5]
    assert safe.range() == (-4.5, 3.5)


def test_entropy_keeps_a_relu6_range_despite_the_spike_at_zero(rng):
    # issue 13: a MobileNetV2 ReLU6 output, mostly zeros, the rest spread over [0, 6]: the spike
    # held the divergence and every such tensor was clipped to about [0, 1]
    x = np.where(rng.random(400_000) < 0.7, 0.0, rng.uniform(0, 6, 400_000))
    obs = EntropyObserver()
    obs.update(x)
    assert obs.levels_used() == 256  # one-sided: the whole int8 grid covers [0, t]
    lo, hi = obs.range()
    assert lo == 0.0 and hi > 5.9
    old = EntropyObserver(max_clipped=1.0, levels=128)
    old.update(x)
    assert old.range()[1] > 5.0  # the spike rule alone fixes it too


def test_entropy_never_collapses_data_away_from_zero(rng):
    # a HardSigmoid output in [0.1, 0.34] (PP-OCR's classifier) became the single value 0.1
    x = rng.uniform(0.1, 0.34, 100_000)
    obs = EntropyObserver()
    obs.update(x)
    lo, hi = obs.range()
    assert lo == pytest.approx(x.min()) and hi > 0.339
    neg = EntropyObserver()
    neg.update(-x)
    assert neg.range()[0] < -0.339 and neg.range()[1] == pytest.approx(-x.min())


def test_entropy_post_relu_and_uniform(rng):
    relu = np.maximum(gaussian_with_outliers(rng), 0)
    obs = EntropyObserver()
    obs.update(relu)
    lo, hi = obs.range()
    # one-sided: 256 levels, so the smallest candidate is 256 bins of 2**-4 (max 100 over <= 2048
    # bins) = 16; the outliers at 80 and 100 are clipped all the same
    assert obs.histogram().width == 2.0**-4 and lo == 0.0 and 2.0 < hi <= 16.0
    signed = EntropyObserver()  # signed data, 128 levels: the threshold reaches the body
    signed.update(gaussian_with_outliers(rng))
    assert 2.0 < signed.range()[1] < 12.0
    uniform = rng.uniform(-2.0, 2.0, 500_000)
    obs = EntropyObserver()
    obs.update(uniform)
    lo, hi = obs.range()
    assert lo <= -1.8 and hi >= 1.8  # nothing to clip in a uniform distribution


def test_entropy_threshold_is_interior_for_moderate_outliers(rng):
    x = rng.normal(0.0, 1.0, 400_000).astype(np.float32)
    x[:2] = [20.0, -20.0]
    obs = EntropyObserver()
    obs.update(x)
    cands, kl = obs.divergences()
    # smallest candidate: the first that clips at most 0.1% of the values (|x| > 3.29 for N(0, 1))
    w = obs.histogram().width
    assert w == 2.0**-6 and np.mean(np.abs(x) >= cands[0] * w) <= 1e-3 < np.mean(np.abs(x) >= (cands[0] - 1) * w)
    t = obs.threshold()
    assert 3.5 < t < 6.0 and kl.min() < kl[0] and kl.min() < kl[-1]
    assert obs.range() == (-t, t)


def test_per_channel_minmax(rng):
    w = rng.normal(0, 1, (8, 3, 3, 16)) * np.arange(1, 9)[:, None, None, None]
    obs = PerChannelMinMaxObserver(0, name="conv.w")
    obs.update(w)
    lo, hi = obs.range()
    assert np.array_equal(lo, w.min(axis=(1, 2, 3))) and np.array_equal(hi, w.max(axis=(1, 2, 3)))
    qp = choose_qparams(lo, hi, "int8", symmetric=True, narrow_range=True, axis=0)
    assert qp.scale.size == 8
    dw = PerChannelMinMaxObserver(3)
    dw.update(w)
    assert np.array_equal(dw.range()[1], w.max(axis=(0, 1, 2)))


# ------------------------------------------------------------------------------------------------
# exact merges


@pytest.mark.parametrize("kind", sorted(EXACT_FACTORIES))
def test_merge_equals_the_single_stream_exactly(rng, kind):
    factory = EXACT_FACTORIES[kind]
    for trial in range(4):
        batches = random_stream(rng, n_batches=int(rng.integers(3, 14)))
        if kind == "per_channel":
            batches = [b.reshape(-1, 3, b.shape[-1]) for b in batches]
        single = feed(factory(), batches)
        cuts = sorted(rng.choice(np.arange(1, len(batches)), size=int(rng.integers(1, 3)), replace=False))
        parts = [feed(factory(), batches[i:j]) for i, j in zip([0, *cuts], [*cuts, len(batches)])]
        before = [p.state_dict() for p in parts]
        merged = parts[0]
        for p in parts[1:]:
            merged = merged.merge(p)
        assert_same_state(merged, single)
        assert ranges_equal(merged.range(), single.range())
        assert [p.state_dict() for p in parts] == before  # merge is pure
        # any order, any grouping
        reverse = parts[-1]
        for p in reversed(parts[:-1]):
            reverse = reverse.merge(p)
        assert_same_state(reverse, single)
        # through JSON, as another process would ship it
        shipped = [Observer.from_state_dict(json.loads(json.dumps(p.state_dict()))) for p in parts]
        merged2 = shipped[0]
        for p in shipped[1:]:
            merged2 = merged2.merge(p)
        assert_same_state(merged2, single)


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
def test_merge_with_an_empty_observer_is_the_identity(rng, kind):
    factory = ALL_FACTORIES[kind]
    data = rng.normal(0, 1, (2, 3, 10))
    full = feed(factory(), [data, data * 2])
    assert full.merge(factory()) == full
    assert factory().merge(full) == full
    assert factory().merge(factory()) == factory()
    unnamed = type(full).from_state_dict(dict(full.state_dict(), name=None))
    assert unnamed.merge(full).name == "t"


def test_ema_merge_algebra_is_exact_in_rational_arithmetic(rng):
    c = Fraction(1, 10)
    a_stream = [Fraction(float(v)) for v in rng.normal(0, 1, 7)]
    b_stream = [Fraction(float(v)) for v in rng.normal(3, 2, 5)]

    def ema(values, start=None):
        e = start
        for v in values:
            e = v if e is None else (1 - c) * e + c * v
        return e

    ema_a, ema_b = ema(a_stream), ema(b_stream)
    sequential = ema(b_stream, start=ema_a)
    assert (1 - c) ** len(b_stream) * (ema_a - b_stream[0]) + ema_b == sequential


def test_ema_merge_is_the_sequential_stream_bit_for_bit(rng):
    """The merge replays the right-hand batches from the left EMA: equal to one observer fed the
    whole stream, for any cut, any number of parts merged in data order (left to right or as a
    tree), through JSON as another process would ship them."""
    for trial in range(20):
        batches = [rng.normal(rng.uniform(-2, 2), rng.uniform(0.1, 3), (4, 8)) for _ in range(int(rng.integers(2, 30)))]
        single = feed(MovingAverageMinMaxObserver(0.05), batches)
        cuts = sorted(set(rng.integers(1, len(batches), size=int(rng.integers(1, 4))).tolist()))
        bounds = [0, *cuts, len(batches)]
        parts = [feed(MovingAverageMinMaxObserver(0.05), batches[a:b]) for a, b in zip(bounds, bounds[1:])]
        before = [p.state_dict() for p in parts]
        merged = parts[0]
        for p in parts[1:]:
            merged = merged.merge(p)
        assert [p.state_dict() for p in parts] == before  # merge is pure
        assert_same_state(merged, single)
        assert merged.range() == single.range()
        shipped = [Observer.from_state_dict(json.loads(json.dumps(p.state_dict()))) for p in parts]
        while len(shipped) > 1:  # pairwise, keeping the order: ((a b) (c d)) ...
            shipped = [shipped[i].merge(shipped[i + 1]) if i + 1 < len(shipped) else shipped[i]
                       for i in range(0, len(shipped), 2)]
        assert_same_state(shipped[0], single)
    # where the closed form (1 - c)**n_b * (ema_a - first_b) + ema_b rounds differently (it does on
    # about half of these streams), the merge still equals the stream
    c, off = 0.05, 0
    for _ in range(50):
        batches = [rng.normal(0, 1, 6) for _ in range(12)]
        a, b = feed(MovingAverageMinMaxObserver(c), batches[:5]), feed(MovingAverageMinMaxObserver(c), batches[5:])
        closed = (1 - c) ** 7 * (a.range()[0] - float(batches[5].min())) + b.range()[0]
        off += closed != feed(MovingAverageMinMaxObserver(c), batches).range()[0]
        assert a.merge(b).range() == feed(MovingAverageMinMaxObserver(c), batches).range()
    assert off > 0


def test_ema_state_keeps_and_checks_the_per_batch_extremes(rng):
    obs = feed(MovingAverageMinMaxObserver(0.1, name="t"), [rng.normal(0, 1, 5) for _ in range(4)])
    state = obs.state_dict()
    assert len(state["state"]["batch_min"]) == len(state["state"]["batch_max"]) == 4
    bad = json.loads(json.dumps(state))
    bad["state"]["batch_max"][2] += 1.0
    with pytest.raises(QuantizationError, match="'t'.*not those of the per-batch extremes"):
        Observer.from_state_dict(bad)
    old = json.loads(json.dumps(state))
    del old["state"]["batch_min"], old["state"]["batch_max"]
    with pytest.raises(QuantizationError, match="older intq.*calibrate again"):
        Observer.from_state_dict(old)


def test_ema_merge_is_order_dependent():
    a = feed(MovingAverageMinMaxObserver(0.5), [np.array([0.0, 1.0])] * 3)
    b = feed(MovingAverageMinMaxObserver(0.5), [np.array([-4.0, 8.0])] * 3)
    assert a.merge(b).range() == (-3.5, 7.125)  # (1/2)^3 * (a - first_b) + ema_b
    assert b.merge(a).range() == (-0.5, 1.875)


def test_merge_refuses_incompatible_observers():
    a, b = MinMaxObserver(name="x"), MinMaxObserver(name="y")
    with pytest.raises(QuantizationError, match="'x'.*'y'"):
        a.merge(b)
    with pytest.raises(QuantizationError, match="MinMaxObserver with a HistogramObserver"):
        MinMaxObserver().merge(HistogramObserver())
    with pytest.raises(QuantizationError, match="different options"):
        HistogramObserver(bins=64).merge(HistogramObserver(bins=128))
    p1, p2 = PerChannelMinMaxObserver(0), PerChannelMinMaxObserver(0)
    p1.update(np.zeros((3, 2)))
    p2.update(np.zeros((4, 2)))
    with pytest.raises(QuantizationError, match="3 and 4 channels"):
        p1.merge(p2)


# ------------------------------------------------------------------------------------------------
# the aligned histogram


def test_histogram_coarsening_is_exact_against_numpy(rng):
    obs = HistogramObserver(bins=128)
    seen = []
    for scale in [1e-3, 1e-2, 0.5, 3.0, 40.0, 1e4]:  # every batch widens the range: coarsening
        x = rng.normal(scale, scale, 3000)
        x[:50] = np.round(x[:50] / scale) * scale  # values on (coarse) bin edges
        obs.update(x)
        seen.append(x)
        h = obs.histogram()
        union = np.concatenate(seen)
        expected, _ = np.histogram(union, bins=h.edges())
        assert np.array_equal(h.counts, expected)
        assert h.total == union.size and 64 < h.nbins <= 128
        assert h.edges()[0] <= union.min() and union.max() < h.edges()[-1]


def test_histogram_after_all_zero_batches(rng):
    # all zeros select the finest width 2**MIN_EXPONENT; later data coarsens by > 63 doublings
    obs = HistogramObserver(bins=64)
    obs.update(np.zeros(10))
    assert obs.histogram() == AlignedHistogram(MIN_EXPONENT, 0, [10])
    x = rng.normal(0, 1, 1000)
    obs.update(x)
    h = obs.histogram()
    union = np.concatenate([np.zeros(10), x])
    assert np.array_equal(h.counts, np.histogram(union, bins=h.edges())[0])


def test_histogram_of_float32_with_negative_subnormals():
    # a wide range makes tiny negative values underflow when scaled: they must land in bin -1
    x = np.array([-1e-45, -1e-40, 1e-45, 0.0, -0.0, 3e38, -2.5e38, -1.0], dtype=np.float32)
    obs = HistogramObserver(bins=16)
    obs.update(x)
    h = obs.histogram()
    expected, _ = np.histogram(x.astype(np.float64), bins=h.edges())
    assert np.array_equal(h.counts, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("magnitude", [False, True])
@pytest.mark.parametrize("bins", [2, 16, 2048])
def test_compiled_binning_equals_the_vectorised_floor(dtype, magnitude, bins, rng):
    """The one-pass compiled binning (observers._count_bins) gives the counts of the vectorised
    floor(ldexp(x, -k)) + bincount it replaced, on data with values on bin edges, negative values
    that underflow when scaled, subnormals and signed zeros, at every width from 2 to 2048 bins."""
    from intq.calibration.observers import _count_bins, _floor_indices, _window

    tiny = np.finfo(dtype).smallest_subnormal
    for scale in (1e-30, 1e-3, 1.0, 7.5, 1e6):
        x = (rng.standard_normal(4000) * scale).astype(dtype)
        x[:100] = np.round(x[:100] * 8 / scale) * scale / 8  # on edges of coarse bins
        x[100:110] = [-tiny, tiny, -0.0, 0.0, -tiny * 3, -scale * 1e-9, scale * 1e-9, -scale, scale, 0.0]
        values = np.abs(x) if magnitude else x
        lo, hi = float(values.min()), float(values.max())
        k, first, n = _window(0.0, hi, bins) if magnitude else _window(lo, hi, bins)
        got = np.zeros(n, np.int64)
        _count_bins(x, k, first, got, magnitude)
        want = np.bincount(_floor_indices(values, k) - first, minlength=n)
        assert np.array_equal(got, want), (scale, k)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=40),
        min_size=2,
        max_size=6,
    ),
    st.integers(2, 64),
    st.integers(1, 5),
)
def test_histogram_merge_property(batches, bins, cut):
    batches = [np.array(b, dtype=np.float32) for b in batches]
    cut = min(cut, len(batches) - 1)
    single = feed(HistogramObserver(bins), batches)
    merged = feed(HistogramObserver(bins), batches[:cut]).merge(feed(HistogramObserver(bins), batches[cut:]))
    assert_same_state(merged, single)
    h = single.histogram()
    union = np.concatenate(batches).astype(np.float64)
    assert np.array_equal(h.counts, np.histogram(union, bins=h.edges())[0])
    assert h.nbins <= bins


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e300, 1e300), st.floats(-1e300, 1e300), st.integers(2, 5000), st.floats(0, 1e300))
def test_aligned_exponent_is_minimal_and_monotone(a, b, bins, widen):
    lo, hi = min(a, b), max(a, b)
    k = aligned_exponent(lo, hi, bins)

    def nbins(k):  # computed independently, in exact rational arithmetic
        return _floor(hi, k) - _floor(lo, k) + 1

    assert nbins(k) <= bins
    m = max(abs(lo), abs(hi))
    k_floor = MIN_EXPONENT if m == 0 else max(math.frexp(m)[1] - RESOLUTION_BITS, MIN_EXPONENT)
    assert k >= k_floor and (k == k_floor or nbins(k - 1) > bins)
    assert aligned_exponent(lo - widen, hi, bins) >= k and aligned_exponent(lo, hi + widen, bins) >= k


def _floor(v, k):
    return math.floor(Fraction(v) / Fraction(2) ** k)


def test_aligned_histogram_value_semantics():
    h = AlignedHistogram(-1, -3, [1, 0, 2, 5])
    assert h.counts.flags.writeable is False
    assert h.edges().tolist() == [-1.5, -1.0, -0.5, 0.0, 0.5]
    # width 1/2 -> 1: bin indices -3, -2, -1, 0 become floor(j / 2) = -2, -1, -1, 0
    assert h.rebin(0, -2, 3) == AlignedHistogram(0, -2, [1, 2, 5])
    assert h.rebin(3, -1, 2) == AlignedHistogram(3, -1, [3, 5])
    assert h + h == AlignedHistogram(-1, -3, [2, 0, 4, 10])


# ------------------------------------------------------------------------------------------------
# state dicts


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
def test_state_dict_round_trip(rng, kind):
    factory = ALL_FACTORIES[kind]
    empty = factory()
    assert Observer.from_state_dict(json.loads(json.dumps(empty.state_dict()))) == empty
    obs = feed(factory(), [rng.normal(0, 1, (3, 3, 7)), rng.uniform(-5, 1, (2, 3, 4)).astype(np.float32)])
    text = json.dumps(obs.state_dict())
    back = type(obs).from_state_dict(json.loads(text))
    assert back == obs and back.name == "t" and back.count == 2
    assert ranges_equal(back.range(), obs.range())
    # both continue identically
    more = rng.normal(0, 3, (1, 3, 5))
    obs.update(more)
    back.update(more)
    assert back == obs
    assert len(text) < 60_000  # small state: at most `bins` counts


def test_copy_is_independent(rng):
    obs = PercentileObserver(name="t")
    obs.update(rng.normal(0, 1, 100))
    dup = obs.copy()
    assert dup == obs and dup is not obs
    dup.update(rng.normal(0, 5, 100))
    assert dup != obs and obs.count == 1
    assert repr(obs) == "PercentileObserver(name='t', percentile=99.99, symmetric=False, bins=2048, count=1)"


def test_state_dict_is_validated(rng):
    obs = HistogramObserver(bins=64, name="t")
    obs.update(rng.normal(0, 1, 1000))
    good = obs.state_dict()
    with pytest.raises(QuantizationError, match="not an observer of this kind"):
        MinMaxObserver.from_state_dict(good)
    with pytest.raises(QuantizationError, match="version"):
        Observer.from_state_dict(dict(good, version=99))
    with pytest.raises(QuantizationError, match="'t'.*aligned window"):
        Observer.from_state_dict(dict(good, state=dict(good["state"], counts=good["state"]["counts"][:-1])))
    with pytest.raises(QuantizationError, match="'t'.*aligned window"):
        Observer.from_state_dict(dict(good, state=dict(good["state"], exponent=good["state"]["exponent"] - 1)))
    bad_counts = list(good["state"]["counts"])
    bad_counts[3] = -1
    with pytest.raises(QuantizationError, match="non-negative"):
        Observer.from_state_dict(dict(good, state=dict(good["state"], counts=bad_counts)))
    with pytest.raises(QuantizationError, match="malformed"):
        Observer.from_state_dict({k: v for k, v in good.items() if k != "state"})
    with pytest.raises(QuantizationError, match="malformed"):
        Observer.from_state_dict(dict(good, count=-1))
    with pytest.raises(QuantizationError, match="expected"):
        Observer.from_state_dict(dict(good, type="Nope"))


# ------------------------------------------------------------------------------------------------
# errors and degenerate data


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_batches_raise_naming_tensor_and_batch(rng, kind, bad):
    obs = ALL_FACTORIES[kind]()
    obs.update(rng.normal(0, 1, (2, 3, 4)))
    obs.update(rng.normal(0, 1, (2, 3, 4)).astype(np.float32))
    before = obs.state_dict()
    x = rng.normal(0, 1, (2, 3, 4)).astype(np.float32)
    x[1, 2, 3] = bad
    with pytest.raises(QuantizationError, match=r"'t'.*batch 2 .*(nan|inf).*\(1, 2, 3\)") as info:
        obs.update(x)
    assert isinstance(info.value, IntqError)
    assert obs.state_dict() == before  # a failed batch leaves the state unchanged


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
def test_empty_and_non_numeric_batches_and_no_data(kind):
    obs = ALL_FACTORIES[kind]()
    with pytest.raises(QuantizationError, match="'t'.*has seen no data"):
        obs.range()
    with pytest.raises(QuantizationError, match="'t'.*batch 0 .*empty"):
        obs.update(np.zeros((0, 3)))
    with pytest.raises(QuantizationError, match="'t'.*dtype"):
        obs.update(np.array(["a", "b"]))
    with pytest.raises(QuantizationError, match="'t'.*dtype"):
        obs.update(np.ones(3, dtype=complex))
    assert obs.count == 0


def test_unnamed_tensor_messages():
    obs = MinMaxObserver()
    with pytest.raises(QuantizationError, match="unnamed tensor: calibration batch 0"):
        obs.update([1.0, float("nan")])


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
def test_all_zeros(kind):
    obs = ALL_FACTORIES[kind]()
    obs.update(np.zeros((2, 3, 5), dtype=np.float32))
    obs.update(-np.zeros((1, 3, 1)))
    lo, hi = obs.range()
    assert np.all(np.asarray(lo) == 0.0) and np.all(np.asarray(hi) == 0.0)
    qp = choose_qparams(lo, hi, axis=0 if kind == "per_channel" else None)
    assert np.all(qp.scale == 1.0)


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
@pytest.mark.parametrize("c", [0.7, -3.25, 1e-30, 123456.0])
def test_constant_and_single_element_tensors(kind, c):
    for data in (np.full((2, 3, 4), c, dtype=np.float32), np.full((1, 1, 1), c)):
        obs = ALL_FACTORIES[kind]()
        obs.update(data)
        obs.update(data)
        lo, hi = obs.range()
        c32 = float(data.reshape(-1)[0])
        if kind == "mse":
            assert (lo, hi) == (min(c32, 0.0), max(c32, 0.0))
        elif kind == "percentile_sym":
            assert (lo, hi) == (-abs(c32), abs(c32))
        else:
            assert np.all(np.asarray(lo) == c32) and np.all(np.asarray(hi) == c32)
        if isinstance(obs, HistogramObserver):
            assert np.count_nonzero(obs.histogram().counts) == 1


def test_integer_batches_are_accepted():
    obs = PercentileObserver(100.0)
    obs.update(np.arange(-5, 6, dtype=np.int8))
    assert obs.range() == (-5.0, 5.0)


def test_bad_options_raise():
    with pytest.raises(QuantizationError, match="bins"):
        HistogramObserver(bins=1)
    with pytest.raises(QuantizationError, match="bins"):
        EntropyObserver(bins=True)
    with pytest.raises(QuantizationError, match="momentum"):
        MovingAverageMinMaxObserver(0.0)
    with pytest.raises(QuantizationError, match="percentile"):
        PercentileObserver(40.0)
    with pytest.raises(QuantizationError, match="axis"):
        PerChannelMinMaxObserver(-1)
    with pytest.raises(QuantizationError, match="unsupported quantized dtype"):
        MSEObserver(dtype="float16")
    obs = PerChannelMinMaxObserver(2, name="w")
    with pytest.raises(QuantizationError, match="'w'.*no axis 2"):
        obs.update(np.zeros((3, 4)))
    obs.update(np.zeros((3, 4, 5)))
    with pytest.raises(QuantizationError, match="'w'.*batch 1 .*6 channels on axis 2, earlier batches had 5"):
        obs.update(np.zeros((3, 4, 6)))


def test_make_observer():
    for method, cls in OBSERVER_METHODS.items():
        obs = make_observer(method, name="x")
        assert type(obs) is cls and obs.name == "x"
    assert set(OBSERVER_METHODS) == {"minmax", "ema", "percentile", "mse", "entropy", "auto"}
    assert make_observer("percentile", percentile=99.9).options()["percentile"] == 99.9
    assert make_observer("ema", momentum=0.1).momentum == 0.1
    with pytest.raises(QuantizationError, match="'kl'.*'minmax', 'ema', 'percentile', 'mse', 'entropy'"):
        make_observer("kl", name="x")
    with pytest.raises(QuantizationError, match="'x'.*unknown option.*momentum.*'minmax'"):
        make_observer("minmax", name="x", momentum=0.1)


# ------------------------------------------------------------------------------------------------
# performance and memory


@pytest.mark.parametrize("cls", [MinMaxObserver, HistogramObserver, EntropyObserver, PerChannelMinMaxObserver])
def test_large_batch_update_is_vectorised(rng, cls):
    x = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    obs = cls(1) if cls is PerChannelMinMaxObserver else cls(name="big")
    t = time.perf_counter()
    obs.update(x)
    obs.update(x * 4.0)  # widens the range: coarsening
    elapsed = time.perf_counter() - t
    assert elapsed < 5.0, f"{cls.__name__}.update took {elapsed:.2f}s for 2 x 6.4M elements"
    assert len(json.dumps(obs.state_dict())) < 40_000


@pytest.mark.parametrize("kind", sorted(ALL_FACTORIES))
def test_renamed_is_the_state_dict_round_trip_and_independent(kind, rng):
    """``renamed`` (the calibration's copy of an observer for a tensor holding the same values)
    gives what the state-dict round trip gives, and later updates of either leave the other as it was."""
    batches = random_stream(rng, 4)
    if kind == "per_channel":
        batches = [np.broadcast_to(b[:1, :, :1], (1, 3, 2)).astype(b.dtype) for b in batches]
    obs = feed(ALL_FACTORIES[kind](), batches)
    ranges = obs.range()
    copy = obs.renamed("u")
    assert_same_state(copy, Observer.from_state_dict({**obs.state_dict(), "name": "u"}))
    assert copy.name == "u" and obs.name == "t"
    before = obs.state_dict()
    copy.update(batches[0] * 3)
    assert obs.state_dict() == before and ranges_equal(obs.range(), ranges)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_mse_errors_are_the_vectorised_quantize_dequantize_bit_for_bit(dtype, rng):
    """The compiled candidate errors (observers._squared_errors) equal, bit for bit, the vectorised
    ``dequantize(quantize(v, qp), qp, float64) - v`` squared and weighted that they replaced, on
    one-sided, signed and outlier-heavy histograms and on candidates clipping far inside the range."""
    from intq.calibration.observers import _MSE_CHUNK_ELEMENTS
    from intq.qmath import choose_qparams, dequantize, quantize

    for data in (gaussian_with_outliers(rng, 50_000), np.maximum(rng.normal(0.3, 1, 20_000), 0),
                 rng.uniform(-5e-3, 2e-3, 30_000), -np.abs(rng.standard_cauchy(10_000))):
        obs = MSEObserver(bins=512, steps=30, dtype=dtype)
        obs.update(data.astype(np.float32))
        lo0, hi0 = min(obs.observed_range()[0], 0.0), max(obs.observed_range()[1], 0.0)
        f = np.linspace(1.0, 0.01, 40)
        a, b = (g.reshape(-1) for g in np.meshgrid(lo0 * f, hi0 * f, indexing="ij"))
        keep = (b - a) > 1e-30
        a, b = a[keep], b[keep]
        got = obs.expected_errors(a, b)
        left, right = obs._bin_supports()
        nz = obs.histogram().counts > 0
        values = ((left + right) / 2)[nz]
        weights = obs.histogram().counts[nz] / float(obs.histogram().total)
        want = np.empty(a.size)
        chunk = max(1, _MSE_CHUNK_ELEMENTS // values.size)  # as before: BLAS's dot products depend on it
        for s in range(0, a.size, chunk):
            qp = choose_qparams(a[s:s + chunk], b[s:s + chunk], dtype, axis=0)
            grid = np.broadcast_to(values, (qp.scale.size, values.size))
            err = dequantize(quantize(grid, qp), qp, dtype=np.float64) - values
            want[s:s + chunk] = (err * err) @ weights
        assert np.array_equal(got, want)
