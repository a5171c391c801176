"""Whole models: intq's float interpreter (after import and passes) against onnxruntime.

The architecture models shipped inside the onnx wheel (weights randomised, see
tests/onnx_helpers.py) and PyTorch-defined MobileNetV2, MobileNetV3-small, ResNet-18 and a
YOLO-style net with random weights, exported to ONNX in memory. Bound: max abs error <= 1e-4 *
max|output| on every output.
"""

import io

import numpy as np
import pytest
import torch

import intq
from intq.passes import simplify
from intq.testing.torch_models import build

from ..onnx_helpers import assert_close_to_reference, ort_session, randomized_light_model

LIGHT = ["resnet50", "shufflenet", "inception_v2", "squeezenet", "densenet121", "vgg19"]


@pytest.mark.parametrize("name", LIGHT)
def test_light_models_match_onnxruntime(name):
    model = randomized_light_model(name)
    graph = simplify(intq.load(model))
    x = np.random.default_rng(1).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    got = intq.Interpreter(graph).run({graph.inputs[0]: x})
    want = dict(zip([o.name for o in model.graph.output], ort_session(model).run(None, {graph.inputs[0]: x})))
    assert set(got) == set(want)
    assert_close_to_reference(got, want)
    logits = [o.name for o in model.graph.output][-1]
    assert np.std(want[logits]) > 1e-3, "the randomised model must not be degenerate"


def _export(module, x, dynamic=False):
    buf = io.BytesIO()
    kwargs = dict(dynamic_axes={"x": {0: "batch"}}) if dynamic else {}
    torch.onnx.export(module, (x,), buf, dynamo=False, opset_version=17, input_names=["x"], **kwargs)
    return buf.getvalue()


@pytest.mark.parametrize("arch,size", [("mobilenet_v2", 224), ("mobilenet_v3_small", 224), ("resnet18", 224), ("tiny_yolo", 256)])
def test_pytorch_architectures_match_onnxruntime(arch, size):
    module = build(arch, seed=3)
    x = torch.randn(1, 3, size, size)
    data = _export(module, x)
    import onnx

    proto = onnx.load_from_string(data)
    graph = simplify(intq.load(proto))
    got = intq.Interpreter(graph).run({"x": x.numpy()})
    names = [o.name for o in proto.graph.output]
    want = dict(zip(names, ort_session(data).run(None, {"x": x.numpy()})))
    assert_close_to_reference(got, want)
    ops = graph.op_types()
    if arch == "mobilenet_v3_small":
        assert "HardSwish" in ops and "HardSigmoid" in ops
    if arch == "tiny_yolo":
        assert "SiLU" in ops and "Split" in ops and "Resize" in ops and "Sigmoid" not in ops


def test_dynamic_batch_defaults_to_1_and_accepts_a_shape():
    module = build("resnet18")
    data = _export(module, torch.randn(1, 3, 64, 64), dynamic=True)
    import onnx

    proto = onnx.load_from_string(data)
    assert intq.load(proto).tensors["x"].shape == (1, 3, 64, 64)  # the batch alone is dynamic: 1
    graph = simplify(intq.load(proto, input_shapes={"x": (2, 3, 64, 64)}))
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    got = intq.Interpreter(graph).run({"x": x})
    want = dict(zip([o.name for o in proto.graph.output], ort_session(data).run(None, {"x": x})))
    assert_close_to_reference(got, want)
    assert all(n.op_type != "Shape" for n in graph.nodes), "shape arithmetic must fold once shapes are static"


def test_torch_module_loads_directly():
    module = build("mobilenet_v3_small")
    x = torch.randn(1, 3, 96, 96)
    graph = simplify(intq.load(module, example_inputs=x))
    out = intq.Interpreter(graph).run({"input": x.numpy()})
    ref = module(x).detach().numpy()
    assert_close_to_reference({"y": next(iter(out.values()))}, {"y": ref})
    assert module.training is False
