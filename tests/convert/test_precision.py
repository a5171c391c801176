"""Mixed precision (issue 13): a YOLO-style output concat of boxes (0..320) and class scores (0..1)
loses the scores in int8; kept in int16 (by choice or under an SQNR budget) they come back, and
the file runs in LiteRT and TFLite Micro equal to intq on every tensor."""

import json

import numpy as np
import pytest

import intq
from intq.calibration import calibrate, reconcile_ranges
from intq.convert import ConversionError
from intq.convert.precision import int16_tensors, load_precision, mismatched_joins
from intq.passes import simplify
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.tflm import run_tflm

from ..analysis.test_hints import _onnx, yolo_head

RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def yolo():
    fg = simplify(intq.load(yolo_head()))
    calib = [{"x": RNG.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(8)]
    evals = [{"x": RNG.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(6)]
    fi = intq.Interpreter(fg)
    ref = np.concatenate([fi.run(s)["out"] for s in evals])
    return fg, calib, evals, ref


def _rows_db(q, evals, ref):
    """SQNR (dB) of the box rows (0-3) and the class rows (4-6) of the output."""
    it = intq.Interpreter(q)
    got = np.concatenate([it.run(s)["out"] for s in evals])

    def db(a, b):
        return 10 * np.log10(np.sum(a.astype(np.float64) ** 2) / np.sum((a.astype(np.float64) - b) ** 2))

    return db(ref[:, :4], got[:, :4]), db(ref[:, 4:], got[:, 4:])


def _equal_in_runtimes(q, feed):
    blob = intq.export_tflite(q)
    for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
        theirs = oracle(blob, [feed[n] for n in q.inputs])["tensors"]
        it = intq.Interpreter(q, target=target)
        it.run(feed)
        mine = it.tensors()
        common = [k for k in mine if k in theirs]
        assert len(common) >= 10, target
        assert [k for k in common if not np.array_equal(mine[k], theirs[k])] == [], target


def test_int16_concat_brings_back_the_class_scores_and_runs_equal(yolo):
    fg, calib, evals, ref = yolo
    boxes8, classes8 = _rows_db(intq.quantize(fg, calib), evals, ref)
    assert boxes8 > 30 and classes8 < 10  # int8: one scale of 320/255 for scores in [0, 1]
    q = intq.quantize(fg, calib, precision={"cat": "int16"})
    boxes16, classes16 = _rows_db(q, evals, ref)
    assert boxes16 >= boxes8 - 0.1 and classes16 >= 25
    assert set(q.metadata["int16_tensors"]) == {"cat", "out"}
    ops = [(n.op_type, q.tensors[n.outputs[0]].dtype.name) for n in q.nodes]
    assert ("CONCATENATION", "int16") in ops and ("QUANTIZE", "int16") in ops  # int8 -> int16 requantization
    _equal_in_runtimes(q, evals[0])


def test_target_sqnr_picks_the_mismatched_join(yolo):
    fg, calib, evals, ref = yolo
    raw = calibrate(fg, calib)
    joins = mismatched_joins(fg, raw)
    assert [n.name for n, _ in joins] == ["Concat_7"] and joins[0][1] > 100
    assert mismatched_joins(fg, reconcile_ranges(fg, raw)) == []  # the union hides it: use the raw table
    q = intq.quantize(fg, calib, target_sqnr=30)
    assert set(q.metadata["int16_tensors"]) == {"cat", "out"} and _rows_db(q, evals, ref)[1] >= 25
    assert intq.quantize(fg, calib, target_sqnr=5).metadata["int16_tensors"] == ()  # reached without int16


def test_an_int16_concat_keeps_its_inputs_ranges(yolo):
    fg, calib, _, _ = yolo
    raw = calibrate(fg, calib)
    union = reconcile_ranges(fg, raw)
    kept = reconcile_ranges(fg, raw, keep=int16_tensors(fg, {"cat": "int16"}))
    assert union["boxes"] == union["cat"] and kept["boxes"] == raw["boxes"] and kept["cat"] == union["cat"]


def test_precision_errors_name_the_layer_and_the_rule(yolo, tmp_path):
    fg = yolo[0]
    with pytest.raises(ConversionError, match="'Conv_0' is a Conv; int16 regions start at a join"):
        int16_tensors(fg, {"Conv_0": "int16"})
    with pytest.raises(ConversionError, match="neither a node nor a tensor"):
        int16_tensors(fg, {"nope": "int16"})
    with pytest.raises(ConversionError, match="must be one of int8, int16"):
        int16_tensors(fg, {"cat": "int4"})
    f32 = np.float32
    from onnx import helper

    nodes = [helper.make_node("Concat", ["x", "x"], ["c"], axis=1), helper.make_node("Conv", ["c", "w"], ["out"])]
    inner = simplify(intq.load(_onnx(nodes, {"w": np.ones((2, 2, 1, 1), f32)}, (1, 1, 4, 4), ["out"])))
    with pytest.raises(ConversionError, match="must end at the outputs"):
        int16_tensors(inner, {"c": "int16"})
    assert int16_tensors(fg, {"cat": "int8"}) == frozenset()
    (tmp_path / "p.json").write_text(json.dumps({"cat": "int16"}))
    (tmp_path / "p.txt").write_text("# the detector's output\nConcat_7 = int16\n")
    assert load_precision(tmp_path / "p.json") == {"cat": "int16"}
    assert load_precision(tmp_path / "p.txt") == {"Concat_7": "int16"}
    assert int16_tensors(fg, load_precision(tmp_path / "p.txt")) == {"cat", "out"}
    (tmp_path / "bad.txt").write_text("Concat_7 int16\n")
    with pytest.raises(ConversionError, match="bad.txt:1: expected NAME=int16"):
        load_precision(tmp_path / "bad.txt")
