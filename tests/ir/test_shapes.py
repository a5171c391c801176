"""Static shape inference (intq.ir.shapes) gives the shapes and dtypes running the graph gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intq
from intq.ir.shapes import SHAPE_RULES, infer_shapes, unknown_shapes
from intq.passes import static_shapes
from intq.runtime import infer_shapes as measured_shapes
from intq.runtime.float_ops import FLOAT_OPS
from intq.testing.torch_models import build


def test_every_float_operator_has_a_shape_rule():
    """A new float operator needs its rule (intq/ir/shapes.py), or its outputs keep the importer's shapes."""
    assert set(SHAPE_RULES) == set(FLOAT_OPS), sorted(set(SHAPE_RULES) ^ set(FLOAT_OPS))


def _models():
    yield "digits", intq.load("intq/data/digits_cnn.onnx", input_shapes={"image": (1, 1, 8, 8)})
    for arch in ("mobilenet_v2", "mobilenet_v3_small", "resnet18", "tiny_yolo"):
        yield arch, intq.load(build(arch), example_inputs=(torch.zeros(1, 3, 32, 32),))
    yield "ppocr_cls_mobile_v2", intq.load("tests/fixtures/corpus/ppocr_cls_mobile_v2.onnx",
                                           input_shapes={"x": (1, 3, 48, 192)})


@pytest.mark.parametrize("name, graph", list(_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_static_shapes_equal_the_measured_ones(name, graph):
    static = static_shapes(graph)
    assert unknown_shapes(static) == []
    measured = measured_shapes(static)
    for t in static.tensors.values():
        m = measured.tensors[t.name]
        assert (t.shape, t.dtype) == (m.shape, m.dtype), t.name


def test_a_shape_that_depends_on_data_stays_unknown_and_a_contradiction_names_the_node():
    from intq.errors import GraphError
    from intq.ir import Graph, Node, Tensor

    x = Tensor("x", np.float32, (2, 3))
    g = Graph([Node("NonZero", "nz", ("x",), ("i",)), Node("Relu", "relu", ("x",), ("y",))],
              {"x": x, "i": Tensor("i", np.int64, None), "y": Tensor("y", np.float32, None)}, ("x",), ("i", "y"))
    shaped = infer_shapes(g)
    assert shaped.tensors["i"].shape == (2, None) and shaped.tensors["y"].shape == (2, 3)
    assert unknown_shapes(shaped) == ["i"]  # measured by the pipeline (intq.pipeline.load_float)
    w = Tensor("w", data=np.zeros((4, 5), np.float32))
    bad = Graph([Node("MatMul", "mm", ("x", "w"), ("z",))], {"x": x, "w": w, "z": Tensor("z", np.float32, None)},
                ("x",), ("z",))
    with pytest.raises(GraphError, match=r"node 'mm' \(MatMul\): shapes \[2, 3\] and \[4, 5\] do not multiply"):
        infer_shapes(bad)
