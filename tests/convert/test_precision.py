"""Mixed precision (issue 13): a YOLO-style output concat of boxes (0..320) and class scores (0..1)
loses the scores in int8; kept in int16, or computed in a float island from the class sigmoid to
the output (by choice or under an SQNR budget), they come back, and the file runs in LiteRT and
TFLite Micro equal to intq on every tensor, the float island's included."""

import json

import numpy as np
import pytest

import intq
from intq.calibration import calibrate, reconcile_ranges
from intq.convert import ConversionError
from intq.convert.precision import float_island, float_nodes, int16_tensors, load_precision
from intq.ptq.precision import island_candidates, mismatched_joins
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


def _equal_in_runtimes(q, feed, at_least: int = 10):
    """Every tensor intq and the runtime both have equal, in LiteRT BUILTIN_REF and TFLite Micro; at
    least ``at_least`` of them, the outputs among them."""
    blob = intq.export_tflite(q)
    for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
        theirs = oracle(blob, [feed[n] for n in q.inputs])["tensors"]
        it = intq.Interpreter(q, target=target)
        it.run(feed)
        mine = it.tensors()
        common = [k for k in mine if k in theirs]
        assert len(common) >= at_least and set(q.outputs) <= set(common), target
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
    with pytest.raises(ConversionError, match="the pattern 'cv3.*' matches no node"):
        int16_tensors(fg, {"cv3.*": "int16"})
    assert int16_tensors(fg, {"Conv_0": "int16"}) == {"f"}  # a layer alone
    assert int16_tensors(fg, {"Conv_[05]": "int16"}) == {"f", "c0"}
    with pytest.raises(ConversionError, match="neither a node nor a tensor"):
        int16_tensors(fg, {"nope": "int16"})
    with pytest.raises(ConversionError, match="must be one of int8, int16"):
        int16_tensors(fg, {"cat": "int4"})
    f32 = np.float32
    from onnx import helper

    nodes = [helper.make_node("Concat", ["x", "x"], ["c"], axis=1), helper.make_node("Conv", ["c", "w"], ["out"])]
    inner = simplify(intq.load(_onnx(nodes, {"w": np.ones((2, 2, 1, 1), f32)}, (1, 1, 4, 4), ["out"])))
    assert int16_tensors(inner, {"c": "int16"}) == {"c"}  # a join inside the graph: alone, int8 after it
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("LogSoftmax", ["c"], ["out"], axis=1)]
    soft = simplify(intq.load(_onnx(nodes, {"w": np.ones((2, 1, 1, 1), f32)}, (1, 1, 4, 4), ["out"])))
    name = soft.nodes[1].name
    with pytest.raises(ConversionError, match=f"'{name}' is a LogSoftmax, which intq cannot convert to int16"):
        int16_tensors(soft, {name: "int16"})
    with pytest.raises(ConversionError, match="is a LogSoftmax"):  # a pattern is checked node by node
        int16_tensors(soft, {"*": "int16"})
    assert int16_tensors(fg, {"cat": "int8"}) == frozenset()
    (tmp_path / "p.json").write_text(json.dumps({"cat": "int16"}))
    (tmp_path / "p.txt").write_text("# the detector's output\nConcat_7 = int16\n")
    assert load_precision(tmp_path / "p.json") == {"cat": "int16"}
    assert load_precision(tmp_path / "p.txt") == {"Concat_7": "int16"}
    assert int16_tensors(fg, load_precision(tmp_path / "p.txt")) == {"cat", "out"}
    (tmp_path / "bad.txt").write_text("Concat_7 int16\n")
    with pytest.raises(ConversionError, match="bad.txt:1: expected NAME=int16"):
        load_precision(tmp_path / "bad.txt")


def test_a_float_island_at_the_class_sigmoid_brings_back_the_scores_and_runs_equal(yolo):
    fg, calib, evals, ref = yolo
    q = intq.quantize(fg, calib, precision={"Sigmoid_6": "float"})
    boxes, classes = _rows_db(q, evals, ref)
    assert boxes >= 37 and classes >= 38  # int8: 3.6 dB; int16 concat: 38.4 dB
    assert q.metadata["float_nodes"] == ("Sigmoid_6", "Concat_7", "Reshape_8")
    float_ops = [(n.op_type, q.tensors[n.outputs[0]].dtype.name) for n in q.nodes if n.op_type != n.op_type.upper()]
    assert float_ops == [("Sigmoid", "float32"), ("Concat", "float32"), ("Reshape", "float32")]
    dequantized = {n.inputs[0] for n in q.nodes if n.op_type == "DEQUANTIZE"}
    assert len(dequantized) == 2 and q.tensors[q.outputs[0]].qparams is None  # the island's two int8 inputs
    from ai_edge_litert.interpreter import Interpreter

    blob = intq.export_tflite(q)
    ops = Interpreter(model_content=blob)._get_ops_details()
    names = [op["op_name"] for op in ops]
    after = names[names.index("DEQUANTIZE"):]  # the island: float builtins after the first DEQUANTIZE
    assert [op for op in after if op not in ("DEQUANTIZE", "TRANSPOSE")] == ["LOGISTIC", "CONCATENATION", "RESHAPE"]
    read_back = [n.op_type for n in intq.load(blob).nodes]
    assert [op for op in read_back if op != op.upper()] == ["Sigmoid", "Concat", "Reshape"]
    _equal_in_runtimes(q, evals[0])


