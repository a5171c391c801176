"""Shared helpers for tests that compare intq against onnxruntime (one session per model)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

LIGHT_DIR = os.path.join(os.path.dirname(__import__("onnx.backend.test").backend.test.__file__), "data", "light")


def ort_session(model: onnx.ModelProto | bytes | str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # errors only
    src = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def randomized_light_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """A model of onnx's 'light' test set with its ConstantOfShape weights (all 0.02) replaced by
    random initializers (He-scaled weights, 1-D parameters in [0.5, 1.5] so batch-norm variances
    stay positive), and the softmax input added as an output so logits are compared too."""
    model = onnx.load(os.path.join(LIGHT_DIR, f"light_{name}.onnx"))
    rng = np.random.default_rng(seed)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            if len(shape) >= 2:
                fan_in = int(np.prod(shape[1:]))
                value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
            else:
                value = rng.uniform(0.5, 1.5, size=shape)
            model.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        else:
            keep.append(node)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    used = {i for n in keep for i in n.input} | {o.name for o in model.graph.output}
    unused = [init for init in model.graph.initializer if init.name not in used]
    for init in unused:  # the shapes that fed the removed ConstantOfShape nodes
        model.graph.initializer.remove(init)
    kept_inputs = [i for i in model.graph.input if i.name in used]
    del model.graph.input[:]
    model.graph.input.extend(kept_inputs)
    for node in model.graph.node:
        if node.op_type == "Softmax":
            model.graph.output.append(helper.make_tensor_value_info(node.input[0], onnx.TensorProto.FLOAT, None))
    return model


def assert_close_to_reference(got: dict, want: dict, rel: float = 1e-4):
    """Every output within ``rel * max|reference|`` (float32 accumulation order differs between
    BLAS/im2col and onnxruntime's kernels; 1e-4 of the output scale is the issue's bound)."""
    for name, ref in want.items():
        out = got[name]
        assert out.shape == ref.shape, f"{name}: shape {out.shape} vs {ref.shape}"
        scale = max(float(np.abs(ref).max()), 1e-30)
        err = float(np.abs(out.astype(np.float64) - ref).max())
        assert err <= rel * scale, f"{name}: max abs error {err:.3g} > {rel} * {scale:.3g}"
