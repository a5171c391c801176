"""``intq.export_onnx`` and ``intq quantize -o model.onnx``: what the file holds (valid ONNX, the
integer graph's names, int8 per-channel weights, int32 biases, intq's metadata), the opset rule,
and the refusals that happen before anything is written."""

import json
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import intq
from intq.ir import Graph, Node
from intq.onnx_format import metadata
from intq.onnx_format.errors import OnnxExportError, OnnxOpError
from intq.pipeline import quantize
from intq.testing.digits import load_split

from .onnx_harness import const, q, single

DIGITS = "intq/data/digits_cnn.onnx"


@pytest.fixture(scope="module")
def digits():
    (x_train, _), (x_test, _) = load_split()
    return quantize(DIGITS, [x[None] for x in x_train[:32]], input_shapes={"image": (1, 1, 8, 8)}), x_train


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_the_file_is_the_integer_graph(digits, fmt, tmp_path):
    qg, _ = digits
    path = tmp_path / "m.onnx"
    data = intq.export_onnx(qg, path, format=fmt, portable=False)  # the weights as quantized
    assert path.read_bytes() == data
    # by default int8 QDQ is portable (onnxruntime rewrites it to uint8 on AVX2 without VNNI), QOperator exact
    assert (intq.export_onnx(qg, format=fmt).portable is not None) == (fmt == "qdq")
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    assert {o.domain or "": o.version for o in m.opset_import}[""] == 21
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    conv = next(n for n in qg.nodes if n.op_type == "CONV_2D")
    w_name, b_name = conv.inputs[1], conv.inputs[2]
    w = inits[f"{w_name}/onnx"]
    assert w.dtype == np.int8 and w.shape == qg.tensors[w_name].data.transpose(0, 3, 1, 2).shape
    assert np.array_equal(w, qg.tensors[w_name].data.transpose(0, 3, 1, 2))
    assert inits[b_name].dtype == np.int32 and np.array_equal(inits[b_name], qg.tensors[b_name].data)
    assert inits[f"{w_name}/scale"].size == w.shape[0]  # per output channel
    node_names = {n.name for n in m.graph.node}
    assert {n.name for n in qg.nodes if n.op_type in ("CONV_2D", "FULLY_CONNECTED")} <= node_names
    assert [i.name for i in m.graph.input] == list(qg.inputs)
    assert [o.name for o in m.graph.output] == list(qg.outputs)
    props = {p.key: p.value for p in m.metadata_props}
    meta, names, export = metadata.decode(props[metadata.INTQ_METADATA], str(path))
    assert names == [n.name for n in qg.nodes]
    assert export["format"] == fmt and export["target"] == "ort" and export["lowest_opset"] == 13
    assert meta["per_channel"] == qg.metadata["per_channel"]


def test_lowest_opset_and_refusals_name_the_node(digits, tmp_path):
    qg, _ = digits
    m13 = onnx.load_from_string(intq.export_onnx(qg, format="qoperator", opset=13))
    assert {o.domain or "": o.version for o in m13.opset_import}[""] == 13
    with pytest.raises(OnnxExportError, match="opset 12"):
        intq.export_onnx(qg, opset=12)
    x, y = q("x", (1, 4), 0.05, 3), q("y", (1, 4), 0.04, -2)
    hs = single("HARD_SWISH", [x], [y])
    with pytest.raises(OnnxOpError, match=r"'hard_swish'.*HardSwish.*opset >= 14"):
        intq.export_onnx(hs, opset=13)
    intq.export_onnx(hs, opset=14)
    out = tmp_path / "never.onnx"
    bad = single("LOG_SOFTMAX", [x], [q("ls", (1, 4), 16 / 256, 127)])
    with pytest.raises(OnnxOpError, match=r"'log_softmax' \(LOG_SOFTMAX\).*export_tflite"):
        intq.export_onnx(bad, out)
    assert not out.exists()
    with pytest.raises(OnnxExportError, match="format"):
        intq.export_onnx(hs, format="qlinear")
    sm = single("SOFTMAX", [x], [q("p", (1, 4), 1 / 256, -128)], {"beta": 2.0})
    with pytest.raises(OnnxOpError, match="beta"):
        intq.export_onnx(sm, out)
    assert not out.exists()
    mean = single("MEAN", [q("m", (1, 4, 4, 2), 1e-4, 0), const("axes", np.array([1, 2], np.int32))],
                  [q("o", (1, 1, 1, 2), 1e-9, 0)], {"keep_dims": True})
    with pytest.raises(OnnxOpError, match="QLinearGlobalAveragePool refuses"):
        intq.export_onnx(mean, out)
    path = tmp_path / "kept.onnx"
    path.write_bytes(b"mine")
    with pytest.raises(OnnxExportError, match="exists"):
        intq.export_onnx(hs, path)
    assert path.read_bytes() == b"mine"


def test_uint8_activations_are_the_same_reals(digits):
    qg, x_train = digits
    m = onnx.load_from_string(intq.export_onnx(qg, format="qoperator", activations="uint8"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    conv = next(n for n in qg.nodes if n.op_type == "CONV_2D")
    zp = inits[f"{conv.outputs[0]}/zero_point"]
    assert zp.dtype == np.uint8 and int(zp) == qg.tensors[conv.outputs[0]].qparams.tensor_zero_point + 128
    assert inits[f"{conv.inputs[1]}/onnx"].dtype == np.int8  # weights stay int8 (u8s8)


def test_cli_quantize_writes_onnx(tmp_path, capsys):
    """``intq quantize -o model.onnx`` (in-process: the command's code, without a second interpreter's imports)."""
    from intq.cli import main

    (x_train, _), _ = load_split()
    np.savez(tmp_path / "calib.npz", image=x_train[:32])
    args = ["quantize", DIGITS, "--calib", str(tmp_path / "calib.npz"), "--input-shape", "image=1x1x8x8",
            "--check-samples", "0", "--json"]
    out = tmp_path / "d.onnx"
    assert main([*args, "-o", str(out), "--format", "qoperator", "--opset", "13"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "onnxruntime" in result["runtimes"] and out.stat().st_size == result["bytes"]
    m = onnx.load(out)
    assert any(n.op_type == "QLinearConv" for n in m.graph.node)
    assert {o.domain or "": o.version for o in m.opset_import}[""] == 13
    assert main([*args, "-o", str(out)]) == 2 and "--force" in capsys.readouterr().err
    assert main([*args, "-o", str(tmp_path / "d.tflite"), "--format", "qdq"]) == 2
    assert "--format" in capsys.readouterr().err
    assert out.stat().st_size == result["bytes"]  # the refused runs left the file alone


def test_an_int16_graph_is_refused_before_writing(tmp_path):
    x, y = q("x", (1, 4), 0.05, 0, np.int16), q("y", (1, 4), 0.04, 0, np.int16)
    g = single("RELU", [x], [y])
    with pytest.raises(OnnxOpError, match="int16.*export_tflite"):
        intq.export_onnx(g, tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_node_names_are_kept_when_they_repeat_tensor_names():
    x, y = q("t", (1, 2, 2, 3), 0.05, 3), q("u", (1, 2, 2, 3), 0.05, 3)
    g = Graph([Node("RESHAPE", "t", ["t", "s"], ["u"], {"new_shape": (1, 2, 2, 3)})],
              {"t": x, "u": y, "s": const("s", np.array([1, 2, 2, 3], np.int32))}, ["t"], ["u"])
    m = onnx.load_from_string(intq.export_onnx(g))
    assert [n.name for n in m.graph.node] == ["t"]
