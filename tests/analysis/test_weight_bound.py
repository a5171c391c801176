"""The weight-only bound (issue 13): the output SQNR int8 weights alone allow, every activation in
float; ``--target-sqnr`` says when it is below the target (no activation precision can reach it)
and when it is not (more int16 layers could); ``compare --sensitivity`` hints at it."""

import numpy as np
import pytest
from onnx import helper

import intq
from intq.analysis.hints import POOR_SQNR_DB, weight_bound_hints
from intq.analysis.weight_bound import weight_only_bound
from intq.passes import simplify

from .test_hints import _onnx

F32 = np.float32


def _huge_range_conv():
    model, data = huge_range_model()
    return simplify(intq.load(model)), data


def huge_range_model():
    """A 1x1 conv whose every output channel has one weight of 1000 on input channel 0 (whose values
    are ~1e-3, so it adds ~1) and weights ~0.5 on channels 1-7 (which carry the signal). Per channel
    int8 steps are 1000 / 127 = 7.9: every small weight rounds to 0, the output keeps only the
    channel-0 term: the bound is a few dB whatever the activations."""
    rng = np.random.default_rng(3)
    w = rng.normal(0, 0.5, (4, 8, 1, 1)).astype(F32)
    w[:, 0] = 1000.0
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["out"])]
    scale = np.array([1e-3] + [1.0] * 7, F32).reshape(1, 8, 1, 1)
    data = [{"x": (rng.normal(0, 1, (1, 8, 6, 6)) * scale).astype(F32)} for _ in range(8)]
    return _onnx(nodes, {"w": w}, (1, 8, 6, 6), ["out"]), data


def _exact_weight_hardswish():
    """A conv whose weights are integers with 127 (63.5 in channel 1: halves) as the largest in every
    output channel (int8 per channel represents them exactly: the bound is the 60 dB cap) then HardSwish, which has no 16x8 kernel (in intq nor in either runtime),
    at the output: int8 activations stay well below 60 dB and the int16 region cannot grow."""
    rng = np.random.default_rng(4)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(F32)
    w[:, 0, 0, 0] = 127.0
    w[1] = w[1] / 2  # max 63.5: exact per channel (steps of 0.5), not per tensor (steps of 1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("HardSwish", ["c"], ["out"])]
    g = simplify(intq.load(_onnx(nodes, {"w": w * F32(1e-3)}, (1, 3, 8, 8), ["out"])))
    data = [{"x": rng.normal(0, 1, (1, 3, 8, 8)).astype(F32)} for _ in range(8)]
    return g, data


def test_the_bound_is_low_when_int8_rounding_destroys_the_small_weights():
    g, data = _huge_range_conv()
    b = weight_only_bound(g, data)
    assert b.layers == 1 and b.samples == 8 and len(b["out"].channels_db) == 4
    assert b["out"].bound_db < 5  # measured 2.6 dB: the small weights' signal is gone
    # the converter's int8 model with every activation int8 is no better than the bound
    q = intq.quantize(g, data)
    it, fi = intq.Interpreter(q), intq.Interpreter(g)
    f = np.concatenate([fi.run(s)["out"] for s in data]).astype(np.float64)
    n = np.concatenate([it.run(s)["out"] for s in data]).astype(np.float64)
    assert 10 * np.log10(np.sum(f * f) / np.sum((f - n) ** 2)) < b["out"].bound_db + 1


def test_the_bound_is_the_cap_when_int8_weights_are_exact():
    g, data = _exact_weight_hardswish()
    b = weight_only_bound(g, data)
    assert b["out"].channels_db == (60.0,) * 4 and b.bound_db == 60.0
    # per tensor, channel 1's half-integer weights round to the tensor's integer steps
    per_tensor = weight_only_bound(g, data, per_channel=False)["out"].channels_db
    assert per_tensor[1] < 55 and per_tensor[0] == per_tensor[2] == per_tensor[3] == 60.0


def test_target_sqnr_below_the_bound_says_no_activation_choice_can_reach_it():
    g, data = _huge_range_conv()
    q = intq.quantize(g, data, target_sqnr=30)
    short = q.metadata["target_shortfall"]
    assert short is not None and short.target_db == 30 and [r.output for r in short.outputs] == ["out"]
    row = short.outputs[0]
    assert row.bound_db < 30 and row.reached_db < 30
    assert row.message.startswith("target 30 dB not reached on output out: best found ")
    assert "int8 weights alone cap it at" in row.message and "no int8/int16 activation choice can reach 30" in row.message
    assert row.capped_channels == (0, 1, 2, 3) and row.message.endswith("4 channels (axis 1) below 30 dB: 0-3")
    assert row.message in q.metadata["conversion_notes"]


def test_target_sqnr_above_what_int8_reaches_but_below_the_bound_names_the_blocking_ops():
    g, data = _exact_weight_hardswish()
    q = intq.quantize(g, data, target_sqnr=55)
    short = q.metadata["target_shortfall"]
    assert short is not None and len(short.outputs) == 1
    row = short.outputs[0]
    assert row.bound_db == 60.0 and row.reached_db < 55
    assert "cap" not in row.message and "more int16 layers could reach it" in row.message
    assert short.int8_ops == ("HardSwish",) and row.message.endswith("stayed int8: HardSwish") and row.capped_channels == ()


def test_a_reached_target_makes_no_claim():
    g, data = _exact_weight_hardswish()
    q = intq.quantize(g, data, target_sqnr=10)
    assert q.metadata["target_shortfall"] is None
    assert not any("not reached" in n for n in q.metadata["conversion_notes"])
    assert "target_shortfall" not in intq.quantize(g, data).metadata


def test_channel_spans():
    from intq.ptq.precision import _spans

    assert _spans((0, 4, 5, 6, 9)) == "0, 4-6, 9" and _spans(()) == ""


@pytest.mark.parametrize("per_channel, notes, expect, absent", [
    (True, (), "AdaRound (--adaround)", "per-channel"),
    (False, (), "per-channel weights or AdaRound", None),
    (True, ("AdaRound: output SQNR on 4 held-out calibration samples 1.0 -> 1.2 dB",), "QAT", "AdaRound"),
])
def test_weight_hints_never_suggest_what_is_in_use(per_channel, notes, expect, absent):
    hints = weight_bound_hints({"out": 3.0, "ok": POOR_SQNR_DB + 1}, per_channel=per_channel, notes=notes)
    assert len(hints) == 1 and hints[0].startswith("weight precision caps output out at 3.0 dB")
    assert expect in hints[0] and (absent is None or absent not in hints[0])


def test_sensitivity_report_carries_the_bound_and_its_hint():
    from intq.analysis.sensitivity import sensitivity

    g, data = _huge_range_conv()
    rep = sensitivity(g, intq.quantize(g, data), data[:2])
    assert rep.weight_only_db["out"] < 5
    assert len(rep.hints) == 1 and "weight precision caps output out" in rep.hints[0]
    assert "hint: weight precision caps output out" in rep.table()
    g2, data2 = _exact_weight_hardswish()
    assert sensitivity(g2, intq.quantize(g2, data2), data2[:2]).hints == ()