def test_target_sqnr_adds_a_float_island_when_int16_is_not_enough(yolo):
    fg, calib, evals, ref = yolo
    assert [n.name for n in island_candidates(fg)] == ["Sigmoid_6", "Sigmoid_3"]  # smallest island first
    q16 = intq.quantize(fg, calib, target_sqnr=30)
    assert q16.metadata["float_nodes"] == ()  # int16 reaches it: no island
    q = intq.quantize(fg, calib, target_sqnr=40)  # int16 gives 37.5 on the calibration samples: not enough
    # the island swallows the join
    assert "Sigmoid_6" in q.metadata["float_nodes"] and "cat" not in q.metadata["int16_tensors"]
    assert _rows_db(q, evals, ref)[1] >= 38


def test_the_class_branch_convolution_in_int16_before_a_float_island(yolo):
    """The island's int8 input carries the class conv's int8 noise (39.8 dB); that conv in int16
    (16x8 CONV_2D: int16 in and out, int8 weights, int64 bias, QUANTIZE int8 -> int16 before it and
    the island's DEQUANTIZE of int16 after it) removes most of it, by choice or under a budget; the
    file runs in LiteRT and TFLite Micro equal to intq on every tensor."""
    fg, calib, evals, ref = yolo
    island = intq.quantize(fg, calib, precision={"Sigmoid_6": "float"})
    q = intq.quantize(fg, calib, precision={"Sigmoid_6": "float", "Conv_5": "int16"})
    assert q.metadata["int16_tensors"] == ("c0",)
    (_, classes_island), (boxes, classes) = _rows_db(island, evals, ref), _rows_db(q, evals, ref)
    assert classes_island < 40 and classes > 41.5 and boxes > 37  # measured 39.8 -> 42.1 dB
    conv = next(n for n in q.nodes if n.name == "Conv_5")
    assert [q.tensors[t].dtype.name for t in conv.inputs] == ["int16", "int8", "int64"]
    assert q.tensors[conv.outputs[0]].dtype == np.int16 and q.tensors[conv.outputs[0]].qparams.tensor_zero_point == 0
    requant = next(n for n in q.nodes if n.outputs[0] == conv.inputs[0])
    assert requant.op_type == "QUANTIZE" and q.tensors[requant.inputs[0]].dtype == np.int8
    assert [q.tensors[n.inputs[0]].dtype.name for n in q.nodes if n.op_type == "DEQUANTIZE"] == ["int16", "int8"]
    _equal_in_runtimes(q, evals[0])
    whole = intq.quantize(fg, calib, precision={"*": "int16"})  # every node: 16x8 MUL with an int16 constant too
    kinds = {(n.op_type, whole.tensors[n.outputs[0]].dtype.name) for n in whole.nodes}
    assert {k for k in kinds if k[0] in ("CONV_2D", "LOGISTIC", "MUL", "CONCATENATION")} == \
        {("CONV_2D", "int16"), ("LOGISTIC", "int16"), ("MUL", "int16"), ("CONCATENATION", "int16")}
    assert min(_rows_db(whole, evals, ref)) > 43.5  # 44.0 dB class rows; 41.3 with the input through int8
    first = whole.nodes[0]  # its only reader is int16: the float input is quantized straight to int16
    assert first.op_type == "QUANTIZE" and whole.tensors[first.outputs[0]].dtype == np.int16
    assert [n.op_type for n in whole.nodes].count("QUANTIZE") == 2  # and once more: the scores onto the concat's grid
    _equal_in_runtimes(whole, evals[0])
    # under a budget: islands alone reach 39.x on the calibration samples; the growth adds the layers
    # writing the islands' inputs (both heads' last convs), then leaves int8 those the target does not need
    auto = intq.quantize(fg, calib, target_sqnr=41)
    assert auto.metadata["int16_tensors"] == ("b0", "c0") and _rows_db(auto, evals, ref)[1] > 41.5
    assert intq.quantize(fg, calib, target_sqnr=40).metadata["int16_tensors"] == ("b0",)  # the box conv suffices


def test_float_island_errors_name_the_node_and_the_rule(yolo):
    fg = yolo[0]
    with pytest.raises(ConversionError, match="float island from Conv 'Conv_5' reaches Conv 'Conv_5'"):
        float_nodes(fg, {"Conv_5": "float"})
    assert [n.name for n in float_island(fg, next(n for n in fg.nodes if n.name == "Sigmoid_3"))] == \
        ["Sigmoid_3", "Mul_4", "Concat_7", "Reshape_8"]
    f32 = np.float32
    from onnx import helper

    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Conv", ["s", "w"], ["out"])]
    inner = simplify(intq.load(_onnx(nodes, {"w": np.ones((2, 1, 1, 1), f32)}, (1, 1, 4, 4), ["out"])))
    with pytest.raises(ConversionError, match="float island from Conv .*reaches Conv .*bit for bit"):
        float_nodes(inner, {next(n.name for n in inner.nodes if n.op_type == "Conv"): "float"})
    # an island whose result a convolution reads is closed by a QUANTIZE (DEQUANTIZE -> LOGISTIC -> QUANTIZE);
    # target_sqnr's search still tries only the islands that end at the outputs
    assert float_nodes(inner, {"s": "float"}) == {next(n.name for n in inner.nodes if n.op_type == "Sigmoid")}
    assert island_candidates(inner) == []


