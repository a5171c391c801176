"""Whole models quantized by intq, exported to .tflite, run by LiteRT (BUILTIN_REF) and TensorFlow
Lite Micro: every intermediate tensor must equal intq's (litert-ref and tflite targets).

Models: the digits CNN (trained, committed), and PyTorch-defined ResNet-18, MobileNetV2,
MobileNetV3-small and a YOLO-style net with random weights (reduced input sizes keep the suite
fast; the kernels are size-agnostic and conformance-tested separately)."""

import numpy as np
import pytest
import torch

import intq
from intq.pipeline import quantize
from intq.runtime.oracles.litert import run_litert
from intq.export.tflite_writer import to_tflite_bytes
from intq.runtime.oracles.tflm import run_tflm
from intq.testing.digits import load_split
from intq.testing.torch_models import build

DIGITS = "intq/data/digits_cnn.onnx"


def _compare_every_tensor(qg, feeds):
    data = to_tflite_bytes(qg)
    ordered = [feeds[n] for n in qg.inputs]
    counts = {}
    for target, oracle in (("litert-ref", run_litert(data, ordered)["tensors"]), ("tflite", run_tflm(data, ordered)["tensors"])):
        it = intq.Interpreter(qg, target=target)
        it.run(feeds)
        mine = it.tensors()
        bad = {k: int(np.sum(v != oracle[k])) for k, v in mine.items() if not np.array_equal(v, oracle[k])}
        assert not bad, f"[{target}] tensors differ (name: elements): {bad}"
        counts[target] = len(mine)
    return counts


def test_digits_cnn_every_tensor_equals_litert_and_tflm():
    (x_train, _), (x_test, _) = load_split()
    qg = quantize(DIGITS, [x[None] for x in x_train[:64]], input_shapes={"image": (1, 1, 8, 8)})
    for i in range(8):
        counts = _compare_every_tensor(qg, {"image": x_test[i:i + 1]})
    assert counts["tflite"] >= 8


@pytest.mark.parametrize("arch,size", [("resnet18", 64), ("mobilenet_v2", 64), ("mobilenet_v3_small", 64), ("tiny_yolo", 64)])
def test_pytorch_architectures_every_tensor_equals_litert_and_tflm(arch, size):
    module = build(arch, seed=1)
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, size, size)).astype(np.float32) for _ in range(8)]
    qg = quantize(module, data, example_inputs=torch.from_numpy(data[0]))
    counts = _compare_every_tensor(qg, {qg.inputs[0]: data[1]})
    assert counts["litert-ref"] > 20


class _Upsampler(torch.nn.Module):
    def __init__(self, k, s, p, op):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(8, 4, k, s, p, output_padding=op)

    def forward(self, x):
        y = self.up(torch.relu(self.conv(x)))
        return torch.maximum(y, torch.relu(y) * 0.5), torch.argmax(y, dim=1)


@pytest.mark.parametrize("cfg", [(4, 2, 1, 0), (2, 2, 0, 0), (3, 2, 1, 1), (3, 1, 1, 0), (3, 2, 0, 0)])
def test_transpose_conv_max_and_argmax_every_tensor_equals_litert_and_tflm(cfg):
    """ConvTranspose as TFLite SAME, VALID, or VALID then a crop; Max; ArgMax (int32 indices)."""
    torch.manual_seed(0)
    module = _Upsampler(*cfg).eval()
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for _ in range(6)]
    qg = quantize(module, data, example_inputs=torch.from_numpy(data[0]))
    assert "TRANSPOSE_CONV" in qg.op_types() and "ARG_MAX" in qg.op_types()
    _compare_every_tensor(qg, {qg.inputs[0]: data[1]})
    out = intq.Interpreter(qg).run({qg.inputs[0]: data[1]})
    idx = next(v for v in out.values() if v.dtype == np.int32)
    ref = module(torch.from_numpy(data[1]))[1].numpy()
    assert idx.shape == ref.shape and np.mean(idx == ref) > 0.95
