"""Print intq's float interpreter vs onnxruntime: max abs error / max |output| per model.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python tools/float_agreement.py

Models: the onnx wheel's light architecture models (weights randomised) and the PyTorch-defined
nets of intq.testing.torch_models exported at opset 17. Each is imported, simplified and run on
one random input; every output (logits included) is compared.
"""

from __future__ import annotations

import io
import os
import sys
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402
from tests.onnx_helpers import ort_session, randomized_light_model  # noqa: E402


def compare(name: str, model: onnx.ModelProto) -> None:
    t0 = time.perf_counter()
    graph = simplify(intq.load(model))
    t_import = time.perf_counter() - t0
    inp = graph.inputs[0]
    x = np.random.default_rng(0).standard_normal(graph.tensors[inp].shape).astype(np.float32)
    got = intq.Interpreter(graph).run({inp: x})
    names = [o.name for o in model.graph.output]
    want = dict(zip(names, ort_session(model).run(None, {inp: x})))
    worst = max(float(np.abs(got[k] - v).max()) / float(np.abs(v).max()) for k, v in want.items())
    print(f"  {name:20s} nodes {len(graph.nodes):4d}  max|err|/max|out| = {worst:.2e}  (import+simplify {t_import:.2f} s)")


def main() -> None:
    print("intq float interpreter vs onnxruntime (bound: 1e-4)")
    for name in ["resnet50", "shufflenet", "inception_v2", "squeezenet", "densenet121", "vgg19"]:
        compare(f"light_{name}", randomized_light_model(name))
    import torch

    from intq.testing.torch_models import build

    for arch, size in [("mobilenet_v2", 224), ("mobilenet_v3_small", 224), ("resnet18", 224), ("tiny_yolo", 256)]:
        buf = io.BytesIO()
        torch.onnx.export(build(arch, seed=3), (torch.randn(1, 3, size, size),), buf, dynamo=False, opset_version=17,
                          input_names=["x"])
        compare(arch, onnx.load_from_string(buf.getvalue()))


if __name__ == "__main__":
    main()