@pytest.mark.slow
def test_nudenet_yolov8_head_in_a_float_island_runs_equal_in_litert_and_tflm():
    """nudenet's YOLOv8n (third-party corpus; AGPL, so only in the local cache of
    tools/build_corpus.py): its class scores on photo crops are nearly all below 1/256 and all
    below 0.5, so int8 reads them as 0; a float island from the class sigmoid gives them back (their logits within the int8
    logits' noise), and the exported file, with the class branch in 16x8, has a float output equal to LiteRT's and
    TFLM's bit for bit."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tools"))
    sys.path.insert(0, str(root / "benchmarks"))
    from accuracy import _logit, _photo_crops
    from build_corpus import DEFAULT_CACHE

    path = DEFAULT_CACHE / "models" / "nudenet_320n.onnx"
    if not path.exists():
        pytest.skip(f"{path} not built (tools/build_corpus.py --only nudenet_320n)")
    g = intq.load(str(path), input_shapes={"images": (1, 3, 320, 320)})
    calib = [{"images": x[None]} for x in _photo_crops(4, (320, 320), 2)]
    x = {"images": _photo_crops(1, (320, 320), 1)}
    ref = intq.Interpreter(g).run(x)["output0"][:, 4:]
    assert np.quantile(ref, 0.99) < 1 / 256 and ref.max() < 0.5  # no detection on these crops
    q8 = intq.quantize(g, calib, method="mse")  # the output concat's int8 step (boxes up to 320) is ~1.25
    assert np.all(intq.Interpreter(q8).run(x)["output0"][:, 4:] == 0)
    # the island, and the class branch's convolutions and SiLUs in 16x8 (a glob over node names)
    q = intq.quantize(g, calib, method="mse", precision={"/model.22/Sigmoid": "float", "/model.22/cv3.*": "int16"})
    assert q.metadata["float_nodes"] == ("/model.22/Sigmoid", "/model.22/Concat_25")
    assert len(q.metadata["int16_tensors"]) == 15  # 3 scales x (3 convs + 2 SiLUs)
    assert sum(n.op_type == "CONV_2D" and q.tensors[n.outputs[0]].dtype == np.int16 for n in q.nodes) == 9
    blob = intq.export_tflite(q)
    for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
        ours = intq.Interpreter(q, target=target).run(x)["output0"]
        theirs = oracle(blob, [x["images"]])["outputs"][0]
        assert theirs.dtype == np.float32 and np.array_equal(theirs, ours), target
    got = ours[:, 4:].astype(np.float64)
    f, n = _logit(ref.astype(np.float64)), _logit(got)
    assert got.min() > 0 and 10 * np.log10(np.sum(f * f) / np.sum((f - n) ** 2)) > 25  # logits: 30+ dB


def test_int16_fully_connected_layers_run_equal():
    """Gemm nodes in int16: 16x8 FULLY_CONNECTED (int16 in and out, int8 weights, int64 bias, the
    fused ReLU), the int8 input requantized once; outputs equal LiteRT's and TFLite Micro's."""
    from onnx import helper

    f32, rng = np.float32, np.random.default_rng(0)
    nodes = [helper.make_node("Flatten", ["x"], ["fl"]), helper.make_node("Gemm", ["fl", "w", "b"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["r"]), helper.make_node("Gemm", ["r", "w2"], ["out"], transB=1)]
    weights = {"w": rng.normal(0, 1, (8, 16)).astype(f32), "b": rng.normal(0, 1, 8).astype(f32),
               "w2": rng.normal(0, 1, (3, 8)).astype(f32)}
    fg = simplify(intq.load(_onnx(nodes, weights, (1, 1, 4, 4), ["out"])))
    calib = [{"x": rng.normal(0, 1, (1, 1, 4, 4)).astype(f32)} for _ in range(8)]
    q = intq.quantize(fg, calib, precision={"Gemm_*": "int16"})
    fcs = [n for n in q.nodes if n.op_type == "FULLY_CONNECTED"]
    assert len(fcs) == 2 and all([q.tensors[t].dtype.name for t in n.inputs] == ["int16", "int8", "int64"] for n in fcs)
    assert [n.op_type for n in q.nodes].count("QUANTIZE") == 2  # float -> int8 at the input, int8 -> int16 once
    blob = intq.export_tflite(q)
    for target, oracle in (("litert-ref", run_litert), ("tflite", run_tflm)):
        theirs = oracle(blob, [calib[0]["x"]])["outputs"][0]
        assert np.array_equal(theirs, intq.Interpreter(q, target=target).run(calib[0])["out"]), target
