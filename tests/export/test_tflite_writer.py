"""export_tflite / to_tflite_bytes: a Graph as builder calls; the file LiteRT runs, metadata, errors."""

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from intq.errors import IntqError
from intq.export.tflite_writer import export_tflite, to_tflite_bytes
from intq.ir import Graph, Node, Tensor
from intq.qmath import QuantParams
from intq.runtime.oracles.litert import run_litert
from intq.tflite.errors import TfliteOpError
from intq.tflite.metadata import decode
from intq.tflite.reader import metadata_bytes, read_model


def _qt(name, shape, scale, zp=0, dtype=np.int8, data=None, axis=None):
    qp = QuantParams(np.asarray(scale, np.float64).reshape(-1), np.zeros(np.size(scale), np.int64) + zp, dtype, axis)
    if data is not None:
        return Tensor(name, dtype, data=np.asarray(data, dtype), qparams=qp)
    return Tensor(name, dtype, shape, qparams=qp)


def _fc_graph(batch=1, attrs=None, bias=True) -> Graph:
    w = _qt("w", None, [0.02, 0.03], data=[[1, -2, 3], [4, 5, -6]], axis=0)
    tensors = {"x": _qt("x", (batch, 3), 0.5, -3), "w": w, "y": _qt("y", (batch, 2), 0.25, 1),
               "unused": Tensor("unused", np.int8, (1,))}
    inputs = ["x", "w"]
    if bias:
        tensors["b"] = _qt("b", None, [0.01, 0.015], dtype=np.int32, data=[100, -50], axis=0)
        inputs.append("b")
    else:
        inputs.append("")  # omitted trailing input
    node = Node("FULLY_CONNECTED", "fc", inputs, ["y"], attrs or {"fused_activation_function": "RELU"})
    return Graph([node], tensors, ["x"], ["y"], name="fc_net", metadata={"source": "test", "axes": (1, 2)})


def test_bytes_run_in_litert_and_carry_the_graph():
    data = to_tflite_bytes(_fc_graph())
    f = read_model(data)
    sub = f.model.subgraphs[0]
    assert [t.name.decode() for t in sub.tensors] == ["x", "w", "y", "b"]  # inputs first, unused tensors left out
    assert sub.name.decode() == "fc_net" and f.model.description.decode() == "intq"
    meta, names = decode(metadata_bytes(f, "intq"), f.where)
    assert meta == {"source": "test", "axes": (1, 2)} and names == ["fc"]
    x = np.array([[-128, 0, 127]], np.int8)
    y = run_litert(data, [x])["outputs"][0]
    assert y.dtype == np.int8 and y.shape == (1, 2) and (y >= 1).all()  # RELU: never below the zero point


def test_trailing_omitted_inputs_are_left_out():
    data = to_tflite_bytes(_fc_graph(bias=False))
    op = schema.ModelT.InitFromPackedBuf(data, 0).subgraphs[0].operators[0]
    assert list(op.inputs) == [0, 1]  # not [0, 1, -1]: TFLM's depthwise conv crashes on a -1 bias index


def test_errors_name_what_to_fix(tmp_path):
    with pytest.raises(IntqError, match=r"tensor 'x' has shape \(None, 3\); a .tflite needs static shapes"):
        to_tflite_bytes(_fc_graph(batch=None))
    with pytest.raises(TfliteOpError, match=r"node 'fc' \(FULLY_CONNECTED\): attributes \['kernel'\]"):
        to_tflite_bytes(_fc_graph(attrs={"kernel": 3}))
    path = tmp_path / "m.tflite"
    data = export_tflite(_fc_graph(), path)
    assert path.read_bytes() == data and not (tmp_path / "m.tflite.tmp").exists()
    with pytest.raises(IntqError, match="exists; pass overwrite=True"):
        export_tflite(_fc_graph(), path)
    assert export_tflite(_fc_graph(), path, overwrite=True) == data  # deterministic bytes
