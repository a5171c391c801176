"""ONNX dims written as ``dim_value: -1`` or ``0`` (paddle2onnx, older exporters) and unnamed dims
are dynamic; ``input_shapes`` binds them, and the error for an unbound one names the fix in the
caller's language (``input_shapes=`` for Python, ``--input-shape`` on the command line)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import intq
from intq.frontends import InputShapeError, OnnxImportError

ROOT = Path(__file__).resolve().parents[2]


def _model(dims) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    for d in dims:
        dim = x.type.tensor_type.shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d  # -1 and 0 are written as values, as paddle2onnx does
        elif d:
            dim.dim_param = d
        # "" leaves the dim unnamed: neither value nor param
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "dyn", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("dims", [(-1, 3, -1, -1), (0, 3, 0, 0), ("", 3, "", ""), ("batch", 3, -1, 0)])
def test_minus_one_zero_and_unnamed_dims_are_dynamic_and_bound(dims):
    g = intq.load(_model(dims), input_shapes={"x": (1, 3, 48, 192)})
    assert g.tensors["x"].shape == (1, 3, 48, 192)
    out = intq.Interpreter(g).run({"x": -np.ones((1, 3, 48, 192), np.float32)})
    assert not np.any(out["y"])


def test_unbound_dims_say_input_shapes_in_python_and_input_shape_on_the_cli(tmp_path):
    model = _model((-1, 3, -1, -1))
    with pytest.raises(InputShapeError) as e:
        intq.load(model)
    assert isinstance(e.value, OnnxImportError)
    assert "input 'x' has dynamic dimensions ['?', '3', '?', '?']" in str(e.value)
    assert "input_shapes={'x': (1, 3, 224, 224)}" in str(e.value) and "--input-shape" not in str(e.value)
    assert "--input-shape x=1x3x224x224" in e.value.cli_message() and "input_shapes" not in e.value.cli_message()

    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    cli = subprocess.run([sys.executable, "-m", "intq.cli", "inspect", str(path)], capture_output=True, text=True,
                         cwd=ROOT)
    assert cli.returncode == 1 and "--input-shape x=1x3x224x224" in cli.stderr and "input_shapes" not in cli.stderr
    ok = subprocess.run([sys.executable, "-m", "intq.cli", "inspect", str(path), "--input-shape", "x=1x3x48x192",
                         "--json"], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr


def test_a_static_dim_still_must_match():
    with pytest.raises(InputShapeError, match=r"static shape \(None, 3, None, None\)"):
        intq.load(_model((-1, 3, -1, -1)), input_shapes={"x": (1, 4, 48, 192)})
    with pytest.raises(InputShapeError, match="rank 4"):
        intq.load(_model((-1, 3, -1, -1)), input_shapes={"x": (1, 3, 48)})
