"""intq.analysis.diff: which tensors differ between two targets, and the cause of each element."""

from fractions import Fraction

import numpy as np
import pytest

import intq
from intq.analysis.diff import DiffError, _classify, diff_targets
from intq.kernels.requantize import Requant, make_requantizer
from intq.qmath import effective_scale, multiply_by_quantized_multiplier, quantize_multiplier
from intq.testing.digits import load_split

MODEL = "intq/data/digits_cnn.onnx"


@pytest.fixture(scope="module")
def digits():
    (x_train, _), (x_test, _) = load_split()
    qg = intq.quantize(MODEL, [x[None] for x in x_train[:50]], input_shapes={"image": (1, 1, 8, 8)})
    return qg, [{"image": x[None]} for x in x_test[:200]]


def _round_half_away(v: Fraction) -> int:
    n = int(abs(v) + Fraction(1, 2))
    return n if v >= 0 else -n


def test_tflm_vs_litert_ref_on_digits_is_explained_element_by_element(digits):
    qg, samples = digits
    report = diff_targets(qg, samples, ("tflite", "litert-ref"))
    assert report.samples == len(samples) and len(report.tensors) == len(qg.nodes)
    fc = next(n for n in qg.nodes if n.op_type == "FULLY_CONNECTED")
    first = report.first_divergence
    # both runtimes share every kernel but FULLY_CONNECTED (double product vs gemmlowp): it is the origin
    assert first is not None and first.name == fc.outputs[0] and first.origin and first.op == "FULLY_CONNECTED"
    assert all(not t.origin for t in report.differing[1:])
    assert sum(first.causes.values()) == first.differing == first.origin_differing > 0
    # Recompute independently: the FC accumulator from the graph's constants and the int8 input,
    # the TFLM value (gemmlowp double rounding) and LiteRT's (round(double(acc) * M)).
    x_t, w_t, b_t = (qg.tensors[i] for i in fc.inputs)
    y_t = qg.tensors[fc.outputs[0]]
    m_real = effective_scale(x_t.qparams.scale, w_t.qparams.scale, y_t.qparams.scale)
    qm = quantize_multiplier(m_real)
    zx, zy = int(x_t.qparams.zero_point[0]), int(y_t.qparams.zero_point[0])
    ia, ib = intq.Interpreter(qg, "tflite"), intq.Interpreter(qg, "litert-ref")
    seen = {"double-vs-single": 0, "multiplier": 0, "tie": 0}
    for s in samples:
        ia.run(s)
        ib.run(s)
        a, b = ia.tensors()[y_t.name], ib.tensors()[y_t.name]
        x = ia.tensors()[x_t.name].astype(np.int64)
        assert np.array_equal(x, ib.tensors()[x_t.name])
        acc = (x - zx) @ w_t.data.astype(np.int64).T + b_t.data.astype(np.int64)
        for c in np.flatnonzero(a[0] != b[0]):
            k = int(acc[0, c])
            m, sh = int(qm.multiplier[c]), int(qm.shift[c])
            assert int(a[0, c]) == np.clip(int(multiply_by_quantized_multiplier(k, m, sh)) + zy, -128, 127)
            product = Fraction(float(np.float64(k) * m_real[c]))  # LiteRT: std::round(double(acc) * M)
            assert int(b[0, c]) == np.clip(_round_half_away(product) + zy, -128, 127)
            exact = Fraction(k * m) * Fraction(2) ** (sh - 31)
            single = _round_half_away(exact)
            if exact - (exact.numerator // exact.denominator) == Fraction(1, 2):
                seen["tie"] += 1
            elif single + zy == int(b[0, c]):
                seen["double-vs-single"] += 1
            else:
                seen["multiplier"] += 1
    assert {k: v for k, v in seen.items() if v} == dict(first.causes)


def test_same_target_twice_agrees(digits):
    qg, samples = digits
    report = diff_targets(qg, samples[:20], ("tflite", "tflite"))
    assert not report.differing and report.first_divergence is None
    assert "agree on every element" in report.table()


def test_errors():
    (x_train, _), _ = load_split()
    fg = intq.load(MODEL, input_shapes={"image": (1, 1, 8, 8)})
    with pytest.raises(DiffError, match="float graph"):
        diff_targets(fg, [{"image": x_train[:1]}])
    with pytest.raises(DiffError, match="two targets"):
        diff_targets(fg, [], ("tflite",))


def _rq(m_real, mode=Requant.DOUBLE, zp=0, lo=-128, hi=127):
    wide = lo < -128 or hi > 127
    return make_requantizer(m_real, mode, zp, lo, hi, out_dtype=np.int64 if wide else np.int8)


def test_classify_each_cause():
    double, single = _rq(0.25), _rq(0.25, Requant.SINGLE)
    # 0.25 * 6 = 1.5: an exact tie; both rounding schemes meet it
    assert _classify(6, double, single, 2, 1, 0) == "tie"
    # different multipliers: Prepare arithmetic, whatever the accumulator
    assert _classify(1000, _rq(0.1234), _rq(0.1239), 123, 124, 0) == "multiplier"
    # saturation: one result clamped to the bound while the exact value lies beyond it
    assert _classify(1000, _rq(0.25, hi=100), _rq(0.25), 100, 127, 0) == "saturation"
    # double vs single: M = 0.1234, acc = -4955 rounds to -612 twice and to -611 once (docs/arithmetic.md)
    m = _rq(0.1234, lo=-1000, hi=1000)
    m1 = _rq(0.1234, Requant.SINGLE, lo=-1000, hi=1000)
    assert int(multiply_by_quantized_multiplier(-4955, int(m.multiplier[0]), int(m.shift[0]))) == -612
    assert _classify(-4955, m, m1, -612, -611, 0) == "double-vs-single"
    # float32: acc = 2^25 + 1 becomes 2^25 in float32, so with M = 0.75 a float product gives
    # 25165824 where the exact 25165824.75 rounds to 25165825
    big = 2**25 + 1
    f = _rq(0.75, Requant.FLOAT32_RNE, lo=-(2**31), hi=2**31 - 1)
    d = _rq(0.75, lo=-(2**31), hi=2**31 - 1)
    assert int(np.rint(np.float32(np.float32(big) * np.float32(0.75)))) == 25165824
    assert _classify(big, d, f, 25165825, 25165824, 0) == "float32"
    assert _classify(big, d, f, 25165825, 25165827, 0) == "other"  # not what float32 gives
    # ruy/NEON half-up double rounding vs gemmlowp's: both round twice; the gemmlowp value -612
    # deviates from the correctly rounded -611
    up = _rq(0.1234, Requant.DOUBLE_HALF_UP, lo=-1000, hi=1000)
    assert _classify(-4955, m, up, -612, -611, 0) == "double-vs-single"
    # an unexplained pair is reported as such, never forced into a cause
    assert _classify(100, double, single, 25, 30, 0) == "other"


@pytest.mark.parametrize("name", ["residual_cnn_int8", "branchy_cnn_int8", "branchy_cnn_int8_pt"])
def test_converter_models_every_difference_has_a_cause(name):
    """TensorFlow-converter models: TFLM and LiteRT's reference kernels differ only in
    FULLY_CONNECTED (fixed point vs a double product), and every such element is explained."""
    fixtures = "tests/fixtures/tflite"
    g = intq.load(f"{fixtures}/{name}.tflite")
    x = np.load(f"{fixtures}/inputs.npz")["x"]
    report = diff_targets(g, [{g.inputs[0]: s[None]} for s in x], ("tflite", "litert-ref"))
    origins = [t for t in report.differing if t.origin]
    assert origins, "these fixtures are known to differ between the two runtimes"
    assert {t.op for t in origins} == {"FULLY_CONNECTED"}
    for t in origins:
        assert sum(t.causes.values()) == t.origin_differing > 0 and "other" not in t.causes, t.as_dict()
